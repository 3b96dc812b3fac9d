"""index, stats and the 4D-STEM products across MPI ranks (mpirun --oversubscribe -np 2 and 3 on loopback; docs/scaling.md).

Every result must be the single-process result: `stats --json` byte for byte, every statistic, histogram
and pyramid tile stored in the index row for row, and every 4D-STEM product's .npy byte for byte with the
same report (but for times, placements and the per-rank section). Faults: a rank killed mid-index ends the job with an error
naming the rank, leaves a valid index and a re-run completes it; a rank that reads different files than rank
0 (a stale or damaged copy on one node, made here with a private bind mount) is named with its error.

Skipped with a visible message when the build has no MPI (TM_HAVE_MPI from CMake) or mpirun is missing; under
TM_REQUIRE_MPI=1 (.ci/run) those are failures."""
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cli_harness import TM_BIN, run  # noqa: E402

BAD_INPUT = 3
INVALID_ARGUMENT = 2
MPIRUN = shutil.which("mpirun")


def mpi_env(extra=None):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "XDG_CONFIG_HOME": tempfile.mkdtemp(prefix="tm-cfg-"),
                "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="tm-cache-"),
                # OpenMPI's own allocations at exit are not ours to report (the sanitizer build).
                "ASAN_OPTIONS": (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")})
    env.pop("TENSORMORPH_PLUGIN_DIR", None)
    env.update(extra or {})
    return env


MPI_FLAGS = ["--oversubscribe", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]


def mpirun(ranks, args, env=None, timeout=300):
    cmd = [MPIRUN] + MPI_FLAGS + ["-np", str(ranks), TM_BIN] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, env=env or mpi_env(), timeout=timeout)


def without_seconds(doc):
    """The document without its times (every key named seconds, at any depth)."""
    if isinstance(doc, dict):
        return {k: without_seconds(v) for k, v in doc.items() if k != "seconds"}
    if isinstance(doc, list):
        return [without_seconds(v) for v in doc]
    return doc


def write_safetensors(path, tensors):
    """tensors: name -> numpy array (float32, float16 or int8), written in the given order."""
    dtypes = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int8): "I8"}
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": dtypes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for a in tensors.values():
            f.write(a.tobytes())


def index_rows(db):
    """Everything indexing stored, without the columns that say when and how long."""
    con = sqlite3.connect(db)
    try:
        rows = {}
        for table, skip in (("stats", {"seconds", "indexed_at"}), ("histograms", set()), ("pyramids", set()),
                            ("pyramid_tiles", set())):
            cols = [c[1] for c in con.execute("PRAGMA table_info(%s)" % table) if c[1] not in skip]
            rows[table] = sorted(con.execute("SELECT %s FROM %s" % (", ".join(cols), table)).fetchall())
        return rows
    finally:
        con.close()


@unittest.skipUnless(MPIRUN, "SKIPPED: mpirun (openmpi-bin) is not installed")
class MpiTestCase(unittest.TestCase):
    def setUp(self):
        if os.environ.get("TM_HAVE_MPI") != "ON":
            msg = "SKIPPED: this build has no MPI (TM_HAVE_MPI=%s)" % os.environ.get("TM_HAVE_MPI")
            if os.environ.get("TM_REQUIRE_MPI") == "1":
                self.fail("TM_REQUIRE_MPI=1 but " + msg)
            self.skipTest(msg)
        self.dir = tempfile.mkdtemp(prefix="tm-mpi-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def single(self, path):
        """The single-process reference: stats --json and the index rows."""
        db = os.path.join(self.dir, "single-%s.sqlite" % uuid.uuid4().hex)
        r = run(["stats", path, "--index", db, "--json"])
        self.assertEqual(r.code, 0, r.err)
        return r.out, index_rows(db)

    def check_same_as_single(self, path, ranks_list=(2, 3)):
        ref_json, ref_rows = self.single(path)
        self.assertTrue(ref_rows["stats"])
        for ranks in ranks_list:
            with self.subTest(ranks=ranks):
                db = os.path.join(self.dir, "ranks%d-%s.sqlite" % (ranks, uuid.uuid4().hex))
                r = mpirun(ranks, ["index", path, "--index", db, "--json"])
                self.assertEqual(r.returncode, 0, r.stderr)
                doc = json.loads(r.stdout)
                self.assertEqual(doc["ranks"], ranks)
                self.assertEqual(doc["computed"], len(ref_rows["stats"]))
                self.assertEqual(index_rows(db), ref_rows, "the index rows differ from one process's")
                r = mpirun(ranks, ["stats", path, "--index", db, "--json"])  # served from the index
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, ref_json)
                db2 = os.path.join(self.dir, "stats%d-%s.sqlite" % (ranks, uuid.uuid4().hex))
                r = mpirun(ranks, ["stats", path, "--index", db2, "--json"])  # computed across the ranks
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, ref_json, "stats --json differs from one process's")
        return ref_json

    def test_demo_checkpoint_is_byte_identical(self):
        demo = os.path.join(self.dir, "demo")
        r = run(["demo", "--out", demo, "--hidden", "128", "--intermediate", "344", "--vocab", "2000", "--no-gguf"])
        self.assertEqual(r.code, 0, r.err)
        self.check_same_as_single(demo)

    def test_gguf_split_set_is_byte_identical(self):
        from test_gguf_split import write_set
        paths = write_set(self.dir, [["token_embd.weight", "blk.0.attn_q.weight"], ["blk.0.ffn_up.weight"],
                                     ["output_norm.weight", "output.weight"]])
        self.check_same_as_single(paths[1])

    def test_uneven_work_one_huge_tensor_many_small(self):
        rng = np.random.default_rng(5)
        tensors = {"small.%02d" % k: rng.standard_normal(64 + 37 * k).astype(np.float16) for k in range(30)}
        tensors["huge"] = rng.standard_normal((1024, 2048)).astype(np.float32)
        tensors.update({"tail.%02d" % k: rng.integers(-128, 128, 500 + k, dtype=np.int8) for k in range(20)})
        path = os.path.join(self.dir, "uneven.safetensors")
        write_safetensors(path, tensors)
        self.check_same_as_single(path, ranks_list=(3,))

    def test_progress_names_every_rank(self):
        demo = os.path.join(self.dir, "demo")
        self.assertEqual(run(["demo", "--out", demo, "--hidden", "64", "--vocab", "500", "--no-gguf"]).code, 0)
        r = mpirun(2, ["index", demo, "--index", os.path.join(self.dir, "p.sqlite")])
        self.assertEqual(r.returncode, 0, r.stderr)
        # rank 0's stderr is a pipe under mpirun: progress comes as whole lines, the last at 100 %.
        last = [line for line in r.stderr.splitlines() if "tensors" in line and "ranks" in line][-1]
        self.assertIn("100.0%", last)
        self.assertIn(" 0:100%", last)
        self.assertIn(" 1:100%", last)
        self.assertIn("on 2 MPI ranks", r.stdout)

    def test_other_commands_refuse_to_run_across_ranks(self):
        demo = os.path.join(self.dir, "demo")
        self.assertEqual(run(["demo", "--out", demo, "--hidden", "64", "--vocab", "500", "--no-gguf"]).code, 0)
        r = mpirun(2, ["ls", demo])
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stderr.count("'ls' does not run across MPI ranks"), 1, r.stderr)
        r = mpirun(2, ["stats", "--raw", os.path.join(demo, "config.json"), "--dtype", "u8"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("stats --raw reads one file in one process", r.stderr)

    def test_stats_with_custom_flags_warns_that_rank_0_computes_alone(self):
        demo = os.path.join(self.dir, "demo")
        self.assertEqual(run(["demo", "--out", demo, "--hidden", "64", "--vocab", "500", "--no-gguf"]).code, 0)
        args = ["stats", demo, "--bins", "17", "--quantiles", "0.25,0.75", "--json"]
        ref = run(args)
        self.assertEqual(ref.code, 0, ref.err)
        r = mpirun(2, args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("rank 0 computes them alone"), 1, r.stderr)
        self.assertEqual(without_seconds(json.loads(r.stdout)), without_seconds(ref.json()))

    def slow_checkpoint(self):
        """40 f32 tensors of 256 KiB: with --max-read-rate 2M each rank reads for ~2.5 s."""
        rng = np.random.default_rng(9)
        path = os.path.join(self.dir, "slow.safetensors")
        write_safetensors(path, {"t.%02d" % k: rng.standard_normal(65536).astype(np.float32) for k in range(40)})
        return path

    def test_killed_rank_ends_the_job_and_a_rerun_resumes(self):
        path = self.slow_checkpoint()
        ref_json, ref_rows = self.single(path)
        db = os.path.join(self.dir, "killed.sqlite")
        mark = uuid.uuid4().hex
        env = mpi_env({"TM_TEST_MARK": mark})
        cmd = [MPIRUN] + MPI_FLAGS + ["-x", "TM_TEST_MARK", "-np", "2", TM_BIN, "index", path, "--index", db,
                                       "--threads", "1", "--max-read-rate", "2M"]
        job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        victim = None
        deadline = time.time() + 60
        while time.time() < deadline and victim is None:  # rank 1 of this job, once rank 0 committed something
            committed = 0
            if os.path.exists(db):
                try:
                    con = sqlite3.connect(db, timeout=1)
                    committed = con.execute("SELECT COUNT(*) FROM stats").fetchone()[0]
                    con.close()
                except sqlite3.Error:
                    pass
            if committed:
                victim = self.find_rank(mark, 1)
            time.sleep(0.05)
        self.assertIsNotNone(victim, "rank 1 not found, or nothing committed within 60 s")
        os.kill(victim, signal.SIGKILL)
        out, err = job.communicate(timeout=120)
        self.assertNotEqual(job.returncode, 0, "the job survived a killed rank: " + err)
        self.assertRegex(err, r"rank 1\b", err)
        self.assertRegex(err, r"(?i)signal 9|killed", err)
        con = sqlite3.connect(db)
        partial = con.execute("SELECT COUNT(*) FROM stats").fetchone()[0]
        self.assertEqual(con.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        con.close()
        self.assertGreater(partial, 0)
        self.assertLess(partial, 40, "the run ended before the kill: make it slower")
        r = run(["index", path, "--index", db, "--json"])  # the re-run computes the rest
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["already_indexed"], partial)
        self.assertEqual(r.json()["computed"], 40 - partial)
        self.assertEqual(index_rows(db), ref_rows)
        self.assertEqual(run(["stats", path, "--index", db, "--json"]).out, ref_json)

    @staticmethod
    def find_rank(mark, rank):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if ("TM_TEST_MARK=" + mark).encode() in env and ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in env:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if os.path.basename(f.read().split(b"\0")[0]) == b"tensormorph":
                        return int(pid)
        return None

    def test_rank_reading_other_files_is_named(self):
        if not shutil.which("unshare") or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
            self.skipTest("SKIPPED: unshare -m (a private mount namespace, as root) is not available here")
        rng = np.random.default_rng(2)
        path = os.path.join(self.dir, "model.safetensors")
        tensors = {"t.%02d" % k: rng.standard_normal(5000).astype(np.float32) for k in range(12)}
        write_safetensors(path, tensors)
        cases = {
            # A stale copy on rank 1's node: other values and one tensor fewer.
            "stale": ({k: v for k, v in list(tensors.items())[:11]}, "11 tensors here, rank 0 read 12"),
            # A damaged copy: the file ends inside the data.
            "truncated": (None, "model.safetensors"),
        }
        for case, (other, fragment) in cases.items():
            with self.subTest(case=case):
                theirs = os.path.join(self.dir, "theirs-%s.safetensors" % case)
                if other is None:
                    with open(path, "rb") as f:
                        data = f.read()
                    with open(theirs, "wb") as f:
                        f.write(data[: len(data) - 7000])
                else:
                    write_safetensors(theirs, other)
                db = os.path.join(self.dir, "%s.sqlite" % case)
                args = ["index", path, "--index", db]
                rank1 = "mount --bind %s %s && exec %s %s" % (theirs, path, TM_BIN, " ".join(args))
                cmd = [MPIRUN] + MPI_FLAGS + ["-np", "1", TM_BIN] + args + [":", "-np", "1", "unshare", "-m", "sh", "-c", rank1]
                r = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env(), timeout=300)
                self.assertEqual(r.returncode, BAD_INPUT, r.stderr)
                self.assertRegex(r.stderr, r"error: rank 1 of 2 on \S+ failed: ")
                self.assertIn(fragment, r.stderr)
                self.assertIn("a new run computes the rest", r.stderr)
                # Rank 0's own share was committed; a single-process re-run completes the index.
                r = run(["index", path, "--index", db, "--json"])
                self.assertEqual(r.code, 0, r.err)
                self.assertGreater(r.json()["already_indexed"], 0)
                self.assertEqual(r.json()["already_indexed"] + r.json()["computed"], 12)


    # 4D-STEM: the simulated acquisition, split over ranks by scan rows.
    def acquisition(self):
        out = os.path.join(self.dir, "acq")
        r = run(["stem", "demo", "--out", out, "--scan", "30,32", "--detector", "48", "--files", "3"])
        self.assertEqual(r.code, 0, r.err)
        return os.path.join(out, "demo_master.h5")

    def product(self, ranks, args, out, cache=True):
        """`stem ARGS -o OUT --json` (products: with --no-cache) in one process or across `ranks`; its report."""
        full = ["stem"] + args + ["-o", out, "--json"] + (["--no-cache"] if cache else [])
        if ranks == 1:
            r = run(full)
            self.assertEqual(r.code, 0, r.err)
            return r.json()
        r = mpirun(ranks, full)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_stem_products_are_byte_identical(self):
        master = self.acquisition()
        cases = [["bf"], ["haadf"], ["adf", "--scan-bin", "2", "--detector-bin", "2"], ["com"], ["dpc"], ["idpc"],
                 ["mean-dp"], ["mean-dp", "--max"], ["fft", "--of", "bf"],
                 ["bf", "--scan-region", "3,29,1,30", "--scan-bin", "3,2"], ["mask", "--inner", "4", "--outer", "9"]]
        # Each product against one process at one rank count, 2 and 3 alternating (both band splits are met by
        # every kind of pass: virtual images, CoM fields, patterns and regions/bins appear at each), so that the
        # 11 cases cost 22 runs, not 33 (make test's time, issue 42).
        for number, case in enumerate(cases):
            ref_npy = os.path.join(self.dir, "one.npy")
            ref = self.product(1, [case[0], master] + case[1:], ref_npy)
            for ranks in ((2, 3)[number % 2],):
                with self.subTest(case=" ".join(case), ranks=ranks):
                    out = os.path.join(self.dir, "ranks%d.npy" % ranks)
                    doc = self.product(ranks, [case[0], master] + case[1:], out)
                    with open(ref_npy, "rb") as a, open(out, "rb") as b:
                        self.assertEqual(a.read(), b.read(), "the .npy differs from one process's")
                    self.assertEqual(len(doc["ranks"]), ranks)
                    self.assertEqual(sum(k["positions"] for k in doc["ranks"]),
                                     doc["provenance"]["output"]["shape"][0] * doc["provenance"]["output"]["shape"][1])
                    for key in ("seconds", "pass_seconds", "placement", "ranks", "file"):
                        doc.pop(key, None), ref.pop(key, None)
                    self.assertEqual(doc, ref)

    def test_stem_prepare_across_ranks_serves_the_same_products(self):
        master = self.acquisition()
        cache = os.path.join(self.dir, "products.sqlite")
        r = mpirun(3, ["stem", "prepare", master, "--cache", cache, "--json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        ref = os.path.join(self.dir, "ref.npy")
        self.product(1, ["haadf", master], ref)
        got = os.path.join(self.dir, "cached.npy")
        r = run(["stem", "haadf", master, "--cache", cache, "-o", got, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertTrue(r.json()["cache"]["hit"], r.json().get("cache"))
        with open(ref, "rb") as a, open(got, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_stem_rank_reading_a_damaged_data_file_is_named(self):
        if not shutil.which("unshare") or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
            self.skipTest("SKIPPED: unshare -m (a private mount namespace, as root) is not available here")
        master = self.acquisition()
        data = os.path.join(os.path.dirname(master), "demo_data_000003.h5")
        theirs = os.path.join(self.dir, "damaged.h5")
        with open(data, "rb") as f:
            raw = f.read()
        with open(theirs, "wb") as f:
            f.write(raw[: len(raw) // 2])
        out = os.path.join(self.dir, "x.npy")
        # SSB with its disk and rotation given reads frames only for G: the failure is in its own protocol.
        ssb = ["stem", "ssb", master, "-o", out, "--scan-rotation-deg", "0", "--center", "24,24", "--radius", "6"]
        for args, said in ((["stem", "bf", master, "-o", out, "--no-cache"], "computing scan rows of its band"),
                           (ssb, "reading its band of the scan")):
            with self.subTest(command=" ".join(args[:2])):
                rank1 = "mount --bind %s %s && exec %s %s" % (theirs, data, TM_BIN, " ".join(args))
                cmd = [MPIRUN] + MPI_FLAGS + ["-np", "1", TM_BIN] + args + [":", "-np", "1", "unshare", "-m", "sh", "-c", rank1]
                r = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env(), timeout=300)
                self.assertNotEqual(r.returncode, 0)
                self.assertRegex(r.stderr, r"error: rank 1 of 2 on \S+ failed " + said + ": .*demo_master.h5: signature ")
                self.assertFalse(os.path.exists(out), "a product was written from a failed job")

    # SSB: each rank reads its band's bright-field values; rank 0 builds G from them in band order.
    def test_stem_ssb_is_byte_identical(self):
        master = self.acquisition()
        cases = [[],  # the preview, the rotation chosen between the DPC candidates
                 ["--scan-rotation-deg", "0", "--C10", "-40", "--C12", "15", "--phi12", "30",
                  "--scan-region", "2,28,1,31", "--detector-bin", "2"],
                 ["--fit", "--trials", "12", "--estimate-trials", "4", "--fit-crop", "16", "--seed", "3"]]
        for case in cases:
            ref_npy = os.path.join(self.dir, "one.npy")
            ref = self.product(1, ["ssb", master] + case, ref_npy, cache=False)
            for ranks in (2, 3):
                with self.subTest(case=" ".join(case), ranks=ranks):
                    out = os.path.join(self.dir, "ranks%d.npy" % ranks)
                    doc = self.product(ranks, ["ssb", master] + case, out, cache=False)
                    with open(ref_npy, "rb") as a, open(out, "rb") as b:
                        self.assertEqual(a.read(), b.read(), "the phase differs from one process's")
                    self.assertEqual([k["rank"] for k in doc["ranks"]], list(range(ranks)))
                    self.assertEqual(sum(k["positions"] for k in doc["ranks"]), doc["shape"][0] * doc["shape"][1])
                    self.assertTrue(all(k["bright_field_bytes"] == k["positions"] * doc["bright_field_pixels"] * 4
                                        for k in doc["ranks"]))
                    if "--fit" in case:  # the fit's central crop was read across the ranks too
                        self.assertEqual(len(doc["fit"]["part"].pop("ranks")), ranks)
                    for d in (doc, ref):
                        for key in ("timings", "placement", "ranks", "file"):
                            d.pop(key, None)
                    self.assertEqual(without_seconds(doc), without_seconds(ref))

    def test_stem_ssb_rank_over_its_memory_budget_is_named(self):
        master = self.acquisition()
        out = os.path.join(self.dir, "s.npy")
        # A rank over its own memory budget (ranks take their budget from their own command line), while rank 2
        # waits to send its values: rank 0 takes and drops them, and the job ends instead of hanging.
        args = ["stem", "ssb", master, "-o", out, "--scan-rotation-deg", "0"]
        cmd = [MPIRUN] + MPI_FLAGS + ["-np", "1", TM_BIN] + args + [":", "-np", "1", TM_BIN] + args + ["--memory-budget", "100K"]
        cmd += [":", "-np", "1", TM_BIN] + args
        r = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env(), timeout=300)
        self.assertEqual(r.returncode, 5, r.stderr)
        self.assertRegex(r.stderr, r"error: rank 1 of 3 on \S+ failed reading its band of the scan: rank 1 of 3 would hold "
                                   r"its band's \d+ bright-field values")
        self.assertFalse(os.path.exists(out), "a phase was written from a failed job")

if __name__ == "__main__":
    unittest.main(verbosity=2)
