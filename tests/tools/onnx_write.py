"""Writes the ONNX fixtures of tests/fixtures/onnx with ONNX's own helper API (Debian's python3-onnx 1.12:
onnx.helper, onnx.numpy_helper, onnx.external_data_helper, onnx.save_model) and the values numpy computes for
them (expected.json). The fixtures and expected.json are committed; only regenerating them needs onnx
(apt-get install python3-onnx), so CI never installs it.

    /usr/bin/python3 tests/tools/onnx_write.py [OUT_DIR]     (default: tests/fixtures/onnx)

Files:
  model.onnx     a small graph (MatMul, Add, Relu) whose initializers hold every element type ONNX 1.12's helper
                 writes, as raw_data (numpy_helper.from_array: f32 f64 f16 i8 i16 i32 i64 u8 u16 u32 u64 bool; bf16
                 through helper.make_tensor(raw=True)), as typed fields (helper.make_tensor(raw=False): float_data,
                 double_data, int32_data, int64_data, uint64_data, string_data), a scalar, an empty tensor and a
                 complex64; the model's metadata (ir_version, producer, two opset imports, model_version,
                 doc_string, metadata_props). ONNX 1.12 predates the float8 types (data_type 17..20, ONNX 1.14): their
                 three tensors are written with the same helper as raw bytes and their data_type set through the
                 protobuf field, which is an int32.
  external.onnx  initializers whose raw bytes onnx.save_model moved to external data (external.data, one file for
                 all, size_threshold 64: the small ones stay inline), and one tensor placed in a second file
                 (weights/extra.bin, a sub-folder) with external_data_helper.set_external_data.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from fixture_output import finish  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "onnx")

TYPE_NAMES = {v: k for k, v in TensorProto.DataType.items()}
TYPE_NAMES.update({17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ"})


def f8_values(bits, exponent_bits, mantissa_bits, bias, finite_only):
    """Exact float8 values of `bits` (uint8 array) as float64: e4m3fn (finite_only: no infinities, S.1111.111 is NaN)
    or e5m2 (IEEE-like)."""
    out = []
    for b in bits.tolist():
        sign = -1.0 if b & 0x80 else 1.0
        e = (b >> mantissa_bits) & ((1 << exponent_bits) - 1)
        m = b & ((1 << mantissa_bits) - 1)
        top = (1 << exponent_bits) - 1
        if finite_only and e == top and m == (1 << mantissa_bits) - 1:
            out.append(float("nan"))
        elif not finite_only and e == top:
            out.append(sign * float("inf") if m == 0 else float("nan"))
        elif e == 0:
            out.append(sign * m * 2.0 ** (1 - bias - mantissa_bits))
        else:
            out.append(sign * (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias))
    return np.array(out, dtype=np.float64)


def summary(values, shape, stored_type, readable, field):
    """expected.json's entry for one tensor: its values summarised by numpy (finite values only for min/max/sum)."""
    v = np.asarray(values).reshape(-1)
    entry = {"shape": list(shape), "elements": int(np.prod(shape, dtype=np.int64)), "stored_type": stored_type,
             "readable": readable, "field": field}
    if readable and v.size:
        if v.dtype.kind in "iu":
            entry.update(min=int(v.min()), max=int(v.max()), sum=float(sum(int(x) for x in v)),
                         first=[int(x) for x in v[:4]])
        else:
            f = v.astype(np.float64)
            finite = f[np.isfinite(f)]
            entry.update(min=float(finite.min()), max=float(finite.max()), sum=float(finite.sum()),
                         nan_count=int(np.isnan(f).sum()), inf_count=int(np.isinf(f).sum()),
                         first=[float(x) for x in f[:4]])
    return entry


def raw_tensors(rng):
    """name -> (TensorProto, values as numpy, stored_type, readable)."""
    out = {}
    base = rng.standard_normal((3, 4)) * 10
    arrays = {
        "dense.weight": base.astype(np.float32),
        "dense.bias": np.array([0.5, -1.25, 3.0, 0.0], dtype=np.float32),
        "raw.f64": (rng.standard_normal(4) * 1e3).astype(np.float64),
        "raw.f16": (rng.standard_normal((2, 5)) * 50).astype(np.float16),
        "raw.i8": rng.integers(-128, 128, 6).astype(np.int8),
        "raw.i16": rng.integers(-30000, 30000, (2, 3)).astype(np.int16),
        "raw.i32": rng.integers(-2 ** 31, 2 ** 31, 5).astype(np.int32),
        "raw.i64": np.array([[-(2 ** 62) - 1, 5], [7, -9]], dtype=np.int64),
        "raw.u8": rng.integers(0, 256, 7).astype(np.uint8),
        "raw.u16": rng.integers(0, 65536, 3).astype(np.uint16),
        "raw.u32": np.array([0, 4000000000, 17], dtype=np.uint32),
        "raw.u64": np.array([2 ** 63 + 5, 3], dtype=np.uint64),
        "raw.bool": np.array([True, False, True, True, False]),
        "raw.scalar": np.array(2.5, dtype=np.float32),
        "raw.empty": np.zeros((0, 3), dtype=np.float32),
    }
    for name, a in arrays.items():
        t = numpy_helper.from_array(a, name)
        out[name] = (t, a, TYPE_NAMES[t.data_type], True)
    # bfloat16: numpy has no such type; the helper takes the raw little-endian bytes.
    bits = (base.astype(np.float32)[:2, :3].reshape(-1).view(np.uint32) >> 16).astype(np.uint16)
    t = helper.make_tensor("raw.bf16", TensorProto.BFLOAT16, [2, 3], bits.tobytes(), raw=True)
    out["raw.bf16"] = (t, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64), "BFLOAT16", True)
    # float8 (ONNX 1.14's types 17..20): raw bytes written by the helper as UINT8, the data_type set afterwards.
    f8 = np.array([0x00, 0x38, 0xB8, 0x7E, 0x7F, 0x01, 0x80, 0x44], dtype=np.uint8)
    for name, code, values, readable in (
            ("raw.f8_e4m3fn", 17, f8_values(f8, 4, 3, 7, True), True),
            ("raw.f8_e5m2", 19, f8_values(f8, 5, 2, 15, False), True),
            ("raw.f8_e4m3fnuz", 18, None, False)):
        t = helper.make_tensor(name, TensorProto.UINT8, [2, 4], f8.tobytes(), raw=True)
        t.data_type = code
        out[name] = (t, values, TYPE_NAMES[code], readable)
    c = np.array([1 + 2j, -3.5 + 0j], dtype=np.complex64)
    out["raw.complex64"] = (numpy_helper.from_array(c, "raw.complex64"), None, "COMPLEX64", False)
    return out


def typed_tensors(rng):
    """Tensors in the typed fields (helper.make_tensor(raw=False)): name -> (TensorProto, values, stored_type, readable,
    field). float_data and double_data are packed little-endian, read in place; the varint fields are decoded."""
    f32 = (rng.standard_normal(6) * 4).astype(np.float32)
    f64 = np.array([1e300, -2.5, 0.125], dtype=np.float64)
    i64 = np.array([3, -(2 ** 40), 12], dtype=np.int64)
    i32 = np.array([-5, 6, 70000], dtype=np.int32)
    f16 = np.array([1.5, -2.0], dtype=np.float16)
    u64 = np.array([2 ** 64 - 1, 1], dtype=np.uint64)
    return {
        "typed.f32": (helper.make_tensor("typed.f32", TensorProto.FLOAT, [2, 3], f32.tolist()), f32, "FLOAT", True, "float_data"),
        "typed.f64": (helper.make_tensor("typed.f64", TensorProto.DOUBLE, [3], f64.tolist()), f64, "DOUBLE", True, "double_data"),
        "typed.i64": (helper.make_tensor("typed.i64", TensorProto.INT64, [3], i64.tolist()), i64, "INT64", True, "int64_data"),
        "typed.i32": (helper.make_tensor("typed.i32", TensorProto.INT32, [3], i32.tolist()), i32, "INT32", True, "int32_data"),
        "typed.f16": (helper.make_tensor("typed.f16", TensorProto.FLOAT16, [2], f16.tolist()), f16, "FLOAT16", True, "int32_data"),
        "typed.u64": (helper.make_tensor("typed.u64", TensorProto.UINT64, [2], u64.tolist()), u64, "UINT64", True, "uint64_data"),
        "typed.string": (helper.make_tensor("typed.string", TensorProto.STRING, [2], [b"ab", b"c"]), None, "STRING", False,
                         "string_data"),
    }


def graph_model(initializers, name):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    nodes = [helper.make_node("MatMul", ["x", "dense.weight"], ["h"], name="matmul"),
             helper.make_node("Add", ["h", "dense.bias"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, name, [x], [y], initializer=initializers)
    model = helper.make_model(graph, producer_name="tensormorph-fixture", producer_version="1.0",
                              opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    model.model_version = 3
    model.doc_string = "Tensormorph's ONNX fixture"
    helper.set_model_props(model, {"author": "tests/tools/onnx_write.py", "license": "MIT"})
    return model


def expected_metadata(model):
    return {"onnx.ir_version": str(model.ir_version), "onnx.producer_name": model.producer_name,
            "onnx.producer_version": model.producer_version, "onnx.model_version": str(model.model_version),
            "onnx.doc_string": model.doc_string, "onnx.opset_import": "ai.onnx 13, com.example 1",
            "onnx.graph.name": model.graph.name, "onnx.graph.nodes": "3", "onnx.graph.op_types": "Add 1, MatMul 1, Relu 1",
            "author": "tests/tools/onnx_write.py", "license": "MIT"}


def check_reload(path, expected):
    """onnx itself reads back what it wrote: every readable tensor's values through numpy_helper.to_array."""
    model = onnx.load(path)
    onnx.checker.check_model(path)
    for t in model.graph.initializer:
        if t.data_type in (17, 18, 19, 20, 8, 14):
            continue
        a = numpy_helper.to_array(t, os.path.dirname(path))
        w = expected[t.name]
        assert list(a.shape) == w["shape"], t.name
        if w["readable"] and a.size:
            assert float(np.asarray(a, dtype=np.float64).min()) == float(w["min"]) or a.dtype.kind in "iu", t.name


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(45)
    expected = {"onnx_version": onnx.__version__, "files": {}}

    raw = raw_tensors(rng)
    typed = typed_tensors(rng)
    inits = [t for t, *_ in raw.values()] + [t for t, *_ in typed.values()]
    model = graph_model(inits, "fixture")
    path = os.path.join(OUT, "model.onnx")
    onnx.save_model(model, path)
    tensors = {n: summary(v, list(t.dims), st, r, "raw_data") for n, (t, v, st, r) in raw.items()}
    tensors.update({n: summary(v, list(t.dims), st, r, f) for n, (t, v, st, r, f) in typed.items()})
    expected["files"]["model.onnx"] = {"tensors": tensors, "metadata": expected_metadata(model)}
    check_reload(path, tensors)

    rng = np.random.default_rng(46)
    arrays = {"big.f32": (rng.standard_normal((64, 16)) * 3).astype(np.float32),
              "big.f16": (rng.standard_normal(40) * 8).astype(np.float16),
              "big.i64": rng.integers(-10 ** 12, 10 ** 12, 12).astype(np.int64),
              "dense.weight": rng.standard_normal((3, 4)).astype(np.float32),
              "dense.bias": np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32),
              "extra.u8": np.arange(200, dtype=np.uint8)}
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    model = graph_model(inits, "external")
    for old in ("external.data", os.path.join("weights", "extra.bin")):
        if os.path.exists(os.path.join(OUT, old)):
            os.remove(os.path.join(OUT, old))
    os.makedirs(os.path.join(OUT, "weights"), exist_ok=True)
    external_data_helper.convert_model_to_external_data(model, all_tensors_to_one_file=True, location="external.data",
                                                        size_threshold=64)
    extra = [t for t in model.graph.initializer if t.name == "extra.u8"][0]
    external_data_helper.set_external_data(extra, "weights/extra.bin")
    path = os.path.join(OUT, "external.onnx")
    onnx.save_model(model, path)
    saved = onnx.load(path, load_external_data=False)
    tensors = {}
    for t in saved.graph.initializer:
        ext = {e.key: e.value for e in t.external_data}
        entry = summary(arrays[t.name], list(t.dims), TYPE_NAMES[t.data_type], True, "raw_data")
        if ext:
            entry["location"] = ext["location"]
        tensors[t.name] = entry
    expected["files"]["external.onnx"] = {"tensors": tensors, "metadata": expected_metadata(model)}
    check_reload(path, tensors)

    finish(OUT, expected)


if __name__ == "__main__":
    main()
