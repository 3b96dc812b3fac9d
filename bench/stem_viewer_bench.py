#!/usr/bin/python3
"""The 4D-STEM viewer's server side, beside what a user would run instead: the time from opening an acquisition
to its first virtual image (GET /api/acquisitions/a0/products/mask on a fresh `tensormorph serve`), the time of
each further image while a detector is dragged (the same request with other radii), the CLI computing the same
image (`tensormorph stem mask`, a fresh process), numpy (h5py + hdf5plugin reading every frame, then the masked
sum), and the block the page's WebGPU path downloads once (GET …/block).

  /usr/bin/python3 bench/stem_viewer_bench.py --build build [--scan 128 --detector 96 --runs 3]

Page-side frame times (WGSL on the adapter) come from the e2e test in Chromium (tests/e2e/stem.test.mjs logs
them; SwiftShader here, a smoke figure). Prints a Markdown table; writes bench/last-run-stem-viewer.md.
"""
import argparse
import datetime
import http.client
import json
import os
import re
import subprocess
import time

from bench_timing import best_of
from stem_demo_data import demo_acquisition, private_env


def serve(tm, master, env):
    proc = subprocess.Popen([tm, "serve", "--port", "0", master], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    for line in proc.stdout:
        m = re.search(r"on http://([^:/]+):(\d+)/", line)
        if m:
            return proc, m.group(1), int(m.group(2)), time.perf_counter() - t0
    raise RuntimeError("serve printed no URL: " + proc.stderr.read())


def get(host, port, path):
    c = http.client.HTTPConnection(host, port, timeout=600)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError("%s: %d %s" % (path, r.status, body[:300]))
        return body
    finally:
        c.close()


def numpy_image(master, inner, outer, center):
    import h5py
    import hdf5plugin
    assert hdf5plugin  # importing it registers the bitshuffle filter with h5py
    import numpy as np
    frames = []
    with h5py.File(master, "r") as f:
        for key in sorted(f["entry/data"].keys()):
            frames.append(f["entry/data"][key][()])
    data = np.concatenate(frames)
    # As every Tensormorph product: sentinels (the dtype's maximum) and the pixel mask's bad pixels count 0.
    data[data == np.iinfo(data.dtype).max] = 0
    with h5py.File(master, "r") as f:
        mask_path = "entry/instrument/detector/detectorSpecific/pixel_mask"
        if mask_path in f:
            data[:, f[mask_path][()] > 0] = 0
    k = data.shape[1]
    rr, cc = np.meshgrid(np.arange(k, dtype=np.float32), np.arange(data.shape[2], dtype=np.float32), indexing="ij")
    d = np.sqrt((rr - np.float32(center[0])) ** 2 + (cc - np.float32(center[1])) ** 2)
    mask = (d >= np.float32(inner)) & (d <= np.float32(outer))
    return data[:, mask].astype(np.uint64).sum(axis=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--scan", type=int, default=128)
    ap.add_argument("--detector", type=int, default=96)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tm = os.path.abspath(os.path.join(args.build, "tensormorph"))
    tmp, env = private_env("tm-stem-viewer-bench-")
    master = demo_acquisition(tm, args.build, "stem-viewer", args.scan, args.detector, env)
    decoded = args.scan * args.scan * args.detector * args.detector * 2
    center = (args.detector / 2, args.detector / 2)
    rows = []

    proc, host, port, start_s = serve(tm, master, env)
    try:
        q = lambda inner, outer: "/api/acquisitions/a0/products/mask?inner=%g&outer=%g&center=%g,%g" % (inner, outer, center[0], center[1])
        t0 = time.perf_counter()
        first = json.loads(get(host, port, q(10, 30)))
        first_s = time.perf_counter() - t0
        assert len(first["values"]) == args.scan * args.scan, first.get("shape")
        rows.append(("server: first virtual image after `serve` listens (GET …/products/mask)", first_s, "serve listened after %.2f s" % start_s))
        drag = []
        for step in range(8):
            t0 = time.perf_counter()
            get(host, port, q(10, 30 + step))
            drag.append(time.perf_counter() - t0)
        drag.sort()
        rows.append(("server: each further image while dragging (median of 8 radii)", drag[len(drag) // 2], "max %.3f s" % drag[-1]))
        t0 = time.perf_counter()
        block = get(host, port, "/api/acquisitions/a0/block")
        rows.append(("server: the block the page uploads once (GET …/block, %.0f MB)" % (len(block) / 1e6), time.perf_counter() - t0, ""))
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    out = os.path.join(tmp, "mask.npy")
    cli_s, _ = best_of(args.runs, lambda: subprocess.run([tm, "stem", "mask", master, "--inner", "10", "--outer", "30", "--center",
                                                          "%g,%g" % center, "-o", out], check=True, env=env, capture_output=True))
    rows.append(("CLI: `tensormorph stem mask` (a fresh process, best of %d)" % args.runs, cli_s, ""))
    try:
        import numpy as np
        np_s, img = best_of(args.runs, lambda: numpy_image(master, 10, 30, center))
        same = bool((np.load(out).reshape(-1) == img).all())
        rows.append(("numpy: h5py + hdf5plugin read, masked sum (best of %d)" % args.runs, np_s, "equal to the CLI's: %s" % same))
    except ImportError as e:
        rows.append(("numpy: not measured (%s)" % e, float("nan"), ""))

    lines = ["# 4D-STEM viewer, server side (%s)\n\n" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "`/usr/bin/python3 bench/stem_viewer_bench.py --build %s --scan %d --detector %d --runs %d`; %d x %d scan of %d x %d "
             "uint16 frames (%.0f MB decoded); annulus 10–30 px.\n\n" % (args.build, args.scan, args.detector, args.runs, args.scan,
                                                                          args.scan, args.detector, args.detector, decoded / 1e6),
             "| what | seconds | decoded GB/s | note |\n|---|---:|---:|---|\n"]
    for what, s, note in rows:
        rate = decoded / s / 1e9 if s == s and s > 0 else float("nan")
        lines.append("| %s | %.3f | %.2f | %s |\n" % (what, s, rate, note))
    text = "".join(lines)
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "last-run-stem-viewer.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
