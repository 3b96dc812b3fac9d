#!/usr/bin/python3
"""4D-STEM detector formats (issue 48): tensormorph's virtual images on a Merlin MIB, a NumPy .npy and an EMD 1.0
HDF5 array of the same frames, beside numpy on a memory map (what a user does without tensormorph) and the memory
floor.

  /usr/bin/python3 bench/stem_formats_bench.py --build build      (part of `make bench`)
  /usr/bin/python3 bench/stem_formats_bench.py --build build --scan 256 --formats mib   (also in `make bench`: the
      issue's 256² × 256² uint16 MIB, 8.6 GB, alone; writes bench/last-run-stem-formats-mib-256.md)

Data (written once into build/bench-data/stem-formats/, reused when present): SCAN x SCAN positions (default 128,
i.e. 16384 frames; `--scan 256 --formats mib` writes and times the issue's 256² scan = 8.6 GB as a MIB alone) of
256 x 256 uint16 counts (12-bit random counts with a bright disk, tests/fixtures/mib_writer.counts), stored as
  - a Merlin MIB of processed U16 frames (big-endian, 384-byte frame headers) with its .hdr (ScanX/ScanY),
    written by tests/fixtures/mib_writer.py;
  - the same frames as a 4-D C-order little-endian .npy (np.lib.format.open_memmap);
  - the same frames as a contiguous EMD 1.0 array (h5py, the layout tests/cli/test_stem_hdf5_array.py writes).
Every file is read once before timing (page cache warm; the VM has enough RAM to hold all three), then, best of
--runs each (the machine is shared and noisy: the least disturbed run is the one compared):
  (1) `tensormorph stem mask FILE --inner 0 --outer 1000` (the full-detector virtual image: every frame decoded
      and summed), as a user types it (the disk is detected first) and with --center/--radius given (no detection
      pass), at --threads 1 and 2; `stem bf` with the same given disk numpy uses. Wall time of the process.
  (2) numpy on a memory map, one thread: MIB as np.memmap of a structured dtype (header bytes from the first
      header, then the '>u2' frame), .npy via np.load(mmap_mode='r'), EMD via h5py slices; the scan summed in
      chunks of scan rows: `.sum(axis=(-2, -1))` and the BF `chunk[..., disk].sum(-1)`.
  (3) the floor: reading the file from the page cache in 64 MiB chunks into a preallocated buffer (readinto; and
      with 2 threads, each reading half, for the 2-thread rows) and a numpy copy of 256 MiB (plus stats_bench's
      memcpy at 1 and 2 threads when built).
  (4) tensormorph's peak RSS (/usr/bin/time -v) for each format, to show frames are streamed, not loaded whole.
GB/s = 1e9 raw frame bytes (headers excluded) per second. Writes bench/last-run-stem-formats.md.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
from bench_timing import best_of, memcpy_gbps  # noqa: E402
from run_bench import cpu_model  # noqa: E402
import mib_writer  # noqa: E402

K = 256           # detector rows = cols
CHUNK_ROWS = 8    # scan rows per numpy chunk (8 x 128 frames = 128 MiB)
READ_CHUNK = 64 << 20
FORMATS = ("mib", "npy", "emd")


def log(msg):
    print("[stem_formats_bench] " + msg, file=sys.stderr, flush=True)


def write_data(d, scan, formats=FORMATS):
    """The files of `formats`, each written under a temporary name and renamed when complete (a cut run is not
    reused); the same frames whichever formats are written. Returns {format: path}."""
    os.makedirs(d, exist_ok=True)
    paths = {f: os.path.join(d, "scan%d.%s" % (scan, f)) for f in formats}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    import contextlib
    import h5py
    log("writing %d x %d frames of %d x %d uint16 as %s (once) to %s" % (scan, scan, K, K, ", ".join(formats), d))
    rng = np.random.default_rng(48)
    mib, npy, emd = (paths.get(f, os.devnull) for f in FORMATS)
    tmp = {p: p + ".part" for p in paths.values()}
    a = np.lib.format.open_memmap(tmp[npy], mode="w+", dtype="<u2", shape=(scan, scan, K, K)) if "npy" in formats else None
    with (open(tmp[mib], "wb") if "mib" in formats else open(os.devnull, "wb")) as fm, \
            (h5py.File(tmp[emd], "w") if "emd" in formats else contextlib.nullcontext()) as fh:
        ds = create_emd(fh, scan) if fh is not None else None
        for r in range(scan):
            frames = mib_writer.counts(rng, (scan, K, K), 12, np.uint16)
            fm.write(b"".join(mib_writer.records(frames, pixel_type="U16", first_seq=1 + r * scan)))
            if a is not None:
                a[r] = frames
            if ds is not None:
                ds[r] = frames
    if a is not None:
        a.flush()
        del a
    if "mib" in formats:
        with open(tmp[mib][:-len(".mib.part")] + ".hdr", "w", newline="") as f:
            f.write(mib_writer.hdr_text(scan * scan, scan, depth=12, scan=(scan, scan)))
    for p in paths.values():
        os.replace(tmp[p], p)
    return paths


def create_emd(fh, scan):
    """An EMD 1.0 file's groups and its contiguous (scan, scan, K, K) uint16 dataset (the layout
    tests/cli/test_stem_hdf5_array.py writes)."""
    fh.attrs["emd_group_type"] = "file"
    fh.attrs["version_major"] = 1
    fh.attrs["version_minor"] = 0
    root = fh.create_group("experiment")
    root.attrs["emd_group_type"] = "root"
    cube = root.create_group("datacube")
    cube.attrs["emd_group_type"] = "array"
    cube.attrs["python_class"] = "DataCube"
    ds = cube.create_dataset("data", shape=(scan, scan, K, K), dtype="<u2")  # contiguous
    for axis, n in enumerate((scan, scan, K, K), start=1):
        cube.create_dataset("dim%d" % axis, data=np.arange(n, dtype=np.float64))
    return ds


def read_floor(path, runs):
    """(best seconds, bytes) of reading the whole file in 64 MiB chunks into one preallocated buffer."""
    buf = bytearray(READ_CHUNK)
    view = memoryview(buf)

    def once():
        n = 0
        with open(path, "rb", buffering=0) as f:
            while True:
                got = f.readinto(view)
                if not got:
                    return n
                n += got
    return best_of(runs, once)


def read_floor_threads(path, runs, threads):
    """(best seconds, bytes) of `threads` threads each reading its share of the file in 64 MiB preads (the GIL is
    released while reading): the floor for a run at that thread count."""
    from concurrent.futures import ThreadPoolExecutor
    size = os.path.getsize(path)
    bufs = [bytearray(READ_CHUNK) for _ in range(threads)]
    share = -(-size // threads)

    def part(i, fd):
        n, off, end = 0, i * share, min(size, (i + 1) * share)
        view = memoryview(bufs[i])
        while off < end:
            got = os.preadv(fd, [view[:min(READ_CHUNK, end - off)]], off)
            if not got:
                break
            n, off = n + got, off + got
        return n

    def once():
        fd = os.open(path, os.O_RDONLY)
        try:
            with ThreadPoolExecutor(threads) as ex:
                return sum(ex.map(lambda i: part(i, fd), range(threads)))
        finally:
            os.close(fd)
    return best_of(runs, once)


def numpy_copy_gbps(runs):
    src = np.ones(256 << 19, dtype=np.uint16)  # 256 MiB
    dst = np.empty_like(src)
    np.copyto(dst, src)
    t, _ = best_of(runs, lambda: np.copyto(dst, src))
    return src.nbytes / t / 1e9


def mib_header_bytes(path):
    with open(path, "rb") as f:
        head = f.read(64).split(b",")
    assert head[0] == b"MQ1", head[:3]
    return int(head[2])


def numpy_views(fmt, path, scan):
    """A function returning the 4-D (scan, scan, K, K) array-like numpy/h5py reads the frames through."""
    if fmt == "mib":
        hb = mib_header_bytes(path)
        rec = np.dtype([("h", "V%d" % hb), ("f", ">u2", (K, K))])
        return lambda: np.memmap(path, dtype=rec, mode="r")["f"].reshape(scan, scan, K, K)
    if fmt == "npy":
        return lambda: np.load(path, mmap_mode="r")
    import h5py
    return lambda: h5py.File(path, "r")["experiment/datacube/data"]


def numpy_product(view, scan, mask=None):
    a = view()
    out = np.empty((scan, scan), dtype=np.uint64)
    for r in range(0, scan, CHUNK_ROWS):
        c = a[r:r + CHUNK_ROWS]
        out[r:r + CHUNK_ROWS] = c.sum(axis=(-2, -1), dtype=np.uint64) if mask is None else c[..., mask].sum(-1, dtype=np.uint64)
    return out


def tm_run(tm, env, args, out):
    t0 = time.perf_counter()
    p = subprocess.run([tm, "stem"] + args + ["-o", out, "--json", "--no-cache"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit("tensormorph stem %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return wall, json.loads(p.stdout)


def tm_best(tm, env, args, out, runs):
    best = None
    for _ in range(runs):
        wall, j = tm_run(tm, env, args, out)
        if best is None or wall < best[0]:
            best = (wall, j)
    return best


def max_rss_mb(tm, env, args, out):
    p = subprocess.run(["/usr/bin/time", "-v", tm, "stem"] + args + ["-o", out, "--no-cache"], capture_output=True,
                       text=True, env=env)
    if p.returncode != 0:
        raise SystemExit("time -v tensormorph failed: " + p.stderr[-2000:])
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return int(m.group(1)) / 1024 if m else float("nan")


def busy_processes():
    """The other processes using CPU now (ps's lifetime %CPU over 5 %), for the report's noise note."""
    try:
        out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu", "--no-headers"], capture_output=True,
                             text=True).stdout.split("\n")
    except OSError:
        return "?"
    busy = [line.split(None, 1) for line in out if line.strip()]
    busy = ["%s %s%%" % (c, p) for p, c in (b for b in busy if len(b) == 2) if float(p) >= 5.0]
    return ", ".join(busy[:6]) or "none over 5 %"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--scan", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--formats", default=",".join(FORMATS), help="which of mib,npy,emd to write and time")
    ap.add_argument("--out", default=None, help="default bench/last-run-stem-formats.md (all formats, scan 128), else "
                    "bench/last-run-stem-formats-FORMATS-SCAN.md")
    args = ap.parse_args()
    formats = tuple(f for f in args.formats.split(",") if f)
    if not formats or any(f not in FORMATS for f in formats):
        raise SystemExit("--formats: a comma-separated subset of " + ",".join(FORMATS))
    if args.out is None:
        args.out = os.path.join(HERE, "last-run-stem-formats.md" if (formats, args.scan) == (FORMATS, 128) else
                                "last-run-stem-formats-%s-%d.md" % ("-".join(formats), args.scan))
    started = datetime.datetime.utcnow()
    tm = os.path.join(args.build, "tensormorph")
    tmp = tempfile.mkdtemp(prefix="tm-stem-formats-")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(tmp, "config"), XDG_CACHE_HOME=os.path.join(tmp, "cache"))
    scan = args.scan
    files = write_data(os.path.join(args.build, "bench-data", "stem-formats"), scan, formats)
    frame_bytes = scan * scan * K * K * 2
    out = os.path.join(tmp, "out.npy")
    load_before = os.getloadavg()
    busy_before = busy_processes()

    # Warm the page cache: every file read once (its time is the cold-ish first read, not reported as a rate).
    for p in files.values():
        read_floor(p, 1)

    # The disk numpy's BF uses, given to tensormorph too (same pixels: |(k, l) - (K/2, K/2)| <= r).
    center, radius = K / 2, K / 6
    kk, ll = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
    disk = (kk - center) ** 2 + (ll - center) ** 2 <= radius ** 2
    given = ["--center", "%g,%g" % (center, center), "--radius", "%g" % radius]
    full = ["--inner", "0", "--outer", "1000"]

    res = {}
    for fmt, path in files.items():
        log("%s: tensormorph" % fmt)
        r = res[fmt] = {"bytes": os.path.getsize(path)}
        for t in (1, 2):
            th = ["--threads", str(t)]
            r["mask", t] = tm_best(tm, env, ["mask", path] + full + th, out, args.runs)
            r["mask_given", t] = tm_best(tm, env, ["mask", path] + full + given + th, out, args.runs)
            r["bf", t] = tm_best(tm, env, ["bf", path] + given + th, out, args.runs)
        # The answers, checked against numpy below.
        tm_run(tm, env, ["mask", path] + full + given + ["--threads", "2"], os.path.join(tmp, "mask.npy"))
        tm_run(tm, env, ["bf", path] + given + ["--threads", "2"], os.path.join(tmp, "bf.npy"))
        log("%s: numpy" % fmt)
        view = numpy_views(fmt, path, scan)
        r["np_sum"], np_sum = best_of(args.runs, lambda: numpy_product(view, scan))
        r["np_bf"], np_bf = best_of(args.runs, lambda: numpy_product(view, scan, disk))
        r["agree"] = (np.array_equal(np.load(os.path.join(tmp, "mask.npy")).astype(np.uint64), np_sum)
                      and np.array_equal(np.load(os.path.join(tmp, "bf.npy")).astype(np.uint64), np_bf))
        r["floor"], n = read_floor(path, args.runs)
        r["floor2"], n2 = read_floor_threads(path, args.runs, 2)
        assert n == n2 == r["bytes"], (n, n2, r["bytes"])
        r["rss_mb"] = max_rss_mb(tm, env, ["mask", path] + full + given + ["--threads", "2"], out)

    copy_np = numpy_copy_gbps(args.runs)
    copy_sb = {}
    if os.path.exists(os.path.join(args.build, "bench", "stats_bench")):
        copy_sb = memcpy_gbps(args.build, env)
    load_after = os.getloadavg()
    busy_after = busy_processes()
    finished = datetime.datetime.utcnow()

    gbps = lambda s: frame_bytes / s / 1e9  # noqa: E731
    uname = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip()
    with open("/proc/meminfo") as f:
        ram_gb = int(f.readline().split()[1]) / 1e6 * 1.024
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    revision = res[formats[0]]["mask", 1][1]["provenance"]["software"].get("revision", "?")
    command = " ".join(shlex.quote(a) for a in ["/usr/bin/python3"] + sys.argv)
    L = ["# 4D-STEM detector formats: %s (issue 48)" % ", ".join({"mib": "MIB", "npy": ".npy", "emd": "EMD"}[f] for f in formats), "",
         "- date: %s UTC (%.0f s)" % (started.strftime("%Y-%m-%d %H:%M"), (finished - started).total_seconds()),
         "- command: `%s`" % command,
         "- machine: `%s`; %s, %d CPUs (nproc), %.1f GB RAM" % (uname, cpu_model(), os.cpu_count(), ram_gb),
         "- commit %s; tensormorph binary revision %s" % (commit, revision),
         "- load average before %.2f %.2f %.2f, after %.2f %.2f %.2f; busy processes before: %s; after: %s" %
         (load_before + load_after + (busy_before, busy_after)),
         "- data: %d x %d scan of %d x %d uint16 frames = %.2f GB of frame bytes (the issue's 256² scan is "
         "8.6 GB); %s; page cache warm (each file read once first); best of %d runs" %
         (scan, scan, K, K, frame_bytes / 1e9, ", ".join(
             {"mib": "MIB %.2f GB on disk (384-byte headers)", "npy": ".npy %.2f GB",
              "emd": "EMD (contiguous) %.2f GB"}[f] % (res[f]["bytes"] / 1e9) for f in formats), args.runs),
         "- GB/s = 1e9 frame bytes per second; tensormorph's seconds are the process's wall time (start, open, detect, "
         "sum, write the .npy; GB/s and ratios use it), its own timer (`seconds` of --json) beside it; numpy is one "
         "thread in the Python process, chunks of %d scan rows" % CHUNK_ROWS,
         "- memory floor: numpy copy of 256 MiB %.2f GB/s%s" %
         (copy_np, "".join("; stats_bench memcpy %d thread%s %.2f GB/s" % (t, "s" if t > 1 else "", g) for t, g in sorted(copy_sb.items()))),
         "",
         "| format | what | threads | seconds | own timer s | GB/s | tm ÷ numpy (speed) | of read floor, same threads | peak RSS |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for fmt in formats:
        r = res[fmt]
        np_label = {"mib": "np.memmap (structured dtype, '>u2')", "npy": "np.load(mmap_mode='r')",
                    "emd": "h5py slices"}[fmt]
        for key, label, np_key in (("mask", "tm mask 0..1000 px (disk detected first)", "np_sum"),
                                   ("mask_given", "tm mask 0..1000 px, --center/--radius given", "np_sum"),
                                   ("bf", "tm bf, r = %g px given" % radius, "np_bf")):
            for t in (1, 2):
                s, j = r[key, t]
                L.append("| %s | %s | %d | %.3f | %.3f | %.2f | %.2f× | %.0f%% | %s |" %
                         (fmt, label, t, s, j["seconds"], gbps(s), r[np_key] / s,
                          100 * r["floor" if t == 1 else "floor2"] / s,
                          "%.0f MB" % r["rss_mb"] if (key, t) == ("mask_given", 2) else ""))
        L.append("| %s | numpy %s `.sum(axis=(-2,-1))` | 1 | %.3f | — | %.2f | 1 | %.0f%% | |" %
                 (fmt, np_label, r["np_sum"], gbps(r["np_sum"]), 100 * r["floor"] / r["np_sum"]))
        L.append("| %s | numpy %s `[..., disk].sum(-1)` | 1 | %.3f | — | %.2f | 1 | %.0f%% | |" %
                 (fmt, np_label, r["np_bf"], gbps(r["np_bf"]), 100 * r["floor"] / r["np_bf"]))
        L.append("| %s | read floor: readinto 64 MiB chunks (%.2f GB file) | 1 | %.3f | — | %.2f | — | 100%% | |" %
                 (fmt, r["bytes"] / 1e9, r["floor"], gbps(r["floor"])))
        L.append("| %s | read floor: 2 threads, each preadv of its half | 2 | %.3f | — | %.2f | — | 100%% | |" %
                 (fmt, r["floor2"], gbps(r["floor2"])))
    L.append("")
    L.append("Answers: tensormorph's mask and bf images equal numpy's on every format: %s." %
             ("yes" if all(res[f]["agree"] for f in res) else
              "NO (" + ", ".join(f for f in res if not res[f]["agree"]) + " differ)"))
    L.append("Peak RSS is `/usr/bin/time -v`'s maximum resident set of `stem mask … --threads 2` (frames are %.2f GB)." %
             (frame_bytes / 1e9))
    text = "\n".join(L) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    shutil.rmtree(tmp, ignore_errors=True)
    log("wrote " + args.out)


if __name__ == "__main__":
    main()
