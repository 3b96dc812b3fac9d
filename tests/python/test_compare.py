"""tm.compare(a, b): the document `tensormorph compare A B --json` prints, from the same application code."""
import numpy as np
import pytest

import tensormorph as tm
from conftest import bf16_bits
from safetensors_write import write_safetensors


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(11)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    v = rng.standard_normal(8).astype(np.float32)
    a, b = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    write_safetensors(a, [("w", w), ("v", v), ("only_a", v), ("reshaped", w)])
    truncated = (w.view(np.uint32) & 0xFFFF0000).view(np.float32)  # what bf16 holds of each value
    write_safetensors(b, [("w", ("BF16", bf16_bits(truncated))), ("v", v),
                          ("only_b", v), ("reshaped", w.reshape(16, 32))])
    return a, b, w


def test_compare_is_the_cli_document(pair, cli):
    a, b, w = pair
    doc = tm.compare(a, b)
    assert doc == cli.json("compare", a, b)
    rows = {r["name"]: r for r in doc["tensors"]}
    assert list(rows) == ["w", "v"] and doc["only_in_a"] == ["only_a"] and doc["only_in_b"] == ["only_b"]
    assert doc["skipped"] == [{"name": "reshaped", "reason": "shape [32, 16] against [16, 32]"}]
    truncated = (w.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
    diff = truncated - w.astype(np.float64)
    assert rows["w"]["type_b"] == "BF16" and rows["w"]["count"] == w.size
    assert rows["w"]["max_abs_diff"] == pytest.approx(np.abs(diff).max(), rel=1e-6)
    assert rows["w"]["rmse"] == pytest.approx(np.sqrt((diff ** 2).mean()), rel=1e-6)
    assert rows["v"]["rmse"] == 0 and rows["v"]["snr_db"] == "inf"  # identical: infinite SNR, as JSON writes it
    assert rows["w"]["placement"]


def test_compare_selects_and_refuses(pair):
    a, b, _ = pair
    assert [r["name"] for r in tm.compare(a, b, "v", threads=1)["tensors"]] == ["v"]
    assert tm.compare(a, b, ["v"])["only_in_b"] == []  # only listed when comparing everything
    with pytest.raises(tm.InvalidArgument, match="tensor 'only_a' is not in both checkpoints"):
        tm.compare(a, b, ["only_a"])
    with pytest.raises(tm.InvalidArgument, match="tensors: expected None, a string or a list of strings"):
        tm.compare(a, b, 3)
    with pytest.raises(tm.IoError):
        tm.compare(a, b + ".missing")
