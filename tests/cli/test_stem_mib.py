"""Quantum Detectors Merlin `.mib` acquisitions (docs/stem.md, "Merlin MIB"), written by tests/fixtures/mib_writer.py
from the published format description: every decoded frame equals the frames written (raw 1-, 6-, 12- and 24-bit,
one chip and a 2 x 2 quad, processed U08/U16/U32); the products (bf, adf, com, mask, mean-dp) equal numpy over the
same frames; the scan shape from the .hdr, from the frame count, and with flyback columns left out by a scan region;
an acquisition interrupted mid-row is readiness, not an error; truncated files and lying headers are bad input
(exit 3) naming the file and the byte offset; discover and inspect describe MIB.

Runs with Debian's /usr/bin/python3 + numpy."""
import math
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
from cli_harness import run  # noqa: E402
import mib_writer as mw  # noqa: E402

ROWS, COLS, K = 5, 6, 32  # the processed acquisition: a 5 x 6 scan of 32 x 32 frames


def annulus(shape, centre, inner, outer):
    k, l = np.meshgrid(np.arange(shape[0], dtype=np.float32), np.arange(shape[1], dtype=np.float32), indexing="ij")
    d = np.sqrt((k - np.float32(centre[0])) ** 2 + (l - np.float32(centre[1])) ** 2)
    return (d >= np.float32(inner)) & (d <= np.float32(outer))


class StemMib(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-mib-")
        cls.rng = np.random.default_rng(48)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def loaded(self, path, *args):
        out = self.path("loaded.npy")
        r = run(["stem", "export", path, "-o", out, "--json", "--no-mask"] + list(args))
        self.assertEqual(r.code, 0, r.err)
        return np.load(out)

    def inspect(self, path, *args):
        r = run(["stem", "inspect", path, "--json"] + list(args))
        self.assertEqual(r.code, 0, r.err)
        return r.json()

    def test_raw_frames_decode_to_what_was_written(self):
        for depth, quad, dtype in [(1, False, np.uint8), (6, False, np.uint8), (12, False, np.uint16), (24, False, np.uint32),
                                   (1, True, np.uint8), (12, True, np.uint16), (24, True, np.uint32)]:
            with self.subTest(depth=depth, quad=quad):
                side = 512 if quad else 256
                frames = mw.counts(self.rng, (4, side, side), depth, dtype)
                frames[0, 0, 1] = (1 << depth) - 1  # the largest count survives (it is not the dtype's sentinel)
                p = mw.write(self.path("raw%d%s.mib" % (depth, "q" if quad else "")), frames, raw=True, depth=depth, quad=quad)
                got = self.loaded(p)
                self.assertEqual(got.dtype, dtype)
                np.testing.assert_array_equal(got, frames.reshape(2, 2, side, side))
                j = self.inspect(p)
                self.assertEqual(j["detector_shape"], [side, side])
                self.assertEqual(j["metadata"]["mib/counter_depth"], {"value": depth, "units": "bit"})
                self.assertEqual(j["metadata"]["mib/raw"]["value"], True)
                self.assertEqual(j["scan_shape_source"], "square frame count")
                self.assertEqual(j["readiness"]["status"], "complete")
                self.assertIn("raw %d-bit counters" % depth, j["description"])

    def test_processed_frames_of_every_width(self):
        for ptype, dtype in [("U08", np.uint8), ("U16", np.uint16), ("U32", np.uint32)]:
            with self.subTest(ptype=ptype):
                frames = self.rng.integers(0, np.iinfo(dtype).max, size=(6, 24, 40), dtype=np.uint64).astype(dtype)
                frames[frames == np.iinfo(dtype).max] = 0  # the loader zeroes the dtype's maximum (Dectris's sentinel)
                depth = {"U08": 6, "U16": 12, "U32": 24}[ptype]
                p = mw.write(self.path("proc%s.mib" % ptype), frames, pixel_type=ptype, depth=depth, hdr=mw.hdr_text(6, 3, depth=depth))
                np.testing.assert_array_equal(self.loaded(p), frames.reshape(2, 3, 24, 40))
                j = self.inspect(p)
                self.assertEqual(j["scan_shape"], [2, 3])
                self.assertTrue(j["scan_shape_source"].endswith(".hdr: Frames in Acquisition / Frames per Trigger"), j)
                self.assertEqual(j["dtype"], "u%d" % (8 * np.dtype(dtype).itemsize))

    def test_products_equal_numpy(self):
        frames = mw.counts(self.rng, (ROWS * COLS, K, K), 12, np.uint16)
        p = mw.write(self.path("products.mib"), frames, hdr=mw.hdr_text(ROWS * COLS, COLS, scan=(ROWS, COLS)))
        data = frames.reshape(ROWS, COLS, K, K).astype(np.uint64)
        j = self.inspect(p)
        self.assertEqual(j["scan_shape"], [ROWS, COLS])
        self.assertTrue(j["scan_shape_source"].endswith(".hdr: ScanY, ScanX"), j)
        mean = data.sum(axis=(0, 1)) / (ROWS * COLS)
        rows, cols = np.nonzero(mean > mean.mean() + mean.std())
        centre, radius = (rows.mean(), cols.mean()), math.sqrt(len(rows) / math.pi)

        def product(name, *args):
            out = self.path(name + ".npy")
            r = run(["stem", name, p, "-o", out, "--json", "--no-cache"] + list(args))
            self.assertEqual(r.code, 0, r.err)
            return np.load(out), r.json()

        for name, (inner, outer) in {"bf": (0, radius), "adf": (radius, 2 * radius)}.items():
            img, rep = product(name)
            self.assertAlmostEqual(rep["disk"]["radius"], radius, places=9)
            np.testing.assert_array_equal(img, data[:, :, annulus((K, K), centre, inner, outer)].sum(axis=2))
        img, _ = product("mask", "--center", "15,17", "--inner", "2", "--outer", "7.5")
        np.testing.assert_array_equal(img, data[:, :, annulus((K, K), (15, 17), 2, 7.5)].sum(axis=2))
        com, _ = product("com")
        s = data.sum(axis=(2, 3)).astype(np.float64)
        k = np.arange(K, dtype=np.float64)
        mu_r = (data.sum(axis=3) * k).sum(axis=2) / s
        mu_c = (data.sum(axis=2) * k).sum(axis=2) / s
        np.testing.assert_allclose(com[0], mu_r - mu_r.mean(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(com[1], mu_c - mu_c.mean(), rtol=0, atol=1e-12)
        mdp, _ = product("mean-dp")
        np.testing.assert_allclose(mdp, mean, rtol=1e-15)

    def test_flyback_columns_are_left_out_by_a_scan_region(self):
        """A scan of 4 rows x 5 positions recorded with one flyback frame at the end of each row: --scan-shape 4,6
        gives the recorded frames their places, --scan-region 0,4,0,5 leaves the flyback column out."""
        frames = mw.counts(self.rng, (4 * 6, 16, 16), 12, np.uint16)
        p = mw.write(self.path("flyback.mib"), frames)
        out = self.path("fly.npy")
        r = run(["stem", "mask", p, "-o", out, "--scan-shape", "4,6", "--scan-region", "0,4,0,5", "--center", "8,8",
                 "--inner", "0", "--outer", "5", "--no-cache"])
        self.assertEqual(r.code, 0, r.err)
        data = frames.reshape(4, 6, 16, 16)[:, :5].astype(np.uint64)
        np.testing.assert_array_equal(np.load(out), data[:, :, annulus((16, 16), (8, 8), 0, 5)].sum(axis=2))
        r = run(["stem", "inspect", p, "--json"])  # 24 frames: no square, no .hdr
        self.assertIsNone(r.json()["scan_shape"])

    def test_interrupted_mid_row_is_readiness(self):
        frames = mw.counts(self.rng, (17, 16, 16), 12, np.uint16)
        p = mw.write(self.path("interrupted.mib"), frames, hdr=mw.hdr_text(6 * 7, 7), cut=100)
        j = self.inspect(p)
        rd = j["readiness"]
        self.assertEqual((rd["status"], rd["frames_present"], rd["frames_expected"]), ("incomplete", 16, 42))
        self.assertTrue(any("bytes after the last complete frame (frame 16 at byte" in x for x in rd["problems"]), rd)
        self.assertIn("16 of 42 frames present", rd["problems"])
        self.assertEqual(j["scan_shape"], [6, 7])
        # The rows already written can be computed.
        np.testing.assert_array_equal(self.loaded(p, "--scan-region", "0,2,0,7"), frames[:14].reshape(2, 7, 16, 16))
        r = run(["stem", "discover", self.dir, "--json"])
        self.assertEqual(r.code, 0, r.err)
        found = {os.path.basename(e["master"]): e for e in r.json()}
        self.assertEqual(found["interrupted.mib"]["status"], "incomplete")
        self.assertEqual(found["interrupted.mib"]["frames_present"], 16)

    def test_header_text_that_is_not_utf8_is_escaped(self):
        # Found by fuzz_mib: a timestamp with a stray byte reached the metadata unescaped (a strict JSON dump threw);
        # it is kept as \xNN, as HDF5 strings are.
        frames = mw.counts(self.rng, (4, 16, 16), 12, np.uint16)
        data = b"".join(mw.records(frames)).replace(b"2024-03-01", b"2024-03-\xaf1")
        p = self.path("latin1.mib")
        with open(p, "wb") as f:
            f.write(data)
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["metadata"]["mib/timestamp"]["value"], "2024-03-\\xAF1 12:00:00.001000")  # core/utf8.h

    def test_bad_input_names_file_and_offset(self):
        frames = mw.counts(self.rng, (4, 16, 16), 12, np.uint16)
        good = b"".join(mw.records(frames))
        rec = len(good) // 4

        def refused(name, data, *expect, command="inspect"):
            p = self.path(name)
            with open(p, "wb") as f:
                f.write(data)
            args = ["stem", command, p] + (["-o", self.path("x.npy")] if command != "inspect" else [])
            r = run(args)
            self.assertEqual(r.code, 3, (name, r.out, r.err))
            for e in (p,) + expect:
                self.assertIn(e, r.err, name)

        refused("short.mib", good[:200], "frame header at byte 0", "only 200 bytes are there (truncated file)")
        refused("empty.mib", b"", "frame header at byte 0", "truncated file")
        refused("notmib.mib", b"PK\x03\x04" + b"\0" * 500, "expected 'MQ1,'")
        refused("hugeheader.mib", good.replace(b"00384", b"99999", 1), "header length 99999 bytes")
        refused("wide.mib", good[:rec].replace(b",0016,0016,", b",9999,9999,", 1), "frame of 9999 x 9999 pixels")
        last = 3 * rec
        lying = good[:last] + good[last:].replace(b",U16,", b",U08,", 1)
        refused("lastdiffers.mib", lying, "frame header at byte %d (frame 3)" % last, "expected the first frame's")
        reseq = good[:last] + good[last:].replace(b"MQ1,000004", b"MQ1,000009", 1)
        refused("sequence.mib", reseq, "sequence number 9, expected 4")
        middle = good[:rec] + good[rec:].replace(b"0016,0016,U16", b"0016,0016,U32", 1)
        refused("middle.mib", middle, "inconsistent frame headers", command="export")
        refused("u64.mib", good.replace(b",U16,", b",U64,"), "pixel type 'U64' is not read")
        raw = b"".join(mw.records(mw.counts(self.rng, (1, 256, 256), 12, np.uint16), raw=True, depth=12))
        refused("rawdims.mib", raw.replace(b",0256,0256,", b",0256,0128,", 1), "stores 65536 pixels, the header says 256 x 128")
        refused("rawdepth.mib", b"".join(mw.records(mw.counts(self.rng, (1, 256, 256), 12, np.uint16), raw=True, depth=12,
                                                  extended=False)), "without a counter depth")
        # A .hdr whose counter depth exceeds the stored pixels' bits (the fuzzer's 64 once shifted a uint64 by 64).
        p = self.path("deep.mib")
        mw.write(p, frames, hdr="HDR,\r\nCounter Depth (number):\t64\r\nEnd\t\r\n", extended=False)
        r = run(["stem", "inspect", p])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("counter depth 64 (from the frame header or the .hdr) exceeds the U16 pixels' 16 bits", r.err)
        p = self.path("badhdr.mib")
        mw.write(p, frames, hdr="HDR,\r\nFrames in Acquisition (Number):\tmany\r\nEnd\t\r\n")
        r = run(["stem", "inspect", p])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("badhdr.hdr: line 2: Frames in Acquisition (Number) is 'many'", r.err)

    def test_discover_inspect_and_folder(self):
        d = os.path.join(self.dir, "folder")
        os.makedirs(os.path.join(d, "sub"))
        frames = mw.counts(self.rng, (9, 8, 8), 12, np.uint16)
        a = mw.write(os.path.join(d, "sub", "a.mib"), frames, hdr=mw.hdr_text(9, 3))
        j = self.inspect(d)  # a folder holding one acquisition
        self.assertEqual(j["master"], a)
        self.assertEqual(j["layout"], "1x1 processed")
        self.assertEqual(j["readiness"]["data_files"][0]["codec"], "file-records")
        self.assertEqual(j["metadata"]["mib/hdr/Frames per Trigger (Number)"], {"value": "3"})
        self.assertEqual(j["metadata"]["mib/pixel_type"], {"value": "U16"})
        self.assertIn("Quantum Detectors Merlin (Medipix 3RX), 1 chip 1x1, processed 12-bit counters", j["description"])
        self.assertEqual(len(j["signature"]), 16)
        self.assertEqual(self.inspect(a[:-4] + ".hdr")["master"], a)  # the .hdr names its .mib
        os.utime(a, (1, 1))
        self.assertNotEqual(self.inspect(a)["signature"], j["signature"])
        b = mw.write(os.path.join(d, "b.mib"), frames)
        r = run(["stem", "discover", d, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(sorted(e["master"] for e in r.json()), sorted([a, b]))
        r = run(["stem", "inspect", d])
        self.assertEqual(r.code, 2, r.err)
        self.assertIn("2 acquisitions here", r.err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
