#!/usr/bin/python3
"""The numpy peer: numpy computing the statistics stats_bench computes, on the same bytes.

Reads the buffers `stats_bench --tm_dump_data=DIR` wrote (DIR/manifest.json, DIR/<dtype>.bin) and times
what a numpy user would write:

  values   f32 and f16 as stored; bf16 -> (u16.astype(np.uint32) << 16).view(np.float32);
           f8_e4m3fn -> a 256-entry float32 lookup table indexed by the bytes
  moments  finite mask; nan / inf / zero counts; min, max, abs max, sum, mean, population std over the
           finite values (sum and std accumulate in float64, as exact-ish as tensormorph's)
  full     moments + np.histogram(finite, bins=256, range=(min, max))
                   + np.quantile(finite, [0.001, 0.01, 0.5, 0.99, 0.999])

Each case is timed with time.perf_counter; the best of --repeats runs is kept (fewer when one run is
slow, see --budget-s). GB/s = raw input bytes / best seconds / 1e9. Loading the file is not timed.
Needs Debian's /usr/bin/python3 (numpy).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

PROBABILITIES = [0.001, 0.01, 0.5, 0.99, 0.999]
DTYPES = ["f32", "bf16", "f16", "f8_e4m3fn"]
STORAGE = {"f32": np.float32, "bf16": np.uint16, "f16": np.float16, "f8_e4m3fn": np.uint8}


def f8_e4m3fn_table():
    """float32 value of every f8_e4m3fn bit pattern (S.EEEE.MMM, bias 7, no Inf, S.1111.111 = NaN)."""
    table = np.empty(256, np.float32)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 0x7
        if e == 0xF and m == 0x7:
            v = float("nan")
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1.0 + m / 8.0) * 2.0 ** (e - 7)
        table[b] = sign * v
    return table


F8_TABLE = f8_e4m3fn_table()


def to_values(raw, dtype):
    if dtype == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if dtype == "f8_e4m3fn":
        return F8_TABLE[raw]
    return raw  # f32, f16: native


def compute(raw, dtype, full):
    x = to_values(raw, dtype)
    finite_mask = np.isfinite(x)
    finite = x[finite_mask]
    out = {
        "count": int(x.size),
        "finite": int(finite.size),
        "nan": int(np.count_nonzero(np.isnan(x))),
        "zero": int(np.count_nonzero(finite == 0)),
    }
    out["inf"] = out["count"] - out["finite"] - out["nan"]
    if finite.size:
        mn, mx = finite.min(), finite.max()
        total = finite.sum(dtype=np.float64)
        out.update(min=float(mn), max=float(mx), abs_max=float(max(-mn, mx)), sum=float(total),
                   mean=float(total / finite.size), std=float(finite.std(dtype=np.float64)))
        if full:
            hist, edges = np.histogram(finite, bins=256, range=(mn, mx))
            q = np.quantile(finite, PROBABILITIES)
            out.update(hist=[int(c) for c in hist], hist_edges_lo_hi=[float(edges[0]), float(edges[-1])],
                       hist_edge_dtype=str(edges.dtype),
                       quantiles=[[p, float(v)] for p, v in zip(PROBABILITIES, q)],
                       quantile_dtype=str(np.asarray(q).dtype))
    return out


def time_case(raw, dtype, full, repeats, budget_s):
    times, result = [], None
    start = time.perf_counter()
    while len(times) < repeats:
        t0 = time.perf_counter()
        result = compute(raw, dtype, full)
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start + times[-1] > budget_s:  # the next run would overrun the budget
            break
    return min(times), times, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", required=True, help="directory written by stats_bench --tm_dump_data")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--modes", default="moments,full")
    ap.add_argument("--repeats", type=int, default=3, help="runs per case; the best is kept (default 3)")
    ap.add_argument("--budget-s", type=float, default=25.0,
                    help="stop repeating a case once another run would exceed this many seconds (default 25)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    with open(os.path.join(args.data_dir, "manifest.json")) as f:
        manifest = json.load(f)
    results = []
    for dtype in args.dtypes.split(","):
        entry = manifest["files"].get(dtype)
        if entry is None:
            sys.exit(f"peer_numpy: {dtype} not in {args.data_dir}/manifest.json")
        raw = np.fromfile(os.path.join(args.data_dir, entry["file"]), dtype=STORAGE[dtype])
        nbytes = raw.nbytes
        if nbytes != entry["bytes"]:
            sys.exit(f"peer_numpy: {entry['file']} holds {nbytes} bytes, manifest says {entry['bytes']}")
        for mode in args.modes.split(","):
            best, times, stats = time_case(raw, dtype, mode == "full", max(1, args.repeats), args.budget_s)
            gbps = nbytes / best / 1e9
            results.append({"dtype": dtype, "mode": mode, "bytes": nbytes, "elements": int(raw.size),
                            "best_s": best, "runs_s": times, "gbps": gbps, "stats": stats})
            print(f"numpy {dtype:10s} {mode:8s} best {best * 1e3:9.1f} ms of {len(times)}  {gbps:7.3f} GB/s",
                  file=sys.stderr, flush=True)
        del raw
    doc = {"numpy_version": np.__version__, "python": sys.version.split()[0], "size_mib": manifest["size_mib"],
           "probabilities": PROBABILITIES, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    else:
        json.dump(doc, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
