#!/usr/bin/python3
"""The viewer's server: what one heatmap tile costs on each colour path, and indexing as a job. Part of
`make bench`.

  /usr/bin/python3 bench/viewer_bench.py --build build

1. Tiles: `tensormorph serve` on a one-layer demo checkpoint (indexed first); every level-0 tile of
   model.embed_tokens.weight ([8000, 512] bf16: 32 x 2 tiles of 256 x 256 elements), fetched over HTTP
   (keep-alive) three times each:
   - GET /api/render/…png: the server reads the values, colours them (display.colorize on the CPU) and
     encodes a PNG — the path of a page without WebGPU;
   - GET /api/cells/…: the server reads the values and sends them as float64 — the page then colours them
     in WGSL (that part is measured in the browser: tests/e2e/heatmap.test.mjs);
   - the peer: numpy + matplotlib doing the same tile by hand (np.memmap of the shard, bf16 -> float32,
     colour map, PNG into memory), what a user would script instead.
   Median and p95 per tile, bytes per tile.
2. Indexing as a job: `serve` on a fresh index of the 8-layer demo (221 MB) — the job's own seconds and
   its event stream — beside `tensormorph index` on a fresh index of the same files.
Writes bench/last-run-viewer.md. Ratios are within this one run; absolute times are context only.
"""
import argparse
import datetime
import http.client
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

import numpy as np

TENSOR = "model.embed_tokens.weight"


def log(msg):
    print(f"[viewer_bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return p.stdout


class Server:
    def __init__(self, tm, paths, env):
        self.proc = subprocess.Popen([tm, "serve", "--port", "0"] + paths, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.started = time.perf_counter()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("serve exited early")
            m = re.search(r"on (http://\S+)", line)
            if m:
                u = urllib.parse.urlsplit(m.group(1))
                self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
                return

    def get(self, path):
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit(f"GET {path}: {r.status} {body[:200]!r}")
        return body

    def stop(self):
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=60)


def stats_ms(samples):
    s = sorted(samples)
    return statistics.median(s) * 1e3, s[min(len(s) - 1, int(0.95 * len(s)))] * 1e3


def peer_tile(shard, offset, cols, r0, c0, limits):
    """One 256 x 256 tile the numpy + matplotlib way: memmap, bf16 -> float32, colour map, PNG in memory."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    raw = np.memmap(shard, dtype=np.uint16, mode="r", offset=offset)
    block = np.asarray(raw.reshape(-1, cols)[r0:r0 + 256, c0:c0 + 256]).astype(np.uint32) << 16
    values = block.view(np.float32)
    buf = io.BytesIO()
    plt.imsave(buf, values, cmap="RdBu_r", vmin=limits[0], vmax=limits[1], format="png")
    return len(buf.getvalue())


def tiles(tm, tmp, env):
    demo = os.path.join(tmp, "demo1")
    run([tm, "demo", "--out", demo, "--layers", "1"], env)
    run([tm, "index", demo], env)
    s = Server(tm, [demo], env)
    try:
        q = urllib.parse.quote(TENSOR, safe="")
        detail = json.loads(s.get(f"/api/tensors/0/{q}"))
        grid_cols, grid_rows = detail["pyramid"]["levels"][0]["grid"]
        cols = detail["shape"][1]
        limits = (-0.05, 0.05)
        png, cells, peer = [], [], []
        png_bytes = cell_bytes = peer_bytes = 0
        for _ in range(3):
            for y in range(grid_rows):
                for x in range(grid_cols):
                    base = f"?level=0&x={x}&y={y}&stat=mean"
                    t0 = time.perf_counter()
                    png_bytes = max(png_bytes, len(s.get(f"/api/render/0/{q}.png{base}&colormap=RdBu_r&limits={limits[0]},{limits[1]}")))
                    t1 = time.perf_counter()
                    cell_bytes = max(cell_bytes, len(s.get(f"/api/cells/0/{q}{base}")))
                    t2 = time.perf_counter()
                    peer_bytes = max(peer_bytes, peer_tile(os.path.join(demo, detail["file"]), detail["offset"], cols, 256 * y, 256 * x, limits))
                    t3 = time.perf_counter()
                    png.append(t1 - t0), cells.append(t2 - t1), peer.append(t3 - t2)
        return {"tiles": grid_rows * grid_cols, "png": stats_ms(png), "cells": stats_ms(cells), "peer": stats_ms(peer),
                "png_bytes": png_bytes, "cell_bytes": cell_bytes, "peer_bytes": peer_bytes}
    finally:
        s.stop()


def indexing(tm, tmp, env):
    demo = os.path.join(tmp, "demo8")
    run([tm, "demo", "--out", demo, "--layers", "8", "--hidden", "1024", "--intermediate", "2816"], env)
    out = {}
    # The CLI on a fresh index (warm page cache: the files were just written and read once here).
    run([tm, "stats", demo, "model.norm.weight", "--json"], dict(env, XDG_CACHE_HOME=os.path.join(tmp, "c0")))
    cli = []
    for k in range(2):
        e = dict(env, XDG_CACHE_HOME=os.path.join(tmp, f"cli{k}"))
        t0 = time.perf_counter()
        run([tm, "index", demo], e)
        cli.append(time.perf_counter() - t0)
    out["cli_s"] = min(cli)
    job, events = [], []
    for k in range(2):
        e = dict(env, XDG_CACHE_HOME=os.path.join(tmp, f"job{k}"))
        s = Server(tm, [demo], e)
        try:
            s.conn.request("GET", "/api/jobs/0/events")
            r = s.conn.getresponse()
            n, last = 0, None
            for raw in r:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    n, last = n + 1, json.loads(line[6:])
                if last is not None and last["state"] != "running" and line == "":
                    break
            job.append(last["seconds"])
            events.append(n)
            out["bytes"] = last["bytes_total"]
        finally:
            s.stop()
    out["job_s"], out["events"] = min(job), max(events)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    tm = os.path.abspath(os.path.join(a.build, "tensormorph"))
    tmp = tempfile.mkdtemp(prefix="tm-viewer-bench-")
    env = dict(os.environ)
    for var in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        env[var] = os.path.join(tmp, var.lower())
        os.makedirs(env[var])
    env.pop("TENSORMORPH_PLUGIN_DIR", None)
    try:
        log("tiles")
        t = tiles(tm, tmp, env)
        log("indexing")
        i = indexing(tm, tmp, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"## Viewer server (`/usr/bin/python3 bench/viewer_bench.py --build {a.build}`, {when}, commit {commit})",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}.",
        "",
        f"One level-0 heatmap tile of {TENSOR} (256 x 256 bf16 elements, one cell each), {t['tiles']} tiles x 3, over HTTP keep-alive:",
        "",
        "| path | median ms / tile | p95 ms | bytes (largest tile) | vs numpy + matplotlib |",
        "|---|---:|---:|---:|---:|",
        f"| GET /api/render …png (server colours, PNG) | {t['png'][0]:.2f} | {t['png'][1]:.2f} | {t['png_bytes']} | {t['peer'][0] / t['png'][0]:.1f}x |",
        f"| GET /api/cells (float64 values; the page colours in WGSL) | {t['cells'][0]:.2f} | {t['cells'][1]:.2f} | {t['cell_bytes']} | {t['peer'][0] / t['cells'][0]:.1f}x |",
        f"| numpy memmap + matplotlib imsave (peer, in process) | {t['peer'][0]:.2f} | {t['peer'][1]:.2f} | {t['peer_bytes']} | 1.0x |",
        "",
        f"Indexing as a job: {i['bytes'] / 1e6:.0f} MB, fresh index, best of 2: `serve`'s job {i['job_s']:.2f} s "
        f"({i['events']} events on its stream) vs `tensormorph index` {i['cli_s']:.2f} s (process wall, includes start-up): "
        f"job / CLI = {i['job_s'] / i['cli_s']:.2f}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-viewer.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
