"""Distributed Checkpoint directories through the Python module: tm.open(DIR) lists each logical tensor once,
read() returns it assembled from its chunks (row bands, column blocks, uneven chunks) equal to what torch 1.13
saved (tests/fixtures/dcp/expected.json), regions of it, its statistics, and the non-tensor entries as metadata."""
import json
import os

import numpy as np
import pytest

import tensormorph as tm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "dcp")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)


def reference(name):
    w = EXPECTED["tensors"][name]
    return np.array(w["values"], dtype=np.int64 if w["dtype"] == "int64" else np.float64).reshape(w["shape"])


@pytest.fixture(scope="module")
def ckpt():
    return tm.open(os.path.join(FIXTURES, "sharded"))


@pytest.mark.parametrize("name", sorted(EXPECTED["tensors"]))
def test_read_equals_torch(ckpt, name):
    a = ckpt.read(name)
    want = reference(name)
    assert a.shape == want.shape
    np.testing.assert_array_equal(a.astype(want.dtype), want)


def test_regions_and_stats(ckpt):
    want = reference("model.emb")
    np.testing.assert_array_equal(ckpt.read("model.emb", rows=slice(3, 11, 2), cols=(2, 7)).astype(np.float64),
                                  want[3:11:2, 2:7])
    s = ckpt.stats("model.norm")["tensors"][0]["stats"]
    w = EXPECTED["tensors"]["model.norm"]
    assert s["count"] == len(w["values"]) and s["min"] == w["min"] and s["max"] == w["max"]
    assert s["sum"] == pytest.approx(w["sum"], rel=1e-12)


def test_listing_and_metadata(ckpt):
    listing = {t["name"]: t for t in ckpt.tensors}
    assert set(listing) == set(EXPECTED["tensors"])
    assert listing["model.emb"]["chunks"] == 2
    for k, v in EXPECTED["metadata"].items():
        assert ckpt.metadata[k] == v
