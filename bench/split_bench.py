#!/usr/bin/python3
"""Split placement (issue 52): the moments of one 2 GiB float32 tensor on the CPU alone, on Vulkan alone and split
over both, beside numpy and the file's read rate. Part of `make bench`.

  /usr/bin/python3 bench/split_bench.py --build build [--gib 2] [--repeats 3]

1. The tensor: <build>/bench-data/split-<gib>g.f32, standard normal float32 written once with numpy (a raw file:
   `tensormorph stats --raw` reads it without an index, so each run is one statistics pass).
2. `tensormorph calibrate --size-mib 64` into a private config folder first, so the planner's estimates are
   calibrated on this machine (the runs use that folder too).
3. Per mode, warm page cache, best of --repeats: `stats --raw F --dtype f32 --no-histogram --no-quantiles --json`
   with `--backend cpu`, `--backend vulkan`, `--split on`; the wall time, and from the JSON the planner's estimate
   and, for the split, each share's planned fraction, measured seconds and bytes.
4. Beside them: `cat` of the file (the read rate) and numpy on a memmap of it (sum, min, max, std: what a user
   would write).

On a machine whose only Vulkan device is lavapipe (a software adapter running on the same cores as the CPU
backend) the split cannot beat the CPU alone: its shares compete for the same cores. The table shows what the
planner predicted from calibrated throughputs and what happened; that comparison is what this bench is for here.
Writes bench/last-run-split.md.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time


def run_json(cmd, env):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"[split_bench] failed: {' '.join(cmd)}\n{r.stderr}")
    return wall, json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import numpy as np

    tm = os.path.abspath(os.path.join(args.build, "tensormorph"))
    data_dir = os.path.join(args.build, "bench-data")
    os.makedirs(data_dir, exist_ok=True)
    n = int(args.gib * (1 << 30)) // 4
    path = os.path.join(data_dir, f"split-{args.gib:g}g.f32")
    if not os.path.exists(path) or os.path.getsize(path) != 4 * n:
        print(f"[split_bench] writing {path} ({4 * n / 1e9:.2f} GB)", flush=True)
        rng = np.random.default_rng(52)
        with open(path + ".part", "wb") as f:
            left = n
            while left:
                k = min(left, 1 << 25)
                rng.standard_normal(k, dtype=np.float32).tofile(f)
                left -= k
        os.replace(path + ".part", path)

    env = dict(os.environ)
    config = tempfile.mkdtemp(prefix="tm-split-bench-")
    env["XDG_CONFIG_HOME"] = config
    env["XDG_CACHE_HOME"] = config
    print("[split_bench] calibrating (tensormorph calibrate --size-mib 64)", flush=True)
    subprocess.run([tm, "calibrate", "--size-mib", "64", "--repeats", "2"], check=True, env=env, stdout=subprocess.DEVNULL)

    base = [tm, "stats", "--raw", path, "--dtype", "f32", "--no-histogram", "--no-quantiles", "--json"]
    modes = [("cpu alone", ["--backend", "cpu"]), ("vulkan alone", ["--backend", "vulkan"]), ("split (--split on)", ["--split", "on"])]
    best = {}
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
        best["cat"] = min(best.get("cat", 1e9), time.perf_counter() - t0)
        t0 = time.perf_counter()
        a = np.memmap(path, dtype=np.float32, mode="r")
        _ = (a.sum(dtype=np.float64), a.min(), a.max(), a.std(dtype=np.float64))
        best["numpy"] = min(best.get("numpy", 1e9), time.perf_counter() - t0)
        del a
        for name, flags in modes:
            wall, doc = run_json(base + flags, env)
            if name not in best or wall < best[name][0]:
                best[name] = (wall, doc)

    gb = 4 * n / 1e9
    lines = [f"# Split placement: stats.moments of {gb:.2f} GB of float32",
             "",
             f"`/usr/bin/python3 bench/split_bench.py --build {args.build} --gib {args.gib:g} --repeats {args.repeats}`, "
             f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, best of {args.repeats}, warm page cache.",
             "",
             "| run | wall s | GB/s | planner's estimate s | shares: backend planned % → measured % of bytes, seconds |",
             "|---|---:|---:|---:|---|"]
    lines.append(f"| cat (read rate) | {best['cat']:.3f} | {gb / best['cat']:.2f} | | |")
    lines.append(f"| numpy memmap sum, min, max, std | {best['numpy']:.3f} | {gb / best['numpy']:.2f} | | |")
    for name, _ in modes:
        wall, doc = best[name]
        p = next(x for x in doc["placement"] if x["op"] == "stats.moments")
        shares = ""
        if p.get("split"):
            total = sum(s["bytes"] for s in p["split"]) or 1
            shares = "; ".join(f"{s['backend']} {100 * s['fraction']:.0f}% → {100 * s['bytes'] / total:.0f}%, {s['seconds']:.3f} s"
                               + (f" (failed: {s['failed']})" if s["failed"] else "") for s in p["split"])
        else:
            shares = p["backend"]
        lines.append(f"| {name} | {wall:.3f} | {gb / wall:.2f} | {p['estimated_seconds']:.3f} | {shares} |")
    split_wall = best["split (--split on)"][0]
    lines += ["", f"Split ÷ CPU alone (wall): {split_wall / best['cpu alone'][0]:.2f}; split ÷ Vulkan alone: "
                  f"{split_wall / best['vulkan alone'][0]:.2f}. Wall time includes the process start and the file's mapping."]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-split.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
