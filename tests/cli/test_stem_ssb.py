"""stem ssb (single-sideband ptychography) through the CLI on simulated acquisitions whose phase and
aberrations are known: the reconstruction correlates with the true phase, the scan rotation is found, wrong
conventions (the sign of the defocus) lose the correlation, calibration sources are reported, --fit
recovers C10, C12 and phi12 with byte-identical values across thread counts, and bad requests are clear
errors."""
import os
import shutil
import sys
import tempfile
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import PLUGIN_DIR, run, require_vulkan  # noqa: E402

SCAN, K, STEP = 48, 64, 2  # the simulator's scan step is 2 real-space pixels


def pearson(a, b):
    a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))


class StemSsb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-ssb-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def demo(self, name, *args):
        out = os.path.join(self.dir, name)
        r = run(["stem", "demo", "--out", out, "--scan", f"{SCAN},{SCAN}", "--detector", str(K), "--json", *args])
        self.assertEqual(r.code, 0, r.err)
        return r.json()["master"]

    def ssb(self, master, *args, expect=0):
        out = os.path.join(self.dir, "phase.npy")
        r = run(["stem", "ssb", master, "-o", out, "--json", *args])
        self.assertEqual(r.code, expect, r.err)
        return (np.load(out), r.json()) if expect == 0 else r

    def truth(self, master):
        """The true phase at each scan position: the object under the probe centre (window origin + K/2)."""
        with h5py.File(master, "r") as f:
            phase = f["entry/sample/simulation/object_phase"][()]
        idx = np.arange(SCAN) * STEP + K // 2
        return phase[np.ix_(idx, idx)]

    def test_phase_correlates_with_the_truth_and_the_defocus_sign_matters(self):
        master = self.demo("plain")  # defocus 5 nm = C10 50 A
        truth = self.truth(master)
        phase, rep = self.ssb(master, "--C10", "50")
        self.assertEqual(phase.shape, (SCAN, SCAN))
        self.assertGreaterEqual(pearson(phase, truth), 0.95)
        self.assertEqual(rep["aberrations"], {"C10": 50.0, "C12": 0.0, "phi12": 0.0})
        cal = rep["calibration"]
        self.assertEqual(cal["energy"]["value"], 300e3)
        self.assertTrue(cal["energy"]["source"].startswith("file"))
        self.assertTrue(cal["scan_step"]["source"].startswith("file: entry/sample/simulation/scan_step"))
        self.assertLess(abs(cal["scan_rotation"]["value"] % 180.0), 2.0)
        flipped, _ = self.ssb(master, "--C10", "-50", "--scan-rotation-deg", "0")
        self.assertLess(pearson(flipped, truth), 0.0)
        # Overrides are reported as such.
        _, rep = self.ssb(master, "--C10", "50", "--kv", "300", "--scan-step-A", str(cal["scan_step"]["value"]),
                          "--scan-rotation-deg", "0")
        self.assertEqual(rep["calibration"]["energy"]["source"], "--kv")
        self.assertEqual(rep["calibration"]["scan_rotation"]["source"], "--scan-rotation-deg")

    def test_vulkan_reconstructs_within_the_stated_bound(self):
        """--prefer vulkan: stem.ssb_overlap runs on Vulkan (placement reported, bounded precision) and the
        phase is the CPU's within 2e-4 rad; higher orders fall back to the CPU with the reason."""
        require_vulkan(self)
        master = self.demo("vk", "--C12-nm", "3", "--phi12-deg", "20")
        common = ["--C10", "50", "--C12", "30", "--phi12", "20", "--scan-rotation-deg", "0", "--center", "32,32", "--radius", "8"]
        cpu, rep_cpu = self.ssb(master, *common)
        gpu, rep_gpu = self.ssb(master, *common, "--prefer", "vulkan")
        placed = {p["op"]: p for p in rep_gpu["placement"]}
        self.assertEqual(placed["stem.ssb_overlap"]["backend"], "vulkan")
        self.assertEqual(placed["stem.ssb_overlap"]["precision"], "bounded(0.0002)")
        self.assertEqual({p["op"]: p["backend"] for p in rep_cpu["placement"]}["stem.ssb_overlap"], "cpu")
        self.assertLessEqual(float(np.abs(gpu - cpu).max()), 2e-4)
        self.assertLessEqual(abs(rep_gpu["loss"] - rep_cpu["loss"]), 1e-5 * rep_cpu["loss"])
        _, rep = self.ssb(master, *common, "--prefer", "vulkan", "--aberration", "C30=1e5")
        at = {p["op"]: p for p in rep["placement"]}["stem.ssb_overlap"]
        self.assertEqual(at["backend"], "cpu")
        self.assertIn("vulkan", [r["backend"] for r in at["rejected"]])

    def test_gpu_kernel_source_reconstructs_within_the_stated_bound(self):
        """--backend gpuemu (the CUDA kernel source under the host grid emulation, FFTW standing in for cuFFT):
        both variants' phase within 2e-4 rad of the CPU's, placement reported as bounded."""
        env = {"TENSORMORPH_PLUGIN_DIR": os.path.join(os.path.dirname(PLUGIN_DIR), "gpu-emulated")}
        master = self.demo("emu", "--C12-nm", "3", "--phi12-deg", "20")
        common = ["--C10", "50", "--C12", "30", "--phi12", "20", "--scan-rotation-deg", "0", "--center", "32,32", "--radius", "8"]
        for extra in ([], ["--aberration", "C30=1e5"]):  # quadratic, then the direct variant
            with self.subTest(extra=extra):
                cpu, rep_cpu = self.ssb(master, *common, *extra)
                out = os.path.join(self.dir, "phase-emu.npy")
                r = run(["stem", "ssb", master, "-o", out, "--json", *common, *extra, "--backend", "gpuemu"], env_extra=env)
                self.assertEqual(r.code, 0, r.err)
                rep = r.json()
                at = {p["op"]: p for p in rep["placement"]}["stem.ssb_overlap"]
                self.assertEqual((at["backend"], at["precision"]), ("gpuemu", "bounded(0.0002)"))
                self.assertLessEqual(float(np.abs(np.load(out) - cpu).max()), 2e-4)
                self.assertLessEqual(abs(rep["loss"] - rep_cpu["loss"]), 1e-5 * rep_cpu["loss"])

    def test_scan_rotation_is_found(self):
        master = self.demo("turned", "--scan-rotation-deg", "30")
        _, rep = self.ssb(master, "--C10", "50")
        found = rep["calibration"]["scan_rotation"]["value"]
        self.assertLess(abs((found - 30.0 + 90.0) % 180.0 - 90.0), 2.0, rep["rotation_search"])
        self.assertLess(abs((found - 30.0 + 180.0) % 360.0 - 180.0), 2.0, rep["rotation_search"])  # the flip too
        _, wrong = self.ssb(master, "--C10", "50", "--scan-rotation-deg", str(found + 180))
        self.assertLess(rep["loss"], wrong["loss"])

    def test_fractional_disk_centre(self):
        master = self.demo("centre")
        _, detected = self.ssb(master, "--C10", "50", "--scan-rotation-deg", "0")
        d = detected["disk"]
        _, given = self.ssb(master, "--C10", "50", "--scan-rotation-deg", "0", "--center", "%r,%r" % (d["row"], d["col"]),
                            "--radius", repr(d["radius"]))
        self.assertEqual(given["disk"]["source"], "given")
        self.assertEqual((given["disk"]["row"], given["disk"]["col"]), (d["row"], d["col"]))
        self.assertEqual(given["loss"], detected["loss"])

    def test_higher_order_aberrations(self):
        master = self.demo("cs", "--C30-um", "60")
        truth = self.truth(master)
        phase, rep = self.ssb(master, "--C10", "50", "--aberration", "C30=6e5", "--scan-rotation-deg", "0")
        self.assertEqual(rep["aberrations"]["C30"], 6e5)
        plain, plain_rep = self.ssb(master, "--C10", "50", "--scan-rotation-deg", "0")
        self.assertGreater(pearson(phase, truth), pearson(plain, truth) + 0.05)
        self.assertLess(rep["loss"], plain_rep["loss"])
        _, rep = self.ssb(master, "--C10", "50", "--aberration", "C23=100,30", "--scan-rotation-deg", "0")
        self.assertEqual((rep["aberrations"]["C23"], rep["aberrations"]["phi23"]), (100.0, 30.0))
        r = self.ssb(master, "--aberration", "C30=1,5", expect=2)
        self.assertIn("no azimuth", r.err)
        r = self.ssb(master, "--aberration", "C77=1", expect=2)
        self.assertIn("C21, C23", r.err)

    def test_png_output(self):
        master = self.demo("png")
        out = os.path.join(self.dir, "phase.png")
        r = run(["stem", "ssb", master, "--C10", "50", "-o", out, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("display", r.json())
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_fit_recovers_the_aberrations_deterministically(self):
        master = self.demo("astigmatic", "--defocus-nm", "10", "--C12-nm", "3", "--phi12-deg", "30")
        args = ["--fit", "--c10-range-nm", "-50,50", "--c12-range-nm", "0,10", "--scan-rotation-deg", "0"]
        phase, rep = self.ssb(master, *args, "--threads", "2")
        ab = rep["aberrations"]
        fit = rep["fit"]
        self.assertLess(abs(ab["C10"] - 100) / 100, 0.10, rep["fit"])
        self.assertLess(abs(ab["C12"] - 30) / 30, 0.10, rep["fit"])
        self.assertLess(abs(ab["phi12"] - 30), 5, rep["fit"])
        self.assertTrue(rep["aberrations_source"].startswith("fitted (wide (asked), then Nelder-Mead"), rep["aberrations_source"])
        self.assertEqual(fit["search"], "wide (asked)")  # a range given: the user's box, searched whole
        fit = rep["fit"]
        self.assertEqual(fit["trials"], 200)
        self.assertEqual(fit["seed"], 0)
        self.assertEqual(fit["evaluations"], 200 + fit["nelder_mead"]["evaluations"])
        self.assertLessEqual(rep["loss"], fit["tpe_best_loss"])
        for key in ("prepare_s", "fit_s", "reconstruct_s", "total_s"):
            self.assertGreaterEqual(rep["timings"][key], 0)
        # Byte-identical on another thread count (JSON numbers print with 17 significant digits).
        _, one = self.ssb(master, *args, "--threads", "1")
        self.assertEqual(one["aberrations"], ab)
        self.assertEqual(one["loss"], rep["loss"])
        self.assertGreaterEqual(pearson(phase, self.truth(master)), 0.93)

    def test_default_fit_finds_the_basin_and_the_physical_branch(self):
        """The issue's acquisition (300 kV, 20 mrad, 96 x 96 detector, 0.37 A step, 30,000 counts, scan rotated
        30 degrees, C10 = 60 A, C12 = 40 A at 20 degrees) with `--fit` and nothing else: the parallax estimate,
        the search around it, the branch by the phase's skewness, all in the report."""
        out = os.path.join(self.dir, "issue")
        r = run(["stem", "demo", "--out", out, "--scan", "48,48", "--detector", "96", "--scan-step-px", "3", "--dose", "30000",
                 "--defocus-nm", "6", "--C12-nm", "4", "--phi12-deg", "20", "--scan-rotation-deg", "30", "--json"])
        self.assertEqual(r.code, 0, r.err)
        master = r.json()["master"]
        phase, rep = self.ssb(master, "--fit", "--threads", "2")
        ab, fit = rep["aberrations"], rep["fit"]
        self.assertLess(abs(ab["C10"] - 60), 6, fit)
        self.assertLess(abs(ab["C12"] - 40), 5, fit)
        self.assertLess(abs(ab["phi12"] - 20), 5, fit)
        self.assertEqual(fit["search"], "around the estimate")
        est = fit["estimate"]
        self.assertTrue(est["reliable"], est)
        self.assertTrue(est["method"].startswith("parallax"))
        self.assertLess(abs(est["aberrations"]["C10"] - 60), 30)
        self.assertLess(fit["search_box"]["C10_nm"][1] - fit["search_box"]["C10_nm"][0], 10)
        self.assertLess(fit["evaluations"], 150)
        for stage in ("estimate", "tpe", "nelder_mead"):
            self.assertGreaterEqual(fit["stages"][stage]["seconds"], 0)
        branch = fit["branch"]
        self.assertIn("skewness", branch["criterion"])
        chosen = [c for c in branch["candidates"] if c["branch"] == branch["chosen"]][0]
        other = [c for c in branch["candidates"] if c["branch"] != branch["chosen"]][0]
        self.assertGreater(chosen["skewness"], 0)
        self.assertAlmostEqual(chosen["skewness"], -other["skewness"], delta=0.05)
        self.assertAlmostEqual(chosen["loss"], other["loss"], delta=1e-3 * chosen["loss"])
        self.assertLess(abs((rep["calibration"]["scan_rotation"]["value"] - 30 + 180) % 360 - 180), 2)
        self.assertEqual(fit["part"], {"reason": "the whole scan"})
        # The same phase as the reconstruction at the true aberrations and rotation, with its sign.
        given, _ = self.ssb(master, "--C10", "60", "--C12", "40", "--phi12", "20", "--scan-rotation-deg", "30")
        self.assertGreaterEqual(pearson(phase, given), 0.95)

    def test_fit_on_a_central_part_then_the_whole(self):
        master = self.demo("part")
        phase, rep = self.ssb(master, "--fit", "--fit-crop", "32", "--scan-rotation-deg", "0")
        self.assertEqual(phase.shape, (SCAN, SCAN))
        part = rep["fit"]["part"]
        self.assertEqual(part["positions"], [32, 32])
        self.assertEqual(part["scan_region"], [[8, 40], [8, 40]])
        self.assertLess(abs(rep["aberrations"]["C10"] - 50), 10, rep["fit"])
        self.assertGreaterEqual(pearson(phase, self.truth(master)), 0.9)

    def test_bad_requests(self):
        master = self.demo("bad")
        r = self.ssb(master, "--fit", "--c10-range-nm", "5,-5", expect=2)
        self.assertIn("LO < HI", r.err)
        r = self.ssb(master, "--fit", "--c12-range-nm", "x", expect=2)
        self.assertIn("--c12-range-nm", r.err)
        r = self.ssb(master, "--fit", "--trials", "0", expect=2)
        self.assertIn("--trials", r.err)
        r = self.ssb(master, "--fit", "--search", "everywhere", expect=2)
        self.assertIn("--search", r.err)
        r = self.ssb(master, "--fit", "--estimate-trials", "0", expect=2)
        self.assertIn("--estimate-trials", r.err)
        r = self.ssb(master, "--scan-step-A", "-1", expect=2)
        self.assertIn("--scan-step-A: expected a number in (0, 10000000] (Å), got '-1'", r.err)
        r = self.ssb(master, "--center", "500,500", "--radius", "8", expect=2)
        self.assertIn("disk", r.err)
        r = self.ssb(master, "--center", "31.5", "--radius", "8", expect=2)
        self.assertIn("--center", r.err)
        r = self.ssb(master, "--memory-budget", "1M", expect=5)
        self.assertIn("bin the detector", r.err)
        self.assertIn("--allow-approx ssb.bin_detector", r.err)

    def test_over_budget_with_consent_bins_the_detector_and_says_so(self):
        master = self.demo("budget")
        phase, rep = self.ssb(master, "--C10", "50", "--scan-rotation-deg", "0", "--memory-budget", "3M",
                              "--allow-approx", "ssb.bin_detector")
        approx = rep["approximation"]
        self.assertEqual(approx["step"], "ssb.bin_detector")
        factor = approx["detector_bin"][0]
        self.assertEqual(approx["detector_bin"], [factor, factor])
        self.assertIn(factor, (2, 4, 8, 16, 32, 64))
        self.assertIn("memory budget", approx["refused_without"])
        self.assertEqual(rep["provenance"]["detector_bin"], [factor, factor])
        self.assertEqual(phase.shape, (SCAN, SCAN))
        self.assertLessEqual(rep["memory_bytes"], 3 << 20)
        # Without the budget problem nothing is approximated.
        _, rep = self.ssb(master, "--C10", "50", "--scan-rotation-deg", "0", "--allow-approx", "ssb.bin_detector")
        self.assertIsNone(rep["approximation"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
