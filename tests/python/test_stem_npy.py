"""tensormorph.stem on a NumPy .npy acquisition (a 4-D uint16 array written by np.save, numpy's own writer): open()
takes the scan shape from the array, load() returns the array's frames, bf() equals numpy's sum over the disk."""
import numpy as np

import tensormorph as tm


def test_open_a_4d_npy(tmp_path):
    rng = np.random.default_rng(11)
    a = rng.poisson(4.0, (4, 3, 12, 10)).astype(np.uint16)
    path = str(tmp_path / "scan.npy")
    np.save(path, a)
    acq = tm.stem.open(path)
    assert acq.scan_shape == (4, 3) and acq.detector_shape == (12, 10) and acq.dtype == "u16"
    assert acq.readiness["status"] == "complete" and acq.info["layout"] == "npy-4d"
    frames, _ = acq.load()
    assert np.array_equal(frames, a)
    values, report = acq.bf(center=(5.5, 4.5), radius=3)
    k, l = np.meshgrid(np.arange(12, dtype=np.float32), np.arange(10, dtype=np.float32), indexing="ij")
    d = np.sqrt((k - np.float32(5.5)) ** 2 + (l - np.float32(4.5)) ** 2)
    assert np.array_equal(values, a[:, :, d <= 3].sum(axis=2)) and report["disk"]["source"] == "given"
