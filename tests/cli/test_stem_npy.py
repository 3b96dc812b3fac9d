"""NumPy .npy arrays as 4D-STEM acquisitions (docs/stem.md, "NumPy .npy acquisitions"), through the CLI. Every
file is written by numpy itself (np.save and np.lib.format.open_memmap; Debian's python3-numpy), a real writer, not
by a writer of ours; the damaged ones are numpy's files cut short or with their header rewritten. Products (bf, adf,
mask, com) against an independent numpy implementation over the same frames, big-endian and 3-D arrays, readiness of
a file cut short, refusals naming the file and the field, and a 2-D .npy that stays a checkpoint."""
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import run  # noqa: E402

SCAN = (5, 6)
K = (16, 18)


def annulus(shape, centre, inner, outer):
    """The products' detector: inner <= d <= outer, d in float32 from pixel index to centre (docs/stem.md)."""
    k, l = np.meshgrid(np.arange(shape[0], dtype=np.float32), np.arange(shape[1], dtype=np.float32), indexing="ij")
    dr, dc = k - np.float32(centre[0]), l - np.float32(centre[1])
    d = np.sqrt(dr * dr + dc * dc)
    return (d >= np.float32(inner)) & (d <= np.float32(outer))


def frames(dtype, seed=3):
    """Counts (SCAN + K), a bright disk in the middle, and one pixel at the dtype's maximum (the loader's sentinel)."""
    rng = np.random.default_rng(seed)
    a = rng.poisson(3.0, SCAN + K).astype(dtype)
    a[:, :, 5:11, 6:12] += dtype(40)
    a[1, 2, 0, 0] = np.iinfo(dtype).max
    return a


def masked(a):
    """What the products see: values equal to the dtype's maximum zeroed (unless --no-mask), as uint64."""
    out = a.astype(np.uint64)
    out[a == np.iinfo(a.dtype).max] = 0
    return out


class StemNpy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-npy-")
        cls.a16 = frames(np.uint16)
        cls.p16 = cls.path("scan_u16.npy")
        np.save(cls.p16, cls.a16)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def product(self, name, src, *args, expect=0):
        out = self.path(name + ".npy")
        r = run(["stem", name, src, "-o", out, "--json"] + list(args))
        self.assertEqual(r.code, expect, r.err)
        return (np.load(out), r.json()) if expect == 0 else r

    def check_products(self, src, data, *extra):
        """bf, adf, mask and com of `src` equal numpy's over `data` (what the products see, uint64)."""
        centre, radius = (7.5, 8.5), 4
        img, rep = self.product("bf", src, "--center", "7.5,8.5", "--radius", str(radius), *extra)
        np.testing.assert_array_equal(img, data[:, :, annulus(K, centre, 0, radius)].sum(axis=2))
        self.assertEqual(rep["disk"]["source"], "given")
        img, _ = self.product("adf", src, "--center", "7.5,8.5", "--radius", str(radius), *extra)
        np.testing.assert_array_equal(img, data[:, :, annulus(K, centre, radius, 2 * radius)].sum(axis=2))
        img, _ = self.product("mask", src, "--center", "6,9", "--inner", "2", "--outer", "7.5", *extra)
        np.testing.assert_array_equal(img, data[:, :, annulus(K, (6, 9), 2, 7.5)].sum(axis=2))
        com, _ = self.product("com", src, *extra)
        s = data.sum(axis=(2, 3)).astype(np.float64)
        mu_r = (data.sum(axis=3) * np.arange(K[0])).sum(axis=2) / s
        mu_c = (data.sum(axis=2) * np.arange(K[1])).sum(axis=2) / s
        np.testing.assert_allclose(com[0], mu_r - mu_r.mean(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(com[1], mu_c - mu_c.mean(), rtol=0, atol=1e-12)

    def test_inspect_describes_a_4d_array(self):
        r = run(["stem", "inspect", self.p16, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual(j["layout"], "npy-4d")
        self.assertEqual(j["readiness"]["status"], "complete")
        self.assertEqual((j["readiness"]["frames_present"], j["readiness"]["frames_expected"]), (30, 30))
        self.assertEqual(j["scan_shape"], list(SCAN))
        self.assertEqual(j["scan_shape_source"], "npy header: shape")
        self.assertEqual(j["detector_shape"], list(K))
        self.assertEqual(j["dtype"], "u16")
        self.assertEqual(j["metadata"]["npy/descr"], {"value": "<u2"})
        self.assertEqual(j["metadata"]["npy/shape"], {"value": list(SCAN + K)})
        self.assertEqual(len(j["signature"]), 16)
        text = run(["stem", "inspect", self.p16])
        self.assertEqual(text.code, 0, text.err)
        self.assertIn("npy-4d", text.out)

    def test_products_equal_numpy(self):
        self.check_products(self.p16, masked(self.a16))
        # --no-mask keeps the value at the dtype's maximum, a real count in a .npy.
        img, rep = self.product("mask", self.p16, "--center", "0,0", "--inner", "0", "--outer", "0.5", "--no-mask")
        self.assertEqual(img[1, 2], 65535)

    def test_export_is_the_array(self):
        out = self.path("export.npy")
        r = run(["stem", "export", self.p16, "-o", out, "--no-mask", "--json"])
        self.assertEqual(r.code, 0, r.err)
        np.testing.assert_array_equal(np.load(out), self.a16)

    def test_big_endian_and_uint8_and_uint32(self):
        for dt, name in ((">u2", "be_u2.npy"), (">u4", "be_u4.npy"), ("<u4", "le_u4.npy"), ("|u1", "u1.npy")):
            with self.subTest(dtype=dt):
                a = frames(np.dtype(dt).newbyteorder("=").type).astype(dt)
                p = self.path(name)
                np.save(p, a)
                self.assertEqual(np.load(p).dtype.str, dt)
                self.check_products(p, masked(a.astype(a.dtype.newbyteorder("="))))
                out = self.path("export.npy")
                r = run(["stem", "export", p, "-o", out, "--no-mask", "--json"])
                self.assertEqual(r.code, 0, r.err)
                np.testing.assert_array_equal(np.load(out), a)

    def test_a_frame_summing_to_2_to_32_streams_with_the_reason(self):
        """The resident copy holds frames whose totals fit uint32; a frame past that is not an error: the products
        stream (the same numbers as numpy) and the provenance says why the copy was not used."""
        a = frames(np.uint32)
        a[3, 4, 2, 2] = a[3, 4, 2, 3] = np.uint32(2**31 + 5)  # position (3, 4) sums past 2^32
        p = self.path("big_u32.npy")
        np.save(p, a)
        data = masked(a)
        img, rep = self.product("mask", p, "--center", "6,9", "--inner", "0", "--outer", "12", "--resident-memory", "1G")
        np.testing.assert_array_equal(img, data[:, :, annulus(K, (6, 9), 0, 12)].sum(axis=2))
        self.assertGreater(int(img[3, 4]), 2**32)
        resident = rep["provenance"]["resident"]
        self.assertFalse(resident["used"], resident)
        self.assertIn("position %d sums to 2^32 or more" % (3 * SCAN[1] + 4), resident["why"])

    def test_3d_array_with_a_scan_shape(self):
        a = frames(np.uint8).reshape((-1,) + K)  # 30 frames: not a square scan
        p = self.path("stack.npy")
        np.save(p, a)
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertIsNone(r.json()["scan_shape"])
        self.assertIn("--scan-shape", r.json()["scan_shape_problem"])
        r = run(["stem", "bf", p, "-o", self.path("x.npy")])
        self.assertEqual(r.code, 2, r.out + r.err)
        self.assertIn("--scan-shape", r.err)
        r = run(["stem", "inspect", p, "--scan-shape", "6,5", "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual((r.json()["scan_shape"], r.json()["scan_shape_source"]), ([6, 5], "--scan-shape"))
        self.check_products(p, masked(a).reshape((6, 5) + K)[:, :, :, :], "--scan-shape", "6,5")

    def test_a_file_cut_short_is_incomplete_not_an_error(self):
        p = self.path("growing.npy")
        m = np.lib.format.open_memmap(p, mode="w+", dtype=np.uint16, shape=SCAN + K)
        m[:] = self.a16
        m.flush()
        del m
        frame = K[0] * K[1] * 2
        size = os.path.getsize(p)
        os.truncate(p, size - 7 * frame - 5)  # 22 whole frames left, and part of a 23rd
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        ready = r.json()["readiness"]
        self.assertEqual(ready["status"], "incomplete")
        self.assertEqual((ready["frames_present"], ready["frames_expected"]), (22, 30))
        self.assertIn("22 of 30 frames present", ready["problems"][0])
        r = run(["stem", "bf", p, "-o", self.path("x.npy"), "--center", "7,7", "--radius", "3"])
        self.assertNotEqual(r.code, 0)
        self.assertIn("growing.npy", r.err)
        # Cut inside the header: refused naming the file and offset.
        os.truncate(p, 40)
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("growing.npy: at byte 10: header of", r.err)

    def test_lying_headers_are_refused_naming_file_and_field(self):
        def rewrite(name, header):
            """numpy's own file with its header dict replaced (padded to the same length)."""
            p = self.path(name)
            shutil.copy(self.p16, p)
            with open(p, "r+b") as f:
                raw = f.read()
                hlen = int.from_bytes(raw[8:10], "little")
                text = header.ljust(hlen - 1) + "\n"
                self.assertEqual(len(text), hlen)
                f.seek(10)
                f.write(text.encode("latin1"))
            return p

        # A shape bigger than the file: readiness, not an error.
        p = rewrite("more.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (6, 6, 16, 18), }")
        j = run(["stem", "inspect", p, "--json"]).json()
        self.assertEqual((j["readiness"]["frames_present"], j["readiness"]["frames_expected"]), (30, 36))
        # A shape smaller than the file: the bytes after it are a problem.
        p = rewrite("less.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (4, 6, 16, 18), }")
        j = run(["stem", "inspect", p, "--json"]).json()
        self.assertEqual(j["readiness"]["status"], "incomplete")
        self.assertIn("bytes after the last frame", j["readiness"]["problems"][0])
        # Sizes that overflow 64 bits.
        p = rewrite("huge.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16, 18), }")
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("overflows", r.err)
        # Fortran order, 64-bit counts, another rank, a zero extent: refused naming the field.
        for name, header, field in (
                ("fortran.npy", "{'descr': '<u2', 'fortran_order': True, 'shape': (5, 6, 16, 18), }", "fortran_order"),
                ("u8.npy", "{'descr': '<u8', 'fortran_order': False, 'shape': (5, 6, 16, 9), }", "descr '<u8'"),
                ("rank5.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 5, 6, 16, 18), }", "shape (1, 5"),
                ("zero.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (5, 0, 16, 18), }", "extent of 0")):
            with self.subTest(name=name):
                r = run(["stem", "inspect", rewrite(name, header), "--json"])
                self.assertNotEqual(r.code, 0, r.out)
                self.assertIn(name, r.err)
                if name != "rank5.npy":  # a 5-D array is not claimed: the error is the last reader's
                    self.assertIn(field, r.err)

    def test_float_and_2d_arrays_stay_checkpoints(self):
        p2 = self.path("weights.npy")
        np.save(p2, np.zeros((4, 5), np.float32))
        pf = self.path("conv.npy")
        np.save(pf, np.zeros((2, 3, 4, 5), np.float32))
        prgb = self.path("images.npy")
        np.save(prgb, np.zeros((7, 9, 3), np.uint8))
        for p in (p2, pf, prgb):
            r = run(["ls", p, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(r.json()["format"], "npy")
            r = run(["stem", "inspect", p, "--json"])
            if p == prgb:  # named to a stem command, a 3-D stack of unsigned pixels is read as (N, Kr, Kc) frames
                self.assertEqual((r.code, r.json()["detector_shape"]), (0, [9, 3]), r.err)
            else:  # the .npy row says why (it does not claim these by name, but their extension is its)
                self.assertEqual(r.code, 3, r.out)
                self.assertIn("4D-STEM frames must be unsigned integer counts", r.err)
        # discover lists the acquisitions only.
        root = tempfile.mkdtemp(prefix="tm-stem-npy-discover-")
        try:
            os.makedirs(os.path.join(root, "a", "b"))
            for p in (p2, pf, prgb):
                shutil.copy(p, os.path.join(root, "a"))
            shutil.copy(self.p16, os.path.join(root, "a", "b", "scan.NPY"))
            r = run(["stem", "discover", root, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual([e["master"] for e in r.json()], [os.path.join(os.path.realpath(root), "a", "b", "scan.NPY")])
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def test_a_folder_holding_one_npy_or_blockfile_is_that_acquisition(self):
        """`stem inspect FOLDER` (and every product) on a folder whose only acquisition is a .npy or a .blo (rows that
        claim files only): the one acquisition any row discovers there; two are refused naming both (exit 2)."""
        sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
        from blockfile_writer import write_blockfile
        d = self.path("folder-npy")
        os.makedirs(os.path.join(d, "sub"), exist_ok=True)
        data = np.arange(2 * 3 * 8 * 8, dtype=np.uint16).reshape(2, 3, 8, 8)
        np.save(os.path.join(d, "sub", "scan.npy"), data)
        r = run(["stem", "inspect", d, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual((r.json()["format"], r.json()["scan_shape"]), ("npy", [2, 3]))
        img, _ = self.product("mask", d, "--center", "4,4", "--inner", "0", "--outer", "100")
        np.testing.assert_array_equal(img, data.astype(np.uint64).sum(axis=(2, 3)))
        b = self.path("folder-blo")
        os.makedirs(b, exist_ok=True)
        write_blockfile(os.path.join(b, "scan.blo"), np.zeros((2, 2, 8, 8), dtype=np.uint8))
        r = run(["stem", "inspect", b, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["format"], "blockfile")
        np.save(os.path.join(b, "other.npy"), data)
        r = run(["stem", "inspect", b])
        self.assertEqual(r.code, 2, r.err)
        self.assertIn("2 acquisitions here", r.err)
        self.assertIn("scan.blo", r.err)
        self.assertIn("other.npy", r.err)

    def test_a_fifo_is_not_waited_for(self):
        p = self.path("pipe.npy")
        os.mkfifo(p)
        r = run(["stem", "inspect", p, "--json"], timeout=30)
        self.assertNotEqual(r.code, 0)


if __name__ == "__main__":
    unittest.main()
