"""One result encoder for the CLI and the API (Debian's python3, standard library only): for the same
tensor, `tensormorph stats PATH NAME --json` and `GET /api/tensors/{ckpt}/{name}` give the same `stats`
and `placement` documents, and the list rows of `GET /api/tensors` the same moments. The tensors include
ones whose statistics are not finite (no finite value at all: NaN quantiles; a float64 sum that
overflows: infinite sum, mean and std), so the one rule for non-finite numbers is exercised on both faces:
the strings "nan", "inf", "-inf", never null (docs/cli.md "Numbers in JSON", docs/api.md conventions)."""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import TM_BIN  # noqa: E402
import test_serve  # noqa: E402
from test_serve import Server, private_env  # noqa: E402

NAN, INF = float("nan"), float("inf")
DAMAGED = "model.layers.0.mlp.down_proj.weight"  # the demo's bf16 tensor with one NaN and one +Inf

# name, safetensors dtype, struct code, shape, values
TENSORS = [
    ("no_finite", "F32", "f", [2, 3], [NAN, INF, -INF, NAN, INF, INF]),
    ("mixed", "F32", "f", [2, 4], [1.0, -2.0, NAN, INF, -INF, 0.5, 0.0, -0.0]),
    ("overflow", "F64", "d", [5], [1.7e308, 1.7e308, -1.0, 5e-324, -INF]),
    ("ints", "I64", "q", [4], [-(2**63), 2**63 - 1, 2**53 + 1, -7]),
]


def write_safetensors(path):
    header, blobs, offset = {}, [], 0
    for name, dtype, code, shape, values in TENSORS:
        data = struct.pack("<%d%s" % (len(values), code), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def nulls(doc, where=""):
    """Paths of every null in doc."""
    if doc is None:
        return [where]
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in nulls(v, where + "." + k)]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in nulls(v, "%s[%d]" % (where, i))]
    return []


class ResultJsonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-result-json-")
        cls.env = private_env(cls.tmp)
        cls.small = os.path.join(cls.tmp, "nonfinite.safetensors")
        write_safetensors(cls.small)
        cls.demo = os.path.join(cls.tmp, "demo")
        r = cls.tm_run("demo", "--out", cls.demo, "--layers", "1", "--no-gguf", "--json")
        assert r.returncode == 0, r.stderr
        cls.server = Server([cls.small, cls.demo], cls.env)

    @classmethod
    def tearDownClass(cls):
        if cls.server.proc.poll() is None:
            cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def tm_run(cls, *args):
        return subprocess.run([TM_BIN] + list(args), capture_output=True, text=True, env=cls.env, timeout=300)

    # ServeTest's HTTP helpers (on self.server)
    request = test_serve.ServeTest.request
    get_json = test_serve.ServeTest.get_json

    def cli_stats(self, path, name, *extra):
        r = self.tm_run("stats", path, name, "--json", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["tensors"][0]

    def api_detail(self, ckpt, name):
        return self.get_json("/api/tensors/%s/%s" % (ckpt, urllib.parse.quote(name, safe="")))

    def api_row(self, ckpt, name):
        rows = self.get_json("/api/tensors?q=" + urllib.parse.quote(name, safe=""))["tensors"]
        return next(r for r in rows if r["checkpoint"] == ckpt and r["name"] == name)

    def assert_same_documents(self, path, ckpt, name):
        cli, api = self.cli_stats(path, name), self.api_detail(ckpt, name)
        self.assertEqual(cli["source"], "index")
        self.assertEqual(api["stats"], cli["stats"], name)
        self.assertEqual(api["placement"], cli["placement"], name)
        moments = {k: v for k, v in cli["stats"].items() if k not in ("histogram", "quantiles")}
        self.assertEqual(self.api_row(ckpt, name)["stats"], moments, name)
        self.assertEqual(nulls(cli["stats"]), [], name)
        return cli["stats"]

    def test_every_tensor_gives_the_same_documents(self):
        for name, *_ in TENSORS:
            with self.subTest(name=name):
                self.assert_same_documents(self.small, "0", name)
        with self.subTest(name=DAMAGED):
            s = self.assert_same_documents(self.demo, "1", DAMAGED)
            self.assertEqual((s["nan_count"], s["inf_count"]), (1, 1))

    def test_no_finite_value(self):
        s = self.assert_same_documents(self.small, "0", "no_finite")
        self.assertEqual((s["count"], s["finite_count"], s["nan_count"], s["inf_count"]), (6, 0, 2, 4))
        self.assertEqual((s["min"], s["max"], s["abs_max"], s["sum"], s["mean"], s["std"]), (0.0,) * 6)
        self.assertNotIn("histogram", s)  # no finite value to bin
        # a quantile of no finite value is NaN: "nan" (it was null in `stats --json`, "nan" in the API)
        self.assertEqual([q["value"] for q in s["quantiles"]["values"]], ["nan"] * 5)
        self.assertEqual([q["sample_size"] for q in s["quantiles"]["values"]], [0] * 5)

    def test_overflowing_moments(self):
        s = self.assert_same_documents(self.small, "0", "overflow")
        self.assertEqual((s["count"], s["finite_count"], s["inf_count"]), (5, 4, 1))
        self.assertEqual((s["min"], s["max"], s["abs_max"]), (-1.0, 1.7e308, 1.7e308))
        # the float64 sum of 2 x 1.7e308 overflows: +inf, sign kept (null would lose it)
        self.assertEqual((s["sum"], s["mean"], s["std"]), ("inf", "inf", "inf"))
        self.assertTrue(all(isinstance(e, float) and math.isfinite(e) for e in s["histogram"]["edges"]))
        self.assertEqual(s["quantiles"]["values"][2]["value"], 8.5e307)  # halfway from 5e-324 to 1.7e308

    def test_finite_values_are_numbers_and_counts_integers(self):
        s = self.assert_same_documents(self.small, "0", "mixed")
        self.assertEqual((s["count"], s["finite_count"], s["nan_count"], s["inf_count"], s["zero_count"]), (8, 5, 1, 2, 2))
        self.assertEqual((s["min"], s["max"], s["abs_max"], s["sum"]), (-2.0, 1.0, 2.0, -0.5))
        for key in ("count", "finite_count", "nan_count", "inf_count", "zero_count"):
            self.assertIsInstance(s[key], int, key)

    def test_integer_moments_stay_exact(self):
        s = self.assert_same_documents(self.small, "0", "ints")
        self.assertEqual(s["exact"], {"min": str(-(2**63)), "max": str(2**63 - 1),
                                      "sum": str(-(2**63) + 2**63 - 1 + 2**53 + 1 - 7)})

    def test_raw_file_follows_the_same_rule(self):
        raw = os.path.join(self.tmp, "no_finite.f32")
        with open(raw, "wb") as f:
            f.write(struct.pack("<3f", NAN, -INF, -INF))
        r = self.tm_run("stats", "--raw", raw, "--dtype", "f32", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        s = json.loads(r.stdout)["stats"]
        self.assertEqual((s["nan_count"], s["inf_count"], s["finite_count"]), (1, 2, 0))
        self.assertEqual([q["value"] for q in s["quantiles"]["values"]], ["nan"] * 5)
        self.assertEqual(nulls(s), [])


if __name__ == "__main__":
    unittest.main()
