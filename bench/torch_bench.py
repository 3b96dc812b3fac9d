#!/usr/bin/python3
"""torch.save checkpoints: listing and statistics by tensormorph beside torch.load + torch, and beside the raw
read rate. Part of `make bench`; skipped with a message when Debian's python3-torch is absent.

  /usr/bin/python3 bench/torch_bench.py --build build [--repeats 3]

1. The bf16 checkpoint of bench/pyramid_index_bench.py (issue 28's generator, 1.07 GB) is written again with
   torch.save as one pytorch_model.bin (a state dict of bf16 tensors), once, in <build>/bench-data/torch.
2. Warm page cache, best of --repeats:
   - `cat` of the file (the raw read rate);
   - `tensormorph ls` (parse the zip directory and the pickle, list every tensor) against `torch.load` with
     mmap off (what a user does: it reads every storage) and a listing of names, dtypes and shapes;
   - `tensormorph stats --json` of every tensor into a fresh index database (count, min, max, mean, std, histogram,
     exact quantiles) against torch.load + per tensor min, max, mean, std in torch (float32 math; fewer
     statistics than tensormorph computes, and not exact quantiles);
   - listing and statistics of legacy.bin: the same state dict saved in the legacy format (torch < 1.6's
     stream of pickles and storages: torch.save(..., _use_new_zipfile_serialization=False)), against
     torch.load of it; the legacy format has no CRC-32, the zip format's storages are checked during the pass;
   - the same statistics of transposed.pt: the same state dict with every 2-D tensor saved as its transpose
     (`w.t()`, a strided view on its storage), which tensormorph gathers into row-major order first;
   - the same statistics of a Distributed Checkpoint of the state dict written by two gloo ranks with torch
     1.13's FileSystemWriter (2-D tensors as ShardedTensors split by rows between the ranks, 1-D ones whole),
     against torch's own DCP loader (load_state_dict into preallocated tensors) + the same torch statistics.
   - the same statistics of a DeepSpeed-ZeRO-2-style folder of the state dict (two data-parallel ranks, one
     parameter group; written with the stand-ins of tests/tools/zero_write.py, not by DeepSpeed): the bf16
     model states plus per rank the flat fp32 partition and its exp_avg / exp_avg_sq (7.5 GB in all);
     tensormorph lists and computes statistics of the model weights, fp32 master weights and both moments
     per parameter, against torch.load of every file + zero_to_fp32's reassembly (tests/tools/zero_write.py's
     reading of it) + the same torch statistics of the same tensors (best of 1: torch takes minutes here).
Writes bench/last-run-torch.md. Ratios are within this one run; absolute times are context only.
"""
import argparse
import datetime
import glob
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_timing import fresh_index_stats_seconds, timed_command as timed  # noqa: E402
from pyramid_index_bench import make_checkpoints, read_safetensors  # noqa: E402

DCP_PEER = r"""
import sys, time
sys.path.insert(0, sys.argv[3])
import torch113_dcp  # noqa: F401  (lets Debian's torch 1.13 import its DCP modules under Python 3.11)
import torch
import torch.distributed._shard.checkpoint as dcp
t0 = time.perf_counter()
meta = dcp.FileSystemReader(sys.argv[1]).read_metadata()
sd = {k: torch.empty(tuple(v.size), dtype=v.properties.dtype) for k, v in meta.state_dict_metadata.items()}
dcp.load_state_dict(sd, dcp.FileSystemReader(sys.argv[1]), no_dist=True)
t1 = time.perf_counter()
for k, v in sd.items():
    x = v.float()
    (x.min().item(), x.max().item(), x.mean().item(), x.std(unbiased=False).item())
t2 = time.perf_counter()
print(t1 - t0, t2 - t0)
"""

TOOLS = os.path.join(os.path.dirname(HERE), "tests", "tools")

ZERO_PEER = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
import zero_write  # noqa: F401  (DeepSpeed's classes, stood in, and zero_to_fp32's reassembly)
import torch
t0 = time.perf_counter()
model = torch.load(sys.argv[1] + "/mp_rank_00_model_states.pt", map_location="cpu")["module"]
kinds = zero_write.zero_to_fp32(sys.argv[1])
t1 = time.perf_counter()
for sd in [model] + list(kinds.values()):
    for k, v in sd.items():
        x = v.float()
        (x.min().item(), x.max().item(), x.mean().item(), x.std(unbiased=False).item())
t2 = time.perf_counter()
print(t1 - t0, t2 - t0)
"""


def write_zero(source, folder, world=2):
    """A DeepSpeed-ZeRO-2-style folder of the state dict in source: one parameter group, `world` ranks."""
    import collections
    import torch
    sys.path.insert(0, TOOLS)
    import zero_write as zw
    sd = torch.load(source)
    names = list(sd)
    step = os.path.join(folder, "global_step1")
    os.makedirs(step, exist_ok=True)
    torch.save({"module": sd, "param_shapes": [collections.OrderedDict((n, sd[n].shape) for n in names)], "shared_params": {},
                "buffer_names": [], "global_steps": 1, "ds_version": "0.14.0"}, os.path.join(step, "mp_rank_00_model_states.pt"))
    flat = torch.cat([sd[n].float().reshape(-1) for n in names])
    del sd
    size = (flat.numel() + world - 1) // world
    for r in range(world):
        part = flat[r * size:(r + 1) * size].clone()
        state = {"step": torch.tensor(1.0), "exp_avg": part * 0.01, "exp_avg_sq": part * part * 1e-4}
        osd = {"zero_stage": zw.ZeroStageEnum(2), "loss_scaler": zw.DynamicLossScaler(), "partition_count": [world],
               "single_partition_of_fp32_groups": [part], "group_paddings": [0],
               "base_optimizer_state": {"state": {0: state}, "param_groups": zw.param_groups(1)}}
        torch.save({"optimizer_state_dict": osd, "ds_version": "0.14.0"},
                   os.path.join(step, f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
    with open(os.path.join(folder, "latest"), "w") as f:
        f.write("global_step1")


def write_dcp_rank(rank, store, source, out):
    """One of two gloo ranks writing source (a torch.save state dict) as DCP: 2-D tensors sharded by rows."""
    sys.path.insert(0, TOOLS)
    import torch113_dcp  # noqa: F401
    import torch
    import torch.distributed as dist
    import torch.distributed._shard.checkpoint as dcp
    from torch.distributed._shard import sharded_tensor
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    spec = ChunkShardingSpec(dim=0, placements=["rank:0/cpu", "rank:1/cpu"])
    sd = {}
    for name, t in torch.load(source).items():
        if t.dim() != 2:
            sd[name] = t
            continue
        st = sharded_tensor.empty(spec, *t.shape, dtype=t.dtype)
        for shard in st.local_shards():
            o, z = shard.metadata.shard_offsets, shard.metadata.shard_sizes
            shard.tensor.copy_(t[o[0]:o[0] + z[0]])
        sd[name] = st
    dcp.save_state_dict(sd, dcp.FileSystemWriter(out))
    dist.barrier()
    dist.destroy_process_group()


PEER = r"""
import sys, time, torch
t0 = time.perf_counter()
sd = torch.load(sys.argv[1], map_location="cpu")
listing = [(k, v.dtype, tuple(v.shape)) for k, v in sd.items()]
t1 = time.perf_counter()
if sys.argv[2] == "stats":
    for k, v in sd.items():
        x = v.float()
        (x.min().item(), x.max().item(), x.mean().item(), x.std(unbiased=False).item())
t2 = time.perf_counter()
print(t1 - t0, t2 - t0)
"""



def log(msg):
    print(f"[torch_bench] {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("[torch_bench] skipped: Debian's python3-torch is not installed (apt-get install python3-torch)")
        return
    tm = os.path.join(args.build, "tensormorph")
    base = os.path.join(args.build, "bench-data")
    bf16_dir = dict(make_checkpoints(tm, os.path.join(base, "pyramid")))["bf16"]
    out = os.path.join(base, "torch", "pytorch_model.bin")
    if not os.path.exists(out):
        log("writing " + out + " with torch.save")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        sd = {}
        for shard in sorted(glob.glob(os.path.join(bf16_dir, "*.safetensors"))):
            for name, shape, bits in read_safetensors(shard):
                sd[name] = torch.from_numpy(bits.copy().view("int16")).view(torch.bfloat16).reshape(shape)
        torch.save(sd, out)
    transposed = os.path.join(base, "torch", "transposed.pt")
    if not os.path.exists(transposed):
        log("writing " + transposed + " with torch.save (2-D tensors as transposed views)")
        sd = torch.load(out)
        torch.save({k: (v.t() if v.dim() == 2 else v) for k, v in sd.items()}, transposed)
        del sd
    legacy = os.path.join(base, "torch", "legacy.bin")
    if not os.path.exists(legacy):
        log("writing " + legacy + " with torch.save in the legacy format")
        torch.save(torch.load(out), legacy, _use_new_zipfile_serialization=False)
    dcp_dir = os.path.join(base, "torch", "dcp")
    if not os.path.exists(os.path.join(dcp_dir, ".metadata")):
        log("writing " + dcp_dir + " with two gloo ranks (torch 1.13 DCP)")
        import tempfile
        import torch.multiprocessing as mp
        mp.spawn(write_dcp_rank, args=(tempfile.mktemp(prefix="dcp-store-"), out, dcp_dir), nprocs=2)
    zero_dir = os.path.join(base, "torch", "zero2")
    if not os.path.exists(os.path.join(zero_dir, "latest")):
        log("writing " + zero_dir + " (DeepSpeed-ZeRO-2-style, 2 ranks)")
        write_zero(out, zero_dir)
    size = os.path.getsize(out)
    timed(["cat", out])
    best = lambda f: min(f() for _ in range(args.repeats))  # noqa: E731
    cat = best(lambda: timed(["cat", out]))
    ls = best(lambda: timed([tm, "ls", out]))
    db = os.path.join(base, "torch", "bench.db")

    def fresh_stats(path):
        return fresh_index_stats_seconds(tm, path, db)

    stats = best(lambda: fresh_stats(out))
    timed(["cat", legacy])
    ls_legacy = best(lambda: timed([tm, "ls", legacy]))
    stats_legacy = best(lambda: fresh_stats(legacy))
    timed(["cat", transposed])
    stats_t = best(lambda: fresh_stats(transposed))
    dcp_files = sorted(glob.glob(os.path.join(dcp_dir, "*.distcp")))
    timed(["cat", *dcp_files])
    stats_dcp = best(lambda: fresh_stats(dcp_dir))
    zero_step = os.path.join(zero_dir, "global_step1")
    zero_files = sorted(glob.glob(os.path.join(zero_step, "*.pt")))
    zero_size = sum(os.path.getsize(f) for f in zero_files)
    cat_zero = best(lambda: timed(["cat", *zero_files]))
    ls_zero = best(lambda: timed([tm, "ls", zero_dir]))
    stats_zero = best(lambda: fresh_stats(zero_dir))

    def peer(kind, path=out):
        p = subprocess.run(["/usr/bin/python3", "-c", PEER, path, kind], capture_output=True, text=True, check=True)
        return [float(x) for x in p.stdout.split()]

    peer_ls = min(peer("ls")[0] for _ in range(args.repeats))
    peer_stats = min(peer("stats")[1] for _ in range(args.repeats))
    peer_stats_t = min(peer("stats", transposed)[1] for _ in range(args.repeats))
    peer_ls_legacy = min(peer("ls", legacy)[0] for _ in range(args.repeats))
    peer_stats_legacy = min(peer("stats", legacy)[1] for _ in range(args.repeats))

    def dcp_peer():
        p = subprocess.run(["/usr/bin/python3", "-c", DCP_PEER, dcp_dir, "stats", TOOLS], capture_output=True, text=True, check=True)
        return float(p.stdout.split()[1])

    peer_stats_dcp = min(dcp_peer() for _ in range(args.repeats))
    p = subprocess.run(["/usr/bin/python3", "-c", ZERO_PEER, zero_step, TOOLS], capture_output=True, text=True, check=True)
    peer_ls_zero, peer_stats_zero = (float(x) for x in p.stdout.split())
    rows = [("list every tensor", ls, peer_ls), ("statistics of every tensor", stats, peer_stats),
            ("list every tensor of the same state dict in the legacy format (legacy.bin, torch < 1.6)", ls_legacy, peer_ls_legacy),
            ("statistics of every tensor of legacy.bin (no CRC-32 in this format)", stats_legacy, peer_stats_legacy),
            ("statistics of every tensor, 2-D ones saved transposed (strided views)", stats_t, peer_stats_t),
            ("statistics of every tensor of the DCP directory (2 ranks, 2-D tensors row-sharded; torch: DCP load_state_dict)",
             stats_dcp, peer_stats_dcp),
            ("list the ZeRO-2 folder (torch: torch.load of every file + zero_to_fp32's reassembly)", ls_zero, peer_ls_zero),
            ("statistics of every tensor of the ZeRO-2 folder: model weights, fp32 master weights, exp_avg, exp_avg_sq",
             stats_zero, peer_stats_zero)]
    lines = [
        "# torch.save checkpoints (bench/torch_bench.py)",
        "",
        f"{datetime.date.today()} · {platform.node()} · {os.cpu_count()} cores · torch {torch.__version__} · "
        f"warm page cache, best of {args.repeats}",
        "",
        f"File: {size / 1e9:.2f} GB pytorch_model.bin (bf16 state dict of issue 28's demo checkpoint); "
        f"`cat` {cat:.2f} s ({size / cat / 1e9:.1f} GB/s).",
        "",
        "| task | tensormorph s | torch.load + torch s | torch / tensormorph |",
        "|---|---:|---:|---:|",
    ]
    for task, ours, theirs in rows:
        lines.append(f"| {task} | {ours:.3f} | {theirs:.3f} | {theirs / ours:.1f} |")
    lines.append("")
    lines.append(f"tensormorph statistics: {size / stats / 1e9:.2f} GB/s, {stats / cat:.1f}× the time of `cat`; "
                 f"of the transposed file {stats_t / stats:.2f}× the time of the row-major one (the gather); "
                 f"the zip file's statistics (CRC-32 of its storages checked) {stats / stats_legacy:.2f}× the time of "
                 f"the legacy file's (no CRC).")
    lines.append(f"ZeRO-2 folder: {zero_size / 1e9:.2f} GB in {len(zero_files)} files, `cat` {cat_zero:.2f} s "
                 f"({zero_size / cat_zero / 1e9:.1f} GB/s); tensormorph statistics {zero_size / stats_zero / 1e9:.2f} GB/s, "
                 f"{stats_zero / cat_zero:.1f}× the time of `cat`.")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(HERE, "last-run-torch.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
