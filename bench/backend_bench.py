#!/usr/bin/python3
"""A GPU backend (Vulkan, CUDA or HIP) beside the CPU, numpy, memcpy and the device's memory bandwidth.

  /usr/bin/python3 bench/backend_bench.py --build build [--backend vulkan|cuda|hip] [--device-gbps N]
  (`make bench` runs it for vulkan, cuda and hip; an unavailable backend prints why and is skipped)

(1) `tensormorph calibrate --json` times every exact kernel of every device on the same 64 MiB of f32
    (Vulkan figures include the copy to the device); (2) `tensormorph stats --raw` on a 256 MiB f32 file,
    strict on each backend, end to end (process start, mapping, all statistics), best of 3, beside numpy
    computing min, max, mean, std, a 256-bin histogram and 5 quantiles on the same file, and a memcpy of it.
On a software adapter these timings are smoke tests of the code path, never performance claims: lavapipe
runs the same CPU cores through an extra layer. --device-gbps (the vendor's memory bandwidth, e.g. 4800 for
an H200) adds each kernel's share of it. Writes bench/last-run-<backend>.md.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_timing import best_of  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--device-gbps", type=float, default=0, help="the device's memory bandwidth, GB/s (vendor figure)")
    args = ap.parse_args()
    name = args.backend
    tm = os.path.join(args.build, "tensormorph")
    env = dict(os.environ, XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="tm-vk-bench-"))
    backends = json.loads(subprocess.run([tm, "backends", "--json"], capture_output=True, text=True, env=env,
                                         check=True).stdout)["backends"]
    vk = next((b for b in backends if b["name"] == name), None)
    lines = ["# %s beside the CPU (`/usr/bin/python3 bench/backend_bench.py --build %s --backend %s`)\n" % (name, args.build, name),
             "%s UTC, %d CPUs\n" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), os.cpu_count())]
    if not vk or not vk["available"]:
        lines.append("%s unavailable: %s\n" % (name, vk["reason"] + " " + vk.get("detail", "") if vk else "plugin not built"))
        print("".join(lines))
        return 0
    lines.append("%s devices: %s\n" % (name, ", ".join("%s (%s, driver %s)" % (d["name"], d["kind"], d.get("driver_version")) for d in vk["devices"])))

    cal = json.loads(subprocess.run([tm, "calibrate", "--json", "--size-mib", "64", "--repeats", "3"],
                                    capture_output=True, text=True, env=env, check=True).stdout)["results"]
    rate = {(r["backend"], r["op"]): r["bytes_per_s"] for r in cal}
    lines.append("\n## Kernels, 64 MiB (`tensormorph calibrate`, copy to the device included), GB/s of input\n\n"
                 "| op | dtype | cpu | %s | %s / cpu | share of device memory bandwidth |\n|---|---|---|---|---|---|\n" % (name, name))
    for r in cal:
        if r["backend"] != name:
            continue
        c = rate.get(("cpu", r["op"]))
        share = "%.4f" % (r["bytes_per_s"] / 1e9 / args.device_gbps) if args.device_gbps else "(no --device-gbps)"
        lines.append("| %s | %s | %.2f | %.2f | %.3f | %s |\n" % (r["op"], r["dtype"], c / 1e9 if c else float("nan"),
                                                                   r["bytes_per_s"] / 1e9, r["bytes_per_s"] / c if c else float("nan"), share))

    n = args.mib << 18
    rng = np.random.default_rng(1)
    data = rng.standard_normal(n, dtype=np.float32)
    path = os.path.join(tempfile.mkdtemp(prefix="tm-vk-bench-"), "x.f32")
    data.tofile(path)
    results = {}
    for backend in ("cpu", name):
        cmd = [tm, "stats", "--raw", path, "--dtype", "f32", "--json", "--backend", backend]
        out = {}

        def once():
            out["doc"] = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout)
        results[backend] = (best_of(3, once)[0], out["doc"])
    m = np.memmap(path, dtype=np.float32, mode="r")

    def numpy_stats():
        x = np.asarray(m)
        finite = x[np.isfinite(x)]
        finite.min(), finite.max(), finite.mean(), finite.std()
        np.histogram(finite, bins=256)
        np.quantile(finite, [0.001, 0.01, 0.5, 0.99, 0.999])
    t_numpy = best_of(3, numpy_stats)[0]
    buf = np.empty_like(data)
    t_copy = best_of(5, lambda: np.copyto(buf, data))[0]
    same = results["cpu"][1]["stats"] == results[name][1]["stats"]
    size = n * 4
    lines.append("\n## `tensormorph stats` end to end, %d MiB f32 (moments, 256-bin histogram, 5 exact quantiles)\n\n" % args.mib)
    lines.append("| what | seconds | GB/s | vs numpy |\n|---|---|---|---|\n")
    for what, t in (("tensormorph --backend cpu", results["cpu"][0]), ("tensormorph --backend " + name, results[name][0]),
                    ("numpy (min/max/mean/std/histogram/quantile)", t_numpy), ("memcpy (numpy copyto)", t_copy)):
        lines.append("| %s | %.3f | %.2f | %.2fx |\n" % (what, t, size / t / 1e9, t_numpy / t))
    lines.append("\n%s statistics identical to the CPU's: %s. Bytes moved to the device per op: %s.\n" %
                 (name, "yes" if same else "NO", [p["bytes_transferred"] for p in results[name][1]["placement"]]))
    text = "".join(lines)
    print(text)
    with open(os.path.join(HERE, "last-run-%s.md" % name), "w") as f:
        f.write(text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
