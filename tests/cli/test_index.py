"""The persistent checkpoint index through the CLI: statistics computed once and served from SQLite,
reopening without re-parsing, a changed shard re-indexed alone, resumption after SIGKILL, a checkpoint
on a read-only volume, damaged or foreign index files, and the memory budget."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cli_harness import TM_BIN, run  # noqa: E402
from safetensors_write import write_safetensors, write_sharded  # noqa: E402

BAD_INPUT, ARG = 3, 2


def read_text(path):
    with open(path) as f:
        return f.read()


def read_json(path):
    return json.loads(read_text(path))


def shard_tensors(seed, layers, rows=64, cols=48):
    rng = np.random.default_rng(seed)
    out = []
    for i in layers:
        out.append((f"model.layers.{i}.mlp.up_proj.weight", (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)))
        bits = (rng.standard_normal((cols, rows)).astype(np.float32) * 0.02).view(np.uint32)
        out.append((f"model.layers.{i}.mlp.down_proj.weight", ("BF16", (bits >> 16).astype(np.uint16))))
        out.append((f"model.layers.{i}.input_layernorm.weight", (1 + rng.standard_normal(cols) * 0.05).astype(np.float16)))
    return out


class IndexedCheckpoint(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-idx-")
        self.cache = tempfile.mkdtemp(prefix="tm-idx-cache-")
        self.ckpt = os.path.join(self.dir, "ckpt")
        os.mkdir(self.ckpt)
        write_sharded(self.ckpt, [("model-00001-of-00002.safetensors", shard_tensors(1, [0, 1])),
                                  ("model-00002-of-00002.safetensors", shard_tensors(2, [2, 3]))])

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.cache, ignore_errors=True)

    def tm(self, *args):
        return run(list(args), cache_home=self.cache)

    def index(self, *extra):
        r = self.tm("index", self.ckpt, "--json", *extra)
        self.assertEqual(r.code, 0, r.err)
        return r.json()

    def test_index_then_reopen_reads_only_the_database(self):
        first = self.index()
        self.assertEqual((first["tensors"], first["computed"], first["already_indexed"]), (12, 12, 0))
        self.assertFalse(first["reused"])
        self.assertTrue(first["persisted"])
        self.assertTrue(first["database"].startswith(self.cache), first["database"])
        second = self.index()
        self.assertTrue(second["reused"], "identities unchanged: nothing should be parsed")
        self.assertEqual((second["computed"], second["already_indexed"]), (0, 12))
        ls = self.tm("ls", self.ckpt, "--json").json()
        self.assertEqual(len(ls["tensors"]), 12)
        self.assertTrue(all(t["stats_indexed"] for t in ls["tensors"]))

    def test_indexed_statistics_equal_a_fresh_computation(self):
        self.index()
        served = self.tm("stats", self.ckpt, "--json")
        fresh = self.tm("stats", self.ckpt, "--json", "--prefer", "cpu")  # a constraint: computed now
        self.assertEqual(served.code, 0, served.err)
        self.assertEqual(fresh.code, 0, fresh.err)
        a, b = served.json()["tensors"], fresh.json()["tensors"]
        self.assertEqual([t["source"] for t in a], ["index"] * 12)
        self.assertEqual([t["source"] for t in b], ["computed"] * 12)
        for x, y in zip(a, b):
            self.assertEqual(x["name"], y["name"])
            self.assertEqual(x["stats"], y["stats"], x["name"])
            self.assertEqual(x["placement"][0]["backend"], "cpu")

    def test_stats_indexes_what_is_missing_and_keeps_it(self):
        r = self.tm("stats", self.ckpt, "model.layers.3.mlp.up_proj.weight", "--json")
        self.assertEqual(r.code, 0, r.err)
        again = self.index()
        self.assertEqual((again["computed"], again["already_indexed"]), (11, 1))

    def test_a_changed_shard_alone_is_reindexed(self):
        self.index()
        shard2 = os.path.join(self.ckpt, "model-00002-of-00002.safetensors")
        new = shard_tensors(99, [2, 3])  # same names and shapes, new values
        write_safetensors(shard2, new)
        st = os.stat(shard2)
        os.utime(shard2, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        r = self.index()
        self.assertFalse(r["reused"])
        self.assertEqual(r["reindexed_files"], [os.path.abspath(shard2)])
        self.assertEqual((r["computed"], r["already_indexed"]), (6, 6))
        name, arr = new[0]
        got = self.tm("stats", self.ckpt, name, "--json").json()["tensors"][0]["stats"]
        self.assertEqual(got["max"], float(arr.max()))

    def test_same_size_and_mtime_but_new_header_is_detected(self):
        self.index()
        shard1 = os.path.join(self.ckpt, "model-00001-of-00002.safetensors")
        st = os.stat(shard1)
        with open(shard1, "r+b") as f:  # rename a tensor in place: same size, header bytes differ
            data = f.read()
            pos = data.index(b"model.layers.0.mlp.up_proj")
            f.seek(pos)
            f.write(b"model.layers.0.mlp.xx_proj")
        os.utime(shard1, ns=(st.st_atime_ns, st.st_mtime_ns))
        write_sharded_index = os.path.join(self.ckpt, "model.safetensors.index.json")
        text = read_text(write_sharded_index).replace("mlp.up_proj.weight\": \"model-00001",
                                                        "mlp.xx_proj.weight\": \"model-00001", 1)
        with open(write_sharded_index, "w") as f:
            f.write(text)
        r = self.index()
        self.assertEqual(r["reindexed_files"], [os.path.abspath(shard1)])
        names = [t["name"] for t in self.tm("ls", self.ckpt, "--json").json()["tensors"]]
        self.assertIn("model.layers.0.mlp.xx_proj.weight", names)

    def test_a_deleted_shard_is_an_error_naming_it(self):
        self.index()
        os.remove(os.path.join(self.ckpt, "model-00002-of-00002.safetensors"))
        r = self.tm("ls", self.ckpt)
        self.assertEqual(r.code, BAD_INPUT, r.err)
        self.assertIn("model-00002-of-00002.safetensors", r.err)

    def test_damaged_cache_entry_is_rebuilt(self):
        db = self.index()["database"]
        for suffix in ("-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        with open(db, "wb") as f:
            f.write(b"this is not a database" * 100)
        r = self.tm("index", self.ckpt, "--json")
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("rebuilt", r.err)
        self.assertEqual(r.json()["computed"], 12)

    def test_explicit_index_that_is_not_an_index_is_refused(self):
        bogus = os.path.join(self.dir, "notes.txt")
        with open(bogus, "w") as f:
            f.write("my notes, not a database\n" * 50)
        r = self.tm("ls", self.ckpt, "--index", bogus)
        self.assertEqual(r.code, BAD_INPUT, r.err)
        self.assertIn("not a Tensormorph index", r.err)
        self.assertEqual(read_text(bogus), "my notes, not a database\n" * 50)  # untouched

    def test_explicit_index_of_another_checkpoint_is_refused(self):
        path = os.path.join(self.dir, "mine.sqlite")
        self.assertEqual(self.tm("index", self.ckpt, "--index", path).code, 0)
        other = os.path.join(self.dir, "other.safetensors")
        write_safetensors(other, [("x", np.zeros(4, np.float32))])
        r = self.tm("ls", other, "--index", path)
        self.assertEqual(r.code, ARG, r.err)
        self.assertIn("belongs to checkpoint", r.err)

    def test_small_memory_budget_streams_in_small_windows(self):
        # Half the budget for mapped windows, the other half for read-ahead and the kernels' workspace
        # (exact f32 quantiles need ~33 MiB per worker).
        r = self.index("--memory-budget", "160M", "--threads", "2")
        self.assertEqual(r["workers"], 2)
        self.assertLessEqual(r["window_bytes"] * r["workers"], 80 * 1024 * 1024)
        self.assertEqual(r["computed"], 12)
        served = self.tm("stats", self.ckpt, "--json", "--prefer", "cpu").json()["tensors"]
        stored = self.tm("stats", self.ckpt, "--json").json()["tensors"]
        self.assertEqual([t["stats"] for t in served], [t["stats"] for t in stored])

    def test_progress_bar_on_a_terminal_only(self):
        import pty
        master, slave = pty.openpty()
        env = dict(os.environ, XDG_CONFIG_HOME=self.cache, XDG_CACHE_HOME=self.cache)
        p = subprocess.run([TM_BIN, "index", self.ckpt], stdout=subprocess.PIPE, stderr=slave, env=env, timeout=60)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        os.close(master)
        bar = b"".join(chunks).decode(errors="replace")
        self.assertEqual(p.returncode, 0)
        self.assertIn("ETA", bar)
        self.assertIn("100.0%", bar)
        self.assertIn("12/12 tensors", bar)
        self.assertIn("12 computed now", p.stdout.decode())
        quiet = self.tm("index", self.ckpt)  # stderr is a pipe: no bar
        self.assertEqual(quiet.code, 0)
        self.assertEqual(quiet.err, "")

    def test_quantized_tensors_are_dequantized_and_indexed(self):
        fixture = os.environ.get("TM_FIXTURES", "../shared/fixtures") + "/gguf/tiny-mixed.gguf"
        if not os.path.exists(fixture):
            self.skipTest(f"SKIPPED: reference fixture {fixture} is absent")
        r = run(["index", fixture, "--json"], cache_home=self.cache)
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual(doc["tensors"], 34)
        self.assertEqual((doc["computed"], doc["unavailable"]), (34, 0))
        served = run(["stats", fixture, "--json"], cache_home=self.cache).json()["tensors"]
        fresh = run(["stats", fixture, "--json", "--prefer", "cpu"], cache_home=self.cache).json()["tensors"]
        self.assertEqual([t["stats"] for t in served], [t["stats"] for t in fresh])
        self.assertEqual(sum(1 for t in served if t.get("dequantized_from")), 22)


class ReferenceFiles(unittest.TestCase):
    """Checkpoints written by other tools (candle's safetensors, ollama's GGUF), indexed, against numpy
    reading the same bytes (numpy's own dtype decoding; its float64 reductions)."""

    def setUp(self):
        self.fixtures = os.environ.get("TM_FIXTURES", os.path.join(HERE, "..", "..", "..", "shared", "fixtures"))
        if not os.path.isdir(self.fixtures):
            self.skipTest(f"SKIPPED: reference fixtures not found at {self.fixtures}")
        self.cache = tempfile.mkdtemp(prefix="tm-ref-cache-")

    def tearDown(self):
        shutil.rmtree(self.cache, ignore_errors=True)

    def check_against_numpy(self, path, arrays):
        r = run(["stats", path, "--json"], cache_home=self.cache)
        self.assertEqual(r.code, 0, r.err)
        got = {t["name"]: t for t in r.json()["tensors"]}
        for name, arr in arrays.items():
            st = got[name]["stats"]
            x = arr.astype(np.float64).ravel()
            self.assertEqual(list(got[name]["shape"]), list(arr.shape), name)
            self.assertEqual(st["count"], x.size, name)
            self.assertEqual(st["min"], float(x.min()), name)
            self.assertEqual(st["max"], float(x.max()), name)
            self.assertAlmostEqual(st["mean"], float(x.mean()), delta=1e-12 * max(1.0, abs(float(x.mean()))), msg=name)
            self.assertAlmostEqual(st["std"], float(x.std()), delta=1e-12 * max(1.0, float(x.std())), msg=name)
            for q in st["quantiles"]["values"]:
                self.assertEqual(q["value"], float(np.quantile(x, q["p"])), (name, q["p"]))
            counts, _ = np.histogram(x, bins=256, range=(float(x.min()), float(x.max())))
            moved = int(np.abs(np.array(st["histogram"]["counts"]) - counts).sum()) // 2
            self.assertLessEqual(moved, 4, name)  # values exactly on an edge may land one bin over
        again = run(["index", path, "--json"], cache_home=self.cache).json()
        self.assertTrue(again["reused"])
        self.assertEqual(again["computed"], 0)

    def safetensors_arrays(self, path):
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            base = 8 + n
            header.pop("__metadata__", None)
            out = {}
            np_types = {"F32": np.float32, "I64": np.int64, "U8": np.uint8, "F16": np.float16}
            for name, t in header.items():
                b, e = t["data_offsets"]
                out[name] = np.fromfile(path, dtype=np_types[t["dtype"]], count=(e - b) // np.dtype(np_types[t["dtype"]]).itemsize,
                                        offset=base + b).reshape(t["shape"])
            return out

    def test_candles_safetensors(self):
        for f in ("mel_filters.safetensors", "voices.safetensors", "jfk-codes.safetensors"):
            path = os.path.join(self.fixtures, f)
            self.check_against_numpy(path, self.safetensors_arrays(path))

    def test_ollamas_gguf_exports_bit_for_bit(self):
        path = os.path.join(self.fixtures, "llama-2-tiny-random.gguf")
        listing = run(["ls", path, "--json"], cache_home=self.cache).json()["tensors"]
        self.assertEqual(len(listing), 12)
        arrays = {}
        d = tempfile.mkdtemp(prefix="tm-ref-npy-")
        try:
            for t in listing:
                out = os.path.join(d, "t.npy")
                r = run(["export", path, t["name"], "-o", out], cache_home=self.cache)
                self.assertEqual(r.code, 0, r.err)
                arr = np.load(out)
                width = {"F32": 4, "F16": 2}[t["stored_type"]]
                raw = np.fromfile(path, dtype=np.float32 if width == 4 else np.float16, count=t["elements"], offset=t["offset"])
                self.assertEqual(arr.tobytes(), raw.tobytes(), t["name"])  # the file's own bytes
                self.assertEqual(list(arr.shape), t["shape"])
                self.assertEqual(t["shape"], list(reversed(t["ne"])))
                arrays[t["name"]] = arr
        finally:
            shutil.rmtree(d, ignore_errors=True)
        self.check_against_numpy(path, arrays)


class Resume(unittest.TestCase):
    """SIGKILL in the middle of indexing leaves a valid index that the next run completes."""

    def test_kill_then_resume(self):
        d = tempfile.mkdtemp(prefix="tm-resume-")
        try:
            rng = np.random.default_rng(5)
            tensors = [(f"w{i:03d}", rng.standard_normal(1 << 20).astype(np.float32)) for i in range(64)]
            ckpt = os.path.join(d, "big.safetensors")
            write_safetensors(ckpt, tensors)  # 256 MiB of f32: each tensor takes two passes
            db = os.path.join(d, "index.sqlite")
            env = dict(os.environ, XDG_CONFIG_HOME=d, XDG_CACHE_HOME=d)
            proc = subprocess.Popen([TM_BIN, "index", ckpt, "--index", db, "--threads", "1", "--json"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            done = 0
            deadline = time.time() + 120
            while time.time() < deadline and proc.poll() is None:
                time.sleep(0.05)
                try:
                    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
                        done = con.execute("SELECT count(*) FROM stats").fetchone()[0]
                except sqlite3.Error:
                    continue
                if done >= 3:
                    break
            if proc.poll() is not None:
                self.skipTest("SKIPPED: indexing finished before it could be killed (machine too fast)")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            with sqlite3.connect(db) as con:
                self.assertEqual(con.execute("PRAGMA integrity_check").fetchone()[0], "ok")
                kept = con.execute("SELECT count(*) FROM stats").fetchone()[0]
            self.assertGreaterEqual(kept, 3)
            self.assertLess(kept, 64)
            r = run(["index", ckpt, "--index", db, "--json"], cache_home=d)
            self.assertEqual(r.code, 0, r.err)
            doc = r.json()
            self.assertEqual(doc["already_indexed"], kept)
            self.assertEqual(doc["computed"], 64 - kept)
            stats = run(["stats", ckpt, "--index", db, "--json"], cache_home=d).json()["tensors"]
            for (name, arr), t in zip(tensors, stats):
                self.assertEqual(t["name"], name)
                self.assertEqual(t["stats"]["min"], float(arr.min()))
                self.assertEqual(t["stats"]["max"], float(arr.max()))
                self.assertAlmostEqual(t["stats"]["mean"], float(arr.astype(np.float64).mean()), delta=1e-12)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class ReadOnlyVolume(unittest.TestCase):
    """A checkpoint on a read-only mount (a private tmpfs remounted read-only in a user+mount namespace)."""

    def test_checkpoint_and_cache_on_a_read_only_volume(self):
        if not shutil.which("unshare"):
            self.skipTest("SKIPPED: unshare (util-linux) is not installed")
        probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest(f"SKIPPED: user+mount namespaces unavailable here ({probe.stderr.decode().strip()})")
        d = tempfile.mkdtemp(prefix="tm-ro-")
        try:
            src = os.path.join(d, "src")
            os.mkdir(src)
            write_sharded(src, [("a.safetensors", shard_tensors(3, [0])), ("b.safetensors", shard_tensors(4, [1]))])
            mnt = os.path.join(d, "mnt")
            os.mkdir(mnt)
            cache = os.path.join(d, "cache")
            os.mkdir(cache)
            script = f"""set -e
mount -t tmpfs none {mnt}
cp -r {src} {mnt}/ckpt
mkdir {mnt}/cache
{TM_BIN} index {mnt}/ckpt --index {mnt}/stored.db > /dev/null
mount -o remount,ro {mnt}
if touch {mnt}/ckpt/probe 2>/dev/null; then echo NOT-READ-ONLY; exit 9; fi
XDG_CACHE_HOME={cache} {TM_BIN} index {mnt}/ckpt --json > {d}/writable-cache.json
XDG_CACHE_HOME={mnt}/cache {TM_BIN} index {mnt}/ckpt --json > {d}/ro-cache.json 2> {d}/ro-cache.err
{TM_BIN} index {mnt}/ckpt --index {mnt}/stored.db --json > {d}/ro-index.json 2> {d}/ro-index.err
XDG_CACHE_HOME={mnt}/cache {TM_BIN} stats {mnt}/ckpt --json > {d}/ro-stats.json
ls -A {mnt}/ckpt > {d}/listing.txt
"""
            env = dict(os.environ, XDG_CONFIG_HOME=d)
            r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            w = read_json(os.path.join(d, "writable-cache.json"))
            self.assertEqual((w["computed"], w["persisted"]), (6, True))
            ro = read_json(os.path.join(d, "ro-cache.json"))
            self.assertEqual((ro["computed"], ro["persisted"], ro["database"]), (6, False, ":memory:"))
            self.assertIn("not saved", read_text(os.path.join(d, "ro-cache.err")))
            # A read-only --index file (a WAL database: SQLite cannot open it read-only in place without
            # its -shm file) is the starting point: nothing recomputed (this recomputed all 6).
            ro_index = read_json(os.path.join(d, "ro-index.json"))
            self.assertEqual((ro_index["computed"], ro_index["persisted"]), (0, False))
            self.assertIn("not saved", read_text(os.path.join(d, "ro-index.err")))
            stats = read_json(os.path.join(d, "ro-stats.json"))["tensors"]
            self.assertEqual(len(stats), 6)
            self.assertTrue(all(t["stats"]["count"] > 0 for t in stats))
            self.assertEqual(sorted(read_text(os.path.join(d, "listing.txt")).split()),
                             ["a.safetensors", "b.safetensors", "model.safetensors.index.json"])  # stored.db is beside ckpt
        finally:
            shutil.rmtree(d, ignore_errors=True)


class ManyTensors(unittest.TestCase):
    """10,000 tensors: reopening the indexed checkpoint lists them from the database alone."""

    def test_reopen_lists_ten_thousand_tensors_without_parsing(self):
        d = tempfile.mkdtemp(prefix="tm-many-")
        try:
            ckpt = os.path.join(d, "many.safetensors")
            write_safetensors(ckpt, [(f"t{i:05d}", np.full(4, i, np.float32)) for i in range(10000)])
            first = run(["ls", ckpt, "--json"], cache_home=d)
            self.assertEqual(first.code, 0, first.err)
            again = run(["index", ckpt, "--json"], cache_home=d).json()
            self.assertTrue(again["reused"])
            self.assertEqual(again["computed"], 10000)
            listing = run(["ls", ckpt, "--json", "--sort", "name"], cache_home=d).json()["tensors"]
            self.assertEqual(len(listing), 10000)
            self.assertEqual(listing[1234]["name"], "t01234")
            self.assertEqual(listing[1234]["shape"], [4])
            self.assertTrue(all(t["stats_indexed"] for t in listing))
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
