#!/usr/bin/python3
"""4D-STEM load beside h5py + hdf5plugin (what a microscopist uses today) and the memory-copy bandwidth.

  /usr/bin/python3 bench/stem_bench.py --build build      (part of `make bench`)

Data: the simulated acquisition `tensormorph stem demo --size large` (192 x 192 scan of 128 x 128 uint16 frames,
1.21 GB raw, bitshuffle+LZ4 over 4 data files), written once to build/bench-data/stem-large.
Measured, best of N runs each (the machine is shared and noisy; best-of is the least disturbed run):
  (1) `tensormorph stem load --threads T --json` for T = 1, 2: its own timer around the load (chunk reads,
      decode, bad-pixel zeroing, output allocation), excluding process start and opening the files;
  (2) h5py + hdf5plugin reading every frame of every data file (HDF5's filter pipeline, one thread);
  (3) a scan-region load (the first quarter of the scan rows) beside h5py slicing the same frames;
  (4) bench/stem_decode_bench: every frame read and decoded into a per-thread buffer that stays in cache (how
      streamed products consume frames), i.e. the decoder without the cost of first touching 1.2 GB of fresh
      output memory, which on this VM's kernel alone runs at a few GB/s;
  (5) memcpy bandwidth from bench/stats_bench at 1 and 2 threads.
GB/s = 1e9 bytes of decoded output per second. Writes bench/last-run-stem.md.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py
import hdf5plugin  # noqa: F401  (registers the bitshuffle filter)

TARGET_VS_H5PY = 3.0
TARGET_GBPS_PER_CORE = 2.0


def best_of(n, f):
    best, result = float("inf"), None
    for _ in range(n):
        t0 = time.perf_counter()
        result = f()
        best = min(best, time.perf_counter() - t0)
    return best, result


def tm_load(tm, env, master, threads, extra=()):
    out = subprocess.run([tm, "stem", "load", master, "--threads", str(threads), "--json"] + list(extra),
                         capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tm = os.path.join(args.build, "tensormorph")
    env = dict(os.environ, XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="tm-stem-bench-"))
    data = os.path.join(args.build, "bench-data", "stem-large")
    master = os.path.join(data, "demo_master.h5")
    if not os.path.exists(master):
        print("writing the benchmark acquisition (once) to", data, flush=True)
        subprocess.run([tm, "stem", "demo", "--size", "large", "--out", data], check=True, env=env)

    # (1) tensormorph, best of runs by its own timer.
    ours = {}
    for t in (1, 2):
        runs = [tm_load(tm, env, master, t) for _ in range(args.runs)]
        ours[t] = min(runs, key=lambda j: j["seconds"])
    decoded = ours[1]["decoded_bytes"]
    stored = ours[1]["stored_bytes_read"]

    # (2) h5py + hdf5plugin, every frame.
    with h5py.File(master, "r") as f:
        names = sorted(f["entry/data"].keys())

    def h5py_all():
        n = 0
        with h5py.File(master, "r") as f:
            for k in names:
                n += f["entry/data"][k][()].nbytes
        return n

    t_h5, n_h5 = best_of(max(1, args.runs - 1), h5py_all)
    assert n_h5 == decoded, (n_h5, decoded)

    # (3) a scan region: the first quarter of the scan rows.
    shape = ours[1]["provenance"]["source"]["shape"]
    rows = shape[0] // 4
    region = "0,%d,0,%d" % (rows, shape[1])
    reg = min((tm_load(tm, env, master, 1, ["--scan-region", region]) for _ in range(args.runs)), key=lambda j: j["seconds"])
    frames = rows * shape[1]

    def h5py_region():
        n, left = 0, frames
        with h5py.File(master, "r") as f:
            for k in names:
                d = f["entry/data"][k]
                take = min(left, d.shape[0])
                n += d[:take].nbytes
                left -= take
                if not left:
                    break
        return n

    t_h5_reg, _ = best_of(max(1, args.runs - 1), h5py_region)

    # (4) the decoder alone.
    dec = {}
    for t in (1, 2):
        out = subprocess.run([os.path.join(args.build, "bench", "stem_decode_bench"), master, str(t), str(args.runs)],
                             capture_output=True, text=True, check=True, env=env).stdout
        dec[t] = json.loads(out)

    # (5) memcpy bandwidth.
    mb = subprocess.run([os.path.join(args.build, "bench", "stats_bench"), "--benchmark_filter=^memcpy",
                         "--benchmark_format=json"], capture_output=True, text=True, check=True,
                        env=dict(env, TM_BENCH_MIB="256")).stdout
    copy = {}
    for b in json.loads(mb)["benchmarks"]:
        t = int(b["name"].split("threads:")[1].split("/")[0])
        copy[t] = max(copy.get(t, 0), b["bytes_per_second"] / 1e9)

    gb = lambda j: j["decoded_bytes"] / j["seconds"] / 1e9  # noqa: E731
    h5_gbps = decoded / t_h5 / 1e9
    lines = ["# 4D-STEM load (`/usr/bin/python3 bench/stem_bench.py --build %s`)\n\n" % args.build,
             "%s UTC, %d CPUs (%s), best of %d runs\n\n" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
                                                          os.cpu_count(), ours[1]["provenance"]["decoder"], args.runs),
             "Acquisition: %s scan x %s frames uint16, %.2f GB decoded from %.1f MB stored (bitshuffle+LZ4, ratio %.1f)\n\n" %
             ("x".join(map(str, shape[:2])), "x".join(map(str, shape[2:])), decoded / 1e9, stored / 1e6, decoded / stored),
             "| what | threads | seconds | decoded GB/s | vs h5py+hdf5plugin | % of memcpy | target |\n",
             "|---|---|---|---|---|---|---|\n"]
    def target(g, t):
        per_core = g / t >= TARGET_GBPS_PER_CORE
        if t == 1:
            return "≥ %.0f× h5py and ≥ %.0f GB/s/core: %s" % (TARGET_VS_H5PY, TARGET_GBPS_PER_CORE,
                                                            "met" if g / h5_gbps >= TARGET_VS_H5PY and per_core else "NOT met")
        return "≥ %.0f GB/s/core: %s" % (TARGET_GBPS_PER_CORE, "met" if per_core else "NOT met")

    for t in (1, 2):
        g = dec[t]["decoded_bytes"] / dec[t]["seconds"] / 1e9
        lines.append("| decode, frames streamed (stem_decode_bench) | %d | %.3f | %.2f | %.1f× | %.0f%% | %s |\n" %
                     (t, dec[t]["seconds"], g, g / h5_gbps, 100 * g / copy.get(t, float("nan")), target(g, t)))
    for t in (1, 2):
        g = gb(ours[t])
        lines.append("| tensormorph stem load (full, into fresh memory) | %d | %.3f | %.2f | %.1f× | %.0f%% | %s |\n" %
                     (t, ours[t]["seconds"], g, g / h5_gbps, 100 * g / copy.get(t, float("nan")), target(g, t)))
    lines.append("| h5py + hdf5plugin (full) | 1 | %.3f | %.2f | 1.0× | %.0f%% | — |\n" % (t_h5, h5_gbps, 100 * h5_gbps / copy[1]))
    lines.append("| tensormorph, scan rows 0..%d (%d frames) | 1 | %.3f | %.2f | %.1f× | — | reads only the region: %.1f MB stored |\n" %
                 (rows, frames, reg["seconds"], gb(reg), t_h5_reg / reg["seconds"], reg["stored_bytes_read"] / 1e6))
    lines.append("| h5py + hdf5plugin, same frames | 1 | %.3f | %.2f | 1.0× | — | — |\n" % (t_h5_reg, reg["decoded_bytes"] / t_h5_reg / 1e9))
    for t in sorted(copy):
        lines.append("| memcpy (stats_bench) | %d | — | %.2f | — | 100%% | — |\n" % (t, copy[t]))
    text = "".join(lines)
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-stem.md"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
