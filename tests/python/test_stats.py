"""Checkpoint.stats and .index, and tm.backends: the same documents the CLI prints with --json."""
import json
import os

import numpy as np
import pytest

import tensormorph as tm
from safetensors_write import write_safetensors


def test_stats_equal_cli_json(small, cli):
    path = small[0]
    c = tm.open(path)
    mine = c.stats()
    theirs = cli.json("stats", path)
    assert mine == theirs
    assert mine["format"] == "safetensors" and len(mine["tensors"]) == 10
    by_name = {t["name"]: t for t in mine["tensors"]}
    assert by_name["e8m0"]["stats"] is None and by_name["e8m0"]["unavailable"]
    assert by_name["f32"]["source"] == "index"
    # One tensor by name: the CLI's document for that name.
    assert c.stats("bf16") == cli.json("stats", path, "bf16")
    assert c.stats(["u8", "f16"]) == cli.json("stats", path, "u8", "f16")


def test_stats_values_are_right(small):
    path, tensors, bf16_values = small
    s = tm.open(path).stats("f64")["tensors"][0]["stats"]
    x = tensors["f64"]
    assert s["count"] == x.size and s["min"] == x.min() and s["max"] == x.max()
    assert abs(s["mean"] - x.mean()) <= 1e-15 and abs(s["std"] - x.std()) <= 1e-15
    b = tm.open(path).stats("bf16")["tensors"][0]
    assert b["dtype"] == "bf16" and b["stats"]["max"] == float(bf16_values.max())


def test_stats_with_placement_arguments_are_computed(small, cli):
    path = small[0]
    c = tm.open(path)
    mine = c.stats("f32", backend="cpu")
    theirs = cli.json("stats", path, "f32", "--backend", "cpu")
    assert mine["tensors"][0]["source"] == "computed"
    assert mine["tensors"][0]["stats"] == theirs["tensors"][0]["stats"]
    assert [p["backend"] for p in mine["tensors"][0]["placement"]] == [p["backend"] for p in theirs["tensors"][0]["placement"]]
    assert c.stats("f32", prefer=["cpu"], never="vulkan")["tensors"][0]["stats"] == theirs["tensors"][0]["stats"]


def test_index_like_the_cli(small, cli):
    path = small[0]
    c = tm.open(path)
    first = c.index()
    assert first["tensors"] == 10 and first["computed"] + first["unavailable"] == 10 and first["persisted"]
    assert os.path.isfile(first["database"])
    again = c.index()
    assert again["computed"] == 0 and again["already_indexed"] == first["computed"]
    theirs = cli.json("index", path)
    assert theirs["database"] == first["database"] and theirs["computed"] == 0


def test_backends_equal_cli(cli):
    mine = tm.backends()
    theirs = cli.json("backends")["backends"]
    assert mine == theirs
    cpu = next(b for b in mine if b["name"] == "cpu")
    assert cpu["available"] is True and cpu["kernels"]


def test_placement_arguments_are_checked(small):
    c = tm.open(small[0])
    with pytest.raises(tm.InvalidArgument, match="prefer"):
        c.stats("f32", prefer=3)
    with pytest.raises(tm.InvalidArgument, match="backend"):
        tm.backends(backend=["cpu"])
    with pytest.raises(tm.InvalidArgument, match="name: expected strings"):
        c.stats(["f32", 3])
    with pytest.raises(tm.InvalidArgument, match="threads: expected 1 to 4096, have 0"):
        c.stats("f32", threads=0)
    one = c.stats("f32", backend="cpu", threads=1)["tensors"][0]["stats"]
    assert one == c.stats("f32", backend="cpu", threads=2, memory_budget="64M")["tensors"][0]["stats"]


def test_precision_refused_then_consented(tmp_path, cli):
    """Exact quantiles beyond the memory budget (compute.memory_budget) need allow_approx, as in the CLI."""
    cfg = tmp_path / "config" / "tensormorph"
    cfg.mkdir(parents=True)
    (cfg / "settings.json").write_text(json.dumps({"compute.memory_budget": "600K"}))
    path = str(tmp_path / "big.safetensors")
    write_safetensors(path, [("x", (np.arange(300000) % 1000).astype(np.float32))])
    c = tm.open(path)
    r = cli.run("stats", path, "x", "--prefer", "cpu", "--json")
    with pytest.raises(tm.PrecisionRefused) as e:
        c.stats("x", prefer="cpu")
    assert r.returncode == e.value.exit_code == 5
    assert f"tensormorph: error: {e.value}\n" in r.stderr
    ok = c.stats("x", prefer="cpu", allow_approx="quantiles.sampling")["tensors"][0]["stats"]
    assert ok["quantiles"]["exact"] is False
    assert ok == cli.json("stats", path, "x", "--prefer", "cpu", "--allow-approx", "quantiles.sampling")["tensors"][0]["stats"]
