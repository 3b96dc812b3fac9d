#!/usr/bin/python3
"""The SSB aberration fit with default settings (`tensormorph stem ssb --fit`): time for 48², 96², 128² and 256²
scans at --threads 1 and 2, how it splits between the parallax estimate, TPE and Nelder-Mead, and the
per-position time, beside quantem.gpu's published fit times (11.2 s on CUDA, 6.1 s on Metal for 512², i.e.
43 us / 23 us per position; not run here: no GPU, not packaged).

  /usr/bin/python3 bench/ssb_fit_bench.py --build build      (part of `make bench`)

Data: `tensormorph stem demo --scan N,N --detector 96 --scan-step-px 3 --dose 30000 --defocus-nm 6 --C12-nm 4
--phi12-deg 20 --scan-rotation-deg 30` (the issue's conditions: 300 kV, 20 mrad, 1.67 mrad/px, 0.37 A step),
written once per size to BUILD/bench-data/ssb-fit-N. The fit runs on the central 64 x 64 positions of larger scans
(default --fit-crop), then the whole scan is reconstructed once; both are in the table.
Writes bench/last-run-ssb-fit.md.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import cpu_model  # noqa: E402

TRUTH = {"C10": 60.0, "C12": 40.0, "phi12": 20.0}


def demo(tm, env, folder, n):
    master = os.path.join(folder, "demo_master.h5")
    if not os.path.exists(master):
        print("writing the %dx%d acquisition (once) to %s" % (n, n, folder), flush=True)
        subprocess.run([tm, "stem", "demo", "--scan", "%d,%d" % (n, n), "--detector", "96", "--scan-step-px", "3",
                        "--dose", "30000", "--defocus-nm", "6", "--C12-nm", "4", "--phi12-deg", "20",
                        "--scan-rotation-deg", "30", "--out", folder], check=True, env=env, capture_output=True)
    return master


def fit(tm, env, master, threads, out):
    t0 = time.perf_counter()
    p = subprocess.run([tm, "stem", "ssb", master, "--fit", "-o", out, "--json", "--threads", str(threads)],
                       capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit("stem ssb --fit failed: " + p.stderr.strip())
    return wall, json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="48,96,128,256")
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    tm = os.path.join(args.build, "tensormorph")
    env = dict(os.environ, XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="tm-ssbfit-bench-"),
               XDG_CACHE_HOME=tempfile.mkdtemp(prefix="tm-ssbfit-bench-cache-"))
    out = os.path.join(tempfile.mkdtemp(prefix="tm-ssbfit-out-"), "phase.npy")
    rows = []
    for n in [int(s) for s in args.sizes.split(",") if s]:
        master = demo(tm, env, os.path.join(args.build, "bench-data", "ssb-fit-%d" % n), n)
        for t in [int(s) for s in args.threads.split(",") if s]:
            wall, rep = fit(tm, env, master, t, out)
            f = rep["fit"]
            st = f["stages"]
            part = f["part"].get("positions", [n, n])
            positions = part[0] * part[1]
            ab = rep["aberrations"]
            rows.append({
                "n": n, "threads": t, "wall": wall, "total": rep["timings"]["total_s"], "prepare": rep["timings"]["prepare_s"],
                "estimate": st["estimate"]["seconds"], "tpe": st["tpe"]["seconds"], "nm": st["nelder_mead"]["seconds"],
                "fit": rep["timings"]["fit_s"], "reconstruct": rep["timings"]["reconstruct_s"], "evals": f["evaluations"],
                "search": f["search"], "part": "%dx%d" % tuple(part), "per_pos_us": rep["timings"]["fit_s"] / positions * 1e6,
                "per_pos_whole_us": rep["timings"]["total_s"] / (n * n) * 1e6,
                "ab": "%.1f / %.1f / %.1f" % (ab["C10"], ab["C12"], ab["phi12"]), "branch": f["branch"]["chosen"],
            })
            r = rows[-1]
            print("%4d^2 threads %d: total %.2f s (prepare %.2f, estimate %.2f, TPE %.2f, NM %.2f, reconstruct %.2f), %d evaluations, %s"
                  % (n, t, r["total"], r["prepare"], r["estimate"], r["tpe"], r["nm"], r["reconstruct"], r["evals"], r["ab"]),
                  flush=True)
    lines = ["# SSB fit with default settings (bench/ssb_fit_bench.py)", "",
             "%s, %s, %d cores visible. Command: `/usr/bin/python3 bench/ssb_fit_bench.py --build %s`." % (
                 datetime.date.today().isoformat(), cpu_model(), os.cpu_count(), args.build), "",
             "Truth: C10 %.0f A, C12 %.0f A, phi12 %.0f deg, scan rotation 30 deg (found from DPC mod 180, branch by skewness)."
             % (TRUTH["C10"], TRUTH["C12"], TRUTH["phi12"]), "",
             "| scan | threads | fitted on | total s | reading + G s | estimate s | TPE s | Nelder-Mead s | branch + whole s | "
             "evaluations | fit us/position (part) | total us/position (whole) | fitted C10 / C12 / phi12 | branch |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        lines.append("| %d^2 | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %d | %.0f | %.0f | %s | %s |" % (
            r["n"], r["threads"], r["part"], r["total"], r["prepare"], r["estimate"], r["tpe"], r["nm"],
            r["fit"] - r["estimate"] - r["tpe"] - r["nm"] + r["reconstruct"], r["evals"], r["per_pos_us"],
            r["per_pos_whole_us"], r["ab"], r["branch"]))
    lines += ["", "quantem.gpu (published): 512^2 fit 11.2 s on CUDA, 6.1 s on Metal = 43 / 23 us per position."]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-ssb-fit.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
