#!/usr/bin/python3
"""Indexing with and without the statistics pyramid, per dtype, beside `cat`. Part of `make bench`.

  /usr/bin/python3 bench/pyramid_index_bench.py --build build [--repeats 3]

1. The checkpoint of issue 28, always the same command: `tensormorph demo --hidden 2048 --intermediate 5504
   --layers 8 --heads 16 --kv-heads 16 --vocab 32000 --shards 4` (1.07 GB of bf16), made once in
   <build>/bench-data/pyramid/bf16. The same values are written again as f16 and f32 safetensors (same
   shards and names) and as one Q4_0 GGUF (2-D tensors quantized in blocks of 32 the way ggml's reference
   quantizer does, 1-D tensors kept as F32), and as int8 and float8 E4M3FN safetensors scaled per tensor to
   their range (the two 8-bit layouts of quantized checkpoints), with numpy.
2. Per dtype, warm page cache, best of --repeats: `cat` of the files to /dev/null, then `tensormorph index`
   into a fresh database with --no-pyramid and with the pyramid, on 1 and 2 threads.
3. The table: seconds, GB/s of the files' bytes, and pyramid rate / no-pyramid rate (issue 28 asks >= 0.8
   for bf16, f16 and f32).

Ratios are within this one run; the machine is shared, so absolute times are context only.
Writes bench/last-run-pyramid.md.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
from gguf_write import write_gguf  # noqa: E402
from safetensors_write import write_safetensors  # noqa: E402

DEMO = ["--hidden", "2048", "--intermediate", "5504", "--layers", "8", "--heads", "16", "--kv-heads", "16",
        "--vocab", "32000", "--shards", "4"]


def log(msg):
    print(f"[pyramid_index_bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, stdout=subprocess.DEVNULL):
    p = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return p


def read_safetensors(path):
    """(name, shape, raw uint16 bf16 bits) of every tensor of one demo shard, in file order."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "BF16", info
        a, b = info["data_offsets"]
        out.append((name, info["shape"], np.frombuffer(data[a:b], dtype=np.uint16)))
    return sorted(out, key=lambda t: header[t[0]]["data_offsets"][0])


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def quantize_q4_0(values):
    """ggml's reference Q4_0: per block of 32, d = (the value of largest magnitude) / -8, codes
    round(x / d) + 8 clipped to 0..15, stored as f16 d then 16 bytes (code j | code j+16 << 4)."""
    x = values.reshape(-1, 32).astype(np.float32)
    idx = np.argmax(np.abs(x), axis=1)
    m = x[np.arange(len(x)), idx]
    d = m / -8.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.trunc(x * inv[:, None] + 8.5), 0, 15).astype(np.uint8)
    packed = q[:, :16] | (q[:, 16:] << 4)
    out = np.empty((len(x), 18), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = packed
    return out.reshape(-1)


def e4m3fn_codes(x):
    """float32 -> OCP float8 E4M3FN codes, round to nearest (ties to the even code), finite |x| > 448
    clipped to 448; NaN and infinities (the format has none) become its NaN, as torch's cast does."""
    codes = np.arange(0x7F, dtype=np.uint8)  # every finite non-negative code, in value order
    e, m = codes >> 3, (codes & 7).astype(np.float64)
    values = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e.astype(np.float64) - 7))
    mid = (values[:-1] + values[1:]) / 2
    finite = np.isfinite(x)
    a = np.minimum(np.abs(np.where(finite, x, 0).astype(np.float64)), 448.0)
    i = np.searchsorted(mid, a)  # a > mid[i-1] and a <= mid[i]
    tie = (i < len(mid)) & (a == mid[np.minimum(i, len(mid) - 1)]) & (codes[np.minimum(i, len(codes) - 1)] % 2 == 1)
    i = np.where(tie, i + 1, i)
    return np.where(finite, codes[i] | np.where(x < 0, 0x80, 0).astype(np.uint8), np.uint8(0x7F))


def narrow_copy(kind, values):
    """The same weights as 8-bit tensors the way such checkpoints hold them: scaled per tensor to the
    format's range (int8: round(x * 127 / max|x|); float8 E4M3FN: x * 448 / max|x|; max over the finite
    values), the scale dropped. int8 has no NaN or infinity: those become 0."""
    finite = np.isfinite(values)
    top = float(np.max(np.abs(values[finite]))) if finite.any() else 1.0
    top = top or 1.0
    if kind == "i8":
        return np.rint(np.where(finite, values, 0) * (127.0 / top)).astype(np.int8)
    return ("F8_E4M3", e4m3fn_codes(values * (448.0 / top)))


def make_checkpoints(tm, base):
    dirs = {k: os.path.join(base, k) for k in ("bf16", "f16", "f32", "i8", "f8_e4m3")}
    gguf = os.path.join(base, "q4_0.gguf")
    if not glob.glob(os.path.join(dirs["bf16"], "*.safetensors")):
        log("writing the bf16 checkpoint: tensormorph demo " + " ".join(DEMO))
        run([tm, "demo", "--out", dirs["bf16"]] + DEMO)
    shards = sorted(glob.glob(os.path.join(dirs["bf16"], "*.safetensors")))
    for kind, dtype in (("f16", np.float16), ("f32", np.float32)):
        if glob.glob(os.path.join(dirs[kind], "*.safetensors")):
            continue
        log(f"writing the {kind} copy")
        os.makedirs(dirs[kind], exist_ok=True)
        for shard in shards:
            tensors = [(name, bf16_to_f32(bits).astype(dtype).reshape(shape)) for name, shape, bits in read_safetensors(shard)]
            write_safetensors(os.path.join(dirs[kind], os.path.basename(shard)), tensors)
    for kind in ("i8", "f8_e4m3"):
        if glob.glob(os.path.join(dirs[kind], "*.safetensors")):
            continue
        log(f"writing the {kind} copy")
        os.makedirs(dirs[kind], exist_ok=True)
        for shard in shards:
            tensors = []
            for name, shape, bits in read_safetensors(shard):
                t = narrow_copy(kind, bf16_to_f32(bits))
                tensors.append((name, (t[0], t[1].reshape(shape))) if isinstance(t, tuple) else (name, t.reshape(shape)))
            write_safetensors(os.path.join(dirs[kind], os.path.basename(shard)), tensors)
    if not os.path.exists(gguf):
        log("writing the Q4_0 GGUF")
        tensors = []
        for shard in shards:
            for name, shape, bits in read_safetensors(shard):
                v = bf16_to_f32(bits)
                ne = list(reversed(shape))
                if len(shape) == 2 and shape[1] % 32 == 0:
                    tensors.append((name, "Q4_0", ne, quantize_q4_0(v)))
                else:
                    tensors.append((name, "F32", ne, v))
        write_gguf(gguf, [("general.architecture", "STRING", "llama")], tensors)
    return [("bf16", dirs["bf16"]), ("f16", dirs["f16"]), ("f32", dirs["f32"]), ("Q4_0 GGUF", gguf),
            ("i8", dirs["i8"]), ("f8_e4m3", dirs["f8_e4m3"])]


def files_of(path):
    return [path] if os.path.isfile(path) else sorted(glob.glob(os.path.join(path, "*.safetensors")))


def best(f, repeats):
    return min(f() for _ in range(repeats))


def timed(cmd):
    t0 = time.perf_counter()
    run(cmd)
    return time.perf_counter() - t0


def index_seconds(tm, ckpt, db, threads, pyramids):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    return timed([tm, "index", ckpt, "--index", db, "--threads", str(threads)] + ([] if pyramids else ["--no-pyramid"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", help="comma-separated dtypes (bf16,f16,f32,q4_0,i8,f8_e4m3)")
    args = ap.parse_args()
    tm = os.path.join(args.build, "tensormorph")
    base = os.path.join(args.build, "bench-data", "pyramid")
    db = os.path.join(base, "bench.db")
    rows = []
    for kind, path in make_checkpoints(tm, base):
        if args.only and kind.split()[0].lower() not in args.only.lower().split(","):
            continue
        files = files_of(path)
        size = sum(os.path.getsize(f) for f in files)
        run(["cat"] + files)  # warm the page cache
        cat = best(lambda: timed(["cat"] + files), args.repeats)
        row = {"dtype": kind, "bytes": size, "cat": cat}
        for threads in (1, 2):
            for pyramids in (False, True):
                key = f"{'pyr' if pyramids else 'nopyr'}{threads}"
                row[key] = best(lambda: index_seconds(tm, path, db, threads, pyramids), args.repeats)
                log(f"{kind}: {key} {row[key]:.3f} s")
        rows.append(row)

    gb = lambda r, k: r["bytes"] / r[k] / 1e9  # noqa: E731
    lines = [
        "# Indexing with and without the pyramid (bench/pyramid_index_bench.py)",
        "",
        f"{datetime.date.today()} · {platform.node()} · {os.cpu_count()} cores · warm page cache, best of {args.repeats}",
        "",
        "Checkpoint: `tensormorph demo " + " ".join(DEMO) + "` (bf16), the same values as f16, f32, a Q4_0 GGUF, "
        "and int8 and float8 E4M3FN scaled per tensor to their range.",
        "",
        "| dtype | GB | cat s (GB/s) | threads | --no-pyramid s (GB/s) | pyramid s (GB/s) | pyramid rate / no-pyramid rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for t in (1, 2):
            lines.append(
                f"| {r['dtype']} | {r['bytes'] / 1e9:.2f} | {r['cat']:.2f} ({gb(r, 'cat'):.1f}) | {t} | "
                f"{r[f'nopyr{t}']:.2f} ({gb(r, f'nopyr{t}'):.2f}) | {r[f'pyr{t}']:.2f} ({gb(r, f'pyr{t}'):.2f}) | "
                f"{r[f'nopyr{t}'] / r[f'pyr{t}']:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(HERE, "last-run-pyramid.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
