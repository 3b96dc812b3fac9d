"""ONNX models written by torch's own exporter through the CLI: the committed fixtures of tests/fixtures/onnx_torch
(torch.onnx.export of torch 1.13 with and without constant folding, and the folded model rewritten with external data
by onnx.save_model: tests/tools/torch_onnx_write.py) against what ONNX's own reader (onnx.numpy_helper.to_array)
returned for every initializer (expected.json): ls (names as torch stored them, types, shapes, data files), info
(the model's metadata), stats (count, min and max exact; sum and mean to 1e-12 relative; int64 exact as decimal
strings) and export (every value and the element bytes' sha256, exact). Needs neither torch nor onnx; the generator
is re-run against torch by tests/tools/test_fixture_generators.py where torch is installed."""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import check_listing, run  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "onnx_torch")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)["files"]
FILES = ("folded.onnx", "unfolded.onnx", "external.onnx")
DTYPES = {"FLOAT": "f32", "FLOAT16": "f16", "BFLOAT16": "bf16", "INT64": "i64"}


def close(a, b):
    return abs(a - b) <= abs(b) * 1e-12 + 1e-12


class TorchExportedOnnx(unittest.TestCase):
    def test_ls_lists_every_initializer_as_torch_named_it(self):
        for name in FILES:
            r = run(["ls", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            want = EXPECTED[name]["tensors"]
            got = check_listing(self, r.json(), "onnx", want, what=name)
            for n, w in want.items():
                self.assertEqual(got[n]["dtype"], DTYPES[w["stored_type"]], (name, n))
                self.assertEqual(got[n]["elements"], w["elements"], (name, n))
                where = w.get("location", name)
                self.assertEqual(os.path.relpath(got[n]["file"], FIXTURES), where, (name, n))
        # What torch's exporter does to names, seen through our listing: folding drops `positions` and
        # `proj.weight` (a transposed copy `onnx::MatMul_N` takes its place); the Conv + BatchNorm fusion of eval
        # mode happens with and without folding.
        folded, unfolded = EXPECTED["folded.onnx"]["tensors"], EXPECTED["unfolded.onnx"]["tensors"]
        self.assertIn("proj.weight", unfolded)
        self.assertNotIn("proj.weight", folded)
        self.assertFalse(any(n.startswith("bn.") or n.startswith("conv.") for n in list(folded) + list(unfolded)))

    def test_info_shows_the_exporters_metadata(self):
        for name in FILES:
            r = run(["info", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            meta = r.json()["metadata"]
            for k, v in EXPECTED[name]["metadata"].items():
                self.assertEqual(meta.get(k), v, (name, k))
            self.assertEqual(meta["onnx.producer_name"], "pytorch")

    def test_stats_equal_onnx_reader(self):
        for name in FILES:
            r = run(["stats", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            want = EXPECTED[name]["tensors"]
            seen = set()
            for t in r.json()["tensors"]:
                n, s = t["name"], t["stats"]
                w = want[n]
                what = (name, n)
                self.assertEqual(s["count"], w["elements"], what)
                self.assertEqual(s["nan_count"], 0, what)
                self.assertEqual(s["inf_count"], 0, what)
                if w["stored_type"] == "INT64":
                    self.assertEqual(s["exact"], {"min": str(w["min"]), "max": str(w["max"]), "sum": w["sum"]}, what)
                    self.assertEqual(s["min"], float(w["min"]), what)
                    self.assertEqual(s["max"], float(w["max"]), what)
                else:
                    self.assertEqual(s["min"], w["min"], what)
                    self.assertEqual(s["max"], w["max"], what)
                    self.assertTrue(close(s["sum"], w["sum"]), (what, s["sum"], w["sum"]))
                    self.assertTrue(close(s["mean"], w["mean"]), (what, s["mean"], w["mean"]))
                seen.add(n)
            self.assertEqual(seen, set(want), name)

    def test_export_gives_every_value(self):
        import numpy as np
        out = tempfile.mkdtemp(prefix="tm-onnx-torch-")
        try:
            for name in FILES:
                for n, w in EXPECTED[name]["tensors"].items():
                    npy = os.path.join(out, "t.npy")
                    r = run(["export", os.path.join(FIXTURES, name), n, "-o", npy])
                    self.assertEqual(r.code, 0, r.err)
                    a = np.load(npy)
                    what = (name, n)
                    self.assertEqual(list(a.shape), w["shape"], what)
                    if w["stored_type"] == "INT64":
                        self.assertEqual(a.dtype, np.dtype("<i8"), what)
                        self.assertEqual([int(x) for x in a.reshape(-1)], w["values"], what)
                        raw = a.astype("<i8").tobytes()
                    else:
                        self.assertEqual([float(x) for x in a.reshape(-1)], w["values"], what)
                        if w["stored_type"] == "BFLOAT16":  # widened exactly to float32: its top halves are the bytes
                            self.assertEqual(a.dtype, np.dtype("<f4"), what)
                            raw = (np.ascontiguousarray(a).view("<u4") >> 16).astype("<u2").tobytes()
                        else:
                            self.assertEqual(a.dtype, np.dtype("<f2" if w["stored_type"] == "FLOAT16" else "<f4"), what)
                            raw = np.ascontiguousarray(a).tobytes()
                    self.assertEqual(hashlib.sha256(raw).hexdigest(), w["sha256"], what)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
