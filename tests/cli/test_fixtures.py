"""Statistics against reference values we did not compute: files written by llama.cpp's gguf-py with
statistics computed by numpy/math.fsum (../shared/fixtures/gguf). Skips visibly when the folder is
absent (a user's clone); never the only test of a feature."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import run  # noqa: E402

FIXTURES = os.environ.get("TM_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures"))
GGUF = os.path.join(FIXTURES, "gguf")
NATIVE = {"F32": "f32", "F16": "f16", "BF16": "bf16"}


def load(path):
    with open(path) as f:
        return json.load(f)


def expected_tensors(doc):
    """The per-tensor records of a single-file or a split-set expected.json."""
    if "tensors" in doc:
        return doc["tensors"]
    return [t for shard in doc["shards"] for t in shard["tensors"]]


def close(a, b, rel=1e-12, abs_=1e-300):
    return abs(a - b) <= max(abs(a), abs(b)) * rel + abs_


@unittest.skipUnless(os.path.isdir(GGUF), "SKIPPED: reference fixtures not found at %s" % GGUF)
class ReferenceStatistics(unittest.TestCase):
    def check(self, stats, want, where):
        for key in ("count", "finite_count", "nan_count", "inf_count", "zero_count"):
            self.assertEqual(stats[key], want[key], "%s %s" % (where, key))
        if want["finite_count"] == 0:
            return
        for key in ("min", "max", "abs_max"):
            self.assertEqual(stats[key], want[key], "%s %s" % (where, key))
        # The reference sum is math.fsum (correctly rounded); ours is compensated: within 1e-12.
        scale = max(abs(want["min"]), abs(want["max"])) * want["finite_count"]
        self.assertTrue(abs(stats["sum"] - want["sum"]) <= scale * 1e-15 + 1e-300, "%s sum %r vs %r" % (where, stats["sum"], want["sum"]))
        self.assertTrue(close(stats["mean"], want["mean"], 1e-12, scale * 1e-15 / want["finite_count"]), "%s mean" % where)
        self.assertTrue(close(stats["std"], want["std"], 1e-10), "%s std %r vs %r" % (where, stats["std"], want["std"]))
        h = want["histogram"]
        got = stats["histogram"]
        self.assertEqual(len(got["counts"]), h["bins"])
        self.assertEqual(got["edges"][0], h["first_edge"])
        self.assertEqual(got["edges"][-1], h["last_edge"])
        # Edge values may land one bin over in another implementation: a few counts of slack.
        diff = sum(abs(a - b) for a, b in zip(got["counts"], h["counts"]))
        self.assertLessEqual(diff, 4, "%s histogram differs by %d counts" % (where, diff))
        self.assertEqual(sum(got["counts"]), want["finite_count"], where)

    def stats_of(self, path, offset, dtype, shape):
        r = run(["stats", "--raw", path, "--offset", str(offset), "--dtype", dtype, "--shape",
                 ",".join(str(d) for d in shape), "--bins", "64", "--json"])
        self.assertEqual(r.code, 0, r.err)
        return r.json()["stats"]

    def test_dequantized_reference_values_of_every_tensor(self):
        """Every tensor's reference float32 values (all 25 types, NaN/Inf probe included)."""
        for prefix in (os.path.join(GGUF, "tiny-mixed"), os.path.join(GGUF, "split", "tiny-split")):
            index = load(prefix + ".ref.json")
            expected = {t["name"]: t for t in expected_tensors(load(prefix + ".expected.json"))}
            self.assertGreater(len(index), 5)
            for name, ref in index.items():
                stats = self.stats_of(prefix + ".ref.f32", ref["offset"], "f32", ref["shape"])
                self.check(stats, expected[name]["stats"], name)

    def test_checkpoint_stats_of_the_gguf_file(self):
        """`tensormorph stats FILE.gguf`: every tensor, dense or dequantized, matches expected.json."""
        r = run(["stats", os.path.join(GGUF, "tiny-mixed.gguf"), "--bins", "64", "--json"])
        self.assertEqual(r.code, 0, r.err)
        got = {t["name"]: t for t in r.json()["tensors"]}
        for t in expected_tensors(load(os.path.join(GGUF, "tiny-mixed.expected.json"))):
            entry = got[t["name"]]
            self.assertEqual(entry["ne"], t["ne"])
            self.assertEqual(entry["shape"], t["numpy_shape"])
            self.assertIsNotNone(entry["stats"], (t["name"], entry.get("unavailable")))
            self.check(entry["stats"], t["stats"], t["name"])
            if t["ggml_type"] not in NATIVE:
                self.assertEqual(entry["dequantized_from"], t["ggml_type"])
                self.assertEqual(entry["placement"][0]["op"], "dequantize.ggml")

    def test_quantization_statistics_of_every_format_are_sane(self):
        """Block scales read at each format's offsets are finite and of the values' magnitude (a wrong
        offset reads codes as fp16 and shows as huge, NaN or zero scales); counted codes sum to the
        elements; bits per weight is the block size's."""
        r = run(["stats", os.path.join(GGUF, "tiny-mixed.gguf"), "--quantization", "--json"])
        self.assertEqual(r.code, 0, r.err)
        seen = 0
        for t in r.json()["tensors"]:
            if "dequantized_from" not in t:
                continue
            seen += 1
            q, name = t["quantization"], t["name"]
            self.assertAlmostEqual(q["bits_per_weight"], 8.0 * t["bytes"] / t["elements"], msg=name)
            for key in ("block_scales", "block_mins"):
                if q[key] is None:
                    continue
                sc = q[key]
                self.assertEqual(sc["nan_count"] + sc["inf_count"], 0, (name, key))
                # a scale or min never exceeds the values it encodes by much (MXFP4: power-of-two rounding)
                self.assertLessEqual(sc["abs_max"], 2 * t["stats"]["abs_max"], (name, key))
                if key == "block_scales":
                    self.assertGreater(sc["abs_max"], 1e-6, name)
            if q["code_bits"]:
                self.assertEqual(sum(q["code_counts"]), t["elements"], name)
        self.assertEqual(seen, 22)

    def test_a_quantized_tensor_no_backend_may_decode_says_why(self):
        """With every decoder excluded (the CPU, and Vulkan, which decodes Q4_0 too), the quantized tensor is
        reported unavailable, naming its format and the reason (dense tensors then fail outright, as any op
        with no backend does)."""
        r = run(["stats", os.path.join(GGUF, "tiny-mixed.gguf"), "blk.0.attn_q.weight", "--never", "cpu",
                 "--never", "vulkan", "--json"])
        self.assertEqual(r.code, 0, r.err)
        t = r.json()["tensors"][0]
        self.assertIsNone(t["stats"])
        self.assertIn("dequantize.ggml on Q4_0 (65536 elements): no backend can run it", t["unavailable"])
        self.assertIn("cpu: disabled_by_policy", t["unavailable"])

    def test_split_set_opened_from_any_shard(self):
        """The 2-file split set as one checkpoint, from either shard; dense tensors match expected.json."""
        expected = {t["name"]: t for t in expected_tensors(load(os.path.join(GGUF, "split", "tiny-split.expected.json")))}
        for shard in ("tiny-split-00001-of-00002.gguf", "tiny-split-00002-of-00002.gguf"):
            r = run(["stats", os.path.join(GGUF, "split", shard), "--bins", "64", "--json"])
            self.assertEqual(r.code, 0, r.err)
            got = {t["name"]: t for t in r.json()["tensors"]}
            self.assertEqual(set(got), set(expected))
            for name, t in expected.items():
                self.check(got[name]["stats"], t["stats"], name)

    def test_export_equals_the_reference_values_bit_for_bit(self):
        """Every tensor (25 types: F32/F16/BF16 and every quantized format, dequantized) exported to .npy
        equals gguf-py's reference float32 values bit for bit, in tiny-mixed and in the split set."""
        import numpy as np  # Debian's python3-numpy (scripts/install-deps)
        out_dir = tempfile.mkdtemp(prefix="tm-export-")
        for prefix, checkpoint in ((os.path.join(GGUF, "tiny-mixed"), os.path.join(GGUF, "tiny-mixed.gguf")),
                                   (os.path.join(GGUF, "split", "tiny-split"),
                                    os.path.join(GGUF, "split", "tiny-split-00001-of-00002.gguf"))):
            ref_index = load(prefix + ".ref.json")
            types = set()
            for t in expected_tensors(load(prefix + ".expected.json")):
                out = os.path.join(out_dir, "t.npy")
                r = run(["export", checkpoint, t["name"], "-o", out])
                self.assertEqual(r.code, 0, r.err)
                got = np.load(out).astype(np.float32)  # f16 stays f16 in the file; widening is exact
                ref = ref_index[t["name"]]
                want = np.fromfile(prefix + ".ref.f32", dtype="<f4", count=ref["count"],
                                   offset=ref["offset"]).reshape(ref["shape"])
                self.assertEqual(got.shape, want.shape, t["name"])
                differ = int((got.view(np.uint32) != want.view(np.uint32)).sum())
                self.assertEqual(differ, 0, f"{t['name']} ({t['ggml_type']}): {differ} values differ")
                types.add(t["ggml_type"])
            self.assertGreater(len(types), 2)

    def test_native_tensors_read_in_place_from_the_gguf_file(self):
        """F32/F16/BF16 tensors straight from the GGUF data section, at the offsets gguf-py reports."""
        seen = set()
        for t in expected_tensors(load(os.path.join(GGUF, "tiny-mixed.expected.json"))):
            if t["ggml_type"] not in NATIVE:
                continue
            seen.add(t["ggml_type"])
            stats = self.stats_of(os.path.join(GGUF, "tiny-mixed.gguf"), t["data_offset"], NATIVE[t["ggml_type"]],
                                  t["numpy_shape"])
            self.check(stats, t["stats"], t["name"])
        self.assertEqual(seen, set(NATIVE))


if __name__ == "__main__":
    if not os.path.isdir(GGUF):
        print("SKIPPED: reference fixtures not found at %s" % GGUF)
    unittest.main(verbosity=2)
