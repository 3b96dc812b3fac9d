"""stem ssb beside an independent numpy implementation of the same conventions (bench/peer_numpy_ssb.py) on the
same simulated file, with the calibration tensormorph reports: the phase and the loss agree within the
backend-parity tolerance the SSB issue states (phase atol 2e-4 rad, loss rtol 1e-5; measured ~2e-8 rad and
~1e-7: tensormorph holds G in complex64 from float32 FFTs with float64 accumulation, numpy here runs in
float64/complex128), with and without astigmatism and scan rotation; and the comparison can fail: numpy with
the sign of chi flipped (C10, C12 -> -C10, -C12), the astigmatism azimuth mirrored or the scan rotation
reversed gives a clearly different phase.

The scan is 30 x 30, not 32 x 32: with 64 x 64 frames the simulator's scan frequencies are then not commensurate
with the detector pixels. At 32 x 32 (nu step = exactly one detector pixel, aperture edge alpha/lambda = exactly
8 pixels from an integer disk centre) many k_b -+ nu fall exactly on the aperture edge, where A(k) = [|k| <= alpha/lambda]
is decided by float rounding: changing alpha by 1e-12 there moves the phase by 3e-3 rad and the loss by 0.7 %, so
two correct implementations that round differently would disagree by more than any sensible tolerance.

Runs with Debian's /usr/bin/python3 (numpy, h5py, hdf5plugin); skipped, saying so, when they are missing."""
import math
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from cli_harness import run  # noqa: E402

try:
    import numpy as np
    import h5py  # noqa: F401
    import hdf5plugin  # noqa: F401
    import peer_numpy_ssb as peer
    MISSING = None
except ImportError as e:  # pragma: no cover
    MISSING = str(e)

PHASE_ATOL = 2e-4   # rad (the backend-parity tolerance; the brief allows 2e-3)
LOSS_RTOL = 1e-5    # (the issue's; the brief allows 1e-4)
CLEARLY = 0.05      # rad: a wrong convention moves the phase by far more than this (the phase spans ~0.5 rad)


@unittest.skipIf(MISSING is not None, "numpy/h5py/hdf5plugin missing (%s): tensormorph vs numpy SSB NOT compared" % MISSING)
class StemSsbNumpy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-ssb-np-")
        out = os.path.join(cls.dir, "demo")
        r = run(["stem", "demo", "--out", out, "--scan", "30,30", "--detector", "64", "--defocus-nm", "5",
                 "--seed", "3", "--dose", "20000", "--threads", "2", "--json"])
        assert r.code == 0, r.err
        cls.master = r.json()["master"]
        cls.frames, cls.mask, _ = peer.load(cls.master)
        cls.preps = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tm(self, *args):
        out = os.path.join(self.dir, "phase.npy")
        r = run(["stem", "ssb", self.master, "-o", out, "--json", "--threads", "2", *args])
        self.assertEqual(r.code, 0, r.err)
        return np.load(out), r.json()

    def numpy_side(self, rep, ab):
        """numpy's (phase, loss, B) with exactly the calibration tensormorph reports."""
        c = rep["calibration"]
        cal = {"energy_ev": c["energy"]["value"], "semiangle_mrad": c["semiangle"]["value"],
               "scan_step_A": c["scan_step"]["value"], "detector_mrad_per_px": c["detector_angle_per_pixel"]["value"],
               "scan_rotation_deg": c["scan_rotation"]["value"], "disk_row": rep["disk"]["row"],
               "disk_col": rep["disk"]["col"], "disk_radius_px": rep["disk"]["radius"]}
        key = tuple(sorted((k, v) for k, v in cal.items() if k != "scan_rotation_deg"))
        if key not in self.preps:
            self.preps[key] = peer.prepare(self.frames, cal, excluded=self.mask, dtype=np.complex128)
        prep = self.preps[key]
        self.assertAlmostEqual(prep["wavelength_A"], c["wavelength_A"], delta=1e-12)
        phase, loss = peer.evaluate(prep, cal, ab)
        return phase, loss, prep["G"].shape[0]

    def compare(self, args, ab):
        tm_phase, rep = self.tm(*args)
        self.assertEqual(rep["aberrations"], {"C10": ab["C10"], "C12": ab["C12"], "phi12": ab["phi12"]})
        np_phase, np_loss, nb = self.numpy_side(rep, ab)
        self.assertEqual(nb, rep["bright_field_pixels"])
        self.assertEqual(tm_phase.shape, np_phase.shape)
        d = float(np.abs(tm_phase - np_phase).max())
        rel = abs(rep["loss"] - np_loss) / abs(np_loss)
        print("\n  %s: phase max |d| %.2e rad (tol %.0e), loss %.9g vs numpy %.9g, rel %.2e (tol %.0e), B %d"
              % (" ".join(args), d, PHASE_ATOL, rep["loss"], np_loss, rel, LOSS_RTOL, nb), file=sys.stderr)
        self.assertLessEqual(d, PHASE_ATOL)
        self.assertLessEqual(rel, LOSS_RTOL)
        return tm_phase, rep

    def differs(self, tm_phase, rep, ab, what):
        phase, _, _ = self.numpy_side(rep, ab)
        d = float(np.abs(tm_phase - phase).max())
        print("  numpy with %s: phase max |d| %.3f rad (must exceed %.2f)" % (what, d, CLEARLY), file=sys.stderr)
        self.assertGreater(d, CLEARLY, what)

    def test_defocus_only_detected_disk(self):
        # The disk: detected by tensormorph (a first run), then given to both sides as --center/--radius;
        # --center takes integers, so the detected centre is rounded (the simulator's disk sits at K/2).
        _, first = self.tm("--C10", "50", "--scan-rotation-deg", "0")
        disk = first["disk"]
        center = "%d,%d" % (round(disk["row"]), round(disk["col"]))
        ab = {"C10": 50.0, "C12": 0.0, "phi12": 0.0}
        tm_phase, rep = self.compare(["--C10", "50", "--scan-rotation-deg", "0", "--center", center,
                                      "--radius", repr(disk["radius"])], ab)
        self.assertEqual(rep["disk"]["source"], "given")
        self.differs(tm_phase, rep, dict(ab, C10=-50.0), "C10 -> -C10 (chi sign flipped)")

    def test_astigmatism_and_scan_rotation(self):
        args = ["--C10", "50", "--C12", "40", "--phi12", "30", "--scan-rotation-deg", "25", "--center", "32,32",
                "--radius", "7.9"]
        ab = {"C10": 50.0, "C12": 40.0, "phi12": 30.0}
        tm_phase, rep = self.compare(args, ab)
        self.assertEqual(rep["calibration"]["scan_rotation"]["value"], 25.0)
        self.differs(tm_phase, rep, dict(ab, C10=-50.0, C12=-40.0), "chi sign flipped")
        self.differs(tm_phase, rep, dict(ab, phi12=-30.0), "phi12 -> -phi12 (azimuth mirrored)")
        rep_reversed = dict(rep, calibration=dict(rep["calibration"], scan_rotation={"value": -25.0}))
        self.differs(tm_phase, rep_reversed, ab, "scan rotation -> -25 deg")

    def test_calibration_overrides(self):
        args = ["--C10", "-80", "--C12", "20", "--phi12", "-60", "--scan-rotation-deg", "200", "--center", "32,32",
                "--radius", "8", "--kv", "200", "--scan-step-A", "0.3", "--detector-mrad-per-px", "2.4",
                "--semiangle-mrad", "19"]
        _, rep = self.compare(args, {"C10": -80.0, "C12": 20.0, "phi12": -60.0})
        lam = peer.wavelength_A(200e3)
        self.assertLess(abs(rep["calibration"]["wavelength_A"] - lam), 1e-12)
        self.assertTrue(math.isfinite(rep["loss"]))


if __name__ == "__main__":
    if MISSING is not None:
        print("SKIPPED: tensormorph vs numpy SSB comparison: %s" % MISSING, file=sys.stderr)
    unittest.main(verbosity=2)
