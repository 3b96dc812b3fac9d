"""EMPAD acquisitions (docs/stem.md, "EMPAD"), written by tests/fixtures/empad_writer.py from the layout the peers'
readers describe: the frames read are the .raw's first 128 rows of each 130-row float32 record, bit for bit; the
products of float frames (bf, adf, mask, com, mean-dp and the max pattern) equal numpy over the same frames summed in
the order docs/stem.md states (sequential float64: np.cumsum(...)[-1]), exactly, and the CoM within 1e-12 after
the mean is taken off; the scan shape from pix_y/pix_x, scan_resolution_y/_x or a series; a truncated .raw is
readiness and a product over its missing frames names the frame and byte offset; an .xml lying about the scan, a
missing .raw, trailing bytes and malformed XML are bad input (exit 3) naming the file and the field or offset; the
sidecar's beam energy, diffraction angle, camera length and scan step (field of view × scan_size ÷ scan extent) are
calibration with their XML paths, a bad reading is not used and says why; the scan is the acquire mode's.

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
import empad_writer as ew  # noqa: E402

ROWS, COLS, K = 3, 4, 128


def annulus(shape, centre, inner, outer):
    k, l = np.meshgrid(np.arange(shape[0], dtype=np.float32), np.arange(shape[1], dtype=np.float32), indexing="ij")
    d = np.sqrt((k - np.float32(centre[0])) ** 2 + (l - np.float32(centre[1])) ** 2)
    return (d >= np.float32(inner)) & (d <= np.float32(outer))


def seq_sum(values):
    """The contract's sum: float64, left to right along the last axis."""
    return np.cumsum(np.asarray(values, dtype=np.float64), axis=-1)[..., -1]


class StemEmpad(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-empad-")
        cls.rng = np.random.default_rng(4848)
        cls.frames = ew.frames(cls.rng, ROWS * COLS)
        cls.xml = ew.write(cls.dir, "scan", cls.frames, scan=(ROWS, COLS))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def sub(self, name):
        d = self.path(name)
        os.makedirs(d, exist_ok=True)
        return d

    def product(self, name, *args, path=None):
        out = self.path(name + ".npy")
        r = run(["stem", name, path or self.xml, "-o", out, "--json", "--no-cache"] + list(args))
        self.assertEqual(r.code, 0, r.err)
        return np.load(out), r.json()

    def bad(self, path, *fragments, args=("inspect",)):
        r = run(["stem"] + list(args) + [path])
        self.assertEqual(r.code, 3, r.err + r.out)
        for f in fragments:
            self.assertIn(f, r.err)

    def test_inspect_and_frames_bit_for_bit(self):
        r = run(["stem", "inspect", self.xml, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual(j["format"], "empad")
        self.assertEqual(j["dtype"], "f32")
        self.assertEqual(j["detector_shape"], [K, K])
        self.assertEqual(j["scan_shape"], [ROWS, COLS])
        self.assertEqual(j["scan_shape_source"], "root/pix_y × root/pix_x")
        self.assertEqual(j["readiness"]["status"], "complete")
        self.assertEqual(j["metadata"]["root/iom_measurements/calibrated_pixelsize"], {"value": "2.1e-3"})
        out = self.path("all.npy")
        r = run(["stem", "export", self.xml, "-o", out, "--json"])
        self.assertEqual(r.code, 0, r.err)
        got = np.load(out)
        self.assertEqual(got.dtype, np.float32)
        self.assertEqual(got.tobytes(), self.frames.reshape(ROWS, COLS, K, K).tobytes())  # bit for bit, metadata rows dropped
        self.assertIsNone(r.json()["provenance"]["bad_pixels"]["sentinel"])
        # A scan region and one frame.
        r = run(["stem", "export", self.xml, "-o", out, "--scan-region", "1,3,1,3", "--detector-region", "10,50,20,60"])
        self.assertEqual(r.code, 0, r.err)
        np.testing.assert_array_equal(np.load(out), self.frames.reshape(ROWS, COLS, K, K)[1:3, 1:3, 10:50, 20:60])
        r = run(["stem", "export", self.xml, "-o", out, "--frame", "2,1"])
        self.assertEqual(r.code, 0, r.err)
        np.testing.assert_array_equal(np.load(out), self.frames[2 * COLS + 1])

    def test_binning_sums_in_float64_in_the_stated_order(self):
        out = self.path("binned.npy")
        r = run(["stem", "export", self.xml, "-o", out, "--scan-bin", "2,2", "--detector-bin", "4,4"])
        self.assertEqual(r.code, 0, r.err)
        got = np.load(out)
        self.assertEqual(got.dtype, np.float64)
        d = self.frames.reshape(ROWS, COLS, K, K)
        want = np.zeros(got.shape)
        for R in range(got.shape[0]):
            for C in range(got.shape[1]):
                for r_ in range(2 * R, min(ROWS, 2 * R + 2)):  # member frames row-major, then detector pixels row-major
                    for c_ in range(2 * C, min(COLS, 2 * C + 2)):
                        for k in range(4):
                            for l in range(4):
                                want[R, C] += d[r_, c_, k::4, l::4].astype(np.float64)
        self.assertEqual(got.tobytes(), want.tobytes())
        # Products of binned float frames: the float64 bins, then the float64 op in its order.
        mdp, _ = self.product("mean-dp", "--scan-bin", "2,2", "--detector-bin", "4,4")
        n = want.shape[0] * want.shape[1]
        self.assertEqual(mdp.tobytes(), (np.cumsum(want.reshape(n, 32, 32), axis=0)[-1] / n).tobytes())
        r = run(["stem", "export", self.xml, "-o", out, "--dtype", "uint16"])
        self.assertEqual(r.code, 2, r.err)
        self.assertIn("the frames are f32", r.err)

    def test_products_equal_numpy(self):
        data = self.frames.reshape(ROWS * COLS, K * K)
        mdp, rep = self.product("mean-dp")
        self.assertEqual(mdp.dtype, np.float64)
        self.assertEqual(mdp.tobytes(), (np.cumsum(self.frames.astype(np.float64), axis=0)[-1] / (ROWS * COLS)).tobytes())
        self.assertTrue(all(p["backend"] == "cpu" for p in rep["placement"]), rep["placement"])
        mx, _ = self.product("mean-dp", "--max")
        self.assertEqual(mx.dtype, np.float64)
        np.testing.assert_array_equal(mx, self.frames.max(axis=0).astype(np.float64))

        for name in ("bf", "adf"):
            img, rep = self.product(name)
            self.assertEqual(img.dtype, np.float64)
            self.assertEqual(rep["detector"]["evaluated_as"], "direct")
            disk = rep["disk"]
            centre, radius = (disk["row"], disk["col"]), disk["radius"]
            self.assertLess(abs(radius - 14.0), 1.0, disk)
            inner, outer = (0, radius) if name == "bf" else (radius, 2 * radius)
            sel = annulus((K, K), centre, inner, outer).ravel()
            self.assertEqual(img.tobytes(), seq_sum(data[:, sel]).reshape(ROWS, COLS).tobytes(), name)
        img, _ = self.product("mask", "--center", "60,70", "--inner", "3", "--outer", "60.5")
        sel = annulus((K, K), (60, 70), 3, 60.5).ravel()
        self.assertGreater(sel.sum(), K * K // 2)  # dense: still summed directly
        self.assertEqual(img.tobytes(), seq_sum(data[:, sel]).reshape(ROWS, COLS).tobytes())

        # The resident store holds integer counts only: float frames are streamed, and the provenance says why.
        again, rep = self.product("mask", "--center", "60,70", "--inner", "3", "--outer", "60.5", "--resident-memory", "1G")
        self.assertEqual(again.tobytes(), img.tobytes())
        self.assertFalse(rep["provenance"]["resident"]["used"], rep["provenance"]["resident"])
        self.assertIn("frames of f32", rep["provenance"]["resident"]["why"])

        com, _ = self.product("com")
        idx = np.arange(K * K)
        w = seq_sum(data)
        mu_r = seq_sum(data.astype(np.float64) * (idx // K)) / w
        mu_c = seq_sum(data.astype(np.float64) * (idx % K)) / w
        np.testing.assert_allclose(com[0].ravel(), mu_r - mu_r.mean(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(com[1].ravel(), mu_c - mu_c.mean(), rtol=0, atol=1e-12)

    def test_backend_without_float_kernels_falls_back_to_the_cpu(self):
        r = run(["backends", "--json"], plugins=True)
        self.assertEqual(r.code, 0, r.err)
        other = [b["name"] for b in r.json()["backends"] if b["available"] and b["name"] != "cpu"]
        self.assertTrue(other, r.out)  # the test plugins (gpuemu, testaccel) at least
        for name in other:
            out = self.path("fallback.npy")
            r = run(["stem", "mean-dp", self.xml, "-o", out, "--json", "--no-cache", "--backend", name], plugins=True)
            self.assertEqual(r.code, 0, r.err)
            p = r.json()["placement"][0]
            self.assertEqual(p["backend"], "cpu", p)
            why = {x["backend"]: x["reason"] for x in p["rejected"]}
            self.assertIn(why.get(name), ("dtype_unsupported", "missing_kernel"), p)  # gpuemu has the op, not for f32
            if name == "gpuemu":
                self.assertEqual(why[name], "dtype_unsupported", p)

    def test_scan_shape_sources(self):
        d = self.sub("shapes")
        f = self.frames[:6]
        for stem, kw, shape, source in [
            ("res", dict(resolution=(2, 3)), [2, 3], "root/scan_parameters/scan_resolution_y × root/scan_parameters/scan_resolution_x"),
            ("quoted", dict(scan=(3, 2), quoted=True), [3, 2], "root/pix_y × root/pix_x"),
        ]:
            p = ew.write(d, stem, f, **kw)
            r = run(["stem", "inspect", p, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(r.json()["scan_shape"], shape)
            self.assertEqual(r.json()["scan_shape_source"], source)
        p = ew.write(d, "series", f, series=6)
        r = run(["stem", "inspect", p, "--json", "--scan-shape", "2,3"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["frames"]["expected"] if "frames" in r.json() else 6, 6)
        img, _ = self.product("mask", "--center", "64,64", "--inner", "0", "--outer", "5", "--scan-shape", "3,2", path=p)
        sel = annulus((K, K), (64, 64), 0, 5).ravel()
        self.assertEqual(img.tobytes(), seq_sum(f.reshape(6, K * K)[:, sel]).reshape(3, 2).tobytes())

    def test_scan_shape_is_the_acquire_modes(self):
        # A <scan_parameters mode="search"> block before the acquire one (EMPAD writes one per mode): the scan is
        # the acquire mode's; the search mode's values are kept under their own path.
        d = self.sub("modes")
        p = ew.write(d, "modes", self.frames[:6], resolution=(2, 3), search_mode=(64, 64))
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual(j["scan_shape"], [2, 3])
        self.assertEqual(j["scan_shape_source"], "root/scan_parameters/scan_resolution_y × root/scan_parameters/scan_resolution_x")
        self.assertEqual(j["metadata"]["root/scan_parameters[mode=search]/scan_resolution_x"], {"value": "64"})
        self.assertEqual(j["metadata"]["root/scan_parameters[mode=search]@mode"], {"value": "search"})
        self.assertEqual(j["metadata"]["root/scan_parameters@mode"], {"value": "acquire"})

    def test_calibration_from_the_sidecar(self):
        # The readings under <iom_measurements> as calibration with the XML path each came from (docs/stem.md,
        # "EMPAD", Calibration). Expected values computed here from the written numbers.
        d = self.sub("calibration")
        cal = {"source.get_voltage": "200000.0", "optics.get_cameralength": "0.23", "calibrated_diffraction_angle": "0.00025"}
        p = ew.write(d, "cal", self.frames, scan=(ROWS, COLS), fov="[4e-09, 3e-09]", scan_size="0.5", calibration=cal)
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        m = j["metadata"]
        iom = "root/iom_measurements/"
        self.assertEqual(j["beam_energy_ev"], 200000.0)
        self.assertEqual(m["empad/beam_energy"], {"value": 200000.0, "units": "V", "from": iom + "source.get_voltage"})
        self.assertEqual(m["empad/camera_length"], {"value": 0.23, "units": "m", "from": iom + "optics.get_cameralength"})
        self.assertEqual(m["empad/detector_angle_per_pixel"], {"value": 0.00025, "units": "rad", "from": iom + "calibrated_diffraction_angle"})
        step = 4e-09 * 0.5 / COLS  # x: the field of view's first number, times scan_size, over the scan's columns
        self.assertAlmostEqual(3e-09 * 0.5 / ROWS, step, delta=1e-24)
        self.assertAlmostEqual(m["empad/scan_step"]["value"], step, delta=step * 1e-12)
        self.assertEqual(m["empad/scan_step"]["units"], "m")
        self.assertEqual(m["empad/scan_step"]["from"], iom + "optics.get_full_scan_field_of_view[0] × root/scan_parameters/scan_size ÷ root/pix_x")
        self.assertNotIn("empad/calibration_not_used", m)

        # A product converts its radii with the sidecar's angle per pixel, and names where it came from.
        img, rep = self.product("mask", "--center", "64,64", "--inner", "2", "--outer", "20", path=p)
        a = rep["detector"]["angle_per_pixel"]
        self.assertEqual(a["source"], "file: empad/detector_angle_per_pixel (from root/iom_measurements/calibrated_diffraction_angle)")
        self.assertAlmostEqual(a["value"], 0.25, places=12)
        self.assertAlmostEqual(rep["detector"]["outer_mrad"], 20 * 0.25, places=9)
        # --detector-mrad-per-px still wins over the file.
        _, rep = self.product("mask", "--center", "64,64", "--inner", "2", "--outer", "20", "--detector-mrad-per-px", "0.5", path=p)
        self.assertEqual(rep["detector"]["angle_per_pixel"]["source"], "--detector-mrad-per-px")

        # Steps that differ between the axes are kept per axis and not used; no scan_size is the whole frame.
        p = ew.write(d, "square_fov", self.frames, scan=(ROWS, COLS), fov="[4e-09, 4e-09]")
        m = run(["stem", "inspect", p, "--json"]).json()["metadata"]
        self.assertNotIn("empad/scan_step", m)
        self.assertAlmostEqual(m["empad/scan_step_x"]["value"], 4e-09 / COLS, delta=1e-21)
        self.assertAlmostEqual(m["empad/scan_step_y"]["value"], 4e-09 / ROWS, delta=1e-21)
        self.assertIn("(root/scan_parameters/scan_size absent: the whole frame)", m["empad/scan_step_x"]["from"])
        self.assertIn("give --scan-step-A", m["empad/calibration_not_used"]["value"])

        # A reading that is not a positive number is not used, and says so; the acquisition still opens.
        p = ew.write(d, "bad", self.frames, scan=(ROWS, COLS), fov="[4e-09]",
                     calibration={"source.get_voltage": "n/a", "calibrated_diffraction_angle": "-1"})
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertIsNone(j["beam_energy_ev"])
        for key in ("empad/beam_energy", "empad/detector_angle_per_pixel", "empad/scan_step"):
            self.assertNotIn(key, j["metadata"])
        note = j["metadata"]["empad/calibration_not_used"]["value"]
        self.assertIn("root/iom_measurements/source.get_voltage is 'n/a': expected a positive number of volts", note)
        self.assertIn("calibrated_diffraction_angle is '-1'", note)
        self.assertIn("optics.get_full_scan_field_of_view is '[4e-09]': expected [x, y]", note)

    def test_truncated_raw_is_readiness_and_missing_frames_are_named(self):
        d = self.sub("trunc")
        raw = ew.raw_bytes(self.frames)
        cut = 7 * 130 * 128 * 4 + 1000  # 7 whole frames and part of the 8th of 12
        p = ew.write(d, "cut", self.frames, scan=(ROWS, COLS), raw=raw[:cut])
        r = run(["stem", "inspect", p, "--json"])
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertNotEqual(j["readiness"]["status"], "complete")
        self.assertIn("7 of 12 frames present", " ".join(j["readiness"]["problems"]))
        self.assertIn("byte offset %d" % (7 * 66560), " ".join(j["readiness"]["problems"]))
        out = self.path("cut.npy")
        r = run(["stem", "export", p, "-o", out, "--scan-region", "0,1,0,4"])  # the frames present
        self.assertEqual(r.code, 0, r.err)
        np.testing.assert_array_equal(np.load(out)[0], self.frames[:4])
        r = run(["stem", "mean-dp", p, "-o", out, "--no-cache"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("cut.raw ends at byte %d: frames 7 to 11 are not written (frame 7 would start at byte offset %d)"
                      % (cut, 7 * 66560), r.err)

    def test_bad_input_names_file_and_field(self):
        d = self.sub("bad")
        f = self.frames[:4]
        # The .xml's scan says 2 x 3 = 6 frames, the .raw holds 4 more.
        p = ew.write(d, "lying", np.concatenate([f, f, f[:2]]), scan=(2, 3))
        self.bad(p, "lying.raw", "root/pix_y × root/pix_x = 2 × 3", "byte offset %d" % (6 * 66560))
        # Trailing bytes after the last frame the .xml describes.
        p = ew.write(d, "trail", f, scan=(2, 2), raw=ew.raw_bytes(f) + b"\0" * 12)
        self.bad(p, "trail.raw", "12 bytes after the last frame (byte offset %d)" % (4 * 66560))
        # The .raw is missing.
        p = ew.write(d, "gone", f, scan=(2, 2))
        os.remove(os.path.join(d, "gone.raw"))
        self.bad(p, "gone.xml", "root/raw_file@filename", "gone.raw")
        # A scan size that is not a number, no scan at all, another root, broken XML.
        for name, text, frags in [
            ("nan", ew.xml_text("nan.raw", scan=(2, 2)).replace("<pix_x>2<", "<pix_x>two<"), ["root/pix_x is 'two'"]),
            ("noscan", ew.xml_text("noscan.raw"), ["no scan shape", "root/pix_x"]),
            ("notroot", '<?xml version="1.0"?><data><raw_file filename="x.raw"/></data>', ["root element <data>"]),
            ("broken", '<root><raw_file filename="x.raw"/><pix_x>2</pix_y></root>', ["byte 42", "expected </pix_x>, found </pix_y>"]),
            ("unclosed", '<root><raw_file filename="x.raw"/><pix_x>2', ["expected </pix_x>"]),
            ("entity", '<root><raw_file filename="x&bogus;.raw"/></root>', ["unknown entity '&bogus;'"]),
        ]:
            with self.subTest(name=name):
                p = os.path.join(d, name + ".xml")
                with open(os.path.join(d, name + ".raw"), "wb") as out:
                    out.write(ew.raw_bytes(f))
                with open(p, "w") as out:
                    out.write(text)
                self.bad(p, name + ".xml", *frags)

    def test_discover_and_folder(self):
        d = self.sub("folder")
        p = ew.write(d, "only", self.frames[:4], scan=(2, 2))
        with open(os.path.join(d, "other.xml"), "w") as out:  # an .xml that is not EMPAD's is not an acquisition
            out.write('<?xml version="1.0"?><config><item>1</item></config>')
        r = run(["stem", "discover", d, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual([a["master"] for a in r.json()], [os.path.realpath(p)])
        self.assertEqual(r.json()[0]["format"], "empad")
        r = run(["stem", "inspect", d, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["format"], "empad")
        r = run(["stem", "inspect", os.path.join(d, "other.xml")])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("root element <config>", r.err)


if __name__ == "__main__":
    unittest.main()
