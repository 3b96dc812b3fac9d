"""Strided torch.save views through the Python module: read() gives numpy the view's own strides over the
mapping (no copy) for dtypes numpy has, widens bf16 from the gathered row-major values, and region reads and
stats() agree with what torch 1.13 recorded for the fixture (tests/fixtures/torch/expected.json)."""
import json
import os

import numpy as np
import pytest

import tensormorph as tm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)["files"]["strided.pt"]["tensors"]
VIEWS = sorted(n for n in EXPECTED if n != "huge")


def reference(name):
    w = EXPECTED[name]
    return np.array(w["values"], dtype=np.float64).reshape(w["shape"])


@pytest.fixture(scope="module")
def strided():
    return tm.open(os.path.join(FIXTURES, "strided.pt"))


@pytest.mark.parametrize("name", VIEWS)
def test_read_equals_torch(strided, name):
    a = strided.read(name)
    assert list(a.shape) == EXPECTED[name]["shape"]
    np.testing.assert_array_equal(a.astype(np.float64), reference(name))


def test_numpy_types_read_in_place_with_the_views_strides(strided):
    a = strided.read("i32_t")
    assert not a.flags["OWNDATA"] and not a.flags["WRITEABLE"]
    assert a.strides == tuple(4 * s for s in EXPECTED["i32_t"]["stride"])
    e = strided.read("f32_expanded")
    assert e.strides == (0, 4)
    b = strided.read("bf16_t")  # widened to float32 from the gathered values
    assert b.dtype == np.float32 and b.flags["C_CONTIGUOUS"]


@pytest.mark.parametrize("rows,cols", [(slice(1, 6, 2), None), (None, slice(0, 5, 3)), ((2, 4), (1, 3))])
def test_regions_of_a_view(strided, rows, cols):
    for name in ("bf16_t", "i32_t", "bool_t"):
        want = reference(name)
        r = rows if not isinstance(rows, tuple) else slice(*rows)
        c = cols if not isinstance(cols, tuple) else slice(*cols)
        got = strided.read(name, rows=rows, cols=cols).astype(np.float64)
        np.testing.assert_array_equal(got, want[r if r is not None else slice(None), c if c is not None else slice(None)])


def test_stats_of_views_and_the_unreadable_one(strided):
    for name in VIEWS:
        s = strided.stats(name)["tensors"][0]["stats"]
        w = EXPECTED[name]
        assert s["count"] == w["elements"] and s["min"] == w["min"] and s["max"] == w["max"], name
        assert s["sum"] == pytest.approx(w["sum"], rel=1e-12, abs=1e-9), name
    listing = {t["name"]: t for t in strided.tensors}
    assert listing["f16_permuted"]["strides"] == EXPECTED["f16_permuted"]["stride"]
    assert not listing["huge"]["readable"] and "more than its file holds" in listing["huge"]["unavailable"]
    with pytest.raises(tm.Unavailable, match="more than its file holds"):
        strided.read("huge")
