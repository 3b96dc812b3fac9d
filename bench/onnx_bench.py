#!/usr/bin/python3
"""ONNX models: listing and statistics by tensormorph beside onnx.load + numpy, and beside the raw read rate. Part of
`make bench`; skipped with a message when Debian's python3-onnx is absent.

  /usr/bin/python3 bench/onnx_bench.py --build build [--repeats 3]

1. The bf16 checkpoint of bench/pyramid_index_bench.py (issue 28's generator, about 1.07 GB) is written again as f16
   (ONNX 1.12's numpy helper has no bfloat16) with ONNX's helper API (onnx.numpy_helper.from_array: raw_data) as the initializers of a one-node graph, once, in
   <build>/bench-data/onnx: model.onnx with every tensor inline (one protobuf message), and external.onnx whose
   weights onnx.save_model moved to one external data file (external.onnx.data).
2. Warm page cache, best of --repeats:
   - `cat` of the file (the raw read rate);
   - `tensormorph ls` against onnx.load (which parses the whole message, copying every raw_data) and a listing of
     names, element types and shapes;
   - `tensormorph stats --json` of every tensor into a fresh index database (count, min, max, mean, std, histogram,
     exact quantiles) against onnx.load + numpy_helper.to_array + per tensor min, max, mean, std in numpy (float32
     math; fewer statistics than tensormorph computes, and not exact quantiles).
Writes bench/last-run-onnx.md. Ratios are within this one run; absolute times are context only.
"""
import argparse
import datetime
import glob
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_timing import fresh_index_stats_seconds, timed_command as timed  # noqa: E402
from pyramid_index_bench import bf16_to_f32, make_checkpoints, read_safetensors  # noqa: E402

PEER = r"""
import sys, time
import numpy as np
import onnx
from onnx import numpy_helper
t0 = time.perf_counter()
m = onnx.load(sys.argv[1])
listing = [(t.name, t.data_type, list(t.dims)) for t in m.graph.initializer]
t1 = time.perf_counter()
if sys.argv[2] == "stats":
    for t in m.graph.initializer:
        x = numpy_helper.to_array(t).astype(np.float32)
        (x.min(), x.max(), x.mean(), x.std())
t2 = time.perf_counter()
print(t1 - t0, t2 - t0)
"""



def log(msg):
    print(f"[onnx_bench] {msg}", file=sys.stderr, flush=True)


def write_models(bf16_dir, inline, external):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = []
    for shard in sorted(glob.glob(os.path.join(bf16_dir, "*.safetensors"))):
        for name, shape, bits in read_safetensors(shard):
            inits.append(numpy_helper.from_array(bf16_to_f32(bits).astype(np.float16).reshape(shape), name))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "bench", [x], [y], initializer=inits)
    model = helper.make_model(graph, producer_name="bench/onnx_bench.py", opset_imports=[helper.make_opsetid("", 13)])
    log(f"writing {inline} ({len(inits)} initializers)")
    onnx.save_model(model, inline)
    log(f"writing {external} with external data")
    onnx.save_model(model, external, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(external) + ".data", size_threshold=1024)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    try:
        import onnx
    except ImportError:
        print("[onnx_bench] skipped: Debian's python3-onnx is not installed (apt-get install python3-onnx)")
        return
    tm = os.path.join(args.build, "tensormorph")
    base = os.path.join(args.build, "bench-data")
    bf16_dir = dict(make_checkpoints(tm, os.path.join(base, "pyramid")))["bf16"]
    inline = os.path.join(base, "onnx", "model.onnx")
    external = os.path.join(base, "onnx", "external.onnx")
    if not os.path.exists(external + ".data"):
        os.makedirs(os.path.dirname(inline), exist_ok=True)
        write_models(bf16_dir, inline, external)
    size = os.path.getsize(inline)
    best = lambda f: min(f() for _ in range(args.repeats))  # noqa: E731
    db = os.path.join(base, "onnx", "bench.db")

    def fresh_stats(path):
        return fresh_index_stats_seconds(tm, path, db)

    def peer(kind, path):
        p = subprocess.run(["/usr/bin/python3", "-c", PEER, path, kind], capture_output=True, text=True, check=True)
        return [float(v) for v in p.stdout.split()]

    rows = []
    for label, path, data in (("inline (one message)", inline, [inline]),
                              ("external data", external, [external, external + ".data"])):
        timed(["cat", *data])
        cat = best(lambda: timed(["cat", *data]))
        ls = best(lambda: timed([tm, "ls", path]))
        stats = best(lambda: fresh_stats(path))
        peer_ls = min(peer("ls", path)[0] for _ in range(args.repeats))
        peer_stats = min(peer("stats", path)[1] for _ in range(args.repeats))
        rows.append((label, cat, ls, peer_ls, stats, peer_stats))
    lines = [
        "# ONNX models (bench/onnx_bench.py)",
        "",
        f"{datetime.date.today()} · {platform.node()} · {os.cpu_count()} cores · onnx {onnx.__version__} · "
        f"warm page cache, best of {args.repeats}",
        "",
        f"Model: {size / 1e9:.2f} GB of f16 initializers (issue 28's demo checkpoint), written by onnx.save_model.",
        "",
        "| model | `cat` s | list: tensormorph s | onnx.load s | ratio | statistics: tensormorph s | onnx.load + numpy s | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, cat, ls, pls, st, pst in rows:
        lines.append(f"| {label} | {cat:.2f} | {ls:.3f} | {pls:.3f} | {pls / ls:.1f} | {st:.3f} | {pst:.3f} | {pst / st:.1f} |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(HERE, "last-run-onnx.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
