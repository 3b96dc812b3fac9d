"""ONNX initializers whose values are in the typed varint fields, written by ONNX's own helper API
(helper.make_tensor(raw=False): int32_data for INT8/16/32, UINT8/16, BOOL, FLOAT16, BFLOAT16; int64_data for INT64;
uint64_data for UINT32/UINT64) with each type's minimum, maximum, zero and a negative value where the type has one:
`stats` and `export` equal onnx.numpy_helper.to_array. python3-onnx 1.12 predates the float8 types, so FLOAT8E4M3FN and
FLOAT8E5M2 tensors are TensorProtos filled through the protobuf API (data_type 17/19, their bits in int32_data) and
compared with the exact decoder of tests/tools/onnx_write.py. Values that do not fit their type (a UINT8 of 300, a BOOL
of 2, an INT8 of -129, a UINT32 of 2^32) are refused with exit 3 naming the file, tensor, index and value. The models
are written at test time (a few hundred bytes each); skipped where python3-onnx is not installed."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from cli_harness import run  # noqa: E402

PYTHON = "/usr/bin/python3"
HAVE_ONNX = subprocess.run([PYTHON, "-c", "import onnx"], capture_output=True).returncode == 0


def typed_tensors():
    """name -> (TensorProto, expected values as float64 or int array)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from onnx_write import f8_values

    ints = {
        "int8": (TensorProto.INT8, np.int8), "int16": (TensorProto.INT16, np.int16), "int32": (TensorProto.INT32, np.int32),
        "int64": (TensorProto.INT64, np.int64), "uint8": (TensorProto.UINT8, np.uint8), "uint16": (TensorProto.UINT16, np.uint16),
        "uint32": (TensorProto.UINT32, np.uint32), "uint64": (TensorProto.UINT64, np.uint64),
    }
    out = {}
    for name, (code, np_type) in ints.items():
        info = np.iinfo(np_type)
        values = [int(info.min), 0, int(info.max), 1] + ([-1, int(info.min) + 1] if info.min < 0 else [int(info.max) - 1, 7])
        t = helper.make_tensor(name, code, [2, 3], values, raw=False)
        out[name] = (t, numpy_helper.to_array(t))
    t = helper.make_tensor("bool", TensorProto.BOOL, [4], [True, False, False, True], raw=False)
    out["bool"] = (t, numpy_helper.to_array(t))
    f16 = np.array([-65504.0, -0.0, 0.0, 65504.0, 6e-08, np.inf, -np.inf, 1.5], dtype=np.float16)
    t = helper.make_tensor("float16", TensorProto.FLOAT16, [8], f16, raw=False)
    out["float16"] = (t, numpy_helper.to_array(t))
    bf16 = [-3.3895313892515355e38, -1.0, 0.0, 3.3895313892515355e38, 0.5]  # bfloat16's min and max, exactly
    t = helper.make_tensor("bfloat16", TensorProto.BFLOAT16, [5], bf16, raw=False)
    out["bfloat16"] = (t, numpy_helper.to_array(t))
    bits = np.array([0xFE, 0x7E, 0x00, 0x80, 0x01, 0xB8], dtype=np.uint8)  # e4m3fn: -448, 448, 0, -0, min subnormal, -0.5
    for name, code, value in (("float8e4m3fn", 17, f8_values(bits, 4, 3, 7, True)), ("float8e5m2", 19, f8_values(bits, 5, 2, 15, False))):
        t = TensorProto()
        t.name, t.data_type = name, code
        t.dims.extend([6])
        t.int32_data.extend(int(b) for b in bits)
        out[name] = (t, value)
    return out


def write_model(path, tensors):
    import onnx
    from onnx import helper
    graph = helper.make_graph([], "typed", [], [], initializer=tensors)
    with open(path, "wb") as f:
        f.write(helper.make_model(graph).SerializeToString())


@unittest.skipUnless(HAVE_ONNX, "python3-onnx is not installed: the typed-field models cannot be written")
class OnnxTypedFields(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-onnx-typed-")
        cls.tensors = typed_tensors()
        cls.model = os.path.join(cls.dir, "typed.onnx")
        write_model(cls.model, [t for t, _ in cls.tensors.values()])
        for t, _ in cls.tensors.values():
            assert not t.raw_data  # raw=False: the values are in the typed fields

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_stats_equal_numpy(self):
        import numpy as np
        r = run(["stats", self.model, "--json"])
        self.assertEqual(r.code, 0, r.err)
        got = {t["name"]: t for t in r.json()["tensors"]}
        self.assertEqual(set(got), set(self.tensors))
        for name, (_, want) in self.tensors.items():
            s = got[name]["stats"]
            self.assertIsNotNone(s, (name, got[name].get("unavailable")))
            v = np.asarray(want).reshape(-1)
            self.assertEqual(s["count"], v.size, name)
            if v.dtype.kind in "iub":
                exact = [int(x) for x in v]
                self.assertEqual(s["min"], float(min(exact)), name)
                self.assertEqual(s["max"], float(max(exact)), name)
                self.assertAlmostEqual(s["sum"], float(sum(exact)), delta=abs(float(sum(exact))) * 1e-15, msg=name)
            else:
                f = v.astype(np.float64)
                finite = f[np.isfinite(f)]
                self.assertEqual(s["min"], float(finite.min()), name)
                self.assertEqual(s["max"], float(finite.max()), name)
                self.assertEqual(s["nan_count"], int(np.isnan(f).sum()), name)
                self.assertEqual(s["inf_count"], int(np.isinf(f).sum()), name)

    def test_export_equals_numpy(self):
        import numpy as np
        for name, (t, want) in self.tensors.items():
            npy = os.path.join(self.dir, name + ".npy")
            r = run(["export", self.model, name, "-o", npy])
            self.assertEqual(r.code, 0, (name, r.err))
            a = np.load(npy)
            self.assertEqual(list(a.shape), list(t.dims), name)
            w = np.asarray(want)
            if w.dtype.kind in "iub":
                self.assertEqual(a.dtype, w.dtype, name)
                self.assertEqual(a.tolist(), w.tolist(), name)  # exact, every value
            else:  # float16 natively; bfloat16 and float8 widened exactly to float32
                np.testing.assert_array_equal(a.astype(np.float64), w.astype(np.float64).reshape(a.shape), err_msg=name)
                w = w.reshape(a.shape)
                keep = ~np.isnan(w)  # -0 stays -0 (a NaN's sign: onnx_write's f8 decoder drops it)
                self.assertEqual(np.signbit(a[keep]).tolist(), np.signbit(w[keep]).tolist(), name)

    def test_values_that_do_not_fit_are_refused(self):
        from onnx import TensorProto
        cases = (("u8", TensorProto.UINT8, "int32_data", [1, 300], "value 1 at offset", "is 300, outside u8's range 0 .. 255"),
                 ("flag", TensorProto.BOOL, "int32_data", [0, 2], "value 1 at offset", "is 2, outside bool's range 0 .. 1"),
                 ("i8", TensorProto.INT8, "int32_data", [-129, 0], "value 0 at offset", "is -129, outside i8's range -128 .. 127"),
                 ("u16", TensorProto.UINT16, "int32_data", [-1, 0], "value 0 at offset", "is -1, outside u16's range 0 .. 65535"),
                 ("u32", TensorProto.UINT32, "uint64_data", [0, 2 ** 32], "value 1 at offset", "is 4294967296, outside u32's range"))
        for name, code, field, values, where, why in cases:
            t = TensorProto()
            t.name, t.data_type = name, code
            t.dims.extend([2])
            getattr(t, field).extend(values)
            path = os.path.join(self.dir, "bad_" + name + ".onnx")
            write_model(path, [t])
            r = run(["ls", path, "--json"])
            self.assertEqual(r.code, 3, (name, r.err))
            for part in (path, "graph.initializer[0] '" + name + "': " + field + ": " + where, why):
                self.assertIn(part, r.err, name)


if __name__ == "__main__":
    unittest.main()
