#!/usr/bin/python3
"""`tensormorph diff` of two bf16 checkpoints beside indexing both (issue 50's measurement), and beside numpy.

  /usr/bin/python3 bench/diff_bench.py --build build [--mib 256] [--repeats 2] [--threads N]

1. Writes two bf16 safetensors checkpoints of --mib MiB each (4096 x 4096 tensors named model.layers.N.weight, values
   ~N(0, 0.02) rounded to bf16; B is A with every 16th row changed), once, in <build>/bench-data/diff (the files are
   written by tests/tools/safetensors_write.py).
2. Warm page cache (both files read once first), best of --repeats, each into a fresh database:
   - `tensormorph index A` + `tensormorph index B` (exact statistics and pyramids of every tensor of both);
   - `tensormorph diff A B` (the difference pyramid of every pair, reading both in one pass);
   - numpy, what a user would write instead: both files as np.memmap uint16, each tensor widened to float32 by a
     shift and to float64, Δ and the per-tensor Σ Δ², Σ a², max |Δ|, changed count (no tiles, no histogram);
   - `tensormorph diff A ADAPTER` of a PEFT LoRA adapter (r = 16 on every tensor of A, written once beside the
     pair) against numpy merging it: W + s · (B @ A) in float64 per tensor and the same per-tensor figures.
Rates are GB/s of input bytes (both files). Prints a Markdown table and writes bench/last-run-diff.md. The issue's
target is diff >= 0.8 x the rate of indexing both, in the same run.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
sys.path.insert(0, HERE)
from bench_timing import best_of, timed_command  # noqa: E402
from safetensors_write import write_safetensors  # noqa: E402

SIDE = 4096


def bf16_bits(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def make_pair(folder, mib):
    a, b = os.path.join(folder, f"a-{mib}.safetensors"), os.path.join(folder, f"b-{mib}.safetensors")
    if os.path.exists(a) and os.path.exists(b):
        return a, b
    os.makedirs(folder, exist_ok=True)
    n = max(1, mib * 2**20 // (SIDE * SIDE * 2))
    rng = np.random.default_rng(50)
    ta, tb = [], []
    for i in range(n):
        w = bf16_bits(rng.standard_normal((SIDE, SIDE), dtype=np.float32) * 0.02)
        v = w.copy()
        v[::16] ^= 1  # one ulp of every 16th row
        ta.append((f"model.layers.{i}.weight", ("BF16", w)))
        tb.append((f"model.layers.{i}.weight", ("BF16", v)))
    write_safetensors(a, ta)
    write_safetensors(b, tb)
    return a, b


def make_adapter(folder, a_path, mib, rank=16):
    """A PEFT LoRA folder over every tensor of A (adapter_config.json + adapter_model.safetensors)."""
    out = os.path.join(folder, f"adapter-{mib}-r{rank}")
    if os.path.exists(os.path.join(out, "adapter_model.safetensors")):
        return out
    os.makedirs(out, exist_ok=True)
    n = max(1, mib * 2**20 // (SIDE * SIDE * 2))
    rng = np.random.default_rng(16)
    tensors = []
    for i in range(n):
        tensors.append((f"base_model.model.model.layers.{i}.lora_A.weight", (rng.standard_normal((rank, SIDE)) * 0.01).astype(np.float32)))
        tensors.append((f"base_model.model.model.layers.{i}.lora_B.weight", (rng.standard_normal((SIDE, rank)) * 0.01).astype(np.float32)))
    write_safetensors(os.path.join(out, "adapter_model.safetensors"), tensors)
    with open(os.path.join(out, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": rank, "lora_alpha": 32, "target_modules": ["w"]}, f)
    return out


def numpy_merge(a, adapter):
    """Per tensor W + s (B @ A) in float64 and Σ Δ², Σ a², max |Δ|, changed count."""
    with open(a, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    with open(os.path.join(adapter, "adapter_model.safetensors"), "rb") as f:
        m = int.from_bytes(f.read(8), "little")
        ah = json.loads(f.read(m))
    ma, mad = np.memmap(a, np.uint8, "r"), np.memmap(os.path.join(adapter, "adapter_model.safetensors"), np.uint8, "r")

    def tensor(mm, hdr, skip, name):
        lo, hi = hdr[name]["data_offsets"]
        return mm[8 + skip + lo: 8 + skip + hi].view(np.float32).reshape(hdr[name]["shape"]).astype(np.float64)
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        w = (ma[8 + n + lo: 8 + n + hi].view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        w = w.reshape(t["shape"])
        module = "base_model.model." + name[: -len(".weight")]
        la, lb = tensor(mad, ah, m, module + ".lora_A.weight"), tensor(mad, ah, m, module + ".lora_B.weight")
        merged = w + (32 / 16) * (lb @ la)
        d = (merged - w).ravel()
        out[name] = (float(d @ d), float(w.ravel() @ w.ravel()), float(np.abs(d).max()), int((d != 0).sum()))
    return out


def numpy_diff(a, b):
    """Per tensor Σ Δ², Σ a², max |Δ| and changed count, from memory maps (float64 sums)."""
    out = {}
    with open(a, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    ma, mb = np.memmap(a, np.uint8, "r"), np.memmap(b, np.uint8, "r")
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        xa = ma[8 + n + lo: 8 + n + hi].view(np.uint16).astype(np.uint32) << 16
        xb = mb[8 + n + lo: 8 + n + hi].view(np.uint16).astype(np.uint32) << 16
        fa, fb = xa.view(np.float32).astype(np.float64), xb.view(np.float32).astype(np.float64)
        d = fb - fa
        out[name] = (float(d @ d), float(fa @ fa), float(np.abs(d).max()), int((fa != fb).sum()))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--mib", type=int, default=int(os.environ.get("TM_BENCH_MIB", "256")))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    tm = os.path.join(args.build, "tensormorph")
    a, b = make_pair(os.path.join(args.build, "bench-data", "diff"), args.mib)
    total = os.path.getsize(a) + os.path.getsize(b)
    for p in (a, b):  # warm the page cache
        subprocess.run(["cat", p], stdout=subprocess.DEVNULL, check=True)
    threads = ["--threads", str(args.threads)] if args.threads else []
    work = tempfile.mkdtemp(prefix="tm-diff-bench-")

    def fresh(name):
        path = os.path.join(work, name)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        return path

    def index_both():
        return (timed_command([tm, "index", a, "--index", fresh("a.sqlite")] + threads) +
                timed_command([tm, "index", b, "--index", fresh("b.sqlite")] + threads))

    def diff():
        return timed_command([tm, "diff", a, b, "--index", fresh("d.sqlite"), "--json"] + threads)

    t_index = min(index_both() for _ in range(args.repeats))
    t_diff, _ = best_of(args.repeats, diff)
    t_numpy, _ = best_of(args.repeats, lambda: numpy_diff(a, b))
    adapter = make_adapter(os.path.join(args.build, "bench-data", "diff"), a, args.mib)
    t_adapter, _ = best_of(args.repeats, lambda: timed_command([tm, "diff", a, adapter, "--index", fresh("l.sqlite"), "--json"] + threads))
    t_merge, _ = best_of(args.repeats, lambda: numpy_merge(a, adapter))
    rows = [("tensormorph index A + index B", t_index), ("tensormorph diff A B", t_diff),
            ("numpy: memmap, widen, Σ Δ², Σ a², max |Δ|, changed per tensor", t_numpy)]
    adapter_rows = [("tensormorph diff A ADAPTER (LoRA r=16 on every tensor)", t_adapter),
                    ("numpy: W + s (B @ A) in float64, the same per-tensor figures", t_merge)]
    load = os.getloadavg()
    lines = [f"# diff_bench: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC",
             "",
             f"- command: `/usr/bin/python3 bench/diff_bench.py --build {args.build} --mib {args.mib} --repeats {args.repeats}`"
             + (f" --threads {args.threads}" if args.threads else ""),
             f"- machine: `{' '.join(platform.uname())}`, {os.cpu_count()} CPUs, load average {load[0]:.2f} at the end",
             f"- data: two bf16 safetensors files of {total / 2 / 1e9:.3f} GB each ({SIDE} x {SIDE} tensors); B changes every 16th row by one ulp",
             "",
             "| what | seconds (best of %d) | GB/s of both files | diff's rate / this |" % args.repeats,
             "|---|---:|---:|---:|"]
    for what, t in rows:
        lines.append(f"| {what} | {t:.3f} | {total / t / 1e9:.3f} | {t / t_diff:.2f}x |")
    lines += ["", f"diff at {t_index / t_diff:.2f} x the rate of indexing both (target >= 0.8).", "",
              "| adapter over A | seconds (best of %d) | GB/s of A | numpy / this |" % args.repeats, "|---|---:|---:|---:|"]
    for what, t in adapter_rows:
        lines.append(f"| {what} | {t:.3f} | {total / 2 / t / 1e9:.3f} | {t_merge / t:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(HERE, "last-run-diff.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
