"""`tensormorph compare A B`: the error of a lower-precision or quantized copy against its source,
checked against numpy computing the same figures from values it decoded itself."""
import math
import os
import shutil
import struct
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cli_harness import run  # noqa: E402
from gguf_write import write_gguf  # noqa: E402
from safetensors_write import write_safetensors  # noqa: E402


def quantize_q8_0(x):
    """Q8_0 as ggml lays it out: per 32 values, an fp16 scale d = max|x| / 127 and int8 q = round(x / d).
    Returns the block bytes and the values they decode to (q * d in float32)."""
    blocks, decoded = bytearray(), []
    for chunk in x.reshape(-1, 32):
        d = np.float16(np.abs(chunk).max() / 127.0)
        q = np.zeros(32, np.int8) if d == 0 else np.clip(np.round(chunk / np.float32(d)), -127, 127).astype(np.int8)
        blocks += struct.pack("<e", d) + q.tobytes()
        decoded.append(q.astype(np.float32) * np.float32(d))
    return bytes(blocks), np.concatenate(decoded)


def quantize_q4_0(x):
    """Q4_0 as ggml lays it out: per 32 values an fp16 d = (the value of largest magnitude) / -8 and
    codes q = clip(round(x / d) + 8, 0, 15), byte j holding q[j] (low nibble) and q[j + 16] (high).
    Returns the bytes, the scales and the codes."""
    out, scales, codes = bytearray(), [], []
    for chunk in x.reshape(-1, 32):
        m = chunk[np.argmax(np.abs(chunk))]
        d = np.float16(m / -8.0)
        inv = 0.0 if d == 0 else 1.0 / np.float32(d)
        q = np.clip(np.round(chunk * inv) + 8, 0, 15).astype(np.uint8)
        out += struct.pack("<e", d) + bytes((q[:16] | (q[16:] << 4)).tolist())
        scales.append(float(d))
        codes.append(q)
    return bytes(out), np.array(scales), np.concatenate(codes)


def figures(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    d = b64 - a64
    ssd, saa, sbb = float((d * d).sum()), float((a64 * a64).sum()), float((b64 * b64).sum())
    return {"rmse": math.sqrt(ssd / a.size), "max_abs_diff": float(np.abs(d).max()), "rel_error": math.sqrt(ssd / saa),
            "cosine": float((a64 * b64).sum()) / math.sqrt(saa * sbb), "snr_db": 10 * math.log10(saa / ssd)}


class Compare(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-compare-")
        rng = np.random.default_rng(11)
        self.w = (rng.standard_normal((64, 96)) * 0.02).astype(np.float32)
        self.w[3, :5] *= 40  # an outlier channel, as real weights have
        self.norm = (1 + rng.standard_normal(96) * 0.05).astype(np.float32)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def gguf(self, name, weight_type, weight_bytes):
        path = os.path.join(self.dir, name)
        write_gguf(path, [("general.architecture", "STRING", "llama")],
                   [("blk.0.ffn_up.weight", weight_type, [96, 64], weight_bytes),
                    ("output_norm.weight", "F32", [96], self.norm.tobytes())])
        return path

    def test_q8_0_against_its_f32_source(self):
        ref = self.gguf("f32.gguf", "F32", self.w.tobytes())
        blocks, decoded = quantize_q8_0(self.w.ravel())
        q8 = self.gguf("q8.gguf", "Q8_0", blocks)
        r = run(["compare", ref, q8, "--json"])
        self.assertEqual(r.code, 0, r.err)
        got = {t["name"]: t for t in r.json()["tensors"]}
        up = got["blk.0.ffn_up.weight"]
        self.assertEqual((up["type_a"], up["type_b"], up["count"]), ("F32", "Q8_0", self.w.size))
        want = figures(self.w.ravel(), decoded)
        for key, value in want.items():
            self.assertAlmostEqual(up[key], value, delta=1e-9 * max(1.0, abs(value)), msg=key)
        self.assertGreater(up["snr_db"], 30)  # 8-bit codes: ~40 dB
        self.assertEqual([p["op"] for p in up["placement"]], ["dequantize.ggml", "compare.diff_moments"])
        same = got["output_norm.weight"]
        self.assertEqual((same["rmse"], same["max_abs_diff"], same["snr_db"]), (0.0, 0.0, "inf"))
        self.assertEqual(same["cosine"], 1.0)

    def test_quantization_statistics_of_q8_0_and_q4_0(self):
        blocks, _ = quantize_q8_0(self.w.ravel())
        q8 = self.gguf("q8.gguf", "Q8_0", blocks)
        r = run(["stats", q8, "blk.0.ffn_up.weight", "--quantization", "--json"])
        self.assertEqual(r.code, 0, r.err)
        q = r.json()["tensors"][0]["quantization"]
        raw = np.frombuffer(blocks, dtype=np.uint8).reshape(-1, 34)
        d = raw[:, :2].copy().view(np.float16).astype(np.float64).ravel()
        codes = raw[:, 2:].copy().view(np.int8).ravel()
        self.assertEqual(q["bits_per_weight"], 8.5)
        self.assertEqual((q["block_scales"]["min"], q["block_scales"]["max"]), (d.min(), d.max()))
        self.assertIsNone(q["block_mins"])
        self.assertEqual(q["code_bits"], 8)
        self.assertEqual(q["code_counts"], np.bincount(codes.astype(np.int64) + 128, minlength=256).tolist())
        sat = int(((codes == 127) | (codes <= -127)).sum())
        self.assertAlmostEqual(q["saturated_fraction"], sat / codes.size, places=15)
        self.assertGreater(sat, 0)  # every block holds its largest value at +-127

        q4_bytes, scales, q4_codes = quantize_q4_0(self.w.ravel())
        q4 = self.gguf("q4.gguf", "Q4_0", q4_bytes)
        q = run(["stats", q4, "blk.0.ffn_up.weight", "--quantization", "--json"]).json()["tensors"][0]["quantization"]
        self.assertEqual(q["bits_per_weight"], 4.5)
        self.assertEqual(q["code_counts"], np.bincount(q4_codes, minlength=16).tolist())
        self.assertEqual((q["block_scales"]["min"], q["block_scales"]["max"]), (scales.min(), scales.max()))
        self.assertAlmostEqual(q["saturated_fraction"], float(((q4_codes == 0) | (q4_codes == 15)).mean()), places=15)
        human = run(["stats", q4, "blk.0.ffn_up.weight", "--quantization"])
        self.assertIn("codes used", human.out)

    def test_info_reports_effective_bits_per_weight(self):
        blocks, _ = quantize_q8_0(self.w.ravel())
        q8 = self.gguf("q8.gguf", "Q8_0", blocks)
        doc = run(["info", q8, "--json"]).json()
        self.assertEqual(doc["by_type"]["Q8_0"]["bits_per_weight"], 8.5)  # 34 bytes per 32 weights
        self.assertEqual(doc["by_type"]["F32"]["bits_per_weight"], 32.0)
        total_bits = 8 * (len(blocks) + self.norm.nbytes)
        self.assertAlmostEqual(doc["bits_per_weight"], total_bits / (self.w.size + self.norm.size), places=12)

    def test_bf16_against_f32_and_unmatched_tensors(self):
        ref = os.path.join(self.dir, "a.safetensors")
        write_safetensors(ref, [("w", self.w), ("only_a", np.zeros(4, np.float32))])
        bits = self.w.view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
        low = os.path.join(self.dir, "b.safetensors")
        write_safetensors(low, [("w", ("BF16", rounded)), ("only_b", np.zeros(4, np.float32))])
        r = run(["compare", ref, low, "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual((doc["only_in_a"], doc["only_in_b"]), (["only_a"], ["only_b"]))
        decoded = (rounded.astype(np.uint32) << 16).view(np.float32)
        want = figures(self.w.ravel(), decoded.ravel())
        w = doc["tensors"][0]
        for key, value in want.items():
            self.assertAlmostEqual(w[key], value, delta=1e-9 * max(1.0, abs(value)), msg=key)
        human = run(["compare", ref, low])
        self.assertEqual(human.code, 0, human.err)
        self.assertIn("1 tensor(s) only in A", human.out)

    def test_shape_mismatch_is_skipped_with_the_reason_and_unknown_names_refused(self):
        a = os.path.join(self.dir, "a.safetensors")
        b = os.path.join(self.dir, "b.safetensors")
        write_safetensors(a, [("w", self.w)])
        write_safetensors(b, [("w", self.w.reshape(96, 64))])
        doc = run(["compare", a, b, "--json"]).json()
        self.assertEqual(doc["tensors"], [])
        self.assertIn("[64, 96] against [96, 64]", doc["skipped"][0]["reason"])
        r = run(["compare", a, b, "nope"])
        self.assertEqual(r.code, 2)
        self.assertIn("'nope' is not in both checkpoints", r.err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
