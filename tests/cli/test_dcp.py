"""PyTorch Distributed Checkpoint directories through the CLI: the committed fixtures of tests/fixtures/dcp
(written by two gloo ranks with torch 1.13's FileSystemWriter, tests/tools/dcp_write.py) against the values
torch holds (expected.json): each logical tensor assembled from its chunks across the .distcp files (row
bands streamed in order, column blocks and uneven chunks assembled), non-tensor entries as metadata, and
chunks that are missing, overlap or lie in a missing file reported by name. Needs no torch."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import check_listing, run  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "dcp")
GOOD = os.path.join(FIXTURES, "sharded")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)
STORED = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "int64": "I64"}


class Dcp(unittest.TestCase):
    def test_ls_lists_each_logical_tensor_once(self):
        r = run(["ls", GOOD, "--json"])
        self.assertEqual(r.code, 0, r.err)
        got = check_listing(self, r.json(), "dcp", EXPECTED["tensors"], STORED)
        self.assertEqual(got["model.w"]["chunks"], 2)
        self.assertEqual(got["model.norm"]["chunks"], 2)

    def test_stats_match_torch(self):
        r = run(["stats", GOOD, "--json"])
        self.assertEqual(r.code, 0, r.err)
        for t in r.json()["tensors"]:
            w = EXPECTED["tensors"][t["name"]]
            s = t["stats"]
            self.assertEqual(s["count"], len(w["values"]), t["name"])
            self.assertEqual(s["min"], float(w["min"]), t["name"])
            self.assertEqual(s["max"], float(w["max"]), t["name"])
            self.assertAlmostEqual(s["sum"], w["sum"], delta=abs(w["sum"]) * 1e-12 + 1e-9, msg=t["name"])

    def test_export_assembles_every_layout(self):
        out = tempfile.mkdtemp(prefix="tm-dcp-")
        try:
            for name, w in EXPECTED["tensors"].items():
                npy = os.path.join(out, name + ".npy")
                r = run(["export", GOOD, name, "-o", npy])
                self.assertEqual(r.code, 0, r.err)
                a = np.load(npy)
                self.assertEqual(list(a.shape), w["shape"], name)
                if w["dtype"] == "int64":
                    self.assertEqual(a.reshape(-1).tolist(), w["values"])  # exact beyond 2^53
                else:
                    self.assertEqual(a.astype(np.float64).reshape(-1).tolist(), w["values"], name)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_metadata_entries(self):
        r = run(["info", GOOD, "--json"])
        self.assertEqual(r.code, 0, r.err)
        text = json.dumps(r.json())
        for k, v in EXPECTED["metadata"].items():
            self.assertIn(f'"{k}": "{v}"', text)

    def test_index_resume_and_render_from_the_index(self):
        out = tempfile.mkdtemp(prefix="tm-dcp-")
        try:
            cache = os.path.join(out, "cache")
            r = run(["index", GOOD], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            r = run(["index", GOOD], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertIn("0 computed now", r.out)
            r = run(["stats", GOOD, "model.emb", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            t = r.json()["tensors"][0]
            self.assertEqual(t["source"], "index")
            self.assertEqual(t["stats"]["max"], EXPECTED["tensors"]["model.emb"]["max"])
            # Values read after reopening only the index: the chunks were kept in it.
            npy = os.path.join(out, "norm.npy")
            r = run(["export", GOOD, "model.norm", "-o", npy], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(np.load(npy).astype(np.float64).reshape(-1).tolist(), EXPECTED["tensors"]["model.norm"]["values"])
            r = run(["tile", GOOD, "model.emb", "--level", "0", "--tile", "0,0", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(r.json()["stats"]["min"], EXPECTED["tensors"]["model.emb"]["min"])
            r = run(["render", GOOD, "model.w", "-o", os.path.join(out, "w.png")], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_broken_chunks_are_named(self):
        cases = {
            "missing_chunk": ("model.w", "its chunks hold 30 of its 60 elements (chunks missing)"),
            "overlap": ("model.emb", "its chunks at offsets [0,0] and [0,2] overlap"),
            "missing_file": ("model.w", "its chunk at offsets [5,0] (sizes [5,6]): its file __1_0.distcp cannot be read"),
            "outside": ("model.w", "its chunk at offsets [8,0] (sizes [5,6]) lies outside the tensor's shape [10,6]"),
            "wrong_dtype": ("model.w", "its chunk at offsets [0,0] (sizes [5,6]): stored as F32, the metadata says F64"),
        }
        for folder, (name, why) in cases.items():
            path = os.path.join(FIXTURES, folder)
            r = run(["ls", path, "--json"])
            self.assertEqual(r.code, 0, r.err)
            got = {t["name"]: t for t in r.json()["tensors"]}
            self.assertFalse(got[name]["readable"], folder)
            self.assertIn(why, got[name]["unavailable"], folder)
            self.assertEqual(sum(not t["readable"] for t in got.values()), 1, folder)
            r = run(["export", path, name, "-o", os.path.join(tempfile.gettempdir(), "never.npy")])
            self.assertEqual(r.code, 3, r.err)  # damaged data is bad input (4 is for a type without a kernel)
            self.assertIn(why, r.err)
        # stats and index report every tensor they can, name the damaged one, and end with exit 7 (incomplete).
        path = os.path.join(FIXTURES, "missing_file")
        r = run(["stats", path, "--json", "--no-histogram", "--no-quantiles"])
        self.assertEqual(r.code, 7, r.err)
        rows = {t["name"]: t for t in r.json()["tensors"]}
        self.assertEqual([n for n, t in rows.items() if t["stats"] is None], ["model.w"])
        self.assertTrue(rows["model.w"]["damaged"])
        self.assertIn(path + ": 1 of %d tensors could not be read: their data is missing or damaged" % len(rows), r.err)
        cache = tempfile.mkdtemp(prefix="tm-dcp-idx-")
        try:
            r = run(["index", path, "--json"], cache_home=cache)
            self.assertEqual(r.code, 7, r.err)
            self.assertEqual((r.json()["damaged"], r.json()["unavailable"]), (1, 1))
            self.assertIn("could not be indexed: their data is missing or damaged", r.err)
            r = run(["stats", path], cache_home=cache)  # served from the index: still incomplete
            self.assertEqual(r.code, 7, r.err)
            self.assertIn("model.w", r.out)
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def test_lying_metadata_is_refused(self):
        cases = {
            "huge": "tensor 'model.w' of shape [1099511627776,1099511627776]: its size overflows 64 bits",
            "bytes_without_storage": "bytes entry 'optim.step' has no storage_data entry",
        }
        for folder, why in cases.items():
            r = run(["ls", os.path.join(FIXTURES, folder)])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn(".metadata", r.err)
            self.assertIn(why, r.err)

    def test_bad_metadata_is_refused_with_the_offset(self):
        out = tempfile.mkdtemp(prefix="tm-dcp-")
        try:
            bad = os.path.join(out, "bad")
            shutil.copytree(GOOD, bad)
            meta = os.path.join(bad, ".metadata")
            with open(meta, "rb") as f:
                data = f.read()
            with open(meta, "wb") as f:
                f.write(data[: len(data) // 2])
            r = run(["ls", bad])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn(".metadata", r.err)
            self.assertIn("byte", r.err)
            # A storage file named outside the directory.
            at = data.find(b"__0_0.distcp")
            self.assertGreater(at, 0)
            with open(meta, "wb") as f:
                f.write(data[:at] + b"../0_0.distcp" [:12] + data[at + 12:])
            r = run(["ls", bad])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn("is not a file name inside the checkpoint's directory", r.err)
            # A class outside the allow-list.
            at = data.find(b"_StorageInfo")
            with open(meta, "wb") as f:
                f.write(data[:at] + b"_StorageInfX" + data[at + 12:])
            r = run(["ls", bad])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn("_StorageInfX' is not on the allow-list", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
