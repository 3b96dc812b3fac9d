"""DeepSpeed ZeRO checkpoints through the CLI: the committed fixtures of tests/fixtures/zero (DeepSpeed-style
folders built from DeepSpeed's documented structure with torch 1.13, tests/tools/zero_write.py, which checks
them against a zero_to_fp32-style reassembly with torch.load) against the values that were partitioned
(expected.json): stages 1 (BF16 optimizer), 2 and 3, each opened through its `latest` pointer and through
its global_step folder; the model weights beside the fp32 master weights and the Adam moments reassembled
from the ranks' flat partitions; a missing rank and lying param_shapes named while the model weights stay
readable; a truncated or model-parallel file refused by name. Needs no torch."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import check_listing, run  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "zero")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)
STORED = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


class Zero(unittest.TestCase):
    def test_ls_lists_model_weights_master_weights_and_moments(self):
        for run_name, w in EXPECTED["runs"].items():
            for path in (os.path.join(FIXTURES, run_name), os.path.join(FIXTURES, run_name, "global_step5")):
                r = run(["ls", path, "--json"])
                self.assertEqual(r.code, 0, r.err)
                check_listing(self, r.json(), "deepspeed", w["tensors"], STORED)

    def test_export_equals_the_partitioned_values(self):
        out = tempfile.mkdtemp(prefix="tm-zero-")
        try:
            for run_name, w in EXPECTED["runs"].items():
                for name, want in w["tensors"].items():
                    npy = os.path.join(out, "t.npy")
                    r = run(["export", os.path.join(FIXTURES, run_name), name, "-o", npy])
                    self.assertEqual(r.code, 0, r.err)
                    a = np.load(npy)
                    self.assertEqual(list(a.shape), want["shape"], name)
                    self.assertEqual(a.astype(np.float64).reshape(-1).tolist(), want["values"], (run_name, name))
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_stats_and_metadata(self):
        for run_name, w in EXPECTED["runs"].items():
            path = os.path.join(FIXTURES, run_name)
            r = run(["stats", path, "--json"])
            self.assertEqual(r.code, 0, r.err)
            for t in r.json()["tensors"]:
                want = w["tensors"][t["name"]]
                s = t["stats"]
                self.assertEqual(s["count"], len(want["values"]), t["name"])
                self.assertEqual(s["min"], want["min"], t["name"])
                self.assertEqual(s["max"], want["max"], t["name"])
                self.assertAlmostEqual(s["sum"], want["sum"], delta=abs(want["sum"]) * 1e-12 + 1e-12, msg=t["name"])
            r = run(["info", path, "--json"])
            self.assertEqual(r.code, 0, r.err)
            meta = r.json()["metadata"]
            self.assertEqual(meta["zero.stage"], str(w["stage"]))
            self.assertEqual(meta["zero.world_size"], str(w["world"]))
            self.assertEqual(meta["global_steps"], "5")

    def test_index_then_read_from_the_index(self):
        out = tempfile.mkdtemp(prefix="tm-zero-")
        try:
            path = os.path.join(FIXTURES, "zero3")
            cache = os.path.join(out, "cache")
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertIn("0 computed now", r.out)
            name = "optimizer.state.fp32_param.layers.0.mlp.weight"
            want = EXPECTED["runs"]["zero3"]["tensors"][name]
            r = run(["stats", path, name, "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            t = r.json()["tensors"][0]
            self.assertEqual(t["source"], "index")
            self.assertEqual(t["stats"]["max"], want["max"])
            npy = os.path.join(out, "w.npy")
            r = run(["export", path, name, "-o", npy], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(np.load(npy).astype(np.float64).reshape(-1).tolist(), want["values"])
            r = run(["tile", path, name, "--level", "0", "--tile", "0,0", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(r.json()["stats"]["min"], want["min"])
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_broken_partitions_are_named_and_model_weights_stay_readable(self):
        cases = {
            "zero2_missing_rank": "partition_count says 2 data-parallel ranks; 1 optimizer-states files are here (missing ranks: 1)",
            "zero2_lying_shapes": "group 0: 'layers.0.mlp.weight' needs elements [102, 522) of the group's 144",
        }
        for folder, why in cases.items():
            path = os.path.join(FIXTURES, folder)
            r = run(["ls", path, "--json"])
            self.assertEqual(r.code, 0, r.err)
            got = {t["name"]: t for t in r.json()["tensors"]}
            master = got["optimizer.state.fp32_param.embed.weight"]
            self.assertFalse(master["readable"], folder)
            self.assertIn(why, master["unavailable"], folder)
            self.assertTrue(got["embed.weight"]["readable"], folder)
            r = run(["stats", path, "embed.weight", "--json"])
            self.assertEqual(r.code, 0, r.err)
            r = run(["export", path, "optimizer.state.exp_avg.norm.weight", "-o", os.path.join(tempfile.gettempdir(), "never.npy")])
            self.assertEqual(r.code, 3, r.err)  # damaged data is bad input (4 is for a type without a kernel)
            self.assertIn(why, r.err)
            r = run(["stats", path, "--json", "--no-histogram", "--no-quantiles"])
            self.assertEqual(r.code, 7, r.err)  # incomplete: every readable tensor reported, the rest named
            damaged = [t["name"] for t in r.json()["tensors"] if t.get("damaged")]
            self.assertIn("optimizer.state.fp32_param.embed.weight", damaged)
            self.assertTrue(all(t["stats"] is not None for t in r.json()["tensors"] if not t.get("damaged")))

    def test_truncated_and_model_parallel_files_are_refused_by_name(self):
        out = tempfile.mkdtemp(prefix="tm-zero-")
        try:
            step = os.path.join(out, "global_step5")
            shutil.copytree(os.path.join(FIXTURES, "zero2", "global_step5"), step)
            victim = os.path.join(step, "zero_pp_rank_1_mp_rank_00_optim_states.pt")
            with open(victim, "rb") as f:
                data = f.read()
            with open(victim, "wb") as f:
                f.write(data[: len(data) - 100])
            r = run(["ls", step])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn("zero_pp_rank_1_mp_rank_00_optim_states.pt", r.err)
            with open(victim, "wb") as f:
                f.write(data)
            shutil.copy(os.path.join(step, "mp_rank_00_model_states.pt"), os.path.join(step, "mp_rank_01_model_states.pt"))
            r = run(["ls", step])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn("mp_rank_01_model_states.pt: a model-parallel ZeRO checkpoint", r.err)
            os.remove(os.path.join(step, "mp_rank_01_model_states.pt"))
            with open(os.path.join(out, "latest"), "w") as f:
                f.write("global_step9")
            r = run(["ls", out])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn("latest: names 'global_step9', which is not a checkpoint folder beside it", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
