#!/usr/bin/python3
"""EMPAD float32 frames (issue 48): tensormorph's virtual image and mean pattern of an EMPAD acquisition (.xml + .raw)
beside numpy on a memory map of the same .raw (what a user does without tensormorph), and the read floor.

  /usr/bin/python3 bench/stem_empad_bench.py --build build [--scan 128] [--runs 3]

Data (written once into build/bench-data/stem-empad/ by tests/fixtures/empad_writer.py, reused when present):
SCAN x SCAN records of 130 x 128 float32 (the issue's 128² scan = 1.09 GB). The page cache is warmed by one read,
then best of --runs each:
  (1) `tensormorph stem mask XML --center 64,64 --inner 0 --outer 1000` (every pixel of every frame: the full-frame
      virtual image, float64 sequential sums per frame) and `tensormorph stem mean-dp XML` (per-pixel float64 sums in
      frame order), --threads 1 and 2, wall time of the process and the report's pass_seconds (the frames' pass
      alone; the process also opens the file, and `stem mask` runs a mean-pattern pass for the disk it reports);
  (2) numpy, one thread, on np.memmap(raw, '<f4').reshape(S, S, 130, 128)[..., :128, :], in chunks of 8 scan rows:
      the image as chunk.sum(axis=(2, 3), dtype=float64) (numpy's pairwise order: not the same bits) and the
      contract's order np.cumsum(chunk.reshape(n, -1), axis=1, dtype=float64)[:, -1] (the same bits); the mean
      pattern as a float64 running sum of the chunks;
  (3) BF with the writer's disk given (--center 63.5,64.5 --radius 14: no detection pass), `tensormorph stem bf`
      at --threads 1 and 2, beside numpy on the same map: chunk[..., disk].sum(-1, dtype=float64) (pairwise) and
      np.cumsum(chunk[..., disk], dtype=float64)[..., -1] (the contract's order: checked equal to tensormorph's image,
      bit for bit);
  (4) the floor: reading the .raw from the page cache in 64 MiB chunks; and the memory: peak RSS
      (/usr/bin/time -v) of `stem mask` and `stem bf` at 2 threads (frames streamed, not loaded).
GB/s = 1e9 frame bytes (128 x 128 x 4 per frame; the metadata rows excluded) per second.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
from bench_timing import best_of  # noqa: E402
import empad_writer  # noqa: E402

CHUNK_ROWS = 8


def write_data(d, scan):
    os.makedirs(d, exist_ok=True)
    xml = os.path.join(d, "scan%d.xml" % scan)
    if os.path.exists(xml):
        return xml
    rng = np.random.default_rng(48)
    raw = os.path.join(d, "scan%d.raw" % scan)
    with open(raw + ".part", "wb") as f:
        for _ in range(scan):
            f.write(empad_writer.raw_bytes(empad_writer.frames(rng, scan)))
    os.replace(raw + ".part", raw)
    with open(xml, "w") as f:
        f.write(empad_writer.xml_text(os.path.basename(raw), scan=(scan, scan)))
    return xml


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--scan", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    tm = os.path.join(a.build, "tensormorph")
    xml = write_data(os.path.join(a.build, "bench-data", "stem-empad"), a.scan)
    raw = xml[:-4] + ".raw"
    s = a.scan
    frame_bytes = s * s * 128 * 128 * 4
    out = os.path.join(a.build, "bench-data", "stem-empad", "out.npy")

    def floor():
        buf = bytearray(64 << 20)
        with open(raw, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    floor()
    rows = []
    t, _ = best_of(a.runs, floor)
    rows.append(("read floor (64 MiB readinto)", 1, t))
    for threads in (1, 2):
        for name, args in (("mask (full frame)", ["mask", "--center", "64,64", "--inner", "0", "--outer", "1000"]),
                           ("mean-dp", ["mean-dp"])):
            cmd = [tm, "stem"] + args[:1] + [xml, "-o", out, "--no-cache", "--json", "--threads", str(threads)] + args[1:]
            passes = []

            def once():
                passes.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["pass_seconds"])
            t, _ = best_of(a.runs, once)
            rows.append(("tensormorph stem " + name + " (process)", threads, t))
            rows.append(("tensormorph stem " + name + " (its pass: report's pass_seconds)", threads, min(passes)))
    # BF with the disk given (the disk tests/fixtures/empad_writer.frames draws: centre (63.5, 64.5), radius 14).
    centre, radius = (63.5, 64.5), 14.0
    bf_args = ["--center", "%g,%g" % centre, "--radius", "%g" % radius]
    bf_out = os.path.join(a.build, "bench-data", "stem-empad", "bf.npy")
    for threads in (1, 2):
        cmd = [tm, "stem", "bf", xml, "-o", bf_out, "--no-cache", "--json", "--threads", str(threads)] + bf_args
        passes = []

        def once_bf():
            passes.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["pass_seconds"])
        t, _ = best_of(a.runs, once_bf)
        rows.append(("tensormorph stem bf, disk given (process)", threads, t))
        rows.append(("tensormorph stem bf, disk given (its pass)", threads, min(passes)))
    rss = {}
    for name, args in (("mask", ["mask", "--center", "64,64", "--inner", "0", "--outer", "1000"]), ("bf", ["bf"] + bf_args)):
        p = subprocess.run(["/usr/bin/time", "-v", tm, "stem", args[0], xml, "-o", out, "--no-cache", "--threads", "2"] + args[1:],
                           capture_output=True, text=True)
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
        rss[name] = int(found.group(1)) / 1024 if p.returncode == 0 and found else float("nan")
    m = np.memmap(raw, dtype="<f4", mode="r").reshape(s, s, 130, 128)
    # The same pixels as the server's annulus_pixels: float32 distances from the centre, d <= radius.
    k, l = np.meshgrid(np.arange(128, dtype=np.float32), np.arange(128, dtype=np.float32), indexing="ij")
    disk = np.sqrt((k - np.float32(centre[0])) ** 2 + (l - np.float32(centre[1])) ** 2) <= np.float32(radius)

    def np_bf(exact):
        img = np.empty((s, s))
        for r in range(0, s, CHUNK_ROWS):
            c = np.asarray(m[r:r + CHUNK_ROWS, :, :128, :])[..., disk]
            img[r:r + CHUNK_ROWS] = np.cumsum(c, axis=-1, dtype=np.float64)[..., -1] if exact else c.sum(-1, dtype=np.float64)
        return img

    def np_image(exact):
        img = np.empty((s, s))
        for r in range(0, s, CHUNK_ROWS):
            c = np.asarray(m[r:r + CHUNK_ROWS, :, :128, :])
            if exact:
                img[r:r + CHUNK_ROWS] = np.cumsum(c.reshape(-1, 128 * 128), axis=1, dtype=np.float64)[:, -1].reshape(-1, s)
            else:
                img[r:r + CHUNK_ROWS] = c.sum(axis=(2, 3), dtype=np.float64)
        return img

    def np_mean():
        acc = np.zeros((128, 128))
        for r in range(0, s, CHUNK_ROWS):
            acc += np.asarray(m[r:r + CHUNK_ROWS, :, :128, :]).sum(axis=(0, 1), dtype=np.float64)
        return acc / (s * s)
    t, _ = best_of(a.runs, lambda: np_image(False))
    rows.append(("numpy memmap image, sum(dtype=f8) (pairwise)", 1, t))
    t, _ = best_of(a.runs, lambda: np_image(True))
    rows.append(("numpy memmap image, cumsum (the contract's order)", 1, t))
    t, _ = best_of(a.runs, np_mean)
    rows.append(("numpy memmap mean pattern, sum(dtype=f8)", 1, t))
    t, _ = best_of(a.runs, lambda: np_bf(False))
    rows.append(("numpy memmap BF, chunk[..., disk].sum(dtype=f8) (pairwise)", 1, t))
    t, exact_bf = best_of(a.runs, lambda: np_bf(True))
    rows.append(("numpy memmap BF, cumsum (the contract's order)", 1, t))
    bf_equal = np.load(bf_out).tobytes() == exact_bf.tobytes()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
    print("EMPAD %d x %d scan of 128 x 128 float32 (%.2f GB of frames), %s, %d cores, %s, best of %d" %
          (s, s, frame_bytes / 1e9, cpu, os.cpu_count(), datetime.date.today().isoformat(), a.runs))
    print("| what | threads | seconds | GB/s |")
    print("|---|---|---|---|")
    for name, threads, t in rows:
        print("| %s | %d | %.3f | %.2f |" % (name, threads, t, frame_bytes / t / 1e9))
    print()
    print("BF disk: centre (%g, %g), radius %g: %d pixels; tensormorph's bf image equals numpy's cumsum bit for bit: %s" %
          (centre[0], centre[1], radius, int(disk.sum()), "yes" if bf_equal else "NO"))
    print("Peak RSS (/usr/bin/time -v, --threads 2): stem mask %.0f MB, stem bf %.0f MB, for %.2f GB of frames" %
          (rss["mask"], rss["bf"], frame_bytes / 1e9))


if __name__ == "__main__":
    main()
