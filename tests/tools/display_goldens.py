#!/usr/bin/python3
"""Writes the display kernels' goldens (tests/goldens/display/) from an independent reference.

The reference is this script alone: the transforms, limits and normalisation of the contract in
src/display/transform.h written again in Python, matplotlib's own Colormap.__call__ for the colours and
numpy for the histogram. It never runs Tensormorph's code nor reads its colour tables.

Files: cases.json holds the inputs (JSON numbers, or "nan" / "inf" / "-inf") with each case's transform,
log floor and limits (null: automatic); NAME.json, one per colour map, holds for every case the resolved
limits, the expected RGBA8 of the inputs (one hex string, 8 digits "rrggbbaa" per input) and the 256-bin histogram (nonzero bins as
[bin, count] pairs, plus nan / pos_inf / neg_inf).

Transforms use Python's math.log10 / math.log1p, i.e. the C library's, as std::log10 / std::log1p do;
numpy's np.log10 / np.log1p may be vectorised approximations that differ in the last bit (they do on
AVX-512 machines), which would move values sitting on a bin edge.

    /usr/bin/python3 tests/tools/display_goldens.py           # rewrite the goldens
    /usr/bin/python3 tests/tools/display_goldens.py --check   # exit 1 with a diff when they differ
"""
import argparse
import difflib
import json
import math
import pathlib
import sys

import matplotlib
import numpy as np

OUT_DIR = pathlib.Path(__file__).resolve().parents[1] / "goldens" / "display"
COLORMAPS = ["gray", "viridis", "plasma", "inferno", "magma", "cividis", "turbo",
             "RdBu_r", "seismic", "coolwarm", "twilight"]
DIVERGING = {"RdBu_r", "seismic", "coolwarm"}  # twilight is cyclic: plain automatic limits
DEFAULT_FLOOR = 1e-12
NAN, INF = float("nan"), float("inf")


# ---- the contract, independently -------------------------------------------------------------------

def transform(x, kind, floor):
    if kind == "linear":
        return x
    if kind == "log":
        return math.log10(max(abs(x), floor))
    if kind == "signed-log":
        sign = 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)
        return sign * math.log1p(abs(x))
    raise ValueError(kind)


def auto_limits(values, kind, diverging):
    xs = np.asarray(values, dtype=np.float64)
    if kind == "log":
        xs = np.abs(xs)
    xs = xs[np.isfinite(xs)]
    if xs.size == 0:
        return 0.0, 0.0
    lo, hi = float(xs.min()), float(xs.max())
    if diverging and kind != "log" and lo < 0 < hi:
        m = max(-lo, hi)
        return -m, m
    return lo, hi


def normalised(values, kind, floor, lo, hi):
    """n in [0, 1] per value; NaN for NaN inputs."""
    tlo, thi = transform(lo, kind, floor), transform(hi, kind, floor)
    scale = 1.0 if math.isfinite(thi - tlo) else 0.5  # t(hi) - t(lo) overflows: halve every term
    out = []
    for x in values:
        if math.isnan(x):
            n = NAN
        elif x == INF:
            n = 1.0
        elif x == -INF:
            n = 1.0 if kind == "log" else 0.0
        elif thi == tlo:
            n = 0.5
        else:
            n = (transform(x, kind, floor) * scale - tlo * scale) / (thi * scale - tlo * scale)
            n = min(max(n, 0.0), 1.0)
        out.append(n)
    return np.array(out, dtype=np.float64)


def expectations(case, cmap_name):
    values = case["values"]
    kind, floor = case["transform"], case["log_floor"]
    lo, hi = case["lo"], case["hi"]
    if lo is None or hi is None:
        alo, ahi = auto_limits(values, kind, cmap_name in DIVERGING and lo is None and hi is None)
        lo = alo if lo is None else lo
        hi = ahi if hi is None else hi
    n = normalised(values, kind, floor, lo, hi)

    cmap = matplotlib.colormaps[cmap_name].resampled(256)
    assert cmap.N == 256, (cmap_name, cmap.N)
    cmap.set_bad((0.0, 0.0, 0.0, 0.0))
    rgba = np.floor(np.asarray(cmap(n, bytes=False), dtype=np.float64).reshape(-1, 4) * 255.0 + 0.5)
    rgba = rgba.astype(np.int64)
    hexes = "".join("%02x" % int(c) for c in rgba.reshape(-1))

    xs = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(xs)
    bins = np.clip(np.floor(n[finite] * 256.0), 0, 255).astype(np.int64)
    counts = np.bincount(bins, minlength=256)
    return {
        "name": case["name"], "lo": lo, "hi": hi, "rgba": hexes,
        "histogram": {"bins": [[int(k), int(c)] for k, c in enumerate(counts) if c],
                      "nan": int(np.isnan(xs).sum()), "pos_inf": int((xs == INF).sum()),
                      "neg_inf": int((xs == -INF).sum())},
    }


# ---- the inputs -------------------------------------------------------------------------------------

def cases():
    rs = np.random.RandomState(20240607)  # legacy generator: its stream is stable across numpy versions
    r4 = lambda a: [float(v) for v in np.round(a, 4)]
    below = lambda x: float(np.nextafter(x, -INF))
    above = lambda x: float(np.nextafter(x, INF))
    out = []

    def add(name, kind, values, lo=None, hi=None, floor=DEFAULT_FLOOR):
        out.append({"name": name, "transform": kind, "log_floor": floor, "lo": lo, "hi": hi,
                    "values": [float(v) for v in values]})

    # Every colour index once: the exact bin edges k/256 of [0, 1] (256/256 is the top end).
    add("linear-sweep", "linear", [k / 256 for k in range(257)], 0.0, 1.0)
    # lo + k (hi - lo)/256 with step 1/32, exact; just below and above edges; out of range; specials.
    edges = [-3.0 + k / 32 for k in (0, 1, 7, 31, 64, 127, 128, 129, 200, 254, 255, 256)]
    add("linear-edges", "linear",
        edges + [below(e) for e in edges[1:]] + [above(e) for e in edges[:-1]] +
        [-1e300, -4.0, 5.5, 1e300, 0.0, -0.0, NAN, INF, -INF], -3.0, 5.0)
    add("linear-auto", "linear", r4(rs.normal(10, 3, 12)) + [3.0, 17.5, NAN, INF, -INF, 0.5])
    add("linear-auto-signed", "linear", [-2.0, 7.0] + r4(rs.uniform(-2, 7, 12)) + [0.0, NAN, INF, -INF])
    add("linear-huge-range", "linear", [-1.5e308, 1.7e308, 0.0, 1e308, -1e308, 5e307, -5e-324, NAN, INF, -INF])
    add("linear-collapsed", "linear", [2.0, 1.0, 3.0, -1e10, 0.0, NAN, INF, -INF], 2.0, 2.0)
    add("linear-one-end-given", "linear", r4(rs.uniform(-1, 1, 8)) + [NAN], -0.5, None)
    add("auto-collapsed", "linear", [3.0, 3.0, 3.0, NAN, INF, -INF])
    add("auto-no-finite", "linear", [NAN, INF, -INF, NAN])
    add("auto-empty", "linear", [])
    # log: exact powers of ten (exact log10) on the edges k/8 of [-4, 4]; |x|; the floor; specials.
    pw = [10.0 ** m for m in range(-6, 7)]
    add("log-edges", "log",
        pw + [-v for v in pw[::3]] + [0.0, -0.0, 1e-13, 5e-5, 3.7, 123.0, 9999.0, 1e300, NAN, INF, -INF],
        1e-4, 1e4)
    add("log-floor", "log", [0.0, 1e-5, -1e-3, 1e-3, 0.01, 1.0, 10.0, 999.0, 1000.0, 1e6, NAN, INF, -INF],
        0.0, 1000.0, floor=1e-3)
    add("log-auto-zeros", "log", r4(rs.lognormal(0, 3, 10)) + [0.0, -250.0, -0.01, NAN, INF], floor=1e-6)
    add("log-auto-positive", "log", r4(rs.lognormal(2, 2, 10)) + [NAN, -INF])
    add("log-collapsed", "log", [-2.0, 2.0, 0.0, 5.0, -1e-20, NAN, INF, -INF], -2.0, 2.0)
    # signed-log: ordinary values around zero, both signs, the limits themselves.
    add("signed-log-explicit", "signed-log",
        [-1e3, -100.0, -5.5, -1.0, -0.5, 0.0, -0.0, 0.5, 1.0, 10.0, 999.5, 1000.0, 1e5, NAN, INF, -INF] +
        r4(rs.normal(0, 200, 8)), -100.0, 1000.0)
    add("signed-log-auto-signed", "signed-log", r4(rs.normal(0, 50, 12)) + [-3000.0, 120.0, NAN, INF])
    add("signed-log-auto-positive", "signed-log", r4(rs.uniform(0.5, 900, 8)) + [NAN, -INF])
    return out


# ---- files ------------------------------------------------------------------------------------------

def enc(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def document(header, key, items):
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in header.items()] + [f'  "{key}": [']
    lines += ["    " + json.dumps(it, separators=(",", ":")) + ("," if i + 1 < len(items) else "")
              for i, it in enumerate(items)]
    return "\n".join(lines + ["  ]", "}"]) + "\n"


def render():
    cs = cases()
    header = {"generator": "tests/tools/display_goldens.py", "matplotlib": matplotlib.__version__}
    files = {"cases.json": document(header, "cases", [
        {**{k: c[k] for k in ("name", "transform", "log_floor", "lo", "hi")},
         "values": [enc(v) for v in c["values"]]} for c in cs])}
    for name in COLORMAPS:
        h = {**header, "colormap": name, "diverging": name in DIVERGING}
        files[f"{name}.json"] = document(h, "cases", [expectations(c, name) for c in cs])
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the checked-in goldens instead of writing")
    args = ap.parse_args()
    files = render()
    if not args.check:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        for stale in set(p.name for p in OUT_DIR.glob("*.json")) - set(files):
            (OUT_DIR / stale).unlink()
        for name, text in files.items():
            (OUT_DIR / name).write_text(text)
        print(f"display_goldens: wrote {len(files)} files to {OUT_DIR}")
        return 0
    bad = 0
    present = set(p.name for p in OUT_DIR.glob("*.json")) if OUT_DIR.is_dir() else set()
    for stale in sorted(present - set(files)):
        print(f"display_goldens: {stale} is checked in but no longer generated")
        bad += 1
    for name, text in files.items():
        path = OUT_DIR / name
        old = path.read_text() if path.exists() else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       str(path), "regenerated"))
            bad += 1
    if bad:
        print(f"display_goldens: {bad} file(s) differ from what matplotlib {matplotlib.__version__} gives now")
        return 1
    print(f"display_goldens: {len(files)} files up to date (matplotlib {matplotlib.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
