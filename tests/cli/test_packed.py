"""Packed quantisation schemes in safetensors: several stored tensors (codes, scales, zeros, group indices, quant
state) shown and exported as ONE logical float32 tensor. FP8 with scale tensors, gpt-oss MXFP4, bitsandbytes
NF4/FP4 (plain and double-quantised), GPTQ (v1/v2, 2/3/4/8 bits, act-order) and AutoAWQ GEMM.

The checkpoints come from tests/tools/packed_write.py, which quantises known weights and dequantises the stored
parts itself (expected.npz: `ref`, which the tool must match bit for bit, the original weights and the scheme's
error bound). Each scheme also holds a hand-made tensor whose values are worked out by hand below."""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
sys.path.insert(0, HERE)
sys.path.insert(0, TOOLS)
from cli_harness import run  # noqa: E402
import packed_write  # noqa: E402

# The `packed.scheme` the logical tensors of each generated directory carry.
SCHEME = {"fp8_tensor": "fp8", "fp8_channel": "fp8", "fp8_block": "fp8", "fp8_e5m2": "fp8", "mxfp4": "mxfp4",
          "nf4": "bnb-nf4", "nf4_nested": "bnb-nf4", "fp4": "bnb-fp4", "gptq": "gptq", "gptq_actorder": "gptq",
          "gptq_v2": "gptq-v2", "gptq_8bit": "gptq", "gptq_2bit": "gptq", "gptq_3bit": "gptq", "awq": "awq"}
# Stored tensors that are parts of a packed tensor: never listed on their own.
PART_SUFFIXES = (".qweight", ".qzeros", ".scales", ".g_idx", ".weight_scale", ".weight_scale_inv", ".absmax",
                 ".quant_map", ".nested_absmax", ".nested_quant_map", "_blocks", "_scales")

L = "model.layers.0.self_attn.q_proj"  # the first quantised linear layer of each linear-layer scheme
HAND = "model.hand.proj.weight"        # the hand-made tensor of each linear-layer scheme
NAN, INF = float("nan"), float("inf")
# bitsandbytes' NF4 code values, as its get_4bit_type("nf4") lists them.
NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]

# The hand-made tensors' values, worked out by hand from the literal parts in packed_write.py (see the comments
# there for the codes, scales and zeros).
HAND_VALUES = {
    # e4m3 codes 0x38 0x40 0xB8 0x7E / 0x01 0x08 0x80 0x7F: 1, 2, -1, 448 / 2^-9 (subnormal), 2^-6, -0, NaN; x 0.5
    "fp8_tensor": {HAND: [[0.5, 1.0, -0.5, 224.0], [2.0**-10, 2.0**-7, -0.0, NAN]]},
    # rows 1, -2 / 0.5, 3 / 0, -0 times bf16 row scales 3, 0.5, -2 (the zeros' signs flip)
    "fp8_channel": {HAND: [[3.0, -6.0], [0.25, 1.5], [-0.0, 0.0]]},
    # 1.0 everywhere but [1, 129] = -3.0; block scales 2 (columns 0..127) and 0.25 (the partial block 128, 129)
    "fp8_block": {HAND: [[2.0] * 128 + [0.25, 0.25], [2.0] * 128 + [0.25, -0.75]]},
    # e5m2 codes 0x3C 0x7B 0x01 0xC2 / 0x7C 0xFC 0x7D 0x3E: 1, 57344, 2^-16, -3 / inf, -inf, NaN, 1.5; x 2
    "fp8_e5m2": {HAND: [[2.0, 114688.0, 2.0**-15, -6.0], [INF, -INF, NAN, 3.0]]},
    # row 0: every code (low nibble first) x 2^1; row 1: scale byte 255; row 2: 0.5 and 6 x 2^-127
    "mxfp4": {"model.layers.1.mlp.experts.gate_up_proj": [[
        [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, -0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0] + [0.0] * 16,
        [NAN] * 32,
        [2.0**-128, 6 * 2.0**-127] * 16]]},
    # codes 0..15 repeated over the first block (absmax 1), code 15 in the partial second block (absmax 4)
    "nf4": {HAND: np.reshape([NF4[i % 16] for i in range(64)] + [4.0], (5, 13))},
    # the same codes; absmax 0.75 * 2 + 0.5 = 2 and 0 * 2 + 0.5 = 0.5 from the nested map
    "nf4_nested": {HAND: np.reshape([2 * NF4[i % 16] for i in range(64)] + [0.5], (5, 13))},
    # FP4 codes 3, 11, 5, 8, 7: 1, -1, 0.5, +0 (bitsandbytes stores +0.0 for code 8), 0.25; x 6
    "fp4": {HAND: [[6.0, -6.0, 3.0, 0.0, 1.5]]},
    "gptq": {
        # scale[o] * (q - (stored zero + 1)): q = i, 8+i, 0, 15, 7-i, 8, 8, 8; zeros 9, 8, 1, 15, 4, 8, 7, 2
        HAND: [[-4.5, -4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0],
               [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75],
               [-1.0] * 8,
               [0.0] * 8,
               [0.375, 0.25, 0.125, 0.0, -0.125, -0.25, -0.375, -0.5],
               [0.0] * 8,
               [3.0] * 8,
               [0.375] * 8],
        # A stored zero of 15 (what AutoGPTQ writes for a zero of 0) in the top nibble: stored + 1 = 16, no
        # wrap to 0. AutoGPTQ itself is not consistent here: qlinear_cuda_old's forward masks and then adds 1
        # (16, as here); its later unpack helpers add 1 and then mask (0).
        "model.hand_wrap.proj.weight": [[i - 8.0 for i in range(8)]] * 7 + [[i - 16.0 for i in range(8)]]},
    # q = i % 8; inputs 0..127 in group 1 (zero 4, scale 0.5), inputs 128..255 in group 0 (zero 8, scale 1)
    "gptq_actorder": {HAND: [[0.5 * (i % 8 - 4) for i in range(128)] + [i % 8 - 8.0 for i in range(128, 256)]] * 8},
    # v2 zeros as stored: 0.5 * (i - 8), 0.5 * (8 + i - 0) x 6, 0.5 * (8 + i - 15)
    "gptq_v2": {HAND: [[-4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5]]
                + [[4.0, 4.5, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5]] * 6
                + [[-3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0]]},
    # 0.5 * (q - 128) for q = 0, 1, 2, 3, 255, 1, 127, 128
    "gptq_8bit": {HAND: [[-64.0, -63.5, -63.0, -62.5, 63.5, -63.5, -0.5, 0.0]] * 8},
    # q - 2 for q = i % 4; the last output column scaled by 0.25
    "gptq_2bit": {HAND: [[-2.0, -1.0, 0.0, 1.0] * 4] * 15 + [[-0.5, -0.25, 0.0, 0.25] * 4]},
    # 3 bits, codes crossing words: q = i % 8 minus zero 4; output 31 scaled by 0.5
    "gptq_3bit": {HAND: [[i % 8 - 4.0 for i in range(32)]] * 31 + [[0.5 * (i % 8 - 4) for i in range(32)]]},
    # nibble k holds column [0, 2, 4, 6, 1, 3, 5, 7][k]: even inputs q = 0, 4, 1, 5, 2, 6, 3, 7 by column, odd
    # inputs 8 more; minus zero 8, times scale (2 for column 3, 0.5 for column 7)
    "awq": {HAND: [[even, odd] * 64 for even, odd in [(-8.0, 0.0), (-4.0, 4.0), (-7.0, 1.0), (-6.0, 10.0),
                                                     (-6.0, 2.0), (-2.0, 6.0), (-5.0, 3.0), (-0.5, 3.5)]]},
}


def is_part(name):
    return name.endswith(PART_SUFFIXES) or ".quant_state." in name


def bit_differences(got, want):
    """How many positions of two float32 arrays differ in their bits, any NaN matching any NaN."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    nan = np.isnan(want)
    return int((np.isnan(got) != nan).sum() + ((got.view(np.uint32) != want.view(np.uint32)) & ~nan).sum())


class GeneratorSelfCheck(unittest.TestCase):
    """The generator's own dequantisation of the hand-made parts gives the values worked out by hand (needs no
    binary): its `ref` for the quantised tensors comes from the same decoders."""

    def test_hand_made_parts_decode_to_the_hand_worked_values(self):
        self.assertEqual(set(HAND_VALUES), set(packed_write.SCHEMES))
        for scheme, build in packed_write.SCHEMES.items():
            logical = build().logical
            for name, values in HAND_VALUES[scheme].items():
                want = np.array(values, np.float32)
                self.assertEqual(logical[name].ref.shape, want.shape, (scheme, name))
                self.assertEqual(bit_differences(logical[name].ref, want), 0, (scheme, name))


class GeneratedCheckpoints(unittest.TestCase):
    """Writes every scheme directory once per class (tests/tools/packed_write.py)."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="tm-packed-")
        gen = subprocess.run([sys.executable, os.path.join(TOOLS, "packed_write.py"), cls.root],
                             capture_output=True, text=True)
        if gen.returncode != 0:
            raise RuntimeError("packed_write.py failed: " + gen.stderr)
        cls.out = os.path.join(cls.root, "export.npy")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)


class PackedSchemes(GeneratedCheckpoints):
    """Every scheme directory: `ls` shows the logical tensors (not their parts) and the plain ones; `export` gives
    `ref` bit for bit, within the quantisation bound of the original weights; `stats` agrees with numpy."""

    def export(self, directory, name):
        r = run(["export", directory, name, "-o", self.out])
        self.assertEqual(r.code, 0, f"{name}: {r.err}")
        return np.load(self.out)

    def check_stats(self, directory, name, ref):
        """min/max exactly numpy's; the mean within 1e-12 relative of the exact (math.fsum) mean, plus 1e-15 of
        the largest magnitude for means near 0 (as test_fixtures)."""
        r = run(["stats", directory, name, "--json"])
        self.assertEqual(r.code, 0, f"{name}: {r.err}")
        stats = r.json()["tensors"][0]["stats"]
        v = ref.astype(np.float64).ravel()
        self.assertEqual((stats["min"], stats["max"]), (v.min(), v.max()), name)
        mean = math.fsum(v) / v.size
        self.assertLessEqual(abs(stats["mean"] - mean), 1e-12 * abs(mean) + 1e-15 * np.abs(v).max(),
                             f"{name}: mean {stats['mean']!r}, want {mean!r}")

    def check_scheme(self, scheme):
        directory = os.path.join(self.root, scheme)
        expected = np.load(os.path.join(directory, "expected.npz"))
        logical = [k[:-len("/ref")] for k in expected.files if k.endswith("/ref")]
        plain = [str(n) for n in expected["plain_names"]]
        r = run(["ls", directory, "--json"])
        self.assertEqual(r.code, 0, r.err)
        listed = {t["name"]: t for t in r.json()["tensors"]}
        self.assertEqual([n for n in listed if is_part(n)], [], "parts of packed tensors are listed")
        self.assertEqual(sorted(listed), sorted(logical + plain))
        for name in plain:
            self.assertIsNone(listed[name].get("packed"), name)
        for name in logical:
            ref = expected[name + "/ref"]
            entry = listed[name]
            self.assertEqual((entry["shape"], entry["readable"]), (list(ref.shape), True), name)
            self.assertEqual(entry["packed"]["scheme"], SCHEME[scheme], name)
            got = self.export(directory, name)
            self.assertEqual((got.dtype, got.shape), (np.float32, ref.shape), name)
            differ = bit_differences(got, ref)
            self.assertEqual(differ, 0, f"{name}: {differ} of {ref.size} values differ from the reference")
            if name + "/orig" in expected.files:
                err = np.abs(got.astype(np.float64) - expected[name + "/orig"].astype(np.float64))
                beyond = int((err > expected[name + "/bound"]).sum())
                self.assertEqual(beyond, 0, f"{name}: {beyond} values beyond the quantisation error bound")
            if np.all(np.isfinite(ref)):
                self.check_stats(directory, name, ref)
        for name, values in HAND_VALUES[scheme].items():
            want = np.array(values, np.float32)
            got = self.export(directory, name)
            self.assertEqual(got.shape, want.shape, name)
            self.assertEqual(bit_differences(got, want), 0, f"{name}: {got.tolist()}")

    def test_fp8_per_tensor_scale(self):
        self.check_scheme("fp8_tensor")

    def test_fp8_per_channel_scale(self):
        self.check_scheme("fp8_channel")

    def test_fp8_deepseek_blocks(self):
        self.check_scheme("fp8_block")

    def test_fp8_e5m2(self):
        self.check_scheme("fp8_e5m2")

    def test_mxfp4_gpt_oss_experts(self):
        self.check_scheme("mxfp4")

    def test_bnb_nf4(self):
        self.check_scheme("nf4")

    def test_bnb_nf4_double_quant(self):
        self.check_scheme("nf4_nested")

    def test_bnb_fp4(self):
        self.check_scheme("fp4")

    def test_gptq_v1(self):
        self.check_scheme("gptq")

    def test_gptq_act_order(self):
        self.check_scheme("gptq_actorder")

    def test_gptq_v2(self):
        self.check_scheme("gptq_v2")

    def test_gptq_8bit(self):
        self.check_scheme("gptq_8bit")

    def test_gptq_2bit(self):
        self.check_scheme("gptq_2bit")

    def test_gptq_3bit(self):
        self.check_scheme("gptq_3bit")

    def test_awq_gemm(self):
        self.check_scheme("awq")


class PackedQuantizationStatistics(GeneratedCheckpoints):
    """`stats --quantization` on packed tensors: bits per weight from the parts' bytes, one scale statistic per
    stored scale, and code counts equal to numpy's count of the stored codes, read from the part's bytes."""

    @staticmethod
    def stored_codes(entry):
        """Every code of the logical tensor's code part, decoded by numpy from the file bytes `ls` points at."""
        packed = entry["packed"]
        part = packed["parts"][0]
        raw = np.fromfile(part["file"], np.uint8, count=part["bytes"], offset=part["offset"])
        kind = packed["kernel_scheme"]
        if kind == "fp8":
            return raw
        if kind == "gptq" and packed["bits"] == 3:  # bit streams down qweight's columns (32 codes in 3 words)
            words = raw.view("<u4").reshape(part["shape"])
            return packed_write._unpack_stream(np.ascontiguousarray(words.T), 3).ravel()
        if kind in ("gptq", "awq"):
            bits = packed["bits"]
            words = raw.view("<u4").astype(np.uint64)
            return np.concatenate([(words >> (j * bits)) & ((1 << bits) - 1) for j in range(32 // bits)])
        n = entry["elements"]  # bnb (first element high) or MXFP4 (first element low): both nibbles count
        codes = np.stack([raw >> 4, raw & 15], axis=1).ravel() if kind == "bnb4" else np.stack([raw & 15, raw >> 4], axis=1).ravel()
        return codes[:n]

    def check_quantization(self, scheme):
        directory = os.path.join(self.root, scheme)
        listed = run(["ls", directory, "--json"]).json()["tensors"]
        for entry in [t for t in listed if t.get("packed")]:
            name = entry["name"]
            r = run(["stats", directory, name, "--quantization", "--no-histogram", "--no-quantiles", "--json"])
            self.assertEqual(r.code, 0, f"{name}: {r.err}")
            q = r.json()["tensors"][0]["quantization"]
            self.assertAlmostEqual(q["bits_per_weight"], 8 * entry["bytes"] / entry["elements"], places=12, msg=name)
            codes = self.stored_codes(entry)
            want = np.bincount(codes.astype(np.int64), minlength=1 << q["code_bits"])
            self.assertEqual(q["code_counts"], want.tolist(), name)
            scale_parts = [p for p in entry["packed"]["parts"] if p["role"] in ("scales", "weight_scale", "weight_scale_inv", "absmax")]
            scale_count = int(np.prod(scale_parts[0]["shape"])) if scale_parts else 0
            self.assertEqual(q["block_scales"]["count"], scale_count, name)

    def test_awq_mins_are_the_value_of_code_zero(self):
        """The hand-made AWQ tensor: zeros 8 everywhere, scales 1 but 2 (column 3) and 0.5 (column 7)."""
        r = run(["stats", os.path.join(self.root, "awq"), HAND, "--quantization", "--json"])
        self.assertEqual(r.code, 0, r.err)
        mins = r.json()["tensors"][0]["quantization"]["block_mins"]
        self.assertEqual((mins["count"], mins["min"], mins["max"], mins["mean"]), (8, -16.0, -4.0, -8.5))

    def test_quantization_statistics_of_every_scheme(self):
        for scheme in SCHEME:
            with self.subTest(scheme=scheme):
                self.check_quantization(scheme)


class PackedTensorsInTheIndex(unittest.TestCase):
    """The index stores each packed tensor's description: a reopened index lists and serves it, and a changed
    quantization config (GPTQ v1 -> v2 zero convention) re-describes it and recomputes its statistics."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-packed-index-")
        self.cache = os.path.join(self.dir, "cache")
        self.ck = os.path.join(self.dir, "gptq")
        packed_write.write_checkpoint(self.ck, packed_write.build_gptq())

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def stats(self):
        r = run(["stats", self.ck, L + ".weight", "--json"], cache_home=self.cache)
        self.assertEqual(r.code, 0, r.err)
        return r.json()["tensors"][0]

    def exported_mean(self):
        out = os.path.join(self.dir, "w.npy")
        self.assertEqual(run(["export", self.ck, L + ".weight", "-o", out]).code, 0)
        return math.fsum(np.load(out).astype(np.float64).ravel()) / np.load(out).size

    def test_reopened_index_serves_packed_tensors_and_notices_a_new_config(self):
        self.assertEqual(run(["index", self.ck], cache_home=self.cache).code, 0)
        listed = {t["name"]: t for t in run(["ls", self.ck, "--json"], cache_home=self.cache).json()["tensors"]}
        entry = listed[L + ".weight"]
        self.assertEqual((entry["packed"]["scheme"], entry["readable"], entry["stats_indexed"]), ("gptq", True, True))
        first = self.stats()
        self.assertEqual(first["source"], "index")
        self.assertLessEqual(abs(first["stats"]["mean"] - self.exported_mean()), 1e-12 * abs(first["stats"]["mean"]) + 1e-15)

        config_path = os.path.join(self.ck, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["quantization_config"]["checkpoint_format"] = "gptq_v2"
        with open(config_path, "w") as f:
            json.dump(config, f)
        listed = {t["name"]: t for t in run(["ls", self.ck, "--json"], cache_home=self.cache).json()["tensors"]}
        self.assertEqual(listed[L + ".weight"]["packed"]["scheme"], "gptq-v2")
        second = self.stats()
        self.assertNotEqual(second["stats"]["mean"], first["stats"]["mean"])
        self.assertLessEqual(abs(second["stats"]["mean"] - self.exported_mean()), 1e-12 * abs(second["stats"]["mean"]) + 1e-15)


class UnalignedParts(unittest.TestCase):
    """safetensors packs tensors back to back: after a 3-byte tensor every part lies at an odd offset. The
    values must not change (and the sanitizer build checks that nothing reads them as aligned words)."""

    def test_every_scheme_with_its_parts_at_odd_offsets(self):
        root = tempfile.mkdtemp(prefix="tm-packed-odd-")
        try:
            for scheme, build in packed_write.SCHEMES.items():
                ck = build()
                ck.tensors.insert(0, ("model.odd_pad", np.arange(3, dtype=np.uint8)))
                directory = os.path.join(root, scheme)
                packed_write.write_checkpoint(directory, ck)
                for name, lg in ck.logical.items():
                    out = os.path.join(root, "o.npy")
                    r = run(["export", directory, name, "-o", out])
                    self.assertEqual(r.code, 0, f"{scheme} {name}: {r.err}")
                    self.assertEqual(bit_differences(np.load(out), lg.ref), 0, f"{scheme} {name}")
        finally:
            shutil.rmtree(root, ignore_errors=True)


class CompareWithTheSource(unittest.TestCase):
    """`compare SOURCE QUANTIZED` pairs each packed logical tensor with the source weight of the same name and
    measures the quantization error: the figures equal numpy's on the exported values."""

    def test_awq_against_its_float_weights(self):
        root = tempfile.mkdtemp(prefix="tm-packed-compare-")
        try:
            ck = packed_write.build_awq()
            quantized = os.path.join(root, "awq")
            packed_write.write_checkpoint(quantized, ck)
            sources = [(name, lg.orig.astype(np.float32)) for name, lg in ck.logical.items() if lg.orig is not None]
            source = os.path.join(root, "source.safetensors")
            packed_write.write_safetensors(source, sources)
            r = run(["compare", source, quantized, "--json"])
            self.assertEqual(r.code, 0, r.err)
            rows = {t["name"]: t for t in r.json()["tensors"]}
            self.assertEqual(sorted(rows), sorted(name for name, _ in sources))
            for name, a in sources:
                out = os.path.join(root, "q.npy")
                self.assertEqual(run(["export", quantized, name, "-o", out]).code, 0)
                a64, b64 = a.astype(np.float64).ravel(), np.load(out).astype(np.float64).ravel()
                diff = b64 - a64
                rmse = math.sqrt(math.fsum(diff * diff) / diff.size)
                cosine = math.fsum(a64 * b64) / math.sqrt(math.fsum(a64 * a64) * math.fsum(b64 * b64))
                row = rows[name]
                self.assertEqual(row["type_b"], "AWQ-INT4")
                self.assertAlmostEqual(row["rmse"], rmse, delta=1e-12 * rmse)
                self.assertEqual(row["max_abs_diff"], np.abs(diff).max())
                self.assertAlmostEqual(row["cosine"], cosine, delta=1e-12)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def replace(ck, name, value):
    """The checkpoint with tensor `name`'s stored value replaced."""
    assert name in [n for n, _ in ck.tensors], name
    ck.tensors = [(n, value if n == name else v) for n, v in ck.tensors]
    return ck


def remove(ck, name):
    assert name in [n for n, _ in ck.tensors], name
    ck.tensors = [(n, v) for n, v in ck.tensors if n != name]
    return ck


class CorruptPackedCheckpoints(unittest.TestCase):
    """Inconsistent parts are bad input (exit 3) naming the part; a layout the tool cannot decode is unavailable
    (listed unreadable, export exit 4)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-packed-bad-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def export(self, ck, name):
        directory = os.path.join(self.dir, "ckpt")
        packed_write.write_checkpoint(directory, ck)
        return run(["export", directory, name, "-o", os.path.join(self.dir, "o.npy")])

    def expect_bad_input(self, ck, name, part):
        r = self.export(ck, name)
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(part, r.err)

    def test_gptq_qzeros_of_the_wrong_shape(self):
        ck = replace(packed_write.build_gptq(), L + ".qzeros", np.zeros((4, 24), np.int32))  # 3 groups of 192 / 8
        self.expect_bad_input(ck, L + ".weight", L + ".qzeros")

    def test_gptq_3bit_codes_not_in_whole_3_word_groups(self):
        """3-bit qweight must hold whole 3-word groups of 32 inputs: 25 word rows (not a multiple of 3) is refused
        naming the part, and so is a 3-bit layer whose output count is not a multiple of 32."""
        ck = replace(packed_write.build_gptq_3bit(), L + ".qweight", np.zeros((25, 96), np.int32))
        self.expect_bad_input(ck, L + ".weight", L + ".qweight")
        ck = replace(packed_write.build_gptq_3bit(), L + ".qweight", np.zeros((24, 80), np.int32))
        self.expect_bad_input(ck, L + ".weight", "3k, 32m")

    def test_gptq_qweight_without_scales(self):
        r = self.export(remove(packed_write.build_gptq(), L + ".scales"), L + ".weight")
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(L + ".scales", r.err)

    def test_bnb_quant_state_that_is_not_json(self):
        state = L + ".weight.quant_state.bitsandbytes__nf4"
        ck = replace(packed_write.build_nf4(), state, np.frombuffer(b"{not json", np.uint8))
        self.expect_bad_input(ck, L + ".weight", state)

    def test_bnb_nested_offset_beyond_float32(self):
        """Found by tests/fuzz/fuzz_quant_config: a nested_offset that no float32 holds became +inf, every value
        decoded to inf, and the index could not read its own descriptor back (JSON has no inf)."""
        state = L + ".weight.quant_state.bitsandbytes__nf4"
        ck = packed_write.build_nf4_nested()
        doc = json.loads(bytes(dict(ck.tensors)[state]))
        doc["nested_offset"] = 1e300
        ck = replace(ck, state, np.frombuffer(json.dumps(doc).encode(), np.uint8))
        r = self.export(ck, L + ".weight")
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(state, r.err)
        self.assertIn("nested_offset 1e+300 is not a finite float32 number", r.err)

    def test_bnb_absmax_too_short_for_the_shape(self):
        ck = replace(packed_write.build_nf4(), L + ".weight.absmax", np.ones(205, np.float32))  # [99, 133]: 206
        self.expect_bad_input(ck, L + ".weight", L + ".weight.absmax")

    def test_mxfp4_scales_not_matching_the_blocks(self):
        experts = "model.layers.0.mlp.experts.gate_up_proj"
        ck = replace(packed_write.build_mxfp4(), experts + "_scales", np.full((2, 64, 3), 127, np.uint8))  # G = 4
        self.expect_bad_input(ck, experts, experts + "_scales")

    def test_fp8_block_scales_of_the_wrong_grid(self):
        ck = replace(packed_write.build_fp8_block(), L + ".weight_scale_inv", np.ones((2, 2), np.float32))  # [2, 3]
        self.expect_bad_input(ck, L + ".weight", L + ".weight_scale_inv")

    def test_gptq_g_idx_beyond_the_groups(self):
        ck = packed_write.build_gptq()
        g_idx = dict(ck.tensors)[L + ".g_idx"].copy()
        g_idx[5] = 3  # 3 groups: 0..2
        r = self.export(replace(ck, L + ".g_idx", g_idx), L + ".weight")
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(L + ".g_idx", r.err)
        self.assertIn("entry 5", r.err)

    def test_a_part_with_a_zero_dimension(self):
        """A zero dimension would let the other one be anything; derived sizes must not overflow."""
        experts = "model.layers.0.mlp.experts.gate_up_proj"
        ck = replace(packed_write.build_mxfp4(), experts + "_blocks", np.zeros((0, 64, 4, 16), np.uint8))
        ck = replace(ck, experts + "_scales", np.zeros((0, 64, 4), np.uint8))
        self.expect_bad_input(ck, experts, "no elements")


if __name__ == "__main__":
    unittest.main(verbosity=2)
