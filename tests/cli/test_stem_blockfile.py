"""NanoMegas ASTAR blockfiles (.blo) as 4D-STEM acquisitions (docs/stem.md, "NanoMegas blockfile"), through the CLI.
The files are written by tests/fixtures/blockfile_writer.py from the published description of the format (no
NanoMegas writer is available here). Products (bf, adf, mask, com) against an independent numpy implementation over
the same frames; the header's scan shape, calibration and stored virtual image; a big-endian header; readiness of a
file cut short; lying headers, sizes that overflow and misplaced frames."""
import os
import shutil
import struct
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fixtures"))
from cli_harness import run  # noqa: E402
from blockfile_writer import write_blockfile  # noqa: E402

NY, NX, K = 5, 7, 16


def annulus(shape, centre, inner, outer):
    """The products' detector: inner <= d <= outer, d in float32 from pixel index to centre (docs/stem.md)."""
    k, l = np.meshgrid(np.arange(shape[0], dtype=np.float32), np.arange(shape[1], dtype=np.float32), indexing="ij")
    dr, dc = k - np.float32(centre[0]), l - np.float32(centre[1])
    d = np.sqrt(dr * dr + dc * dc)
    return (d >= np.float32(inner)) & (d <= np.float32(outer))


class StemBlockfile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-blo-")
        rng = np.random.default_rng(5)
        a = rng.poisson(2.0, (NY, NX, K, K)).astype(np.uint8)
        a[:, :, 5:11, 5:11] += 60
        a[2, 3, 0, 1] = 255  # saturated: the loader's sentinel for uint8
        cls.frames = a
        cls.vbf = rng.integers(0, 256, (NY, NX), dtype=np.uint8)
        cls.blo = cls.path("scan.blo")
        cls.header = write_blockfile(cls.blo, a, vbf=cls.vbf, note="ASTAR test\r\nOperator: none")
        d = a.astype(np.uint64)
        d[a == 255] = 0
        cls.data = d

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def copy_with(self, name, **patch):
        """scan.blo with header fields rewritten in place: name -> (struct code, byte offset, value)."""
        p = self.path(name)
        shutil.copy(self.blo, p)
        with open(p, "r+b") as f:
            for code, at, value in patch.values():
                f.seek(at)
                f.write(struct.pack("<" + code, value))
        return p

    def product(self, name, src, *args, expect=0):
        out = self.path(name + ".npy")
        r = run(["stem", name, src, "-o", out, "--json"] + list(args))
        self.assertEqual(r.code, expect, r.err)
        return (np.load(out), r.json()) if expect == 0 else r

    def test_inspect_describes_the_header(self):
        r = run(["stem", "inspect", self.blo, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual(j["layout"], "blockfile")
        self.assertEqual(j["readiness"]["status"], "complete")
        self.assertEqual((j["readiness"]["frames_present"], j["readiness"]["frames_expected"]), (NY * NX, NY * NX))
        self.assertEqual((j["scan_shape"], j["scan_shape_source"]), ([NY, NX], "blockfile header: NY, NX"))
        self.assertEqual((j["detector_shape"], j["dtype"]), ([K, K], "u8"))
        m = j["metadata"]
        self.assertEqual(m["blockfile/SX"], {"value": 1.5, "units": "nm"})
        self.assertEqual(m["blockfile/scan_step"], {"value": 1.5, "units": "nm"})
        self.assertEqual(m["blockfile/Beam_energy"], {"value": 200000, "units": "V"})
        self.assertEqual(m["blockfile/Note"]["value"], "ASTAR test\r\nOperator: none")
        self.assertEqual(m["blockfile/first_frame_number"]["value"], 0)
        image = m["blockfile/virtual_image"]["value"]
        self.assertEqual((image["offset"], image["shape"]), (0x1000, [NY, NX]))
        stored = np.fromfile(self.blo, np.uint8, NY * NX, offset=image["offset"]).reshape(image["shape"])
        np.testing.assert_array_equal(stored, self.vbf)
        r = run(["stem", "discover", self.dir, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn(os.path.realpath(self.blo), [e["master"] for e in r.json()])

    def test_products_equal_numpy(self):
        for src, name in ((self.blo, "little-endian"), (None, "big-endian")):
            if src is None:
                src = self.path("be.blo")
                write_blockfile(src, self.frames, vbf=self.vbf, endian=">")
            with self.subTest(header=name):
                img, rep = self.product("bf", src, "--center", "7.5,7.5", "--radius", "4")
                np.testing.assert_array_equal(img, self.data[:, :, annulus((K, K), (7.5, 7.5), 0, 4)].sum(axis=2))
                img, _ = self.product("adf", src, "--center", "7.5,7.5", "--radius", "4")
                np.testing.assert_array_equal(img, self.data[:, :, annulus((K, K), (7.5, 7.5), 4, 8)].sum(axis=2))
                img, _ = self.product("mask", src, "--center", "3,4", "--inner", "1", "--outer", "6.5")
                np.testing.assert_array_equal(img, self.data[:, :, annulus((K, K), (3, 4), 1, 6.5)].sum(axis=2))
                com, _ = self.product("com", src)
                s = self.data.sum(axis=(2, 3)).astype(np.float64)
                mu_r = (self.data.sum(axis=3) * np.arange(K)).sum(axis=2) / s
                mu_c = (self.data.sum(axis=2) * np.arange(K)).sum(axis=2) / s
                np.testing.assert_allclose(com[0], mu_r - mu_r.mean(), rtol=0, atol=1e-12)
                np.testing.assert_allclose(com[1], mu_c - mu_c.mean(), rtol=0, atol=1e-12)
        out = self.path("export.npy")
        r = run(["stem", "export", self.blo, "-o", out, "--no-mask", "--json"])
        self.assertEqual(r.code, 0, r.err)
        np.testing.assert_array_equal(np.load(out), self.frames)

    def test_a_file_cut_short_is_incomplete(self):
        p = self.path("cut.blo")
        shutil.copy(self.blo, p)
        record = 6 + K * K
        os.truncate(p, os.path.getsize(p) - 4 * record - 100)
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        ready = r.json()["readiness"]
        self.assertEqual((ready["status"], ready["frames_present"], ready["frames_expected"]), ("incomplete", 30, 35))
        self.assertIn("30 of 35 frames present", ready["problems"][0])
        os.truncate(p, 200)
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("cut.blo: at byte 200: truncated inside the 240-byte header", r.err)

    def test_lying_headers(self):
        # More scan rows than the file holds: readiness, not an error.
        p = self.copy_with("tall.blo", ny=("H", 26, NY + 2))
        j = run(["stem", "inspect", p, "--json"]).json()
        self.assertEqual((j["readiness"]["frames_present"], j["readiness"]["frames_expected"]), (NY * NX, (NY + 2) * NX))
        # Frames one byte off where the header puts them: the frame headers say so, and products exit 7.
        p = self.copy_with("shifted.blo", off2=("I", 12, self.header["Data_offset_2"] + 1))
        with open(p, "ab") as f:
            f.write(b"\0")  # every frame present, one byte later than written
        j = run(["stem", "inspect", p, "--json"]).json()
        [problem] = j["readiness"]["problems"]
        self.assertIn("frame 0 at byte %d: frame header 0x" % (self.header["Data_offset_2"] + 1), problem)
        self.assertIn("expected 0x55aa", problem)
        r = self.product("bf", p, "--center", "7,7", "--radius", "3", expect=7)
        self.assertIn("shifted.blo", r.err)
        # Refused naming the file and the field's byte offset.
        for name, patch, text in (
                ("magic.blo", {"m": ("H", 6, 0x0999)}, "at byte 6: MAGIC"),
                ("nodetector.blo", {"d": ("H", 20, 0)}, "at byte 20: DP_SZ is 0"),
                ("noscan.blo", {"x": ("H", 24, 0)}, "at byte 24: NX is 0"),
                ("inside.blo", {"o": ("I", 12, 100)}, "at byte 12: Data_offset_2 100"),
                ("huge.blo", {"d": ("H", 20, 65535), "x": ("H", 24, 65535), "y": ("H", 26, 65535),
                              "o": ("I", 12, 0xFFFFFFFF)}, "at byte 20: 4294836225 frames of 4294836231 bytes")):
            with self.subTest(name=name):
                r = run(["stem", "inspect", self.copy_with(name, **patch), "--json"])
                self.assertEqual(r.code, 3, r.out + r.err)
                self.assertIn(name + ": " + text, r.err)
        # A virtual image that would run into the frames is not offered; the frames still are.
        p = self.copy_with("image.blo", off1=("I", 8, self.header["Data_offset_2"] - 3))
        j = run(["stem", "inspect", p, "--json"]).json()
        self.assertIn("runs into the frames", j["metadata"]["blockfile/virtual_image_problem"]["value"])
        self.assertEqual(j["readiness"]["status"], "complete")


if __name__ == "__main__":
    unittest.main()
