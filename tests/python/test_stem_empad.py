"""tm.stem on an EMPAD acquisition (an .xml and its .raw, written by tests/fixtures/empad_writer.py from the layout
the peers' readers describe): open, inspect, load (float32, bit for bit) and products (float64, summed in the
contract's sequential order, equal to numpy's cumsum)."""
import os
import sys

import numpy as np

import tensormorph as tm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import empad_writer as ew  # noqa: E402


def test_open_an_empad_acquisition(tmp_path):
    frames = ew.frames(np.random.default_rng(11), 6)
    path = ew.write(str(tmp_path), "scan", frames, scan=(2, 3))
    a = tm.stem.open(path)
    assert a.master == path and a.scan_shape == (2, 3) and a.detector_shape == (128, 128)
    assert a.info["format"] == "empad" and a.readiness["status"] == "complete"
    assert a.info["metadata"]["root/raw_file@filename"]["value"].endswith("scan.raw")
    values, _ = a.load(scan_region=(1, 2, 0, 3))
    assert values.dtype == np.float32 and values.tobytes() == frames.reshape(2, 3, 128, 128)[1:2].tobytes()
    total, _ = a.product("mask", center=(64, 64), inner=0, outer=1000)
    want = np.cumsum(frames.reshape(6, -1).astype(np.float64), axis=1)[:, -1].reshape(2, 3)
    assert total.dtype == np.float64 and total.tobytes() == want.tobytes()


def test_bf_and_calibration_of_an_empad_acquisition(tmp_path):
    # BF: the disk the product reports, and numpy's sum over the same pixels in the contract's order (float64,
    # sequential per frame: np.cumsum), bit for bit. The calibration: the sidecar's readings, with their sources.
    frames = ew.frames(np.random.default_rng(12), 12)
    path = ew.write(str(tmp_path), "scan", frames, scan=(3, 4), fov="[8e-09, 6e-09]", scan_size="0.25",
                    calibration={"source.get_voltage": "80000", "calibrated_diffraction_angle": "0.0005"})
    a = tm.stem.open(path)
    bf, report = a.product("bf")
    disk = report["disk"]
    k, l = np.meshgrid(np.arange(128, dtype=np.float32), np.arange(128, dtype=np.float32), indexing="ij")
    d = np.sqrt((k - np.float32(disk["row"])) ** 2 + (l - np.float32(disk["col"])) ** 2)
    sel = (d <= np.float32(disk["radius"])).ravel()
    want = np.cumsum(frames.reshape(12, -1)[:, sel].astype(np.float64), axis=1)[:, -1].reshape(3, 4)
    assert bf.dtype == np.float64 and bf.tobytes() == want.tobytes()

    cal = a.calibration()
    assert cal["energy"]["value"] == 80000.0 and cal["energy"]["source"] == "file: beam energy"
    assert a.info["metadata"]["empad/beam_energy"]["from"] == "root/iom_measurements/source.get_voltage"
    step_A = 8e-09 * 0.25 / 4 * 1e10  # the field of view's x times scan_size over the scan's columns, in angstrom
    assert abs(cal["scan_step"]["value"] - step_A) < 1e-12 * step_A and cal["scan_step"]["unit"] == "angstrom"
    assert cal["scan_step"]["source"].startswith("file: empad/scan_step (from root/iom_measurements/optics.get_full_scan_field_of_view[0]")
    assert abs(cal["detector_angle_per_pixel"]["value"] - 0.5) < 1e-12
    assert cal["detector_angle_per_pixel"]["source"] == \
        "file: empad/detector_angle_per_pixel (from root/iom_measurements/calibrated_diffraction_angle)"
