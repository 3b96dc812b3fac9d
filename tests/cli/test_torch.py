"""torch.save checkpoints through the CLI: the committed fixtures of tests/fixtures/torch (written by
tests/tools/torch_write.py with torch 1.13) against the values torch computed for them (expected.json).
Needs no torch."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import run  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)["files"]


def read_npy(path):
    import numpy as np
    return np.load(path)


def readable(name, want):
    """Every tensor is readable but the view that expands its storage beyond its file."""
    return name != "huge"


class TorchSave(unittest.TestCase):
    def test_ls_lists_every_tensor_with_its_type_and_shape(self):
        for name in ("state_dict.pt", "protocol4.pt", "tensor.pt", "parameter.pt", "strided.pt"):
            r = run(["ls", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            doc = r.json()
            self.assertEqual(doc["format"], "torch")
            want = EXPECTED[name]["tensors"]
            got = {t["name"]: t for t in doc["tensors"]}
            self.assertEqual(set(got), set(want), name)
            for n, w in want.items():
                self.assertEqual(got[n]["shape"], w["shape"], n)
                self.assertEqual(got[n]["stored_type"], w["stored_type"], n)
                self.assertEqual(got[n]["readable"], readable(n, w), n)
                # A view's strides are listed as torch has them; a row-major tensor has none.
                self.assertEqual(got[n].get("strides"), None if w["contiguous"] else w["stride"], n)
        huge = {t["name"]: t for t in run(["ls", os.path.join(FIXTURES, "strided.pt"), "--json"]).json()["tensors"]}["huge"]
        self.assertIn("a view that expands storage", huge["unavailable"])
        self.assertIn("to 40000000000 bytes, more than its file holds", huge["unavailable"])

    def test_stats_match_torch(self):
        for name in ("state_dict.pt", "strided.pt"):
            r = run(["stats", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            want = EXPECTED[name]["tensors"]
            seen = 0
            for t in r.json()["tensors"]:
                w = want[t["name"]]
                if not readable(t["name"], w):
                    self.assertIsNone(t["stats"], t["name"])
                    continue
                s = t["stats"]
                self.assertEqual(s["count"], w["elements"], t["name"])
                self.assertEqual(s["min"], float(w["min"]), t["name"])
                self.assertEqual(s["max"], float(w["max"]), t["name"])
                self.assertAlmostEqual(s["sum"], w["sum"], delta=abs(w["sum"]) * 1e-12 + 1e-9, msg=t["name"])
                seen += not w["contiguous"]
            self.assertGreaterEqual(seen, 2, name)

    def test_strided_views_export_in_row_major_order(self):
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            for file, name in (("state_dict.pt", "views.transposed"), ("state_dict.pt", "views.column"),
                               ("strided.pt", "bf16_t"), ("strided.pt", "i32_t"), ("strided.pt", "f16_permuted"),
                               ("strided.pt", "f64_column"), ("strided.pt", "u8_every_other"),
                               ("strided.pt", "bool_t"), ("strided.pt", "f32_expanded")):
                w = EXPECTED[file]["tensors"][name]
                npy = os.path.join(out, name + ".npy")
                r = run(["export", os.path.join(FIXTURES, file), name, "-o", npy])
                self.assertEqual(r.code, 0, r.err)
                a = read_npy(npy)
                self.assertEqual(list(a.shape), w["shape"], name)
                got = [float(v) for v in a.astype("float64").reshape(-1)]
                self.assertEqual(got, [float(v) for v in w["values"]], name)
            r = run(["export", os.path.join(FIXTURES, "strided.pt"), "huge", "-o", os.path.join(out, "huge.npy")])
            self.assertEqual(r.code, 4, r.err)
            self.assertIn("more than its file holds", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_strided_views_from_the_index(self):
        """The strides are kept in the index: a view read after reopening only the index reads the same values,
        its statistics and pyramid are computed from the gathered values, and render draws it."""
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            path = os.path.join(FIXTURES, "strided.pt")
            cache = os.path.join(out, "cache")
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            r = run(["stats", path, "bf16_t", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            t = r.json()["tensors"][0]
            self.assertEqual(t["source"], "index")
            self.assertEqual(t["strides"], [1, 7])
            self.assertEqual(t["stats"]["min"], EXPECTED["strided.pt"]["tensors"]["bf16_t"]["min"])
            npy = os.path.join(out, "t.npy")
            r = run(["export", path, "f16_permuted", "-o", npy], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual([float(v) for v in read_npy(npy).astype("float64").reshape(-1)],
                             EXPECTED["strided.pt"]["tensors"]["f16_permuted"]["values"])
            r = run(["tile", path, "bf16_t", "--level", "0", "--tile", "0,0", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            tile = r.json()
            self.assertEqual(tile["stats"]["count"], 35)
            self.assertEqual(tile["stats"]["min"], EXPECTED["strided.pt"]["tensors"]["bf16_t"]["min"])
            png = os.path.join(out, "t.png")
            r = run(["render", path, "bf16_t", "-o", png], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_info_metadata_export_and_index(self):
        path = os.path.join(FIXTURES, "state_dict.pt")
        r = run(["info", path, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("1234", json.dumps(r.json()))
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            npy = os.path.join(out, "rows.npy")
            r = run(["export", path, "views.rows", "-o", npy])
            self.assertEqual(r.code, 0, r.err)
            with open(npy, "rb") as f:
                data = f.read()
            # float32 rows 1..2 of arange(24).reshape(4, 6) - 7.5: the last 48 bytes of the .npy
            import struct
            self.assertEqual(list(struct.unpack("<12f", data[-48:])), [float(v) - 7.5 for v in range(6, 18)])
            cache = os.path.join(out, "cache")
            fresh = run(["ls", path, "--json"], cache_home=cache).json()["tensors"]
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertIn("0 computed now", r.out)
            # The inventory read back from the index is the one the file gave.
            again = run(["ls", path, "--json"], cache_home=cache).json()["tensors"]
            for t in fresh + again:
                t.pop("stats_indexed")
            self.assertEqual(again, fresh)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_directories_of_pytorch_model_bin(self):
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            # A lone pytorch_model.bin.
            single = os.path.join(out, "single")
            os.makedirs(single)
            shutil.copy(os.path.join(FIXTURES, "parameter.pt"), os.path.join(single, "pytorch_model.bin"))
            r = run(["ls", single, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(sorted(t["name"] for t in r.json()["tensors"]), ["p", "q"])
            # Shards with transformers' pytorch_model.bin.index.json (total_size: 6 + 4 + 9 float32).
            sharded = os.path.join(out, "sharded")
            os.makedirs(sharded)
            one, two = "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"
            shutil.copy(os.path.join(FIXTURES, "parameter.pt"), os.path.join(sharded, one))
            shutil.copy(os.path.join(FIXTURES, "tensor.pt"), os.path.join(sharded, two))
            index = {"metadata": {"total_size": 76}, "weight_map": {"p": one, "q": one, "tensor": two}}
            with open(os.path.join(sharded, "pytorch_model.bin.index.json"), "w") as f:
                json.dump(index, f)
            for path in (sharded, os.path.join(sharded, "pytorch_model.bin.index.json")):
                r = run(["stats", path, "--json"])
                self.assertEqual(r.code, 0, r.err)
                doc = r.json()
                self.assertEqual(doc["format"], "torch")
                got = {t["name"]: t["stats"] for t in doc["tensors"]}
                self.assertEqual(got["p"]["sum"], 3.0)
                self.assertEqual(got["tensor"]["count"], 9)
            index["weight_map"]["tensor"] = one
            with open(os.path.join(sharded, "pytorch_model.bin.index.json"), "w") as f:
                json.dump(index, f)
            r = run(["ls", sharded])
            self.assertEqual(r.code, 3)
            self.assertIn("weight_map lists 'tensor' in " + one + ", which does not contain it", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_refusals_name_the_problem(self):
        r = run(["ls", os.path.join(FIXTURES, "legacy.pt")])
        self.assertEqual(r.code, 3)
        self.assertIn("legacy torch.save format", r.err)
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            with open(os.path.join(FIXTURES, "tensor.pt"), "rb") as f:
                data = bytearray(f.read())
            # Replace the rebuild function's name by one of the same length outside the allow-list.
            at = data.find(b"_rebuild_tensor_v2")
            self.assertGreater(at, 0)
            data[at:at + 18] = b"_rebuild_tensor_v9"
            bad = os.path.join(out, "bad.pt")
            with open(bad, "wb") as f:
                f.write(data)
            r = run(["ls", bad])
            self.assertEqual(r.code, 3)
            self.assertIn("global 'torch._utils._rebuild_tensor_v9' is not on the allow-list", r.err)
            self.assertIn("data.pkl", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
