"""What the decoding progress line costs (issue 46): `stem mask --no-cache` on `stem demo --size medium` (128 x 128
scan of 96 x 96 uint16 frames, 302 MB decoded) with stderr on a pseudo-terminal, where the loader calls its progress
callback after every batch and the CLI redraws the line, against the same command with stderr on a pipe, where no
callback is set. Runs alternate (terminal, pipe, terminal, ...) so that the machine's drift falls on both.

Usage: /usr/bin/python3 bench/progress_overhead_bench.py --build build [--repeats 9]
Prints the table (best and median wall seconds, and the ratio of the medians)."""
import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cli"))
from cli_harness import run_on_terminal  # noqa: E402  (the tests' pseudo-terminal runner)


def on_terminal(argv, env):
    """Wall seconds of argv with stderr on a pseudo-terminal, whose output is read (and dropped) as it comes."""
    t0 = time.perf_counter()
    code, _, seen = run_on_terminal(argv, env, timeout=600)
    if code != 0 or b"decoding [" not in seen:
        raise SystemExit("the terminal run failed or drew no progress line: %r" % seen[-400:])
    return time.perf_counter() - t0


def on_pipe(argv, env):
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=9)
    a = ap.parse_args()
    tm = os.path.abspath(os.path.join(a.build, "tensormorph"))
    work = tempfile.mkdtemp(prefix="tm-progress-")
    try:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache"), XDG_CONFIG_HOME=os.path.join(work, "config"))
        subprocess.run([tm, "stem", "demo", "--out", os.path.join(work, "acq"), "--size", "medium"], env=env,
                       stdout=subprocess.DEVNULL, check=True)
        master = os.path.join(work, "acq", "demo_master.h5")
        argv = [tm, "stem", "mask", master, "--inner", "3", "--outer", "20", "-o", os.path.join(work, "m.npy"), "--no-cache"]
        on_pipe(argv, env)  # the page cache warm for both
        terminal, pipe = [], []
        for _ in range(a.repeats):
            terminal.append(on_terminal(argv, env))
            pipe.append(on_pipe(argv, env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("progress_overhead_bench: %s, %s, %d CPUs, %s UTC" % (platform.node(), platform.processor() or platform.machine(),
                                                                  os.cpu_count(), datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")))
    print("| stderr | best s | median s |")
    print("|---|---:|---:|")
    print("| terminal (progress line drawn) | %.3f | %.3f |" % (min(terminal), statistics.median(terminal)))
    print("| pipe (no callback) | %.3f | %.3f |" % (min(pipe), statistics.median(pipe)))
    print("median ratio terminal / pipe: %.3f" % (statistics.median(terminal) / statistics.median(pipe)))


if __name__ == "__main__":
    main()
