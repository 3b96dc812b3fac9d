#!/usr/bin/python3
"""One machine, 1 vs 2 MPI ranks, beside the single-process threaded run (issue: MPI; docs/scaling.md).

  /usr/bin/python3 bench/mpi_bench.py --build build [--repeats 3]      (part of `make bench`)

Data, written once under build/bench-data/mpi: a llama-shaped bf16 checkpoint (`tensormorph demo`, hidden 2048,
12 layers, vocabulary 32000: ~1.4 GB over 4 shards) and the simulated acquisition `stem demo --size large`
(192 x 192 scan of 128 x 128 uint16 frames, 1.21 GB raw, bitshuffle+LZ4). Warm page cache (every file read once
first). Measured, best of N (wall time of the whole command, process start and MPI start included):
  index: `tensormorph index` into a fresh index database, one process with 1 and 2 threads, and
         `mpirun -np 2 tensormorph index --threads 1` (two ranks of one worker each);
  stem:  `tensormorph stem haadf --no-cache` with --disk given (one pass), the same three ways;
  ssb:   `tensormorph stem ssb` with the disk and scan rotation given (one read of G, one reconstruction; across
         ranks only the read is split, rank 0 does the FFTs), the same three ways;
  start: mpirun -np 2 of `index` over a checkpoint already indexed (no work: the price of starting MPI).
"net" subtracts the start cost of the same way (the work alone). Efficiency = net rate with 2 ranks / (2 × net
rate of one process with one thread). Two ranks on this 2-vCPU VM compete
with each other and with the shared host, as two threads do; the number to read is ranks vs threads.
Writes bench/last-run-mpi.md.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_timing import best_of  # noqa: E402

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
MPI_FLAGS = ["--oversubscribe", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]


def warm(path):
    for root, _, files in os.walk(path) if os.path.isdir(path) else [(os.path.dirname(path), [], [os.path.basename(path)])]:
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


def size_of(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tm = os.path.abspath(os.path.join(args.build, "tensormorph"))
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("mpi_bench: SKIPPED: mpirun (openmpi-bin) is not installed")
        return
    env = dict(os.environ, **MPI_ENV)
    env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tm-bench-cache-")
    if not json.loads(subprocess.run([tm, "backends", "--json"], capture_output=True, text=True, env=env,
                                      check=True).stdout)["mpi"]["built"]:
        print("mpi_bench: SKIPPED: this build has no MPI")
        return
    data = os.path.join(args.build, "bench-data", "mpi")
    ckpt, acq_dir = os.path.join(data, "llama"), os.path.join(data, "acq")
    if not os.path.exists(os.path.join(ckpt, "model-00004-of-00004.safetensors")):
        subprocess.run([tm, "demo", "--out", ckpt, "--hidden", "2048", "--intermediate", "5504", "--layers", "12",
                        "--vocab", "32000", "--shards", "4"], check=True, env=env, capture_output=True)
    master = os.path.join(acq_dir, "demo_master.h5")
    if not os.path.exists(master):
        subprocess.run([tm, "stem", "demo", "--out", acq_dir, "--size", "large"], check=True, env=env,
                       capture_output=True)
    warm(ckpt), warm(acq_dir)
    ckpt_bytes = size_of(ckpt)
    work = tempfile.mkdtemp(prefix="tm-mpi-bench-")

    def ways(cmd):
        return [("1 process, 1 thread", [tm] + cmd + ["--threads", "1"]),
                ("1 process, 2 threads", [tm] + cmd + ["--threads", "2"]),
                ("2 ranks x 1 thread", [mpirun] + MPI_FLAGS + ["-np", "2", tm] + cmd + ["--threads", "1"])]

    counter = [0]

    def run_index(argv):
        counter[0] += 1
        db = os.path.join(work, "i%d.sqlite" % counter[0])
        subprocess.run(argv + ["--index", db, "--json"], check=True, env=env, capture_output=True)

    # The price of starting: an index with nothing left to compute, one process and two ranks.
    done_db = os.path.join(work, "done.sqlite")
    subprocess.run([tm, "index", ckpt, "--index", done_db, "--json"], check=True, env=env, capture_output=True)
    start = {}
    for label, argv in ways(["index", ckpt, "--index", done_db]):
        start[label], _ = best_of(args.repeats, lambda: subprocess.run(argv + ["--json"], check=True, env=env, capture_output=True))

    rows, ssb_parts = [], []
    for label, argv in ways(["index", ckpt]):
        s, _ = best_of(args.repeats, lambda: run_index(argv))
        rows.append(("index", label, s, ckpt_bytes, start[label]))
    # One pass of HAADF with the disk given (no detection pass); bytes = decoded frames.
    disk = ["--center", "64,64", "--radius", "16"]
    for label, argv in ways(["stem", "haadf", master, "-o", os.path.join(work, "h.npy"), "--no-cache", "--json"] + disk):
        s, out = best_of(args.repeats, lambda: subprocess.run(argv, check=True, env=env, capture_output=True, text=True).stdout)
        rows.append(("stem haadf", label, s, json.loads(out)["decoded_bytes"], start[label]))
    # SSB with the disk, rotation and aberrations given: one read of G (797 bright-field pixels) and one
    # reconstruction; bytes = the same decoded frames. Across ranks only the read is split (distributed_ssb.h).
    frames = rows[-1][3]
    ssb = ["stem", "ssb", master, "-o", os.path.join(work, "s.npy"), "--json", "--scan-rotation-deg", "0"] + disk
    for label, argv in ways(ssb):
        s, out = best_of(args.repeats, lambda: subprocess.run(argv, check=True, env=env, capture_output=True, text=True).stdout)
        t = json.loads(out)["timings"]
        rows.append(("stem ssb", label, s, frames, start[label]))
        ssb_parts.append((label, t["prepare_s"], t["reconstruct_s"]))
    shutil.rmtree(work, True)

    lines = ["# MPI: 1 vs 2 ranks on one machine", "",
             "`/usr/bin/python3 bench/mpi_bench.py --build %s --repeats %d`, %s, %s, %d CPUs, %s." % (
                 args.build, args.repeats, datetime.date.today().isoformat(), platform.processor() or platform.machine(),
                 os.cpu_count(), "warm page cache"), "",
             "| job | how | seconds (best of %d) | start s | GB/s | net GB/s | net vs 1 thread | net vs 2 threads |" % args.repeats,
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for job in ("index", "stem haadf", "stem ssb"):
        mine = [r for r in rows if r[0] == job]
        net = [b / max(s - st, 1e-9) / 1e9 for _, _, s, b, st in mine]
        for (_, label, s, b, st), n in zip(mine, net):
            lines.append("| %s | %s | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f |" % (job, label, s, st, b / s / 1e9, n, n / net[0],
                                                                              n / net[1]))
        lines.append("")
        lines.append("%s: 2-rank efficiency %.2f net, %.2f with the start (rate / (2 x one thread's)); 2 ranks / 2 threads "
                     "%.2f net" % (job, net[2] / (2 * net[0]), (mine[2][3] / mine[2][2]) / (2 * mine[0][3] / mine[0][2]),
                                   net[2] / net[1]))
        lines.append("")
    lines.append("stem ssb, the last run of each way: " + "; ".join(
        "%s: G read %.3f s, reconstruction %.3f s" % part for part in ssb_parts))
    lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-mpi.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
