#!/usr/bin/python3
"""Statistics throughput beside memcpy and numpy: runs stats_bench and the numpy peer, prints one table.

  /usr/bin/python3 bench/run_bench.py --build build      (what `make bench` runs, after building)

Steps: (1) stats_bench --tm_dump_data writes the deterministic buffers (one per dtype) to the data dir;
(2) stats_bench runs with --benchmark_format=json (memcpy and every dtype x mode x thread count);
(3) bench/peer_numpy.py computes the same statistics on the same bytes; (4) one markdown table is printed
and written, with date, machine and command, to bench/last-run.md, followed by a cross-check of the
results (tensormorph vs numpy, and tensormorph 1 thread vs N threads).

Convention: GB/s = 1e9 bytes per second of raw input, each byte read once; memcpy counts the source size
(it writes as many bytes again). Best of the repetitions on both sides, since the machine is shared.
Builds nothing: `make bench` builds first.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = ["f32", "bf16", "f16", "f8_e4m3fn"]
MODES = ["moments", "full"]
MOMENTS_TARGET = 0.80  # of copy bandwidth at the same thread count
FULL_TARGET = 10.0     # times numpy


def log(msg):
    print(f"[run_bench] {msg}", file=sys.stderr, flush=True)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return ",".join(x for x in ("avx2", "avx512f", "avx512bw", "avx512_bf16") if x in flags)
    except OSError:
        pass
    return ""


def cpu_times():
    """(busy, steal) seconds of the whole machine so far, from /proc/stat (None where unreadable)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq = fields[:7]
    steal = fields[7] if len(fields) > 7 else 0
    return (user + nice + system + irq + softirq) / tick, steal / tick


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Noise:
    """Share of the machine's CPU time that other processes (and the hypervisor, as steal) took while
    a child of ours ran: (machine busy - our children's CPU) / (wall * CPUs)."""

    def __enter__(self):
        self.t, self.cpu, self.kids = time.monotonic(), cpu_times(), children_cpu()
        return self

    def __exit__(self, *exc):
        end = cpu_times()
        wall = time.monotonic() - self.t
        if self.cpu is None or end is None or wall <= 0:
            self.others = self.steal = None
            return False
        capacity = wall * (os.cpu_count() or 1)
        self.others = max(0.0, (end[0] - self.cpu[0]) - (children_cpu() - self.kids)) / capacity
        self.steal = (end[1] - self.cpu[1]) / capacity
        return False

    def describe(self):
        if self.others is None:
            return "unknown"
        return f"{100 * self.others:.0f}% busy with other processes, {100 * self.steal:.0f}% steal"


def wait_for_idle(limit_s, threshold=0.10):
    """Waits (at most limit_s) for a 1-second window in which other processes use < threshold of the CPUs."""
    deadline = time.monotonic() + limit_s
    while True:
        with Noise() as n:
            time.sleep(1.0)
        if n.others is None or n.others < threshold:
            return True
        if time.monotonic() >= deadline:
            return False
        log(f"machine busy ({100 * n.others:.0f}% CPU used by other processes); waiting for it to calm down")


def git_state():
    """'<commit>' plus the paths outside bench/ with uncommitted changes (what the measured library was)."""
    root = os.path.dirname(HERE)
    try:
        commit = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h %s"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", ".", ":!bench"], capture_output=True,
                               text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    dirty = [line[3:] for line in dirty if line.strip()]
    return f"`{commit}`" + (f"; uncommitted changes outside bench/: {', '.join(dirty)}" if dirty else "; clean outside bench/")


def run_cpp(binary, env, args, tool="run_bench"):
    """Runs a Google Benchmark binary with JSON output on stdout, echoing each benchmark's name as it
    completes; returns the parsed document, or None when the binary printed a SKIPPED line instead."""
    cmd = [binary, "--benchmark_format=json"] + args
    log("$ " + " ".join(shlex.quote(c) for c in cmd))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    lines, seen = [], set()
    for line in proc.stdout:
        lines.append(line)
        s = line.strip()
        if s.startswith('"run_name"'):
            name = s.split(":", 1)[1].strip().strip('",').removesuffix("/real_time")
            if name not in seen:
                seen.add(name)
                log(f"  {name}")
    if proc.wait() != 0:
        sys.exit(f"{tool}: {os.path.basename(binary)} exited with status {proc.returncode}")
    text = "".join(lines)
    if text.startswith("SKIPPED"):
        print(text.strip())
        return None
    return json.loads(text)


def best_gbps(doc):
    """Best bytes/s over the repetitions of each benchmark, by run name; also the worst, for the spread."""
    best = {}
    for b in doc["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"]).removesuffix("/real_time")
        g = b["bytes_per_second"] / 1e9
        lo, hi = best.get(name, (g, g))
        best[name] = (min(lo, g), max(hi, g))
    errors = {b.get("run_name", b["name"]): b.get("error_message", "") for b in doc["benchmarks"]
              if b.get("error_occurred")}
    return best, errors


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def rel(a, b):
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def cross_check(tm_runs, np_results):
    """Lines comparing tensormorph's results with numpy's and across thread counts."""
    lines = []
    by_key = {}
    for r in tm_runs:
        by_key.setdefault((r["dtype"], r["mode"]), []).append(r)
    for (dtype, mode), runs in sorted(by_key.items(), key=lambda kv: (DTYPES.index(kv[0][0]), MODES.index(kv[0][1]))):
        runs.sort(key=lambda r: r["threads"])
        base = runs[0]
        strip = lambda r: {k: v for k, v in r.items() if k not in ("name", "threads")}
        same_threads = all(strip(r) == strip(base) for r in runs[1:])
        parts = [f"threads {'/'.join(str(r['threads']) for r in runs)}: "
                 + ("identical results" if same_threads else "RESULTS DIFFER")]
        n = np_results.get((dtype, mode))
        if n is not None:
            s = n["stats"]
            exact = [k for k in ("finite", "nan", "inf", "zero", "min", "max", "abs_max") if s.get(k) != base.get(k)]
            parts.append("counts/min/max/abs max " + ("identical" if not exact else "DIFFER in " + ",".join(exact)))
            parts.append(f"sum rel diff {rel(s['sum'], base['sum']):.1e}, std rel diff {rel(s['std'], base['std']):.1e}")
            if "hist" in s and "hist" in base:
                moved = sum(abs(a - b) for a, b in zip(s["hist"], base["hist"])) // 2
                parts.append(f"histogram: {moved} of {base['finite']} values in another bin"
                             + (f" (numpy's edges are {s['hist_edge_dtype']})" if moved else ""))
            if "quantiles" in s and "quantiles" in base:
                worst = max(rel(a[1], b[1]) for a, b in zip(s["quantiles"], base["quantiles"]))
                parts.append(f"quantiles ({base['quantile_method']}): "
                             + ("identical" if worst == 0 else f"max rel diff {worst:.1e}"))
        lines.append(f"- {dtype} {mode}: " + "; ".join(parts))
    return lines


def run_context_lines(title, started, finished, ctx, source, load_before, idle, wait_idle, cpp_noise, np_noise):
    """The header every bench report starts with: what ran, when, where, on which source and how quiet."""
    uname = " ".join(platform.uname())
    try:
        uname = subprocess.run(["uname", "-a"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    command = " ".join(shlex.quote(a) for a in ["/usr/bin/python3"] + sys.argv)
    return [
        f"# {title}",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S')} UTC ({(finished - started).total_seconds():.0f} s)",
        f"- command: `{command}` (cwd {os.getcwd()})",
        f"- machine: `{uname}`",
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical CPUs, flags {cpu_flags() or 'n/a'}; "
        f"Google Benchmark sees {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz",
        f"- source (at start): {source}",
        f"- load average before the C++ bench: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}"
        + ("" if idle is None else " (machine quiet at start)" if idle else f" (still busy after waiting {wait_idle:.0f} s)"),
        f"- noise: during the C++ bench the machine was {cpp_noise.describe()}"
        + (f"; during numpy {np_noise.describe()}" if np_noise else ""),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="CMake build directory holding bench/stats_bench")
    ap.add_argument("--size-mib", type=int, default=int(os.environ.get("TM_BENCH_MIB", "256")),
                    help="buffer size per dtype in MiB (default $TM_BENCH_MIB or 256)")
    ap.add_argument("--threads", default=os.environ.get("TM_BENCH_THREADS", "1,2"),
                    help="thread counts (default $TM_BENCH_THREADS or 1,2)")
    ap.add_argument("--repetitions", type=int, default=3, help="Google Benchmark repetitions; best kept")
    ap.add_argument("--min-time", type=float, default=0.5, help="Google Benchmark min time per repetition (s)")
    ap.add_argument("--numpy-repeats", type=int, default=3, help="numpy runs per case; best kept")
    ap.add_argument("--numpy-budget-s", type=float, default=25.0, help="numpy seconds per case before giving up repeats")
    ap.add_argument("--no-numpy", action="store_true", help="skip the numpy peer")
    ap.add_argument("--filter", help="passed to --benchmark_filter (the numpy peer still runs every dtype)")
    ap.add_argument("--wait-idle", type=float, default=60.0,
                    help="before the C++ bench, wait up to this many seconds for other processes to go quiet (default 60)")
    ap.add_argument("--data-dir", help="where the buffers go (default <build>/bench-data)")
    ap.add_argument("--out", default=os.path.join(HERE, "last-run.md"), help="markdown report (default bench/last-run.md)")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    binary = os.path.join(build, "bench", "stats_bench")
    if not os.access(binary, os.X_OK):
        sys.exit(f"run_bench: {binary} not found; build first (make bench, or cmake --build {args.build} --target stats_bench)")
    data_dir = os.path.abspath(args.data_dir or os.path.join(build, "bench-data"))
    os.makedirs(data_dir, exist_ok=True)
    env = dict(os.environ, TM_BENCH_MIB=str(args.size_mib), TM_BENCH_THREADS=args.threads)
    started = datetime.datetime.now(datetime.timezone.utc)
    source = git_state()

    # 1. The buffers, written by the same generator the C++ bench uses in memory.
    log(f"writing {args.size_mib} MiB buffers per dtype to {data_dir}")
    subprocess.run([binary, f"--tm_dump_data={data_dir}"], env=env, check=True)

    # 2. tensormorph and memcpy.
    check_file = os.path.join(data_dir, "check.json")
    cpp_args = [f"--benchmark_repetitions={args.repetitions}", f"--benchmark_min_time={args.min_time}",
                f"--tm_check_out={check_file}"]
    if args.filter:
        cpp_args.append(f"--benchmark_filter={args.filter}")
    idle = wait_for_idle(args.wait_idle) if args.wait_idle > 0 else None
    load_before = os.getloadavg()
    with Noise() as cpp_noise:
        cpp = run_cpp(binary, env, cpp_args)
    gbps, errors = best_gbps(cpp)
    with open(check_file) as f:
        tm_runs = json.load(f)

    # 3. numpy on the same bytes.
    np_doc, np_results, np_noise = None, {}, None
    if not args.no_numpy:
        np_json = os.path.join(data_dir, "numpy.json")
        cmd = [sys.executable, os.path.join(HERE, "peer_numpy.py"), "--data-dir", data_dir, "--repeats",
               str(args.numpy_repeats), "--budget-s", str(args.numpy_budget_s), "--json", np_json]
        log("$ " + " ".join(shlex.quote(c) for c in cmd))
        with Noise() as np_noise:
            subprocess.run(cmd, check=True)
        with open(np_json) as f:
            np_doc = json.load(f)
        np_results = {(r["dtype"], r["mode"]): r for r in np_doc["results"]}
    finished = datetime.datetime.now(datetime.timezone.utc)

    # 4. The table.
    threads = [int(t) for t in args.threads.split(",")]
    rows = ["| dtype | threads | mode | tensormorph GB/s | numpy GB/s | ratio vs numpy | % of copy bandwidth | target | tm spread GB/s |",
            "|---|---:|---|---:|---:|---:|---:|---|---|"]
    for t in threads:
        c = gbps.get(f"memcpy/threads:{t}")
        if c:
            rows.append(f"| memcpy | {t} | copy | {c[1]:.2f} | — | — | 100% | — | {c[0]:.2f}–{c[1]:.2f} |")
    for dtype in DTYPES:
        for mode in MODES:
            for t in threads:
                name = f"stats/{dtype}/{mode}/threads:{t}"
                if name not in gbps:
                    if name in errors or name + "/real_time" in errors:
                        rows.append(f"| {dtype} | {t} | {mode} | error | — | — | — | — | {errors.get(name) or errors.get(name + '/real_time', '')} |")
                    continue
                lo, hi = gbps[name]
                n = np_results.get((dtype, mode))
                n_gbps = n["gbps"] if n else None
                ratio = hi / n_gbps if n_gbps else None
                copy = gbps.get(f"memcpy/threads:{t}")
                pct = 100 * hi / copy[1] if copy else None
                if mode == "moments":
                    target = "—" if pct is None else ("met" if pct >= 100 * MOMENTS_TARGET else "not met") + " (≥80% copy)"
                else:
                    target = "—" if ratio is None else ("met" if ratio >= FULL_TARGET else "not met") + " (≥10× numpy)"
                rows.append(f"| {dtype} | {t} | {mode} | {hi:.2f} | {fmt(n_gbps, 3)} | "
                            f"{'—' if ratio is None else f'{ratio:.1f}×'} | {'—' if pct is None else f'{pct:.0f}%' if pct >= 10 else f'{pct:.1f}%'} | "
                            f"{target} | {lo:.2f}–{hi:.2f} |")
    table = "\n".join(rows)

    header = run_context_lines("Tensormorph statistics throughput (last run)", started, finished, cpp.get("context", {}), source,
                               load_before, idle, args.wait_idle, cpp_noise, np_noise) + [
        f"- data: {args.size_mib} MiB per dtype (deterministic ~N(0,1) values, 128 planted NaN/Inf), "
        f"written by stats_bench and read by numpy",
        f"- tensormorph: best of {args.repetitions} Google Benchmark repetitions (min time {args.min_time} s each), "
        f"real time; numpy {np_doc['numpy_version'] + ' (Python ' + np_doc['python'] + ')' if np_doc else 'skipped'}: "
        f"best of up to {args.numpy_repeats} runs (fewer when a run is slow)",
        "- GB/s = 1e9 bytes/s of raw input, each byte read once; memcpy counts the source size (it also writes "
        "as many bytes). '% of copy bandwidth' divides by memcpy at the same thread count.",
        "- numpy is single-threaded: its column is the same for every thread count.",
        "- moments = nan/inf/zero counts, min, max, abs max, sum, mean, std; "
        "full = moments + 256-bin histogram over [min, max] + quantiles 0.001/0.01/0.5/0.99/0.999.",
        "",
    ]
    checks = ["", "Cross-check (tensormorph at the lowest thread count vs numpy; tensormorph across thread counts):", ""]
    checks += cross_check(tm_runs, np_results)
    report = "\n".join(header) + "\n" + table + "\n" + "\n".join(checks) + "\n"
    print(report)
    with open(args.out, "w") as f:
        f.write(report)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
