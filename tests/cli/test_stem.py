"""`tensormorph stem`: a simulated acquisition in the Dectris layout, inspected, loaded and exported, compared
with what a microscopist would otherwise use (h5py + hdf5plugin, numpy slicing and summing), and the errors
and readiness reports of damaged or incomplete acquisitions."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import run  # noqa: E402

try:
    import h5py
    import hdf5plugin  # noqa: F401  (registers the bitshuffle filter with h5py)
except ImportError:  # pragma: no cover
    h5py = None

SCAN = (6, 7)
K = 24


def peer_read(master):
    """The whole acquisition through h5py + hdf5plugin (a peer decoder), bad pixels zeroed like Tensormorph."""
    with h5py.File(master, "r") as f:
        group = f["entry/data"]
        frames = np.concatenate([group[k][()] for k in sorted(group.keys())])
        mask = f["entry/instrument/detector/detectorSpecific/pixel_mask"][()]
    raw = frames.reshape(SCAN + (K, K))
    masked = raw.astype(np.uint64)
    masked[masked == np.iinfo(frames.dtype).max] = 0
    masked[:, :, mask > 0] = 0
    return raw, masked


def bin_sum(a, sbin, dbin):
    """Sums bins of a 4-D array, keeping partial edge bins."""
    for axis, b in zip(range(4), sbin + dbin):
        idx = np.arange(0, a.shape[axis], b)
        a = np.add.reduceat(a, idx, axis=axis)
    return a


@unittest.skipIf(h5py is None, "h5py/hdf5plugin not installed (scripts/install-deps installs them)")
class StemCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-cli-")
        r = run(["stem", "demo", "--out", cls.dir, "--scan", "6,7", "--detector", str(K), "--files", "3", "--json"])
        assert r.code == 0, r.err
        cls.master = r.json()["master"]
        cls.raw, cls.masked = peer_read(cls.master)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def export(self, *args, expect=0):
        out = os.path.join(self.dir, "out.npy")
        r = run(["stem", "export", self.master, "-o", out, "--json"] + list(args))
        self.assertEqual(r.code, expect, r.err)
        return (np.load(out), r.json()) if expect == 0 else r

    def test_inspect_reports_readiness_detector_and_metadata(self):
        r = run(["stem", "inspect", self.dir, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual(j["readiness"]["status"], "complete")
        self.assertEqual(j["readiness"]["frames_present"], 42)
        self.assertEqual(j["readiness"]["frames_expected"], 42)
        self.assertEqual(j["detector_shape"], [K, K])
        self.assertEqual(j["dtype"], "u16")
        self.assertEqual(j["scan_shape"], [6, 7])  # 42 frames, not a square: the simulator records the shape
        self.assertIn("entry/sample/simulation", j["scan_shape_source"])
        self.assertEqual(j["bad_pixels"], 4)
        self.assertEqual(j["metadata"]["entry/instrument/beam/incident_energy"], {"value": 300000.0, "units": "eV"})
        self.assertEqual(len(j["readiness"]["data_files"]), 3)
        self.assertEqual(len(j["signature"]), 16)
        text = run(["stem", "inspect", self.master, "--scan-shape", "7,6"])
        self.assertEqual(text.code, 0, text.err)
        self.assertIn("7 x 6", text.out)
        self.assertIn("bitshuffle+lz4", text.out)

    def test_discover_lists_the_master(self):
        # A tree of our own (not the shared /tmp, where parallel tests create and delete folders while we walk):
        # the acquisition two levels down, beside a dangling link named like a master and a link back up the
        # tree, which is not followed, so the walk ends and lists the master once.
        root = tempfile.mkdtemp(prefix="tm-stem-discover-")
        try:
            nested = os.path.join(root, "session", "scan-01")
            os.makedirs(nested)
            r = run(["stem", "demo", "--out", nested, "--scan", "2,2", "--detector", "8", "--json"])
            self.assertEqual(r.code, 0, r.err)
            master = r.json()["master"]
            os.symlink(os.path.join(root, "absent"), os.path.join(root, "ghost_master.h5"))
            os.symlink(root, os.path.join(nested, "loop"))
            r = run(["stem", "discover", root, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual([e["master"] for e in r.json()], [os.path.realpath(master)])
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def test_full_export_equals_the_peer_decode(self):
        a, j = self.export("--scan-shape", "6,7", "--no-mask")
        self.assertEqual(a.dtype, np.uint16)
        np.testing.assert_array_equal(a, self.raw)
        a, j = self.export("--scan-shape", "6,7")
        np.testing.assert_array_equal(a, self.masked.astype(np.uint16))
        with open(os.path.join(self.dir, "out.npy.provenance.json")) as f:
            prov = json.load(f)
        for key in ("source", "scan_region", "detector_region", "scan_bin", "detector_bin", "output", "backend", "device",
                    "software"):
            self.assertIn(key, prov)
        self.assertEqual(prov["source"]["shape"], [6, 7, K, K])
        self.assertEqual(prov["source"]["signature"], j["provenance"]["source"]["signature"])

    def test_regions_and_bins_equal_numpy_slicing_and_summing(self):
        cases = [
            (["--scan-region", "1,5,2,7"], (slice(1, 5), slice(2, 7), slice(None), slice(None)), (1, 1), (1, 1)),
            (["--detector-region", "4,21,0,13", "--detector-bin", "3"], (slice(None), slice(None), slice(4, 21), slice(0, 13)), (1, 1), (3, 3)),
            (["--scan-bin", "4,3", "--detector-bin", "5,2"], (slice(None),) * 4, (4, 3), (5, 2)),
        ]
        for args, sl, sbin, dbin in cases:
            with self.subTest(args=args):
                a, j = self.export("--scan-shape", "6,7", *args)
                expected = bin_sum(self.masked[sl], sbin, dbin)
                self.assertEqual(a.shape, expected.shape)
                np.testing.assert_array_equal(a.astype(np.uint64), expected)
                if sbin != (1, 1) or dbin != (1, 1):
                    self.assertEqual(a.dtype, np.uint32)  # widened for the sums

    def test_frame_access(self):
        a, _ = self.export("--scan-shape", "6,7", "--frame", "4,5")
        self.assertEqual(a.shape, (K, K))
        np.testing.assert_array_equal(a, self.masked[4, 5].astype(np.uint16))

    def test_load_reports_throughput_and_counts(self):
        r = run(["stem", "load", self.master, "--scan-shape", "6,7", "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual(j["total_counts"], int(self.masked.sum()))
        self.assertEqual(j["decoded_bytes"], 42 * K * K * 2)
        self.assertGreater(j["stored_bytes_read"], 0)

    def test_bad_requests_are_usage_errors(self):
        for args in (["--scan-region", "0,9,0,7"], ["--scan-region", "1,2,3"], ["--detector-bin", "0"], ["--dtype", "float32"]):
            with self.subTest(args=args):
                r = run(["stem", "load", self.master, "--scan-shape", "6,7"] + args)
                self.assertEqual(r.code, 2, r.err)
        r = run(["stem", "load", self.master, "--scan-shape", "5,8"])  # 40 positions for 42 frames
        self.assertEqual(r.code, 2)
        self.assertIn("does not cover the 42 frames", r.err)

    def test_memory_budget_refuses_with_the_ladder(self):
        r = run(["stem", "load", self.master, "--scan-shape", "6,7", "--memory-budget", "30K", "--threads", "1"])
        self.assertEqual(r.code, 5, r.err)
        for s in ("over the memory budget", "--scan-region 0,", "--scan-bin", "--detector-bin", "product-first"):
            self.assertIn(s, r.err)


@unittest.skipIf(h5py is None, "h5py/hdf5plugin not installed")
class StemDamage(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-stem-damage-")
        r = run(["stem", "demo", "--out", self.dir, "--scan", "4,4", "--detector", "16", "--files", "2", "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.master = r.json()["master"]

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def overwrite_chunk(self, data_file, local_frame, offset, data):
        """Overwrites bytes of one frame's stored chunk in place, `offset` bytes into the chunk."""
        path = os.path.join(self.dir, data_file)
        with h5py.File(path, "r") as f:
            info = f["entry/data/data"].id.get_chunk_info_by_coord((local_frame, 0, 0))
        with open(path, "r+b") as f:
            f.seek(info.byte_offset + offset)
            f.write(data)
        return path

    def test_non_utf8_metadata_is_reported_escaped(self):
        # A string value, a units attribute and a dataset name holding bytes that are not UTF-8 exited 70
        # (nlohmann type_error.316) under `stem inspect --json`; such bytes are now reported as \\xNN.
        with h5py.File(self.master, "r+") as f:
            g = f["entry/instrument/detector"]
            ds = g.create_dataset("odd_text", data=np.bytes_(b"ab\xff\xfecd"))
            ds.attrs.create("units", np.bytes_(b"\xe9V"))
            g.create_dataset(b"na\xffme", data=3)
        r = run(["stem", "inspect", self.master, "--json"])
        self.assertEqual(r.code, 0, r.err)
        meta = r.json()["metadata"]
        self.assertEqual(meta["entry/instrument/detector/odd_text"], {"value": "ab\\xFF\\xFEcd", "units": "\\xE9V"})
        self.assertEqual(meta["entry/instrument/detector/na\\xFFme"], {"value": 3})
        self.assertEqual(run(["stem", "inspect", self.master]).code, 0)

    def test_corrupted_block_names_file_frame_and_block(self):
        data = self.overwrite_chunk("demo_data_000002.h5", 1, 16, b"\xff" * 8)
        r = run(["stem", "load", self.master])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(data + ", frame 9: bitshuffle/LZ4 chunk: block 0", r.err)

    def test_missing_data_file_is_reported_and_its_frames_refused(self):
        os.remove(os.path.join(self.dir, "demo_data_000002.h5"))
        r = run(["stem", "inspect", self.master, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual(j["readiness"]["status"], "incomplete")
        self.assertTrue(any("which does not exist" in p for p in j["readiness"]["problems"]))
        self.assertEqual(run(["stem", "load", self.master, "--scan-region", "0,2,0,4"]).code, 0)
        r = run(["stem", "load", self.master, "--scan-region", "2,3,0,4"])
        self.assertEqual(r.code, 3)
        self.assertIn("frame 8 is not present", r.err)

    def test_a_fifo_in_place_of_a_data_file_is_a_problem_not_a_hang(self):
        # The probe's finding: stem inspect, stem bf and Python's bf() waited forever for a writer (the
        # acquisition's signature opened every data file for reading). Now the FIFO is a readiness problem.
        data = os.path.join(self.dir, "demo_data_000002.h5")
        os.remove(data)
        os.mkfifo(data)
        r = run(["stem", "inspect", self.master, "--json"], timeout=30)
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["readiness"]["status"], "incomplete")
        self.assertTrue(any(data + ": not a regular file" in p for p in r.json()["readiness"]["problems"]), r.json()["readiness"])
        r = run(["stem", "bf", self.master, "-o", os.path.join(self.dir, "bf.npy"), "--no-cache"], timeout=30)
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("frame 8 is not present in any readable data file", r.err)
        self.assertIn("not a regular file", r.err)

    def test_header_size_that_lies_is_an_error(self):
        self.overwrite_chunk("demo_data_000001.h5", 0, 6, b"\x7f")
        r = run(["stem", "load", self.master, "--frame", "0,0"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("frame 0: bitshuffle/LZ4 chunk: header (byte 0) says", r.err)

    def test_filter_encoded_demo_loads_the_same(self):
        other = os.path.join(self.dir, "filter")
        r = run(["stem", "demo", "--out", other, "--scan", "4,4", "--detector", "16", "--encoder", "hdf5-filter", "--json"])
        self.assertEqual(r.code, 0, r.err)
        a = run(["stem", "load", self.master, "--json"]).json()
        b = run(["stem", "load", r.json()["master"], "--json"]).json()
        self.assertEqual(a["total_counts"], b["total_counts"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
