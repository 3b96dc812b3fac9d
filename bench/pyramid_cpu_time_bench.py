#!/usr/bin/python3
"""CPU time (user + sys) of `tensormorph index --threads 1` with and without the pyramid, for two binaries run in
turns, best of --repeats. On a shared machine wall time swings with the load; CPU time of one thread does much
less, so this compares a change's pyramid cost where pyramid_index_bench.py's wall-time ratios are noise.

  /usr/bin/python3 bench/pyramid_cpu_time_bench.py --before OLD/tensormorph --after build/tensormorph \\
      [--data build/bench-data/pyramid] [--only bf16,f16,f32] [--repeats 5]

The data is pyramid_index_bench.py's (run it once to make it). Prints a Markdown table; rate ratio = CPU time
without the pyramid / CPU time with it (issue 28 and 43 ask >= 0.8).
"""
import argparse
import os
import resource
import subprocess
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--data", default="build/bench-data/pyramid")
    ap.add_argument("--only", default="bf16,f16,f32")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    bins = {"before": args.before, "after": args.after}
    dtypes = args.only.split(",")
    best = {}
    for _ in range(args.repeats):
        for dt in dtypes:
            for name, tm in bins.items():
                for pyramid in (False, True):
                    with tempfile.TemporaryDirectory() as d:
                        cmd = [tm, "index", os.path.join(args.data, dt), "--index", os.path.join(d, "i.db"), "--threads", "1",
                               "--json"] + ([] if pyramid else ["--no-pyramid"])
                        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        t0 = time.time()
                        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
                        wall = time.time() - t0
                        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                        key = (dt, name, pyramid)
                        best[key] = min(best.get(key, (1e9, 1e9)), (cpu, wall))
    print("| dtype | binary | --no-pyramid CPU s | pyramid CPU s | rate ratio (CPU) | wall ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for dt in dtypes:
        for name in bins:
            a, b = best[(dt, name, False)], best[(dt, name, True)]
            print(f"| {dt} | {name} | {a[0]:.2f} | {b[0]:.2f} | **{a[0] / b[0]:.2f}** | {a[1] / b[1]:.2f} |")


if __name__ == "__main__":
    main()
