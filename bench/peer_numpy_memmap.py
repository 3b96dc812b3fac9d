#!/usr/bin/python3
"""What a user would write instead of `tensormorph index`: the same statistics of every bf16 tensor of a
sharded safetensors checkpoint, through np.memmap (count, nan/inf/zero counts, min, max, abs_max, sum,
mean, population std, a 256-bin histogram over the finite min..max, quantiles 0.001/0.01/0.5/0.99/0.999).

  peer_numpy_memmap.py CHECKPOINT_DIR [--max-bytes N] [--out results.json]

Tensors are taken in file order until --max-bytes of tensor data have been processed (numpy is slow;
the rate is what is compared). Prints a JSON summary; --out also writes per-tensor results.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

PROBS = [0.001, 0.01, 0.5, 0.99, 0.999]


def tensors_of(directory):
    with open(os.path.join(directory, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    for shard in shards:
        path = os.path.join(directory, shard)
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            yield path, 8 + n, name, t


def stats_bf16(bits):
    f = (bits.astype(np.uint32) << 16).view(np.float32)
    finite_mask = np.isfinite(f)
    x = f[finite_mask]
    out = {"count": int(f.size), "nan_count": int(np.isnan(f).sum()), "inf_count": int(np.isinf(f).sum()),
           "zero_count": int((f == 0).sum())}
    if x.size:
        lo, hi = float(x.min()), float(x.max())
        x64 = x.astype(np.float64)
        s = float(x64.sum())
        out.update(min=lo, max=hi, abs_max=float(np.abs(x64).max()), sum=s, mean=s / x.size, std=float(x64.std()))
        counts, _ = np.histogram(x64, bins=256, range=(lo, hi))
        out["histogram"] = counts.tolist()
        out["quantiles"] = [float(q) for q in np.quantile(x64, PROBS)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--out")
    a = ap.parse_args()
    results, done, t0 = {}, 0, time.perf_counter()
    for path, data_start, name, t in tensors_of(a.checkpoint):
        if t["dtype"] != "BF16":
            continue
        b, e = t["data_offsets"]
        if done and done + (e - b) > a.max_bytes:
            break
        bits = np.memmap(path, dtype=np.uint16, mode="r", offset=data_start + b, shape=((e - b) // 2,))
        results[name] = stats_bf16(bits)
        done += e - b
    seconds = time.perf_counter() - t0
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f)
    print(json.dumps({"tensors": len(results), "bytes": done, "seconds": seconds,
                      "bytes_per_second": done / seconds if seconds else 0}))


if __name__ == "__main__":
    sys.exit(main())
