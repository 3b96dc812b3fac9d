"""ONNX models through the CLI: the committed fixtures of tests/fixtures/onnx (written by ONNX's own helper API,
tests/tools/onnx_write.py) against the values numpy computed for them (expected.json): ls, stats, info and export,
inline and external data; damaged copies (a missing or short data file, a location that leaves the model's folder,
a truncated model) refused with exit 3 naming the file. Needs no onnx; where python3-onnx is installed, the generator
is re-run and must write the same values."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import check_listing, run  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "onnx")
TOOLS = os.path.join(os.path.dirname(__file__), "..", "tools")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)["files"]
PYTHON = "/usr/bin/python3"


class OnnxModels(unittest.TestCase):
    def test_ls_lists_every_initializer_with_its_type_shape_and_place(self):
        for name in ("model.onnx", "external.onnx"):
            r = run(["ls", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            want = EXPECTED[name]["tensors"]
            got = check_listing(self, r.json(), "onnx", want, readable=lambda n, w: w["readable"], what=name)
            for n, w in want.items():
                if "location" in w:
                    self.assertEqual(os.path.relpath(got[n]["file"], FIXTURES), w["location"], n)
        got = {t["name"]: t for t in run(["ls", os.path.join(FIXTURES, "model.onnx"), "--json"]).json()["tensors"]}
        self.assertTrue(got["typed.i64"]["readable"])  # int64_data varints, decoded
        self.assertEqual(got["typed.string"]["unavailable"], "no kernel yet for ONNX STRING")
        self.assertEqual(got["raw.complex64"]["unavailable"], "no kernel yet for ONNX COMPLEX64")
        self.assertEqual(got["raw.f8_e4m3fnuz"]["unavailable"], "no kernel yet for ONNX FLOAT8E4M3FNUZ")

    def test_stats_equal_numpy(self):
        for name in ("model.onnx", "external.onnx"):
            r = run(["stats", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            want = EXPECTED[name]["tensors"]
            seen = 0
            for t in r.json()["tensors"]:
                w = want[t["name"]]
                if not w["readable"]:
                    self.assertIsNone(t["stats"], t["name"])
                    continue
                s = t["stats"]
                self.assertEqual(s["count"], w["elements"], t["name"])
                if w["elements"] == 0 or "min" not in w:
                    continue
                self.assertEqual(s["min"], float(w["min"]), t["name"])  # JSON numbers: int64 extremes as doubles
                self.assertEqual(s["max"], float(w["max"]), t["name"])
                self.assertAlmostEqual(s["sum"], w["sum"], delta=abs(w["sum"]) * 1e-12 + 1e-9, msg=t["name"])
                if "nan_count" in w:
                    self.assertEqual(s["nan_count"], w["nan_count"], t["name"])
                    self.assertEqual(s["inf_count"], w["inf_count"], t["name"])
                seen += 1
            self.assertEqual(seen, 6 if name == "external.onnx" else 23, name)

    def test_info_shows_the_model_metadata(self):
        for name in ("model.onnx", "external.onnx"):
            r = run(["info", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            meta = r.json()["metadata"]
            for k, v in EXPECTED[name]["metadata"].items():
                self.assertEqual(meta.get(k), v, k)
        r = run(["info", os.path.join(FIXTURES, "model.onnx")])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("ai.onnx 13, com.example 1", r.out)

    def test_export_reads_the_values_in_place(self):
        import numpy as np
        out = tempfile.mkdtemp(prefix="tm-onnx-")
        try:
            for file, name in (("model.onnx", "dense.weight"), ("model.onnx", "typed.f32"), ("model.onnx", "raw.bf16"),
                               ("external.onnx", "big.f32"), ("external.onnx", "big.i64"), ("external.onnx", "extra.u8")):
                npy = os.path.join(out, "t.npy")
                r = run(["export", os.path.join(FIXTURES, file), name, "-o", npy])
                self.assertEqual(r.code, 0, r.err)
                a = np.load(npy)
                w = EXPECTED[file]["tensors"][name]
                self.assertEqual(list(a.shape), w["shape"], name)
                self.assertEqual([float(v) for v in a.reshape(-1)[:4]], [float(v) for v in w["first"]], name)
        finally:
            shutil.rmtree(out, ignore_errors=True)


class DamagedOnnxModels(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-onnx-bad-")
        shutil.copytree(FIXTURES, os.path.join(self.dir, "m"))
        self.model = os.path.join(self.dir, "m", "external.onnx")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def refused(self, what):
        r = run(["ls", self.model, "--json"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(self.model, r.err)
        self.assertIn(what, r.err)
        return r.err

    def patch_location(self, new):
        with open(os.path.join(FIXTURES, "external.onnx"), "rb") as f:
            data = f.read()
        self.assertEqual(len(new), len(b"external.data"))
        with open(self.model, "wb") as f:
            f.write(data.replace(b"external.data", new))

    def test_a_missing_data_file(self):
        os.remove(os.path.join(self.dir, "m", "external.data"))
        self.refused("(location 'external.data') is missing")

    def test_a_short_data_file(self):
        with open(os.path.join(self.dir, "m", "external.data"), "r+b") as f:
            f.truncate(4100)
        self.refused("runs past the end of")

    def test_locations_outside_the_model_folder(self):
        self.patch_location(b"../external.d")
        self.refused("climbs out of the model's folder")
        self.patch_location(b"/tmp/external")
        self.refused("an absolute path")

    def test_a_truncated_model(self):
        with open(self.model, "r+b") as f:
            f.truncate(600)
        self.refused("runs past the end of the message")


@unittest.skipUnless(subprocess.run([PYTHON, "-c", "import onnx"], capture_output=True).returncode == 0,
                     "python3-onnx is not installed: the ONNX fixture generator was not re-run")
class OnnxFixtureGenerator(unittest.TestCase):
    def test_generator_writes_the_committed_values(self):
        out = tempfile.mkdtemp(prefix="tm-onnx-gen-")
        try:
            r = subprocess.run([PYTHON, os.path.join(TOOLS, "onnx_write.py"), out], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            with open(os.path.join(out, "expected.json")) as f:
                self.assertEqual(json.load(f)["files"], EXPECTED)
            for name in ("model.onnx", "external.onnx", "external.data", os.path.join("weights", "extra.bin")):
                with open(os.path.join(out, name), "rb") as a, open(os.path.join(FIXTURES, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
