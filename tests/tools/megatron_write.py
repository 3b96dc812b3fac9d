"""Writes the Megatron-LM-`torch_dist`-style fixture of tests/fixtures/megatron with Debian's python3-torch (1.13)
from two gloo ranks (tensor-parallel size 2), and the values it holds (expected.json). The fixture is
committed; only regenerating it needs torch.

    /usr/bin/python3 tests/tools/megatron_write.py [OUT_DIR]     (default: tests/fixtures/megatron)

Megatron-LM is not packaged by Debian, so this folder is NOT written by Megatron: it follows the layout
Megatron-core's dist_checkpointing documents and writes with its torch_dist backend — a run folder with
latest_checkpointed_iteration.txt and iter_0000010/ holding metadata.json ({"sharded_backend": "torch_dist",
...}), common.pt (torch.save of the state every rank shares: args as an argparse.Namespace, iteration,
checkpoint_version, the scheduler's state) and a Distributed Checkpoint whose keys are Megatron-core's sharded
keys: layers stacked on a leading dimension (decoder.layers.*), column-parallel weights split on their output
dimension, row-parallel ones on their input dimension, the vocabulary split across ranks, replicated norms
written once, and the optimizer's fp32 copies and moments under optimizer.state.*. Written with torch 1.13's
DCP (torch113_dcp.py); real torch_dist checkpoints come from torch >= 2, whose metadata classes live under
torch.distributed.checkpoint (both are read). Checked here: torch's own DCP loader reads back every tensor
equal to what was saved.
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_output import finish  # noqa: E402
from torch113_dcp import EnumerableShardingSpec, ShardMetadata, dcp, dist, mp, sharded, torch  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "megatron")
WORLD = 2
LAYERS, HIDDEN, VOCAB = 2, 8, 16
ITER = "iter_0000010"


def full_tensors():
    g = torch.Generator().manual_seed(10)
    t = {
        "embedding.word_embeddings.weight": torch.randn(VOCAB, HIDDEN, generator=g).bfloat16(),
        "decoder.layers.self_attention.linear_qkv.weight": torch.randn(LAYERS, 3 * HIDDEN, HIDDEN, generator=g).bfloat16(),
        "decoder.layers.self_attention.linear_proj.weight": torch.randn(LAYERS, HIDDEN, HIDDEN, generator=g).bfloat16(),
        "decoder.final_layernorm.weight": (torch.randn(HIDDEN, generator=g) + 1).bfloat16(),
    }
    for name in list(t):
        if name.endswith("layernorm.weight"):
            continue
        t["optimizer.state.fp32_param." + name] = t[name].float() + torch.randn(t[name].shape, generator=g) * 1e-3
        t["optimizer.state.exp_avg." + name] = torch.randn(t[name].shape, generator=g) * 1e-2
    return t


def split_dim(name):
    """The dimension tensor parallelism splits (None: replicated) and whether the leading dimension stacks layers."""
    base = name.split("optimizer.state.")[-1].split(".", 1)[-1] if name.startswith("optimizer.state.") else name
    if "word_embeddings" in base:
        return 0, False
    if "linear_qkv" in base:
        return 1, True
    if "linear_proj" in base:
        return 2, True
    return None, False


def spec(shape, dim, stacked):
    """Megatron-core's shards: one per (layer, tensor-parallel rank) when layers are stacked."""
    shards = []
    layers = range(shape[0]) if stacked else [None]
    for layer in layers:
        for r in range(WORLD):
            offsets, sizes = [0] * len(shape), list(shape)
            if layer is not None:
                offsets[0], sizes[0] = layer, 1
            part = shape[dim] // WORLD
            offsets[dim], sizes[dim] = r * part, part
            shards.append(ShardMetadata(shard_offsets=offsets, shard_sizes=sizes, placement=f"rank:{r}/cpu"))
    return EnumerableShardingSpec(shards)


def rank_main(rank, store, out):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    sd = {}
    for name, t in full_tensors().items():
        dim, stacked = split_dim(name)
        sd[name] = t if dim is None else sharded(t, spec(list(t.shape), dim, stacked))
    dcp.save_state_dict(sd, dcp.FileSystemWriter(out))
    dist.barrier()
    dist.destroy_process_group()


def common_state():
    args = argparse.Namespace(num_layers=LAYERS, hidden_size=HIDDEN, padded_vocab_size=VOCAB, tensor_model_parallel_size=WORLD,
                              pipeline_model_parallel_size=1, params_dtype=torch.bfloat16, bf16=True, seq_length=32,
                              ckpt_format="torch_dist", use_distributed_optimizer=False)
    return {"args": args, "checkpoint_version": 3.0, "iteration": 10, "num_floating_point_operations_so_far": 123456789,
            "opt_param_scheduler": {"max_lr": 3e-4, "num_steps": 80, "decay_style": "cosine"}}


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    folder = os.path.join(OUT, "run", ITER)
    os.makedirs(folder)
    with open(os.path.join(OUT, "run", "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("10")
    store = tempfile.mktemp(prefix="megatron-store-")
    mp.spawn(rank_main, args=(store, folder), nprocs=WORLD)
    with open(os.path.join(folder, "metadata.json"), "w") as f:
        json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}, f)
    torch.save(common_state(), os.path.join(folder, "common.pt"))
    back = {name: torch.zeros_like(t) for name, t in full_tensors().items()}
    dcp.load_state_dict(back, dcp.FileSystemReader(folder), no_dist=True)
    tensors = {}
    for name, t in full_tensors().items():
        assert torch.equal(back[name], t), name
        values = [float(x) for x in t.double().reshape(-1).tolist()]
        tensors[name] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "values": values,
                         "min": min(values), "max": max(values), "sum": math.fsum(values),
                         "chunks": 1 if split_dim(name)[0] is None else (LAYERS if split_dim(name)[1] else 1) * WORLD}
    expected = {"torch_version": torch.__version__, "tensors": tensors,
                "metadata": {"iteration": "10", "checkpoint_version": "3", "args.num_layers": str(LAYERS),
                             "args.ckpt_format": "torch_dist", "megatron.sharded_backend": "torch_dist"}}
    finish(OUT, expected, 50)


if __name__ == "__main__":
    main()
