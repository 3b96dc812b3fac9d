"""tm.stem on a Quantum Detectors Merlin .mib acquisition (written by tests/fixtures/mib_writer.py from the format
description): open, inspect, load and a product, each what the frames written say."""
import os
import sys

import numpy as np

import tensormorph as tm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import mib_writer as mw  # noqa: E402


def test_open_a_mib_acquisition(tmp_path):
    frames = mw.counts(np.random.default_rng(7), (12, 256, 256), 12, np.uint16)
    path = mw.write(str(tmp_path / "scan.mib"), frames, raw=True, depth=12, hdr=mw.hdr_text(12, 4))
    a = tm.stem.open(path)
    assert a.master == path and a.scan_shape == (3, 4) and a.detector_shape == (256, 256) and a.dtype == "u16"
    assert a.info["metadata"]["mib/counter_depth"]["value"] == 12 and a.readiness["status"] == "complete"
    values, _ = a.load(scan_region=(1, 2, 0, 4))
    assert np.array_equal(values, frames.reshape(3, 4, 256, 256)[1:2])
    total, _ = a.product("mask", center=(128, 128), inner=0, outer=1000)
    assert np.array_equal(total, frames.reshape(3, 4, -1).astype(np.uint64).sum(axis=2))
