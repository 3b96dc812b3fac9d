"""Output files follow their extension: `stem <product> -o OUT.tif` and `stem ssb -o OUT.tif` write TIFFs read back
here with tifffile (Debian's python3-tifffile: a reader the project does not write, pure Python, not libtiff) —
the product's integer samples exactly, float products as the nearest float32, a vector field as two pages, the scan
step as the pixel size — and an extension a command cannot write is refused (exit 2) before any work, with no file
left. A 4D-STEM file given to a checkpoint command points at `stem inspect`."""
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import run  # noqa: E402

import numpy as np  # noqa: E402

try:
    import tifffile
except ImportError:  # pragma: no cover
    tifffile = None


def npy(path):
    return np.load(path)


@unittest.skipIf(tifffile is None, "python3-tifffile is not installed (scripts/install-deps installs it)")
class TiffOutputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-outputs-")
        r = run(["stem", "demo", "--out", os.path.join(cls.dir, "acq"), "--scan", "12,10", "--detector", "32", "--json"])
        assert r.code == 0, r.err
        cls.master = r.json()["master"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def product(self, kind, out, *extra):
        r = run(["stem", kind, self.master, "-o", self.path(out), "--json", *extra])
        self.assertEqual(r.code, 0, r.err)
        return r.json()

    def test_virtual_image_is_the_products_integers_with_the_scan_step_as_pixel_size(self):
        npy_doc = self.product("bf", "bf.npy")
        doc = self.product("bf", "bf.tif")
        want = npy(self.path("bf.npy"))
        with tifffile.TiffFile(self.path("bf.tif")) as t:
            self.assertEqual(len(t.pages), 1)
            page = t.pages[0]
            got = page.asarray()
            tags = {tag.name: tag.value for tag in page.tags.values()}
        self.assertEqual(got.dtype, np.uint64)
        np.testing.assert_array_equal(got, want)
        self.assertEqual(tags["SampleFormat"], 1)
        self.assertEqual(tags["BitsPerSample"], 64)
        self.assertEqual(tags["Software"], "tensormorph")
        desc = json.loads(tags["ImageDescription"])
        self.assertEqual(desc["product"], "bf")
        self.assertEqual(desc["shape"], [12, 10])
        step = desc["scan_step"]
        self.assertEqual(step["unit"], "angstrom")
        self.assertTrue(step["source"].startswith("file: "), step)
        # XResolution is a rational in pixels per centimetre: 1e8 / (angstrom per pixel), as float32.
        num, den = tags["XResolution"]
        self.assertAlmostEqual(num / den, 1e8 / step["value"], delta=1e8 / step["value"] * 1e-6)
        self.assertEqual(tags["YResolution"], tags["XResolution"])
        self.assertEqual(int(tags["ResolutionUnit"]), 3)  # centimetre
        self.assertEqual(doc["tiff"]["samples"], "uint64")
        self.assertEqual(doc["tiff"]["scan_step"], step)
        self.assertEqual(doc["summary"], npy_doc["summary"])
        self.assertTrue(os.path.exists(self.path("bf.tif.json")))

    def test_float_products_are_the_nearest_float32_and_a_field_is_two_pages(self):
        self.product("mean-dp", "mean.npy")
        doc = self.product("mean-dp", "mean.tif")
        with tifffile.TiffFile(self.path("mean.tif")) as t:
            page = t.pages[0]
            got = page.asarray()
            tags = {tag.name: tag.value for tag in page.tags.values()}
        self.assertEqual(got.dtype, np.float32)
        self.assertEqual(got.tobytes(), npy(self.path("mean.npy")).astype(np.float32).tobytes())
        self.assertNotIn("XResolution", tags)  # a diffraction pattern: no scan-space pixel size
        self.assertEqual(doc["tiff"], {"pages": 1, "samples": "float32", "rounded_from": "float64",
                                       "pixels_per_cm": None, "scan_step": None})
        self.product("com", "com.npy")
        self.product("com", "com.tif")
        want = npy(self.path("com.npy"))
        self.assertEqual(want.shape[0], 2)
        with tifffile.TiffFile(self.path("com.tif")) as t:
            self.assertEqual(len(t.pages), 2)
            pages = [p.asarray() for p in t.pages]
        for k in range(2):
            self.assertEqual(pages[k].tobytes(), want[k].astype(np.float32).tobytes())

    def test_ssb_phase_as_tiff(self):
        self.product("ssb", "phase.npy", "--C10", "50")
        doc = self.product("ssb", "phase.TIFF", "--C10", "50")  # the extension in any case
        got = tifffile.imread(self.path("phase.TIFF"))
        self.assertEqual(got.tobytes(), npy(self.path("phase.npy")).astype(np.float32).tobytes())
        self.assertEqual(doc["tiff"]["samples"], "float32")
        self.assertIsNotNone(doc["tiff"]["pixels_per_cm"])

    def test_extensions_a_command_cannot_write_are_refused_before_any_work(self):
        demo = self.path("demo")
        self.assertEqual(run(["demo", "--out", demo, "--no-gguf"]).code, 0)
        cases = [
            (["stem", "bf", self.master, "-o", self.path("bf.jpg")], "cannot write a '.jpg' file",
             "writes .npy, .png or .tif"),
            (["stem", "ssb", self.master, "--C10", "50", "-o", self.path("phase")], "cannot write a file without an extension",
             "writes .npy, .png or .tif"),
            (["stem", "export", self.master, "-o", self.path("frames.tif")], "cannot write a '.tif' file", "writes .npy"),
            (["export", demo, "model.norm.weight", "-o", self.path("norm.csv")], "cannot write a '.csv' file", "writes .npy"),
            (["render", demo, "model.norm.weight", "-o", self.path("norm.jpg")], "cannot write a '.jpg' file", "writes .png"),
        ]
        for args, said, writes in cases:
            r = run(args)
            self.assertEqual(r.code, 2, (args, r.err))
            self.assertIn(said, r.err)
            self.assertIn("the format follows the extension: this command " + writes, r.err)
            self.assertFalse(os.path.exists(args[args.index("-o") + 1]), args)

    def test_a_tiff_that_cannot_be_written_is_an_io_error_naming_the_path(self):
        out = self.path("no-such-folder/bf.tif")
        r = run(["stem", "bf", self.master, "-o", out])
        self.assertEqual(r.code, 6, r.err)
        self.assertIn(out + ": cannot create the TIFF file", r.err)
        self.assertFalse(os.path.exists(out))

    def test_a_stem_file_given_to_a_checkpoint_command_points_at_stem_inspect(self):
        r = run(["info", self.master])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("a 4D-STEM acquisition opens with tensormorph stem inspect " + self.master, r.err)


if __name__ == "__main__":
    unittest.main()
