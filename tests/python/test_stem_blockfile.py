"""tensormorph.stem on a NanoMegas blockfile (.blo, written by tests/fixtures/blockfile_writer.py from the published
description of the format): open() takes the scan and detector from the header, load() returns the frames as stored,
bf() equals numpy's sum over the same disk, and calibration() gives the header's beam energy and scan step with their
sources (issue 48: "Python opens each format")."""
import os
import sys

import numpy as np

import tensormorph as tm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import blockfile_writer as bw  # noqa: E402


def test_open_a_blockfile(tmp_path):
    rng = np.random.default_rng(48)
    frames = rng.integers(0, 200, size=(3, 4, 16, 16)).astype(np.uint8)  # below 255: the uint8 sentinel stays out
    path = str(tmp_path / "scan.blo")
    bw.write_blockfile(path, frames, SX=2.5, SY=2.5, Beam_energy=120000)
    acq = tm.stem.open(path)
    assert acq.scan_shape == (3, 4) and acq.detector_shape == (16, 16) and acq.dtype == "u8"
    assert acq.info["format"] == "blockfile" and acq.readiness["status"] == "complete"
    loaded, _ = acq.load()
    assert loaded.dtype == np.uint8 and np.array_equal(loaded, frames)
    values, report = acq.bf(center=(7.5, 8.0), radius=5)
    k, l = np.meshgrid(np.arange(16, dtype=np.float32), np.arange(16, dtype=np.float32), indexing="ij")
    d = np.sqrt((k - np.float32(7.5)) ** 2 + (l - np.float32(8.0)) ** 2)
    assert np.array_equal(values, frames[:, :, d <= 5].sum(axis=2, dtype=np.uint64)) and report["disk"]["source"] == "given"
    cal = acq.calibration(center=(7.5, 8.0), radius=5)
    assert cal["energy"]["value"] == 120000.0 and cal["energy"]["source"] == "file: beam energy"
    assert abs(cal["scan_step"]["value"] - 25.0) < 1e-12  # SX = SY = 2.5 nm
    assert cal["scan_step"]["source"] == "file: blockfile/scan_step"
