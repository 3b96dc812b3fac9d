#!/usr/bin/python3
"""The Python module beside what a Python user does today, in the same interpreter, and its call overhead.

  /usr/bin/python3 bench/python_bench.py --build build      (part of `make bench`)

(1) Statistics of one 256 MiB float32 tensor (a safetensors file in BUILD/bench-data/python-stats, page cache
    warm): `tm.open(p).stats(name, backend="cpu", threads=…)` — computed for the call, not from the index: count,
    min, max, mean, std, the 256-bucket histogram, exact quantiles — beside numpy on the same bytes
    (`np.memmap` of the file; min, max, mean and std in float64, which is less than Tensormorph computes: no
    histogram, no quantiles) and numpy's exact quantiles (`np.quantile`, a sorting partition of a copy), and
    the floor: the tensor's bytes ÷ memcpy bandwidth.
    `tm.open(p).read(name)` then numpy on it: the zero-copy view costs nothing to make.
(2) A bright-field virtual image of `tensormorph stem demo --size medium` (128 x 128 scan of 96 x 96 uint16
    frames, 302 MB decoded, bitshuffle+LZ4): `tm.stem.bf(path, threads=T)` (decode and sum, streamed) beside
    h5py + hdf5plugin reading every frame and numpy summing the same disk (`data[:, :, mask].sum(-1)`).
(3) Call overhead for a small request: `Checkpoint.stats(name)` of an indexed 4-tensor file and
    `tm.stem.inspect(path)` in the interpreter, beside the CLI doing the same (`tensormorph stats … --json`,
    `tensormorph stem inspect … --json`) as a subprocess — what a script calling the CLI pays per request.
Best of N runs each; ratios are what to read (the machine is shared). Writes bench/last-run-python.md.
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "tools"))
from bench_timing import best_of, memcpy_gbps  # noqa: E402
from run_bench import cpu_model  # noqa: E402
from safetensors_write import write_safetensors  # noqa: E402

TENSOR_ELEMENTS = 64 * 1024 * 1024  # 256 MiB of float32


def stats_section(tm, data_dir, runs, copy):
    path = os.path.join(data_dir, "stats.safetensors")
    if not os.path.exists(path):
        rng = np.random.default_rng(2026)
        write_safetensors(path, [("w", rng.standard_normal(TENSOR_ELEMENTS, dtype=np.float32).reshape(-1, 4096))])
    nbytes = TENSOR_ELEMENTS * 4
    c = tm.open(path)
    offset = c.tensors[0]["offset"]
    ours = {}
    for t in (1, 2):
        ours[t], doc = best_of(runs, lambda t=t: c.stats("w", backend="cpu", threads=t))
    s = doc["tensors"][0]["stats"]
    a = np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=(TENSOR_ELEMENTS,))

    def numpy_moments():
        return a.min(), a.max(), a.mean(dtype=np.float64), a.std(dtype=np.float64)

    t_np, (mn, mx, mean, std) = best_of(runs, numpy_moments)
    assert mn == s["min"] and mx == s["max"], (mn, mx, s["min"], s["max"])
    assert abs(mean - s["mean"]) <= 1e-9 * max(1.0, abs(mean)), (mean, s["mean"])
    t_q, _ = best_of(max(1, runs - 1), lambda: np.quantile(a, [0.01, 0.5, 0.99]))
    view_t, view = best_of(runs, lambda: c.read("w"))
    t_view_np, _ = best_of(runs, lambda: (view.min(), view.max(), view.mean(dtype=np.float64), view.std(dtype=np.float64)))
    rows = ["## (1) Statistics of one float32 tensor (%d MiB, page cache warm)\n\n" % (nbytes >> 20),
            "| what | threads | seconds | GB/s | vs numpy moments | vs numpy moments + exact quantiles | "
            "vs floor (bytes ÷ memcpy) |\n|---|---|---|---|---|---|---|\n"]
    t_np_q = t_np + t_q  # what a numpy user runs to get what stats() returns (still without the histogram)
    for t in (1, 2):
        g = nbytes / ours[t] / 1e9
        rows.append("| `tm.open(p).stats(\"w\", backend=\"cpu\")`: moments, histogram, exact quantiles | %d | %.3f | %.2f | "
                    "%.1f× | %.1f× | %.2f× |\n" % (t, ours[t], g, t_np / ours[t], t_np_q / ours[t],
                                                  ours[t] / (nbytes / (copy[t] * 1e9))))
    rows.append("| numpy on `np.memmap`: min, max, mean, std (float64) | 1 | %.3f | %.2f | 1.0× | — | %.2f× |\n" %
                (t_np, nbytes / t_np / 1e9, t_np / (nbytes / (copy[1] * 1e9))))
    rows.append("| numpy `np.quantile(a, [.01, .5, .99])` (exact) | 1 | %.3f | %.2f | — | — | — |\n" % (t_q, nbytes / t_q / 1e9))
    rows.append("| numpy moments + `np.quantile` | 1 | %.3f | %.2f | — | 1.0× | — |\n" % (t_np_q, nbytes / t_np_q / 1e9))
    rows.append("| `tm.open(p).read(\"w\")` (zero-copy view) | — | %.6f | — | — | — | — |\n" % view_t)
    rows.append("| numpy moments on that view | 1 | %.3f | %.2f | %.2f× of memmap's time | — | — |\n" %
                (t_view_np, nbytes / t_view_np / 1e9, t_view_np / t_np))
    for t in sorted(copy):
        rows.append("| memcpy (stats_bench) | %d | — | %.2f | — | — | 1.00× |\n" % (t, copy[t]))
    return rows


def virtual_image_section(tm, tm_bin, env, data_dir, runs):
    import h5py
    import hdf5plugin  # noqa: F401  (registers the bitshuffle filter)
    folder = os.path.join(data_dir, "stem-medium")
    master = os.path.join(folder, "demo_master.h5")
    if not os.path.exists(master):
        subprocess.run([tm_bin, "stem", "demo", "--size", "medium", "--out", folder], check=True, env=env,
                       capture_output=True)
    ours = {}
    for t in (1, 2):
        ours[t], (bf, report) = best_of(runs, lambda t=t: tm.stem.bf(master, threads=t))
    disk = report["disk"]
    info = tm.stem.inspect(master)
    rows_, cols_ = info["scan_shape"]
    K, L = info["detector_shape"]
    kk, ll = np.meshgrid(np.arange(K), np.arange(L), indexing="ij")
    # The pixels the BF detector sums (report["detector"] holds its annulus around the disk centre).
    det = report["detector"]
    d2 = (kk - disk["row"]) ** 2 + (ll - disk["col"]) ** 2
    outer = det["outer_px"]
    inner = det.get("inner_px", 0) or 0
    mask = (d2 <= outer * outer) & (d2 >= inner * inner)

    def h5py_numpy():
        with h5py.File(master, "r") as f:
            frames = np.concatenate([f["entry/data"][k][()] for k in sorted(f["entry/data"])])
            bad = f["entry/instrument/detector/detectorSpecific/pixel_mask"][()] > 0
        data = frames.reshape(rows_, cols_, K, L)
        use = mask & ~bad
        return data[:, :, use].sum(axis=-1, dtype=np.uint64)

    t_peer, peer = best_of(max(1, runs - 1), h5py_numpy)
    same = bool(np.array_equal(peer, bf))
    decoded = rows_ * cols_ * K * L * 2
    lines = ["\n## (2) A bright-field virtual image, %dx%d scan of %dx%d uint16 frames (%.0f MB decoded)\n\n" %
             (rows_, cols_, K, L, decoded / 1e6),
             "| what | threads | seconds | decoded GB/s | vs h5py+hdf5plugin+numpy |\n|---|---|---|---|---|\n"]
    for t in (1, 2):
        lines.append("| `tm.stem.bf(path, threads=%d)` (disk detection pass + BF pass) | %d | %.3f | %.2f | %.1f× |\n" %
                     (t, t, ours[t], decoded / ours[t] / 1e9, t_peer / ours[t]))
    lines.append("| h5py + hdf5plugin read all, numpy `data[:, :, mask].sum(-1)` | 1 | %.3f | %.2f | 1.0× |\n" %
                 (t_peer, decoded / t_peer / 1e9))
    lines.append("\nThe same uint64 image from both: %s (the same %d detector pixels, bad pixels excluded).\n" %
                 ("yes" if same else "NO", int((mask).sum())))
    return lines


def overhead_section(tm, tm_bin, env, data_dir, runs):
    path = os.path.join(data_dir, "small.safetensors")
    if not os.path.exists(path):
        rng = np.random.default_rng(3)
        write_safetensors(path, [("t%d" % i, rng.standard_normal((64, 64)).astype(np.float32)) for i in range(4)])
    master = os.path.join(data_dir, "stem-medium", "demo_master.h5")
    c = tm.open(path)
    c.index()
    subprocess.run([tm_bin, "index", path, "--json"], check=True, env=env, capture_output=True)
    n = max(20, runs * 10)

    def per_call(f):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t0) / n

    py_stats = min(per_call(lambda: c.stats("t1")) for _ in range(runs))
    py_open_stats = min(per_call(lambda: tm.open(path).stats("t1")) for _ in range(runs))
    cli = lambda *a: subprocess.run([tm_bin, *a, "--json"], check=True, env=env, capture_output=True)  # noqa: E731
    cli_stats = min(per_call(lambda: cli("stats", path, "t1")) for _ in range(runs))
    py_inspect = min(per_call(lambda: tm.stem.inspect(master)) for _ in range(runs))
    cli_inspect = min(per_call(lambda: cli("stem", "inspect", master)) for _ in range(runs))
    return ["\n## (3) Call overhead for a small request (mean of %d calls, best of %d)\n\n" % (n, runs),
            "| request | Python ms | CLI subprocess ms | CLI ÷ Python |\n|---|---|---|---|\n",
            "| stats of one indexed 64x64 tensor, checkpoint open | %.2f | — | — |\n" % (py_stats * 1e3),
            "| the same with `tm.open(path)` in the call | %.2f | %.2f | %.0f× |\n" %
            (py_open_stats * 1e3, cli_stats * 1e3, cli_stats / py_open_stats),
            "| `stem inspect` of the medium acquisition | %.2f | %.2f | %.0f× |\n" %
            (py_inspect * 1e3, cli_inspect * 1e3, cli_inspect / py_inspect)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(build, "python"))
    import tensormorph as tm
    tm_bin = os.path.join(build, "tensormorph")
    home = tempfile.mkdtemp(prefix="tm-python-bench-")
    env = dict(os.environ, XDG_CONFIG_HOME=home, XDG_CACHE_HOME=home)
    os.environ.update(XDG_CONFIG_HOME=home, XDG_CACHE_HOME=home)  # the module reads the same settings and cache
    data_dir = os.path.join(build, "bench-data", "python")
    os.makedirs(data_dir, exist_ok=True)
    copy = memcpy_gbps(build, env)
    lines = ["# The Python module (`/usr/bin/python3 bench/python_bench.py --build %s`)\n\n" % args.build,
             "%s UTC, %d CPUs (%s), best of %d runs\n\n" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
                                                          os.cpu_count(), cpu_model(), args.runs)]
    lines += stats_section(tm, data_dir, args.runs, copy)
    lines += virtual_image_section(tm, tm_bin, env, data_dir, args.runs)
    lines += overhead_section(tm, tm_bin, env, data_dir, args.runs)
    text = "".join(lines)
    print(text)
    with open(os.path.join(HERE, "last-run-python.md"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
