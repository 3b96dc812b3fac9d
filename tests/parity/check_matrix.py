#!/usr/bin/python3
"""Keeps tests/parity/backend_matrix.json honest:
  - every level is one of the declared levels; every capability lists every declared backend;
  - exactly one backend is the reference for each capability;
  - every implemented entry names gates, and every gate exists (gtest names from the test binary's
    --gtest_list_tests, Python tests parsed from their files);
  - what the matrix claims for the CPU backend and the test plugin is what the binary reports (for a row naming
    "dtypes", a kernel of the op that takes every one of them);
  - docs/backends.md is exactly what the matrix generates.
Usage: check_matrix.py --gtest-binary PATH [--gtest-binary PATH ...] --tm-bin PATH --plugin-dir DIR [--plugin-dir DIR ...]
"""
import argparse
import ast
import fnmatch
import json
import os
import subprocess
import sys

# Ops whose kernels take stored formats (ggml types, packed schemes, SSB variants) rather than dtypes.
# Test plugins that run another backend's kernel source on the host (backends/gpu/host_grid.h): what they
# report stands for those backends in CI, where the real plugins have no device.
EMULATES = {"gpuemu": ("cuda", "hip")}
# Ops the emulation has that an emulated backend's build leaves out (the kernel source's #if), and why.
NOT_BUILT = {("hip", "stem.ssb_overlap"): "no hipFFT in Debian 12 (backends/gpu/gpu_fft.inl)"}
FORMAT_OPS = ("dequantize.ggml", "dequantize.packed", "quant.moments", "quant.block_stats", "stem.ssb_overlap")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gtest_names(binary):
    out = subprocess.run([binary, "--gtest_list_tests"], capture_output=True, text=True, check=True).stdout
    names, suite = set(), None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip().rstrip(".")
        else:
            names.add("%s.%s" % (suite, line.split("#")[0].strip()))
    return names


def python_tests(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test_"):
                    found.add("%s.%s" % (node.name, item.name))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gtest-binary", required=True, action="append", help="repeatable: every gtest binary")
    ap.add_argument("--tm-bin", required=True)
    ap.add_argument("--plugin-dir", required=True, action="append", help="repeatable: test plugins, real plugins")
    args = ap.parse_args()
    with open(os.path.join(ROOT, "tests", "parity", "backend_matrix.json")) as f:
        matrix = json.load(f)
    problems = []
    levels = set(matrix["levels"])
    backends = set(matrix["backends"])
    gtests = set().union(*(gtest_names(b) for b in args.gtest_binary))
    py_cache = {}

    def gate_exists(gate):
        kind, _, name = gate.partition(":")
        if kind == "gtest":
            return any(fnmatch.fnmatchcase(g, name) for g in gtests)
        if kind == "e2e":  # a browser test: the file exists and ctest runs it (tests/CMakeLists.txt)
            full = os.path.join(ROOT, name)
            with open(os.path.join(ROOT, "tests", "CMakeLists.txt")) as f:
                return os.path.isfile(full) and name in f.read()
        if kind == "py":
            path, _, test = name.partition("::")
            full = os.path.join(ROOT, path)
            if not os.path.isfile(full):
                return False
            if full not in py_cache:
                py_cache[full] = python_tests(full)
            return test in py_cache[full]
        return False

    for cap in matrix["capabilities"]:
        cid = cap["id"]
        if set(cap["backends"]) != backends:
            problems.append("%s: lists backends %s, the matrix declares %s" % (cid, sorted(cap["backends"]), sorted(backends)))
        refs = [b for b, e in cap["backends"].items() if e["level"] == "reference"]
        if cap.get("op") and len(refs) != 1:
            problems.append("%s: needs exactly one reference backend, has %s" % (cid, refs))
        for name, entry in cap["backends"].items():
            if entry["level"] not in levels:
                problems.append("%s/%s: level %r is not one of %s" % (cid, name, entry["level"], sorted(levels)))
            if entry["level"] != "not-implemented" and not entry.get("gates"):
                problems.append("%s/%s: level %s names no gate test" % (cid, name, entry["level"]))
            for gate in entry.get("gates", []):
                if not gate_exists(gate):
                    problems.append("%s/%s: gate %s does not exist" % (cid, name, gate))

    # What the binary reports must agree with what the matrix claims.
    present = {}
    for plugin_dir in args.plugin_dir:
        env = dict(os.environ, TENSORMORPH_PLUGIN_DIR=plugin_dir)
        report = json.loads(subprocess.run([args.tm_bin, "backends", "--json"], capture_output=True, text=True,
                                           env=env, check=True).stdout)
        present.update({b["name"]: b for b in report["backends"] if b["available"]})
    for emulator, real in EMULATES.items():
        if emulator in present:
            for name in real:
                view = dict(present[emulator])
                view["kernels"] = [k for k in view["kernels"] if (name, k["op"]) not in NOT_BUILT]
                present.setdefault(name, view)
            del present[emulator]
    for cap in matrix["capabilities"]:
        if not cap.get("op"):
            continue
        step = cap.get("approx_step")
        # Rows of ops over stored formats are per format ("dequantize.ggml.Q4_0"): the kernel must take it.
        per_format = cap["op"] in FORMAT_OPS and cap["id"].startswith(cap["op"] + ".")
        fmt = cap["id"][len(cap["op"]) + 1:] if per_format else None
        # Rows of one op's dtypes ("stem.frame_sums.float", "dtypes": ["f32", "f64"]): the kernel must take them all.
        need = cap.get("dtypes", [])
        for name, entry in cap["backends"].items():
            kernels = [k for k in present.get(name, {}).get("kernels", [])
                       if k["op"] == cap["op"] and k["approx_step"] == step and (fmt is None or fmt in k["dtypes"])
                       and all(d in k["dtypes"] for d in need)]
            implemented = entry["level"] != "not-implemented"
            if name in present and implemented != bool(kernels):
                problems.append("%s/%s: matrix says %s but the backend %s such a kernel" %
                                (cap["id"], name, entry["level"], "has" if kernels else "has no"))
    for name in present:
        if name not in backends:
            problems.append("backend %s is installed but missing from the matrix" % name)

    doc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen-backends-doc.py"), "--check"],
                         capture_output=True, text=True)
    if doc.returncode != 0:
        problems.append(doc.stdout.strip() or doc.stderr.strip().splitlines()[-1])

    for p in problems:
        print("MATRIX:", p)
    print("checked %d capabilities x %d backends: %s" % (len(matrix["capabilities"]), len(backends),
                                                       "OK" if not problems else "%d problems" % len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
