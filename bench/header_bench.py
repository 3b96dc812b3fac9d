#!/usr/bin/python3
"""Opening safetensors headers of many tensors: `tensormorph ls` (parse, validate, build the index; then
reopen from the index) beside Python's json.loads of the same header (what a script would do, and the
lower bound of any Python reader). Part of `make bench`.

  /usr/bin/python3 bench/header_bench.py --build build [--counts 10000,30000,100000]

Each file holds N zero-size F32 tensors (a valid header, no data), as a large MoE checkpoint's header
does at scale. The JSON parser this replaced was quadratic in N (issue 29: 10k 3.4 s, 30k 21 s, 100k did
not open in 60 s). Ratios are within this one run; the machine is shared, so absolute times are context.
Writes bench/last-run-header.md.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import struct
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def write_header_file(path, n):
    header = {f"model.layers.{i // 256}.experts.{i % 256}.w": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
              for i in range(n)}
    text = json.dumps(header, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
    return len(text)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--counts", default="10000,30000,100000")
    a = ap.parse_args()
    tm = os.path.join(a.build, "tensormorph")
    rows = []
    d = tempfile.mkdtemp(prefix="tm-header-bench-")
    try:
        for n in [int(c) for c in a.counts.split(",")]:
            path = os.path.join(d, f"h{n}.safetensors")
            size = write_header_file(path, n)
            db = os.path.join(d, f"h{n}.db")

            def ls():
                subprocess.run([tm, "ls", path, "--index", db], check=True, stdout=subprocess.DEVNULL)

            def py():
                with open(path, "rb") as f:
                    raw = f.read()
                (length,) = struct.unpack("<Q", raw[:8])
                assert len(json.loads(raw[8:8 + length])) == n

            first = timed(ls)
            again = timed(ls)
            peer = min(timed(py) for _ in range(3))
            rows.append((n, size, first, again, peer))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    lines = [f"# safetensors headers of many tensors ({datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, "
             f"{platform.node()}, {os.cpu_count()} CPUs)", "",
             "| tensors | header MB | `ls` first open s (parse + index) | `ls` reopen s | Python json.loads s | first open / json.loads |",
             "|---:|---:|---:|---:|---:|---:|"]
    for n, size, first, again, peer in rows:
        lines.append(f"| {n:,} | {size / 1e6:.1f} | {first:.2f} | {again:.2f} | {peer:.2f} | {first / peer:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(HERE, "last-run-header.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
