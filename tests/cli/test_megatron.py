"""Megatron-LM torch_dist checkpoints through the CLI: the committed fixture of tests/fixtures/megatron (a
Megatron-style run folder written by two gloo ranks with torch 1.13's DCP, tests/tools/megatron_write.py)
against the values torch saved and read back (expected.json): opened through latest_checkpointed_iteration.txt
and through its iter_ folder, tensors under Megatron's keys assembled from their tensor-parallel and per-layer
chunks, the replicated norm read once, common.pt's arguments and counters as metadata, and a common.pt
that cannot be read reported without hiding the tensors. Needs no torch."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import check_listing, run  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "megatron")
RUN = os.path.join(FIXTURES, "run")
ITER = os.path.join(RUN, "iter_0000010")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)
STORED = {"float32": "F32", "bfloat16": "BF16"}


class Megatron(unittest.TestCase):
    def test_ls_through_the_pointer_and_the_iteration_folder(self):
        for path in (RUN, ITER):
            r = run(["ls", path, "--json"])
            self.assertEqual(r.code, 0, r.err)
            got = check_listing(self, r.json(), "megatron", EXPECTED["tensors"], STORED)
            for name, w in EXPECTED["tensors"].items():
                self.assertEqual(got[name].get("chunks", 1), w["chunks"], name)

    def test_export_and_stats_equal_torch(self):
        out = tempfile.mkdtemp(prefix="tm-megatron-")
        try:
            for name, w in EXPECTED["tensors"].items():
                npy = os.path.join(out, "t.npy")
                r = run(["export", RUN, name, "-o", npy])
                self.assertEqual(r.code, 0, r.err)
                a = np.load(npy)
                self.assertEqual(list(a.shape), w["shape"], name)
                self.assertEqual(a.astype(np.float64).reshape(-1).tolist(), w["values"], name)
            r = run(["stats", RUN, "--json"])
            self.assertEqual(r.code, 0, r.err)
            for t in r.json()["tensors"]:
                w = EXPECTED["tensors"][t["name"]]
                self.assertEqual((t["stats"]["min"], t["stats"]["max"]), (w["min"], w["max"]), t["name"])
                self.assertAlmostEqual(t["stats"]["sum"], w["sum"], delta=abs(w["sum"]) * 1e-12 + 1e-12, msg=t["name"])
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_common_state_as_metadata(self):
        r = run(["info", RUN, "--json"])
        self.assertEqual(r.code, 0, r.err)
        meta = r.json()["metadata"]
        for k, v in EXPECTED["metadata"].items():
            self.assertEqual(meta[k], v, k)

    def test_unreadable_common_state_is_reported(self):
        out = tempfile.mkdtemp(prefix="tm-megatron-")
        try:
            folder = os.path.join(out, "iter_0000010")
            shutil.copytree(ITER, folder)
            with open(os.path.join(folder, "common.pt"), "wb") as f:
                f.write(b"PK\x03\x04 not a zip")
            r = run(["info", folder, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertIn("common.pt", r.json()["metadata"]["megatron.common"])
            self.assertIn("unreadable", r.json()["metadata"]["megatron.common"])
            r = run(["stats", folder, "decoder.final_layernorm.weight", "--json"])
            self.assertEqual(r.code, 0, r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
