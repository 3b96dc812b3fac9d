"""tm.diff(a, b): the document `tensormorph diff A B --json` prints, from the same application code (docs/diff.md)."""
import math

import numpy as np
import pytest

import tensormorph as tm
from safetensors_write import write_safetensors


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(50)
    w = rng.standard_normal((40, 300)).astype(np.float32)
    tuned = w.copy()
    tuned[[3, 17], :] += 0.5  # two changed rows
    a, b = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    write_safetensors(a, [("layers.0.w", w), ("only_a", w[0])])
    write_safetensors(b, [("layers.0.w", tuned), ("only_b", w[0])])
    return a, b, w, tuned


def without_run_facts(doc):
    """The document less what differs from run to run (timings, and whether the index already held the pyramid)."""
    for p in doc["pairs"]:
        p.pop("seconds"), p.pop("reused")
    return doc


def test_diff_is_the_cli_document(pair, cli):
    a, b, w, tuned = pair
    doc = tm.diff(a, b, "layers.0.w", level=0)
    assert without_run_facts(doc) == without_run_facts(cli.json("diff", a, b, "layers.0.w", "--level", "0"))
    p = doc["pairs"][0]
    d = tuned.astype(np.float64) - w
    assert p["difference"]["changed"] == 2 * 300 and p["layer"] == 0
    assert p["difference"]["sum_sq_delta"] == pytest.approx(math.fsum((d * d).ravel()), rel=1e-12)
    assert [t["changed"] for t in p["tiles"]["tiles"]] == [600]
    assert tm.diff(a, b)["only_in_a"] == ["only_a"]


def test_diff_refuses_bad_arguments(pair):
    a, b, _, _ = pair
    with pytest.raises(tm.InvalidArgument, match="has no counterpart"):
        tm.diff(a, b, "only_a")
    with pytest.raises(tm.InvalidArgument, match="name the tensors"):
        tm.diff(a, b, level=0)
    with pytest.raises(tm.InvalidArgument, match="level: expected an integer from 0 to 63"):
        tm.diff(a, b, "layers.0.w", level=-1)
    with pytest.raises(tm.IoError):
        tm.diff(a, b + ".missing")


def test_diff_tile_gives_the_values_of_a_tile(pair, tmp_path):
    a, b, w, tuned = pair
    delta, where = tm.diff_tile(a, b, "layers.0.w")
    assert where == {"level": 0, "slice": 0, "tx": 0, "ty": 0, "row_begin": 0, "row_end": 40, "col_begin": 0, "col_end": 300}
    assert delta.dtype == np.float64 and delta.shape == (40, 300)
    np.testing.assert_array_equal(delta, tuned.astype(np.float64) - w.astype(np.float64))
    # A 600 x 300 tensor has level-0 tiles of 256 x 256: tile (0, 1) is rows 256-511, columns 0-255, and the sum of its
    # Δ² is the pyramid's.
    big = np.random.default_rng(2).standard_normal((600, 300)).astype(np.float32)
    write_safetensors(str(tmp_path / "c.safetensors"), [("m", big)])
    write_safetensors(str(tmp_path / "d.safetensors"), [("m", big * 2)])
    delta, where = tm.diff_tile(str(tmp_path / "c.safetensors"), str(tmp_path / "d.safetensors"), "m", y=1)
    assert (where["row_begin"], where["row_end"], where["col_begin"], where["col_end"]) == (256, 512, 0, 256)
    np.testing.assert_array_equal(delta, big[256:512, :256].astype(np.float64))
    doc = tm.diff(str(tmp_path / "c.safetensors"), str(tmp_path / "d.safetensors"), "m", level=0)
    tile = [t for t in doc["pairs"][0]["tiles"]["tiles"] if (t["ty"], t["tx"]) == (1, 0)][0]
    assert tile["sum_sq_delta"] == pytest.approx(math.fsum((delta * delta).ravel()), rel=1e-12)
    with pytest.raises(tm.InvalidArgument, match="no tile"):
        tm.diff_tile(a, b, "layers.0.w", level=5)
    with pytest.raises(tm.InvalidArgument, match="has no counterpart"):
        tm.diff_tile(a, b, "only_a")
    with pytest.raises(tm.InvalidArgument, match="x: expected 0 or more"):
        tm.diff_tile(a, b, "layers.0.w", x=-1)
