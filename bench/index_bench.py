#!/usr/bin/python3
"""Indexing a sharded bf16 checkpoint beside the raw read rate, a numpy memmap script, and GGUF header
parsing beside a gguf-py-style Python parser. Part of `make bench`.

  /usr/bin/python3 bench/index_bench.py --build build [--size large|small]

1. Generates the checkpoint with `tensormorph demo` (once; kept in <build>/bench-data). `large`: a
   llama-shaped bf16 model of >= 4 GB in two shards; `small`: ~0.5 GB for a quick look.
2. Raw read rate of the same files: `cat` to /dev/null, warm (page cache) and cold (the files are
   evicted from the page cache with POSIX_FADV_DONTNEED first; no root needed).
3. `tensormorph index` into a fresh database, warm and cold, 1 and all threads.
4. bench/peer_numpy_memmap.py on the first --numpy-bytes of tensor data (warm), and a cross-check of its
   results against the index.
5. A GGUF with 10,000 tensors (bench/make_gguf_10k.py): bench/peer_gguf_header.py vs `tensormorph info`
   opening it for the first time (parse + build the index) and reopening it (index only).

Ratios are computed within this one run; the machine is shared, so absolute times are context only.
Writes bench/last-run-index.md.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
SIZES = {  # demo options
    "large": ["--hidden", "4096", "--intermediate", "11008", "--layers", "10", "--heads", "32", "--kv-heads", "32",
              "--vocab", "32000", "--shards", "2"],
    "small": ["--hidden", "2048", "--intermediate", "5632", "--layers", "6", "--heads", "16", "--kv-heads", "4",
              "--vocab", "16000", "--shards", "2"],
}


def log(msg):
    print(f"[index_bench] {msg}", file=sys.stderr, flush=True)


def timed(cmd, env=None, stdout=subprocess.DEVNULL):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return dt, p


def evict(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def shard_files(ckpt):
    return sorted(os.path.join(ckpt, f) for f in os.listdir(ckpt) if f.endswith(".safetensors"))


def cat_seconds(files, cold):
    if cold:
        evict(files)
    return timed(["sh", "-c", "cat \"$@\" > /dev/null", "cat"] + files)[0]


def dd_parallel_seconds(files, cold):
    """Every file read at once by its own dd with 4 MiB blocks: the machine's raw read rate for a reader
    that, like the indexer, reads the shards in parallel with large requests."""
    if cold:
        evict(files)
    script = " ".join(f"dd if='{f}' of=/dev/null bs=4M status=none &" for f in files) + " wait"
    return timed(["sh", "-c", script])[0]


def index_run(tm, ckpt, db, threads, cold, files):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    if cold:
        evict(files)
    args = [tm, "index", ckpt, "--index", db, "--json"] + (["--threads", str(threads)] if threads else [])
    wall, p = timed(args, stdout=subprocess.PIPE)
    doc = json.loads(p.stdout)
    return wall, doc


def best(fn, n):
    return min(fn() for _ in range(n))


def cross_check(db, peer_results):
    con = sqlite3.connect(db)
    rows = {name: (cnt, nan, inf, zero, mn, mx, mean, std, qs) for name, cnt, nan, inf, zero, mn, mx, mean, std, qs in con.execute(
        "SELECT t.name, s.count, s.nan_count, s.inf_count, s.zero_count, s.min, s.max, s.mean, s.std, s.quantiles "
        "FROM tensors t JOIN stats s ON s.tensor_id = t.id")}
    hist = {name: counts for name, counts in con.execute(
        "SELECT t.name, h.counts FROM tensors t JOIN histograms h ON h.tensor_id = t.id")}
    worst_mean = worst_std = 0.0
    exact_mismatch, hist_moved, hist_total, q_mismatch = [], 0, 0, 0
    import numpy as np
    for name, r in peer_results.items():
        cnt, nan, inf, zero, mn, mx, mean, std, qs = rows[name]
        if (cnt, nan, inf, zero) != (r["count"], r["nan_count"], r["inf_count"], r["zero_count"]) or mn != r["min"] or mx != r["max"]:
            exact_mismatch.append(name)
        worst_mean = max(worst_mean, abs(mean - r["mean"]) / max(abs(r["mean"]), 1e-300))
        worst_std = max(worst_std, abs(std - r["std"]) / max(abs(r["std"]), 1e-300))
        ours = np.frombuffer(hist[name], dtype=np.uint64).astype(np.int64)
        hist_moved += int(np.abs(ours - np.array(r["histogram"], dtype=np.int64)).sum()) // 2
        hist_total += int(ours.sum())
        q_mismatch += sum(1 for a, b in zip([q["value"] for q in json.loads(qs)], r["quantiles"]) if a != b)
    return {"tensors": len(peer_results), "exact_mismatch": exact_mismatch, "mean_rel": worst_mean, "std_rel": worst_std,
            "hist_moved": hist_moved, "hist_total": hist_total, "quantile_mismatch": q_mismatch}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--size", choices=sorted(SIZES), default=os.environ.get("TM_BENCH_INDEX_SIZE", "large"))
    ap.add_argument("--repeats", type=int, default=2, help="runs per warm case; best kept")
    ap.add_argument("--numpy-bytes", type=int, default=1 << 30, help="tensor bytes the numpy peer processes")
    ap.add_argument("--out", default=os.path.join(HERE, "last-run-index.md"))
    a = ap.parse_args()
    tm = os.path.abspath(os.path.join(a.build, "tensormorph"))
    data = os.path.abspath(os.path.join(a.build, "bench-data"))
    os.makedirs(data, exist_ok=True)
    ckpt = os.path.join(data, f"ckpt-{a.size}")
    if not os.path.exists(os.path.join(ckpt, "model.safetensors.index.json")):
        log(f"generating the {a.size} demo checkpoint in {ckpt}")
        shutil.rmtree(ckpt, ignore_errors=True)
        timed([tm, "demo", "--out", ckpt] + SIZES[a.size])
    files = shard_files(ckpt)
    total = sum(os.path.getsize(f) for f in files)
    log(f"checkpoint: {len(files)} shards, {total / 1e9:.2f} GB")
    db = os.path.join(data, "index-bench.sqlite")
    rows = []

    # Warm: page cache primed by a first read.
    cat_seconds(files, cold=False)
    cat_warm = best(lambda: cat_seconds(files, cold=False), a.repeats)
    rows.append(("cat > /dev/null (warm)", total, cat_warm, None))
    dd_warm = best(lambda: dd_parallel_seconds(files, cold=False), a.repeats)
    rows.append((f"dd bs=4M, {len(files)} files in parallel (warm)", total, dd_warm, None))
    raw_warm = min(cat_warm, dd_warm)
    idx = {}
    for threads in (1, 0):
        runs = [index_run(tm, ckpt, db, threads, False, files) for _ in range(a.repeats)]
        wall, doc = min(runs, key=lambda r: r[0])
        idx[("warm", threads)] = (wall, doc)
        rows.append((f"tensormorph index, {doc['workers']} worker(s) (warm)", doc["bytes"], wall, raw_warm))
    # Cold: evicted from the page cache before each run.
    cat_cold = cat_seconds(files, cold=True)
    rows.append(("cat > /dev/null (cold)", total, cat_cold, None))
    dd_cold = dd_parallel_seconds(files, cold=True)
    rows.append((f"dd bs=4M, {len(files)} files in parallel (cold)", total, dd_cold, None))
    wall, doc = index_run(tm, ckpt, db, 0, True, files)
    idx[("cold", 0)] = (wall, doc)
    rows.append((f"tensormorph index, {doc['workers']} worker(s) (cold)", doc["bytes"], wall, min(cat_cold, dd_cold)))

    # numpy through memmap, warm, on the first --numpy-bytes.
    peer_out = os.path.join(data, "peer-numpy-memmap.json")
    cat_seconds(files, cold=False)
    _, p = timed([PY, os.path.join(HERE, "peer_numpy_memmap.py"), ckpt, "--max-bytes", str(a.numpy_bytes), "--out", peer_out],
                 stdout=subprocess.PIPE)
    peer = json.loads(p.stdout)
    with open(peer_out) as f:
        check = cross_check(db, json.load(f))

    # GGUF with 10,000 tensors: header parse and reopen.
    gguf = os.path.join(data, "many-10k.gguf")
    if not os.path.exists(gguf):
        timed([PY, os.path.join(HERE, "make_gguf_10k.py"), "--out", gguf, "--tensors", "10000"])
    _, p = timed([PY, os.path.join(HERE, "peer_gguf_header.py"), gguf, "--repeat", "5"], stdout=subprocess.PIPE)
    peer_gguf = json.loads(p.stdout)
    gdb = os.path.join(data, "many-10k.sqlite")

    def first_open():
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(gdb + suffix):
                os.remove(gdb + suffix)
        return timed([tm, "info", gguf, "--json", "--index", gdb])[0]

    def python_start():
        return timed([PY, "-c", "import numpy"])[0]

    first_tensor = json.loads(subprocess.run([tm, "ls", gguf, "--json", "--index", os.path.join(data, "scratch.sqlite")], capture_output=True,
                                             text=True).stdout)["tensors"][0]["name"]
    npy = os.path.join(data, "one.npy")
    gguf_parse = best(lambda: timed([tm, "export", gguf, first_tensor, "-o", npy])[0], 5)
    gguf_first = best(first_open, 5)
    gguf_reopen = best(lambda: timed([tm, "info", gguf, "--json", "--index", gdb])[0], 5)
    ls_reopen = best(lambda: timed([tm, "ls", gguf, "--index", gdb])[0], 5)

    # Report.
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"## Indexing (`make bench`, {now}, commit {commit}, {platform.node()}, {os.cpu_count()} vCPU)", "",
             f"Checkpoint: `tensormorph demo {' '.join(SIZES[a.size])}`: {len(files)} shards, {total / 1e9:.2f} GB bf16, "
             f"{idx[('warm', 0)][1]['tensors']} tensors.", "",
             "| what | bytes | seconds | GB/s | vs the faster raw read (same cache state) |", "| --- | ---: | ---: | ---: | ---: |"]
    for what, nbytes, secs, ref in rows:
        ratio = f"{ref / secs * 100:.0f}%" if ref else ""
        lines.append(f"| {what} | {nbytes} | {secs:.3f} | {nbytes / secs / 1e9:.2f} | {ratio} |")
    np_rate = peer["bytes_per_second"]
    best_idx = max(v[1]["bytes"] / v[0] for k, v in idx.items() if k[0] == "warm")
    lines += ["", f"numpy through `np.memmap` (bench/peer_numpy_memmap.py, warm, first {peer['tensors']} tensors, "
              f"{peer['bytes'] / 1e9:.2f} GB): {np_rate / 1e9:.3f} GB/s; tensormorph index (warm, best): "
              f"{best_idx / 1e9:.2f} GB/s = **{best_idx / np_rate:.1f}× numpy**.", "",
              f"Cross-check of those {check['tensors']} tensors, index vs numpy: counts/min/max identical for all but "
              f"{len(check['exact_mismatch'])}; mean rel. diff ≤ {check['mean_rel']:.1e}, std ≤ {check['std_rel']:.1e}; "
              f"quantiles differing: {check['quantile_mismatch']}; histogram: {check['hist_moved']} of {check['hist_total']} "
              f"values in another bin.", "",
              "GGUF with 10,000 tensors (bench/make_gguf_10k.py), process wall time, best of 5:", "",
              "| what | seconds | vs Python parser |", "| --- | ---: | ---: |",
              f"| Python gguf-py-style parser (bench/peer_gguf_header.py, in-process parse only) | {peer_gguf['seconds_best']:.4f} | 1× |",
              f"| `tensormorph export` of one tensor (parse + validate, no index) | {gguf_parse:.4f} | "
              f"{peer_gguf['seconds_best'] / gguf_parse:.1f}× |",
              f"| `tensormorph info` first open (parse + validate + build the index) | {gguf_first:.4f} | "
              f"{peer_gguf['seconds_best'] / gguf_first:.1f}× |",
              f"| `tensormorph info` reopen (identity check + index) | {gguf_reopen:.4f} | {peer_gguf['seconds_best'] / gguf_reopen:.1f}× |",
              f"| `tensormorph ls` reopen, 10,000 rows printed | {ls_reopen:.4f} | {peer_gguf['seconds_best'] / ls_reopen:.1f}× |", "",
              f"Python interpreter start with numpy, for context (not counted above): {best(python_start, 3):.3f} s.", ""]
    text = "\n".join(lines)
    with open(a.out, "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
