"""NumPy arrays as checkpoints (the .npy / .npz opener), through the CLI. Every file here is written by numpy
itself (np.save, np.savez, np.savez_compressed; Debian's python3-numpy), not by our writers: ls, stats and
export against numpy's own values; Fortran-ordered arrays read through strides; object arrays listed and never
unpickled; big-endian and compressed entries listed with the reason; truncated, lying and malformed headers
refused naming the file and the byte offset."""
import os
import shutil
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import run  # noqa: E402


class Npy(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-npy-")
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def export(self, ckpt, name):
        out = self.path("out.npy")
        r = run(["export", ckpt, name, "-o", out])
        self.assertEqual(r.code, 0, r.err)
        return np.load(out)

    def test_one_npy_is_one_tensor_named_by_its_stem(self):
        a = self.rng.standard_normal((33, 17)).astype(np.float32)
        np.save(self.path("weights.npy"), a)
        r = run(["ls", self.path("weights.npy"), "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual(doc["format"], "npy")
        [t] = doc["tensors"]
        self.assertEqual((t["name"], t["shape"], t["stored_type"], t["readable"]), ("weights", [33, 17], "<f4", True))
        r = run(["stats", self.path("weights.npy"), "weights", "--json"])
        self.assertEqual(r.code, 0, r.err)
        s = r.json()["tensors"][0]["stats"]
        self.assertEqual(s["count"], a.size)
        self.assertEqual(s["min"], float(a.min()))
        self.assertEqual(s["max"], float(a.max()))
        self.assertAlmostEqual(s["sum"], float(a.astype(np.float64).sum()), delta=1e-9)
        self.assertTrue(np.array_equal(self.export(self.path("weights.npy"), "weights"), a))

    def test_every_dtype_numpy_writes_that_a_kernel_reads(self):
        for dt in ["<f8", "<f4", "<f2", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"]:
            a = (self.rng.standard_normal(50) * 20).astype(dt)
            p = self.path("a.npy")
            np.save(p, a)
            self.assertTrue(np.array_equal(self.export(p, "a"), a), dt)

    def test_fortran_order_reads_through_strides(self):
        a = np.asfortranarray(self.rng.standard_normal((5, 7, 3)))
        np.save(self.path("f.npy"), a)
        got = self.export(self.path("f.npy"), "f")
        self.assertTrue(np.array_equal(got, a))

    def test_npz_entries_are_tensors(self):
        arrays = {"layer.0.weight": self.rng.standard_normal((8, 4)).astype(np.float32),
                  "layer.0.bias": np.arange(8, dtype=np.int64), "scalar": np.float64(2.5)}
        np.savez(self.path("m.npz"), **arrays)
        r = run(["ls", self.path("m.npz"), "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual(doc["format"], "npz")
        self.assertEqual({t["name"]: t["shape"] for t in doc["tensors"]},
                         {"layer.0.weight": [8, 4], "layer.0.bias": [8], "scalar": []})
        for name, a in arrays.items():
            self.assertTrue(np.array_equal(self.export(self.path("m.npz"), name), a), name)
        r = run(["stats", self.path("m.npz"), "--json"])
        self.assertEqual(r.code, 0, r.err)

    def test_what_no_kernel_reads_is_listed_with_the_reason(self):
        np.save(self.path("obj.npy"), np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
        r = run(["ls", self.path("obj.npy"), "--json"])
        self.assertEqual(r.code, 0, r.err)
        [t] = r.json()["tensors"]
        self.assertFalse(t["readable"])
        self.assertIn("never unpickled", t["unavailable"])
        np.save(self.path("be.npy"), np.arange(6, dtype=">f4"))
        [t] = run(["ls", self.path("be.npy"), "--json"]).json()["tensors"]
        self.assertFalse(t["readable"])
        self.assertIn("big-endian", t["unavailable"])
        np.savez_compressed(self.path("c.npz"), x=np.zeros(10))
        [t] = run(["ls", self.path("c.npz"), "--json"]).json()["tensors"]
        self.assertFalse(t["readable"])
        self.assertIn("savez_compressed", t["unavailable"])

    def test_bad_files_are_refused_naming_file_and_offset(self):
        np.save(self.path("good.npy"), np.arange(100, dtype=np.float64))
        raw = open(self.path("good.npy"), "rb").read()
        header_len = struct.unpack("<H", raw[8:10])[0]

        def npy(header, payload=b""):
            """A v1.0 .npy with this header text (padded as numpy pads it) and payload."""
            text = header.encode()
            text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
            return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + payload

        def refused(name, data, *expect):
            p = self.path(name)
            with open(p, "wb") as f:
                f.write(data)
            r = run(["ls", p])
            self.assertNotEqual(r.code, 0, name)
            self.assertIn(p, r.err, name)
            for e in expect:
                self.assertIn(e, r.err, name)
            self.assertNotIn("Traceback", r.err)

        refused("truncated.npy", raw[:-8], "at byte " + str(10 + header_len), "800 bytes")
        refused("short.npy", raw[:9], "truncated")
        refused("huge_header.npy", raw[:8] + struct.pack("<H", 0xFFFF) + raw[10:], "runs past the end")
        refused("version.npy", raw[:6] + b"\x09\x00" + raw[8:], "format version 9.0")
        refused("lying_shape.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999,), }", b"\0" * 800),
                "bytes of '<f8' values")
        refused("overflow.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }"),
                "overflows 64 bits")
        refused("key.npy", npy("{'descr': '<f8', 'fortran_orde_': False, 'shape': (0,), }"), "unexpected key 'fortran_orde_'")
        refused("twice.npy", npy("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (0,), }"), "given twice")
        refused("missing.npy", npy("{'descr': '<f8', 'shape': (0,), }"), "expected the keys")
        refused("structured.npy", npy("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (0,), }"), "structured dtype")
        refused("negative.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"), "non-negative integer")
        refused("order.npy", npy("{'descr': 'f8', 'fortran_order': False, 'shape': (0,), }"), "byte order")

if __name__ == "__main__":
    unittest.main()
