"""Writes the PyTorch Distributed Checkpoint (DCP) fixtures of tests/fixtures/dcp with Debian's python3-torch
(1.13: torch.distributed._shard.checkpoint, FileSystemWriter) from two gloo ranks, and the values torch holds
for them (expected.json). The fixtures are committed; only regenerating them needs torch.

    /usr/bin/python3 tests/tools/dcp_write.py [OUT_DIR]     (default: tests/fixtures/dcp)

torch113_dcp.py makes torch 1.13's DCP importable under Python 3.11.

Directories:
  sharded/        two ranks: model.w (10 x 6 f32, rows split between the ranks: row bands), model.emb (12 x 8
                  bf16, columns split: blocks), model.norm (3 x 4 x 5 f16, split unevenly on dim 0: 2 rows on
                  rank 0, 1 on rank 1), model.b (6 bf16, a plain tensor every rank holds), model.i
                  (5 int64, plain), and two non-tensor entries (optim.step = 7, optim.lr = 0.5)
  missing_chunk/  sharded/ with model.w's second chunk dropped from .metadata
  overlap/        sharded/ with model.emb's second chunk moved onto the first
  missing_file/   sharded/ without __1_0.distcp
  outside/        sharded/ with model.w's second chunk moved to rows [8, 13) of its 10
  wrong_dtype/    sharded/ whose metadata says model.w is float64 (its chunks hold float32)
  huge/           sharded/ whose metadata says model.w is 2^40 x 2^40 (an element count past 64 bits)
  bytes_without_storage/  sharded/ without the storage_data entry of optim.step
"""
import math
import os
import pickle
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_output import finish  # noqa: E402
from torch113_dcp import (ChunkShardingSpec, EnumerableShardingSpec, ShardMetadata, dcp, dist, mp,  # noqa: E402
                          sharded, torch)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "dcp")
WORLD = 2


def full_tensors():
    """The logical tensors, the same on every rank (seeded)."""
    g = torch.Generator().manual_seed(24)
    return {
        "model.w": torch.randn(10, 6, generator=g),
        "model.emb": (torch.randn(12, 8, generator=g) * 4).bfloat16(),
        "model.norm": (torch.randn(3, 4, 5, generator=g) + 1).half(),
        "model.b": torch.arange(6).bfloat16() - 2.5,
        "model.i": torch.tensor([-(2 ** 40), -3, 0, 5, 2 ** 41], dtype=torch.int64),
    }


def rank_main(rank, store, out):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    full = full_tensors()
    rows = ChunkShardingSpec(dim=0, placements=[f"rank:{r}/cpu" for r in range(WORLD)])
    cols = ChunkShardingSpec(dim=1, placements=[f"rank:{r}/cpu" for r in range(WORLD)])
    uneven = EnumerableShardingSpec([
        ShardMetadata(shard_offsets=[0, 0, 0], shard_sizes=[2, 4, 5], placement="rank:0/cpu"),
        ShardMetadata(shard_offsets=[2, 0, 0], shard_sizes=[1, 4, 5], placement="rank:1/cpu"),
    ])
    sd = {
        "model.w": sharded(full["model.w"], rows),
        "model.emb": sharded(full["model.emb"], cols),
        "model.norm": sharded(full["model.norm"], uneven),
        "model.b": full["model.b"],
        "model.i": full["model.i"],
        "optim.step": 7,
        "optim.lr": 0.5,
    }
    dcp.save_state_dict(sd, dcp.FileSystemWriter(out))
    dist.barrier()
    dist.destroy_process_group()


def reference():
    out = {}
    for name, t in full_tensors().items():
        flat = t.reshape(-1)
        is_int = not t.dtype.is_floating_point
        values = [int(x) for x in flat.tolist()] if is_int else [float(x) for x in flat.double().tolist()]
        out[name] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "values": values,
                     "min": min(values), "max": max(values), "sum": math.fsum(values) if not is_int else sum(values)}
    return out


def rewrite_metadata(src, dst, change):
    shutil.copytree(src, dst)
    with open(os.path.join(dst, ".metadata"), "rb") as f:
        meta = pickle.load(f)
    change(meta)
    with open(os.path.join(dst, ".metadata"), "wb") as f:
        pickle.dump(meta, f)


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    good = os.path.join(OUT, "sharded")
    store = tempfile.mktemp(prefix="dcp-store-")
    mp.spawn(rank_main, args=(store, good), nprocs=WORLD)
    # Read back with torch's own loader into fresh tensors, and check against what was saved.
    back = {name: torch.zeros_like(t) for name, t in full_tensors().items()}
    dcp.load_state_dict(back, dcp.FileSystemReader(good), no_dist=True)
    for name, t in full_tensors().items():
        assert torch.equal(back[name], t), name

    def drop_chunk(meta):
        meta.state_dict_metadata["model.w"].chunks.pop(1)

    def overlap(meta):
        chunks = meta.state_dict_metadata["model.emb"].chunks
        moved = chunks[1]
        key = [k for k in meta.storage_data if k.fqn == "model.emb" and list(k.offset) == list(moved.offsets)][0]
        info = meta.storage_data.pop(key)
        moved.offsets = torch.Size([0, 2])
        meta.storage_data[type(key)("model.emb", moved.offsets, key.index)] = info

    def move_chunk(meta, name, index, offsets):
        moved = meta.state_dict_metadata[name].chunks[index]
        key = [k for k in meta.storage_data if k.fqn == name and list(k.offset) == list(moved.offsets)][0]
        info = meta.storage_data.pop(key)
        moved.offsets = torch.Size(offsets)
        meta.storage_data[type(key)(name, moved.offsets, key.index)] = info

    def outside(meta):
        move_chunk(meta, "model.w", 1, [8, 0])

    def wrong_dtype(meta):
        meta.state_dict_metadata["model.w"].properties.dtype = torch.float64

    def huge(meta):
        meta.state_dict_metadata["model.w"].size = torch.Size([2 ** 40, 2 ** 40])

    def bytes_without_storage(meta):
        key = [k for k in meta.storage_data if k.fqn == "optim.step"][0]
        del meta.storage_data[key]

    rewrite_metadata(good, os.path.join(OUT, "outside"), outside)
    rewrite_metadata(good, os.path.join(OUT, "wrong_dtype"), wrong_dtype)
    rewrite_metadata(good, os.path.join(OUT, "huge"), huge)
    rewrite_metadata(good, os.path.join(OUT, "bytes_without_storage"), bytes_without_storage)
    rewrite_metadata(good, os.path.join(OUT, "missing_chunk"), drop_chunk)
    rewrite_metadata(good, os.path.join(OUT, "overlap"), overlap)
    shutil.copytree(good, os.path.join(OUT, "missing_file"))
    os.remove(os.path.join(OUT, "missing_file", "__1_0.distcp"))
    expected = {"torch_version": torch.__version__, "tensors": reference(), "metadata": {"optim.step": "7", "optim.lr": "0.5"}}
    finish(OUT, expected, 40)


if __name__ == "__main__":
    main()
