"""How long a short command takes from exec to exit (issue 42): the start-up a user pays on every call and the test
suite pays thousands of times. Side by side in one run: the tool's short commands, the same with every plugin
opened (--prefer vulkan: what every command paid before plugins opened lazily), and what a user would run instead
to look at a small tensor from Python (the interpreter alone, and importing numpy then reading a .npy), with
/bin/true as the machine's floor for starting any process.

Usage: /usr/bin/python3 bench/startup_bench.py --build build [--repeats 20]
Writes the table to stdout and bench/last-run-startup.md (not committed)."""
import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time


def wall(cmd, env, repeats):
    """(median, least) wall seconds of `repeats` runs of cmd, a list or a function of the run's number giving one
    (output discarded; a failing run stops the bench)."""
    times = []
    for i in range(repeats):
        argv = cmd(i) if callable(cmd) else cmd
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    tm = os.path.abspath(os.path.join(a.build, "tensormorph"))
    work = tempfile.mkdtemp(prefix="tm-startup-")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache"), XDG_CONFIG_HOME=os.path.join(work, "config"))
    demo = os.path.join(work, "demo")
    subprocess.run([tm, "demo", "--out", demo, "--hidden", "64", "--intermediate", "128", "--layers", "1"], env=env,
                   stdout=subprocess.DEVNULL, check=True)
    npy = os.path.join(work, "norm.npy")
    subprocess.run([tm, "export", demo, "model.norm.weight", "-o", npy], env=env, stdout=subprocess.DEVNULL, check=True)

    def fresh_stats(*flags):  # a new index per run, so every call computes instead of reading a stored answer
        return lambda i: [tm, "stats", demo, "model.norm.weight", "--index", os.path.join(work, "i%s-%d.sqlite" % ("".join(flags), i)), *flags]

    rows = [
        ("/bin/true (the floor for starting a process)", ["/bin/true"]),
        ("tensormorph --version", [tm, "--version"]),
        ("tensormorph ls DEMO", [tm, "ls", demo]),
        ("tensormorph stats DEMO model.norm.weight (computed: 64 bf16)", fresh_stats()),
        ("same, --prefer vulkan (opens the plugins: every stats call before)", fresh_stats("--prefer", "vulkan")),
        ("python3 -c pass", ["/usr/bin/python3", "-c", "pass"]),
        ("python3: import numpy; numpy.load(norm.npy)", ["/usr/bin/python3", "-c", "import numpy; numpy.load(%r)" % npy]),
    ]
    results = []
    for label, cmd in rows:
        med, least = wall(cmd, env, a.repeats)
        results.append((label, med, least))
        print("%-60s median %6.1f ms  least %6.1f ms" % (label, med * 1e3, least * 1e3), flush=True)
    ls = next(r for r in results if r[0].startswith("tensormorph ls"))[1]
    numpy_load = results[-1][1]
    lines = ["# Start-up of short commands (`/usr/bin/python3 bench/startup_bench.py --build %s --repeats %d`)" % (a.build, a.repeats),
             "", "- date: %s UTC" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
             "- machine: %s, %d CPUs" % (platform.platform(), os.cpu_count()), "",
             "| command | median ms | least ms |", "|---|---:|---:|"]
    lines += ["| %s | %.1f | %.1f |" % (l, m * 1e3, s * 1e3) for l, m, s in results]
    lines += ["", "ratio: `ls` / (import numpy + load a .npy) = %.2f" % (ls / numpy_load)]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(os.path.dirname(__file__), "last-run-startup.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
