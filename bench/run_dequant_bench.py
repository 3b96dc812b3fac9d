#!/usr/bin/python3
"""Dequantization throughput per GGUF block format beside numpy and memcpy: runs dequant_bench and the numpy
peer, prints one table.

  /usr/bin/python3 bench/run_dequant_bench.py --build build      (what `make bench` runs, after building)

Steps: (1) dequant_bench runs with --benchmark_format=json: memcpy, every quantized type of the reference
fixture tiny-mixed.gguf (its tensor's bytes tiled to ~64 MiB of input) at 1 and 2 threads, and the
statistics (compute_quantized_stats) of Q8_0 and Q4_0: "moments" (count, nan/inf/zero, min, max, sum, mean,
std: quant.moments from the codes) and "full" (plus the 256-bin histogram and exact quantiles, streamed); (2) bench/peer_numpy_dequant.py verifies its numpy
decoders against the fixture's reference values and times them on a prefix (whole tensor copies, default
16 MiB) of the same tiled bytes; (3) one markdown table is printed and written, with date, machine, command
and commit, to bench/last-run-dequant.md.

Conventions: elements/s = dequantized values per second; input GB/s = 1e9 bytes of quantized input per
second; memcpy counts its source size (it writes as many bytes again). Best of the repetitions on both
sides, since the machine is shared. numpy is single-threaded; "ratio vs numpy" divides tensormorph at each
thread count by the one numpy figure. Builds nothing: `make bench` builds first. When the fixtures are
absent, prints a SKIPPED line and exits 0.
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_bench import Noise, git_state, run_context_lines, run_cpp, wait_for_idle  # noqa: E402  (same helpers)

NUMPY_TARGET = 50.0     # times the numpy path, every type
STATS_TARGET = 0.50     # of copy bandwidth, Q8_0 and Q4_0 statistics, counted on input bytes
STATS_TYPES = ["Q8_0", "Q4_0"]


def log(msg):
    print(f"[run_dequant_bench] {msg}", file=sys.stderr, flush=True)


def best_runs(doc):
    """Per run name: the repetition with the highest rate (items/s, else bytes/s), plus the low/high spread."""
    best, spread, errors = {}, {}, {}
    for b in doc["benchmarks"]:
        name = b.get("run_name", b["name"]).removesuffix("/real_time")
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "")
            continue
        if b.get("run_type", "iteration") != "iteration":
            continue
        rate = b.get("items_per_second", b.get("bytes_per_second", 0))
        if name not in best or rate > best[name].get("items_per_second", best[name].get("bytes_per_second", 0)):
            best[name] = b
        lo, hi = spread.get(name, (rate, rate))
        spread[name] = (min(lo, rate), max(hi, rate))
    return best, spread, errors


def pct(x):
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.1f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="CMake build directory holding bench/dequant_bench")
    ap.add_argument("--fixtures", default=os.environ.get("TM_FIXTURES", os.path.join(HERE, "..", "..", "shared", "fixtures")),
                    help="fixtures folder (default $TM_FIXTURES or <repo>/../shared/fixtures)")
    ap.add_argument("--size-mib", type=int, default=int(os.environ.get("TM_DEQUANT_MIB", "64")),
                    help="C++ input bytes per type, MiB (default $TM_DEQUANT_MIB or 64)")
    ap.add_argument("--numpy-mib", type=float, default=16.0, help="numpy input bytes per type, MiB (default 16)")
    ap.add_argument("--threads", default=os.environ.get("TM_BENCH_THREADS", "1,2"),
                    help="thread counts (default $TM_BENCH_THREADS or 1,2)")
    ap.add_argument("--repetitions", type=int, default=3, help="Google Benchmark repetitions; best kept")
    ap.add_argument("--min-time", type=float, default=0.3, help="Google Benchmark min time per repetition (s)")
    ap.add_argument("--numpy-repeats", type=int, default=3, help="numpy runs per type; best kept")
    ap.add_argument("--no-numpy", action="store_true", help="skip the numpy peer")
    ap.add_argument("--filter", help="passed to --benchmark_filter (the numpy peer still runs every type)")
    ap.add_argument("--wait-idle", type=float, default=60.0,
                    help="before the C++ bench, wait up to this many seconds for other processes to go quiet (default 60)")
    ap.add_argument("--out", default=os.path.join(HERE, "last-run-dequant.md"),
                    help="markdown report (default bench/last-run-dequant.md)")
    args = ap.parse_args()

    fixtures = os.path.abspath(args.fixtures)
    gguf = os.path.join(fixtures, "gguf", "tiny-mixed.gguf")
    if not os.path.exists(gguf) or not os.path.exists(os.path.join(fixtures, "gguf", "tiny-mixed.expected.json")):
        print(f"SKIPPED: dequantization bench needs {gguf} and its expected.json (set TM_FIXTURES or --fixtures)")
        return 0
    build = os.path.abspath(args.build)
    binary = os.path.join(build, "bench", "dequant_bench")
    if not os.access(binary, os.X_OK):
        sys.exit(f"run_dequant_bench: {binary} not found; build first (make bench, or cmake --build {args.build} --target dequant_bench)")
    env = dict(os.environ, TM_DEQUANT_MIB=str(args.size_mib), TM_BENCH_THREADS=args.threads)
    started = datetime.datetime.now(datetime.timezone.utc)
    source = git_state()

    # 1. tensormorph and memcpy.
    cpp_args = [f"--benchmark_repetitions={args.repetitions}", f"--benchmark_min_time={args.min_time}",
                f"--tm_fixtures={fixtures}"]
    if args.filter:
        cpp_args.append(f"--benchmark_filter={args.filter}")
    idle = wait_for_idle(args.wait_idle) if args.wait_idle > 0 else None
    load_before = os.getloadavg()
    with Noise() as cpp_noise:
        cpp = run_cpp(binary, env, cpp_args, tool="run_dequant_bench")
    if cpp is None:
        return 0
    best, spread, errors = best_runs(cpp)

    # 2. numpy on a prefix of the same bytes.
    np_doc, np_by_type, np_noise = None, {}, None
    if not args.no_numpy:
        np_json = os.path.join(build, "bench-dequant-numpy.json")
        cmd = ["/usr/bin/python3", os.path.join(HERE, "peer_numpy_dequant.py"), "--fixtures", fixtures,
               "--size-mib", str(args.numpy_mib), "--repeats", str(args.numpy_repeats), "--json", np_json]
        log("$ " + " ".join(shlex.quote(c) for c in cmd))
        with Noise() as np_noise:
            subprocess.run(cmd, check=True)
        with open(np_json) as f:
            np_doc = json.load(f)
        np_by_type = {r["type"]: r for r in np_doc["results"]}
    finished = datetime.datetime.now(datetime.timezone.utc)

    # 3. The tables.
    threads = [int(t) for t in args.threads.split(",")]
    memcpy = {t: best[f"memcpy/threads:{t}"]["bytes_per_second"] for t in threads if f"memcpy/threads:{t}" in best}
    types = []
    for b in cpp["benchmarks"]:
        name = b.get("run_name", b["name"])
        if name.startswith("dequant/"):
            ty = name.split("/")[1]
            if ty not in types:
                types.append(ty)

    tcols = " | ".join(f"tensormorph {t} thread{'s' if t > 1 else ''} (G el/s)" for t in threads)
    rows = [f"| type | elements per block | {tcols} | numpy (M el/s) | ratio vs numpy ({' / '.join(f'{t}t' for t in threads)}) "
            f"| ≥{NUMPY_TARGET:.0f}× numpy (best thread count) | input GB/s vs memcpy ({' / '.join(f'{t}t' for t in threads)}) |",
            "|---|---:|" + "---:|" * len(threads) + "---:|---:|---|---|"]
    rows.append(f"| memcpy (reference) | — | {' | '.join('—' for _ in threads)} | — | — | — | "
                f"{' / '.join(f'{memcpy[t] / 1e9:.2f}' for t in threads if t in memcpy)} GB/s = 100% |")
    met_all, unmeasured = [], []
    for ty in types:
        cells, rates, gbps = [], [], []
        block = None
        for t in threads:
            name = f"dequant/{ty}/threads:{t}"
            b = best.get(name)
            if b is None:
                cells.append("error" if name in errors else "—")
                rates.append(None)
                gbps.append(None)
                continue
            block = int(b.get("block_elements", 0))
            rates.append(b["items_per_second"])
            gbps.append(b["bytes_per_second"])
            cells.append(f"{b['items_per_second'] / 1e9:.2f}")
        n = np_by_type.get(ty)
        if n is None:
            np_cell, ratio_cell, target = "—", "—", "—"
            unmeasured.append(ty)
        elif n["status"] != "ok":
            np_cell, ratio_cell, target = n["status"], "—", "—"
            unmeasured.append(ty)
        else:
            npr = n["elements_per_second"]
            np_cell = f"{npr / 1e6:.1f}"
            ratios = [r / npr if r else None for r in rates]
            ratio_cell = " / ".join("—" if r is None else f"{r:.1f}×" for r in ratios)
            top = max((r for r in ratios if r), default=None)
            ok = top is not None and top >= NUMPY_TARGET
            met_all.append((ty, ok))
            target = "met" if ok else "not met"
        copy_cell = " / ".join("—" if g is None or t not in memcpy else f"{g / 1e9:.2f} ({pct(g / memcpy[t])})"
                               for g, t in zip(gbps, threads))
        rows.append(f"| {ty} | {block if block else '—'} | {' | '.join(cells)} | {np_cell} | {ratio_cell} | {target} | {copy_cell} |")
    table = "\n".join(rows)

    srows = ["| statistics | threads | input GB/s | G el/s | memcpy GB/s | % of copy bandwidth | ≥50% of copy |",
             "|---|---:|---:|---:|---:|---:|---|"]
    stats_met = []
    for ty, kind in [(ty, kind) for kind in ("moments", "full") for ty in STATS_TYPES]:
        for t in threads:
            name = f"stats/{ty}/{kind}/threads:{t}"
            b = best.get(name)
            if b is None:
                if name in errors:
                    srows.append(f"| {ty} {kind} | {t} | error: {errors[name]} | | | | |")
                continue
            frac = b["bytes_per_second"] / memcpy[t] if t in memcpy else None
            ok = frac is not None and frac >= STATS_TARGET
            stats_met.append((f"{ty} {kind}", t, ok))
            srows.append(f"| {ty} {kind} | {t} | {b['bytes_per_second'] / 1e9:.3f} | {b['items_per_second'] / 1e9:.3f} | "
                         f"{memcpy.get(t, 0) / 1e9:.2f} | {'—' if frac is None else pct(frac)} | {'met' if ok else 'not met'} |")
    stable = "\n".join(srows)

    # GPTQ through dequantize.packed (synthetic 4,096 x 8,192 layers; no numpy peer here).
    prows = ["| packed (GPTQ, 4,096 x 8,192, groups of 128) | threads | G el/s | qweight GB/s |", "|---|---:|---:|---:|"]
    for bits in (3, 4):
        for t in threads:
            b = best.get(f"packed/GPTQ{bits}bit/threads:{t}")
            if b is not None:
                prows.append(f"| GPTQ {bits}-bit | {t} | {b['items_per_second'] / 1e9:.2f} | {b['bytes_per_second'] / 1e9:.2f} |")
    ptable = "\n".join(prows) if len(prows) > 2 else ""

    n_met = sum(ok for _, ok in met_all)
    summary = [
        f"- ≥{NUMPY_TARGET:.0f}× numpy: met for {n_met} of {len(met_all)} types with a numpy peer"
        + (f" (not met: {', '.join(ty for ty, ok in met_all if not ok)})" if n_met < len(met_all) else "")
        + (f"; no numpy figure for {', '.join(unmeasured)}" if unmeasured else ""),
        "- statistics ≥50% of copy bandwidth (input bytes): "
        + ("; ".join(f"{ty} {t}t {'met' if ok else 'not met'}" for ty, t, ok in stats_met) or "not measured"),
    ]
    numpy_line = "skipped"
    if np_doc:
        numpy_line = (f"numpy {np_doc['numpy_version']} (Python {np_doc['python']}), gguf-py style, "
                      f"{args.numpy_mib:g} MiB of the same tiled input per type, best of up to {args.numpy_repeats} runs; "
                      "each decoder reproduced the fixture's reference values bit for bit before it was timed")
    header = run_context_lines("Tensormorph dequantization throughput (last run)", started, finished, cpp.get("context", {}),
                               source, load_before, idle, args.wait_idle, cpp_noise, np_noise) + [
        f"- data: for each quantized type, the bytes of its tensor in {gguf} repeated to {args.size_mib} MiB "
        "(whole tensor copies; real, valid blocks)",
        f"- tensormorph: `dequantize_range` into a pre-faulted float32 buffer, best of {args.repetitions} Google "
        f"Benchmark repetitions (min time {args.min_time} s each), real time; {numpy_line}",
        "- G el/s = 1e9 dequantized values per second; input GB/s = 1e9 quantized input bytes per second; memcpy "
        "counts its source size (it writes as many bytes again); the % divides by memcpy at the same thread count. "
        "Dequantization writes 4 output bytes per element, so its memory traffic is far above its input figure.",
        "- numpy is single-threaded: its figure is divided into tensormorph's at each thread count.",
        "",
    ]
    report = ("\n".join(header) + "\n" + table + "\n\n" + stable + "\n\n" + (ptable + "\n\n" if ptable else "")
              + "\n".join(summary) + "\n")
    print(report)
    with open(args.out, "w") as f:
        f.write(report)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
