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
