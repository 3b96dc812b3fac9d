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
    with pytest.raises(tm.InvalidArgument, match="level: expected 0 to 63"):
        tm.diff(a, b, "layers.0.w", level=-1)
    with pytest.raises(tm.IoError):
        tm.diff(a, b + ".missing")
