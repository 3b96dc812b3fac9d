"""tensormorph.stem on HDF5 arrays written by h5py: an EMD 1.0 array group (found by its attributes) and a dataset
named as FILE:/path. open() takes the scan shape from the 4-D dataset, load() returns its frames, bf() equals
numpy's sum over the disk."""
import numpy as np
import pytest

import tensormorph as tm

h5py = pytest.importorskip("h5py")


def test_open_an_emd_array_and_a_named_dataset(tmp_path):
    a = np.random.default_rng(12).poisson(4.0, (4, 3, 12, 10)).astype(np.uint16)
    emd, plain = str(tmp_path / "cube.emd"), str(tmp_path / "plain.h5")
    with h5py.File(emd, "w") as f:
        g = f.create_group("root/cube")
        g.attrs["emd_group_type"] = "array"
        g.create_dataset("data", data=a, chunks=(1, 1, 12, 10))
    with h5py.File(plain, "w") as f:
        f.create_dataset("scans/frames", data=a, compression="gzip", chunks=(2, 3, 12, 10))
    k, l = np.meshgrid(np.arange(12, dtype=np.float32), np.arange(10, dtype=np.float32), indexing="ij")
    disk = np.sqrt((k - np.float32(5.5)) ** 2 + (l - np.float32(4.5)) ** 2) <= 3
    for path, layout in [(emd, "emd-array"), (plain + ":/scans/frames", "dataset")]:
        acq = tm.stem.open(path)
        assert acq.scan_shape == (4, 3) and acq.detector_shape == (12, 10) and acq.dtype == "u16"
        assert acq.readiness["status"] == "complete" and acq.info["layout"] == layout
        frames, _ = acq.load()
        assert np.array_equal(frames, a)
        values, _ = acq.bf(center=(5.5, 4.5), radius=3)
        assert np.array_equal(values, a[:, :, disk].sum(axis=2))
