"""DeepSpeed ZeRO and Megatron torch_dist folders through the Python module: tm.open(RUN) follows the run's
latest pointer; read() returns a parameter's fp32 master weight reassembled from the ranks' flat partitions
(and a Megatron tensor from its per-layer, tensor-parallel chunks) equal to the values the fixture
generators partitioned (tests/fixtures/{zero,megatron}/expected.json), regions of it, and the metadata."""
import json
import os

import numpy as np
import pytest

import tensormorph as tm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
with open(os.path.join(FIXTURES, "zero", "expected.json")) as f:
    ZERO = json.load(f)
with open(os.path.join(FIXTURES, "megatron", "expected.json")) as f:
    MEGATRON = json.load(f)


def reference(w):
    return np.array(w["values"], dtype=np.float64).reshape(w["shape"])


@pytest.mark.parametrize("run", sorted(ZERO["runs"]))
def test_zero_master_weights_and_moments(run):
    ckpt = tm.open(os.path.join(FIXTURES, "zero", run))
    assert ckpt.metadata["zero.stage"] == str(ZERO["runs"][run]["stage"])
    for name in ("optimizer.state.fp32_param.embed.weight", "optimizer.state.exp_avg_sq.layers.0.mlp.weight",
                 "optimizer.state.fp32_param.head.weight", "layers.0.attn.rotary"):
        want = reference(ZERO["runs"][run]["tensors"][name])
        np.testing.assert_array_equal(ckpt.read(name).astype(np.float64), want)
    want = reference(ZERO["runs"][run]["tensors"]["optimizer.state.fp32_param.layers.0.mlp.weight"])
    np.testing.assert_array_equal(ckpt.read("optimizer.state.fp32_param.layers.0.mlp.weight", rows=slice(1, 6, 2), cols=(2, 5)),
                                  want[1:6:2, 2:5])


def test_megatron_tensors_and_common_state():
    ckpt = tm.open(os.path.join(FIXTURES, "megatron", "run"))
    for name, w in MEGATRON["tensors"].items():
        np.testing.assert_array_equal(ckpt.read(name).astype(np.float64), reference(w))
    for k, v in MEGATRON["metadata"].items():
        assert ckpt.metadata[k] == v
