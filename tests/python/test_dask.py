"""tensormorph.dask on a distributed LocalCluster of 2 worker processes: the lazy acquisition array equals
tensormorph.stem.load's, virtual images computed band by band in the workers are the same bytes as one process's,
and checkpoint statistics merged from one task per tensor are the one-process document."""
import os

import numpy as np
import pytest

import tensormorph as tm

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import tensormorph.dask as tmd  # noqa: E402

from safetensors_write import write_safetensors  # noqa: E402

pytestmark = pytest.mark.skipif(bool(os.environ.get("TM_UNDER_ASAN")),
                                reason="worker processes under ASan's preload: the release build runs the cluster")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.fixture
def acquisition(cli, tmp_path):
    doc = cli.json("stem", "demo", "--out", str(tmp_path / "acq"), "--scan", "20,20", "--detector", "64")
    return doc["master"]


def test_stem_array_is_the_loaded_acquisition(client, acquisition):
    a = tmd.stem_array(acquisition, rows_per_chunk=6)
    assert a.chunks[0] == (6, 6, 6, 2) and a.shape == (20, 20, 64, 64)
    whole, _ = tm.stem.load(acquisition)
    assert a.dtype == whole.dtype
    assert np.array_equal(a.compute(), whole)
    assert int(a[3:9, 2].sum().compute()) == int(whole[3:9, 2].astype(np.uint64).sum())


def test_virtual_images_are_the_one_process_bytes(client, acquisition):
    bf, report = tm.stem.bf(acquisition)
    disk = dict(center=(report["disk"]["row"], report["disk"]["col"]), radius=report["disk"]["radius"])
    assert np.array_equal(tmd.virtual_image(acquisition, "bf", rows_per_chunk=3, **disk).compute(), bf)
    ring, _ = tm.stem.mask(acquisition, inner_mrad=5, outer_mrad=15, **disk)
    got = tmd.virtual_image(acquisition, "mask", inner_mrad=5, outer_mrad=15, rows_per_chunk=7, **disk).compute()
    assert got.dtype == np.uint64 and np.array_equal(got, ring)
    with pytest.raises(tm.InvalidArgument):
        tmd.virtual_image(acquisition, "bf")  # no disk: each band would detect its own
    with pytest.raises(tm.InvalidArgument):
        tmd.virtual_image(acquisition, "com", **disk)


def test_virtual_images_of_float_frames_are_float64_like_one_process(client, tmp_path):
    # EMPAD frames are float32: the product sums them in float64 (the contract's sequential order), so the lazy
    # array declares float64 and its bands are the one-process bytes (it declared uint64 for every acquisition).
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
    import empad_writer as ew
    path = ew.write(str(tmp_path), "scan", ew.frames(np.random.default_rng(21), 20), scan=(5, 4))
    ring, report = tm.stem.mask(path, center=(64, 64), radius=10, inner=2, outer=30)
    lazy = tmd.virtual_image(path, "mask", center=(64, 64), radius=10, inner=2, outer=30, rows_per_chunk=2)
    assert lazy.dtype == np.float64 and lazy.chunks[0] == (2, 2, 1)
    got = lazy.compute()
    assert got.dtype == np.float64 and got.tobytes() == ring.tobytes()


def test_checkpoint_stats_merge_to_the_one_process_document(client, tmp_path):
    rng = np.random.default_rng(3)
    path = str(tmp_path / "model.safetensors")
    write_safetensors(path, [("w%d" % i, rng.standard_normal((32, 16 + i)).astype(np.float32)) for i in range(5)])
    merged = tmd.checkpoint_stats(path)
    one = tm.open(path).stats(backend="cpu")
    assert [t["name"] for t in merged["tensors"]] == ["w0", "w1", "w2", "w3", "w4"]
    assert [t["stats"] for t in merged["tensors"]] == [t["stats"] for t in one["tensors"]]
    assert {k: v for k, v in merged.items() if k != "tensors"} == {k: v for k, v in one.items() if k != "tensors"}
