#!/usr/bin/python3
"""Level of detail: what the statistics pyramid costs and how fast tiles come back. Part of `make bench`.

  /usr/bin/python3 bench/lod_bench.py --build build [--size small|large]

1. Indexes the bench checkpoint (the one bench/index_bench.py generates in <build>/bench-data; made here
   when absent) into fresh databases, warm (page cache), 1 and 2 threads, with and without pyramids
   (`index --no-pyramid`), best of 3: the pyramid's share of indexing time; and cold (files evicted from
   the page cache first, best of 2), where reads run at storage speed.
2. The pyramid's size: its tile records and the database growth, against the tensor bytes.
3. bench/lod_tile_bench on the largest tensor: fetching one stored tile, drawing one 256 x 256 level-0
   tile from the values, drawing a whole stored level, encoding a tile PNG (p50 / p99).
4. bench/lod_build_bench: the pyramid's compute beside the indexing statistics' on resident bf16.
5. numpy computing the same tile's statistics (min, max, mean, std of a 256 x 256 block read from a
   np.memmap of the safetensors file) — what a user would script instead.
Writes bench/last-run-lod.md. Ratios are within this one run; absolute times are context only.
"""
import argparse
import datetime
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from index_bench import SIZES, evict  # noqa: E402


def log(msg):
    print(f"[lod_bench] {msg}", file=sys.stderr, flush=True)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return p.stdout


def index_seconds(tm, ckpt, db, threads, pyramids):
    if os.path.exists(db):
        os.remove(db)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    cmd = [tm, "index", ckpt, "--index", db, "--threads", str(threads), "--json"] + ([] if pyramids else ["--no-pyramid"])
    t0 = time.perf_counter()
    run(cmd)
    return time.perf_counter() - t0


def numpy_tile_ms(ckpt, repeats=200):
    """Statistics of random 256 x 256 bf16 tiles of the largest tensor, the numpy way (memmap)."""
    best = None
    for name in sorted(os.listdir(ckpt)):
        if not name.endswith(".safetensors"):
            continue
        path = os.path.join(ckpt, name)
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        for k, v in header.items():
            if k == "__metadata__" or v["dtype"] != "BF16" or len(v["shape"]) != 2:
                continue
            size = v["shape"][0] * v["shape"][1]
            if best is None or size > best[0]:
                best = (size, path, 8 + n + v["data_offsets"][0], v["shape"])
    _, path, offset, shape = best
    raw = np.memmap(path, dtype=np.uint16, mode="r", offset=offset, shape=tuple(shape))
    rng = np.random.default_rng(1)
    ms = []
    for _ in range(repeats):
        y = rng.integers(0, max(1, shape[0] // 256)) * 256
        x = rng.integers(0, max(1, shape[1] // 256)) * 256
        t0 = time.perf_counter()
        block = (raw[y:y + 256, x:x + 256].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        finite = block[np.isfinite(block)]
        _ = (finite.min(), finite.max(), finite.mean(), finite.std(), np.isnan(block).sum())
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return {"p50_ms": ms[len(ms) // 2], "p99_ms": ms[int(0.99 * len(ms))]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    tm = os.path.join(a.build, "tensormorph")
    data = os.path.abspath(os.path.join(a.build, "bench-data"))
    ckpt = os.path.join(data, f"ckpt-{a.size}")
    if not os.path.exists(os.path.join(ckpt, "model.safetensors.index.json")):
        log(f"generating the {a.size} demo checkpoint in {ckpt}")
        os.makedirs(data, exist_ok=True)
        run([tm, "demo", "--out", ckpt] + SIZES[a.size])
    files = [os.path.join(ckpt, f) for f in os.listdir(ckpt) if f.endswith(".safetensors")]
    tensor_bytes = sum(os.path.getsize(f) for f in files)
    for f in files:  # warm the page cache
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass

    db = os.path.join(data, "lod-bench.sqlite")
    rows = []
    for threads in (1, 2):
        t = {}
        for pyramids in (False, True):
            t[pyramids] = min(index_seconds(tm, ckpt, db + ("" if pyramids else ".flat"), threads, pyramids)
                              for _ in range(a.repeats))
        rows.append((threads, t[False], t[True]))
        log(f"{threads} thread(s): index {t[False]:.2f} s without pyramids, {t[True]:.2f} s with")

    cold = {}
    for pyramids in (False, True):  # cold: the files evicted from the page cache first (read at storage speed)
        times = []
        for _ in range(2):
            evict(files)
            times.append(index_seconds(tm, ckpt, db + ("" if pyramids else ".flat"), 2, pyramids))
        cold[pyramids] = min(times)
    log(f"cold, 2 threads: index {cold[False]:.2f} s without pyramids, {cold[True]:.2f} s with")

    con = sqlite3.connect(db)
    records = con.execute("SELECT count(*), sum(length(record)) FROM pyramid_tiles").fetchone()
    con.close()
    db_with = os.path.getsize(db)
    db_without = os.path.getsize(db + ".flat")

    tiles = json.loads(run([os.path.join(a.build, "bench", "lod_tile_bench"), ckpt, db, "1000"]))
    build = json.loads(run([os.path.join(a.build, "bench", "lod_build_bench")]))
    peer = numpy_tile_ms(ckpt)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    out = [f"# Level of detail ({now}, commit {rev}, {platform.node()}, {os.cpu_count()} cores)", "",
           f"Command: `/usr/bin/python3 bench/lod_bench.py --build {a.build} --size {a.size}`; checkpoint {ckpt} "
           f"({tensor_bytes / 2**20:.0f} MiB of bf16 safetensors), warm page cache, best of {a.repeats}.", "",
           "| threads | index without pyramids (s) | with pyramids (s) | pyramid overhead |", "|---|---|---|---|"]
    for threads, flat, lod in rows:
        out.append(f"| {threads} | {flat:.2f} | {lod:.2f} | {100 * (lod / flat - 1):+.1f}% |")
    out.append(f"| 2, cold (evicted) | {cold[False]:.2f} | {cold[True]:.2f} | {100 * (cold[True] / cold[False] - 1):+.1f}% |")
    out += ["", f"Compute alone on resident data (bench/lod_build_bench: 4096 x 8192 bf16, 4 MiB pieces, one thread, "
                f"best of 5): indexing statistics {build['stats_gb_per_s']:.2f} GB/s, pyramid {build['pyramid_gb_per_s']:.2f} "
                f"GB/s ({build['pyramid_over_stats']:.1f}x the statistics' time; the pyramid counts the bit patterns the "
                f"statistics then need not count); both as indexing runs them {build['stats_and_pyramid_gb_per_s']:.2f} GB/s "
                f"({build['stats_rate_over_both_rate']:.2f}x the statistics' rate).", ""]
    out += [f"Pyramid size: {records[0]} tiles, {records[1] / 2**20:.2f} MiB of tile records = "
                f"{100 * records[1] / tensor_bytes:.2f}% of the tensor bytes; the database grows by "
                f"{(db_with - db_without) / 2**20:.2f} MiB ({100 * (db_with - db_without) / tensor_bytes:.2f}%).", "",
            f"Tiles of `{tiles['tensor']}` ({tiles['elements']} elements, {tiles['level0_tiles']} level-0 tiles):", "",
            "| operation | p50 (ms) | p99 (ms) |", "|---|---|---|"]
    for k in ("fetch_stored_tile", "draw_level0_tile_from_values", "draw_whole_level0_from_index", "encode_tile_png"):
        out.append(f"| {k.replace('_', ' ')} | {tiles[k]['p50_ms']:.3f} | {tiles[k]['p99_ms']:.3f} |")
    out.append(f"| numpy: statistics of one 256 x 256 tile from a memmap | {peer['p50_ms']:.3f} | {peer['p99_ms']:.3f} |")
    text = "\n".join(out) + "\n"
    with open(os.path.join(HERE, "last-run-lod.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
