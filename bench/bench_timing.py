"""Timing helpers shared by the benchmark scripts: best-of-N wall time, and the machine's memory-copy
bandwidth as bench/stats_bench measures it (the floor every table compares with)."""
import json
import os
import subprocess
import time


def best_of(n, f):
    """(the least wall seconds of n calls of f, the last call's result): on a shared, noisy machine the least
    disturbed run is the one to compare."""
    best, result = float("inf"), None
    for _ in range(n):
        t0 = time.perf_counter()
        result = f()
        best = min(best, time.perf_counter() - t0)
    return best, result


def timed_command(cmd):
    """Wall seconds of running cmd (its output discarded); exits naming the command when it fails."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return time.perf_counter() - t0


def fresh_index_stats_seconds(tm, path, db):
    """Seconds of `tm stats PATH --index DB --json` into a new database (DB and its WAL files removed first), so
    every tensor is computed, never read back from a stored answer."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    return timed_command([tm, "stats", path, "--index", db, "--json"])


def memcpy_gbps(build, env, timeout=300):
    """{threads: GB/s} of stats_bench's memcpy benchmarks over 256 MiB (1e9 bytes of source per second)."""
    out = subprocess.run([os.path.join(build, "bench", "stats_bench"), "--benchmark_filter=^memcpy",
                          "--benchmark_format=json"], capture_output=True, text=True, check=True,
                         env=dict(env, TM_BENCH_MIB="256"), timeout=timeout).stdout
    copy = {}
    for b in json.loads(out)["benchmarks"]:
        t = int(b["name"].split("threads:")[1].split("/")[0])
        copy[t] = max(copy.get(t, 0), b["bytes_per_second"] / 1e9)
    return copy
