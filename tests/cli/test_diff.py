"""`tensormorph diff A B`: difference pyramids of two checkpoints. Every figure, every tile and every histogram
count is checked against numpy (diff_reference.py) on fixtures written here: safetensors files by
tests/tools/safetensors_write.py, GGUF files by tests/tools/gguf_write.py (llama.cpp's gguf-py is not in Debian)
with the Q/K row permutation applied by numpy exactly as llama.cpp's convert_hf_to_gguf.py does, a fine-tune
saved by torch.save when torch is present, and Q8_0 blocks quantized as ggml lays them out."""
import json
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cli_harness import run  # noqa: E402
from diff_reference import bf16_to_f32, bins_of, f32_to_bf16_bits, figures, llama_cpp_permute  # noqa: E402
from gguf_write import write_gguf  # noqa: E402
from safetensors_write import write_safetensors  # noqa: E402
from test_compare import quantize_q8_0  # noqa: E402

HIDDEN, HEADS, KV_HEADS, FF, VOCAB = 64, 4, 2, 96, 100


def num(v):
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v] if isinstance(v, str) else v


class DiffCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-diff-")
        self.cache = tempfile.mkdtemp(prefix="tm-diff-cache-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.cache, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def diff(self, *args, code=0):
        r = run(["diff", *args, "--json"], cache_home=self.cache)
        self.assertEqual(r.code, code, r.err)
        return r.json() if code == 0 else r

    def assert_figures(self, got, want, where):
        for key, w in want.items():
            if key == "hist":
                self.assertEqual(got["histogram"]["counts"], w, where)
                continue
            g, w = num(got[key]), num(w)
            if isinstance(w, float) and math.isnan(w):
                self.assertTrue(math.isnan(g), f"{where}: {key} {g}")
            elif isinstance(w, int):
                self.assertEqual(g, w, f"{where}: {key}")
            else:
                self.assertTrue(math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-300), f"{where}: {key} {g} != {w}")

    def assert_pyramid(self, pair_doc, a, b, level):
        """Every tile of `level` (tiles of 256 x 256 elements at level 0, doubled per level) against numpy."""
        fin = np.isfinite(a) & np.isfinite(b)
        shared = bins_of((b.astype(np.float64) - a)[fin].ravel())
        tiles = pair_doc["tiles"]
        self.assertEqual(tiles["level"], level)
        side = 256 << level
        for t in tiles["tiles"]:
            r0, r1, c0, c1 = t["row_begin"], t["row_end"], t["col_begin"], t["col_end"]
            self.assertEqual((r0, c0), (t["ty"] * side, t["tx"] * side))
            self.assert_figures(t, figures(a[r0:r1, c0:c1], b[r0:r1, c0:c1], shared), f"tile {level}/{t['ty']}/{t['tx']}")
        return tiles


class FineTune(DiffCase):
    """A synthetic fine-tune: bf16 matrices with known changed rows and columns, a float32 embedding with NaN and
    infinity, an unchanged norm."""

    def make(self):
        rng = np.random.default_rng(50)
        self.w0 = (rng.standard_normal((300, 520)) * 0.02).astype(np.float32)
        self.w1 = (rng.standard_normal((300, 520)) * 0.02).astype(np.float32)
        ft0, ft1 = self.w0.copy(), self.w1.copy()
        self.rows0, self.cols0 = [5, 77, 260], [3, 400]
        ft0[self.rows0, :] += 0.001
        ft0[:, self.cols0] -= 0.0005
        ft1[120:140, :] *= 1.5  # layer 1 changes most
        self.emb = (rng.standard_normal((64, 520))).astype(np.float32)
        self.emb[0, 0] = np.nan
        emb_b = self.emb.copy()
        emb_b[1, 1] = np.inf
        emb_b[2, 2] += 1
        self.norm = np.ones(520, np.float32)
        self.a = {"model.layers.0.mlp.up_proj.weight": f32_to_bf16_bits(self.w0),
                  "model.layers.1.mlp.up_proj.weight": f32_to_bf16_bits(self.w1)}
        self.b = {"model.layers.0.mlp.up_proj.weight": f32_to_bf16_bits(ft0),
                  "model.layers.1.mlp.up_proj.weight": f32_to_bf16_bits(ft1)}
        write_safetensors(self.path("a.safetensors"), [(k, ("BF16", v)) for k, v in self.a.items()] +
                          [("model.embed_tokens.weight", self.emb), ("model.norm.weight", self.norm)])
        write_safetensors(self.path("b.safetensors"), [(k, ("BF16", v)) for k, v in self.b.items()] +
                          [("model.embed_tokens.weight", emb_b), ("model.norm.weight", self.norm)])
        self.emb_b = emb_b

    def test_every_figure_tile_and_ranking_equals_numpy(self):
        self.make()
        doc = self.diff(self.path("a.safetensors"), self.path("b.safetensors"))
        self.assertEqual(doc["name_mapping"], "exact names")
        pairs = {p["name"]: p for p in doc["pairs"]}
        self.assertEqual(len(pairs), 4)
        for name in self.a:
            a, b = bf16_to_f32(self.a[name]).astype(np.float64), bf16_to_f32(self.b[name]).astype(np.float64)
            shared = bins_of((b - a).ravel())
            self.assert_figures(pairs[name]["difference"], figures(a, b, shared), name)
            self.assertEqual(pairs[name]["rows"], "stored")
            self.assertEqual(pairs[name]["type_a"], "BF16")
        emb = pairs["model.embed_tokens.weight"]["difference"]
        self.assert_figures(emb, figures(self.emb, self.emb_b), "embedding")
        self.assertEqual((emb["changed"], emb["nonfinite"]), (2, 2))  # NaN against NaN is unchanged
        norm = pairs["model.norm.weight"]["difference"]
        self.assertEqual((norm["changed"], num(norm["rel_change"]), norm["histogram"]["counts"]), (0, 0.0, [520]))
        ranking = doc["ranking"]
        want = {n: num(figures(*(bf16_to_f32(x[n]) for x in (self.a, self.b)))["rel_change"]) for n in self.a}
        want["model.embed_tokens.weight"] = figures(self.emb, self.emb_b)["rel_change"]
        want["model.norm.weight"] = 0.0
        self.assertEqual([t["name"] for t in ranking["tensors"]], sorted(want, key=lambda n: -want[n]))
        self.assertEqual([l["layer"] for l in ranking["layers"]], [1, 0])
        self.assertEqual([s["layer"] for s in doc["layer_strip"]], [0, 1])
        # A layer's relative change: sqrt(sum of its tensors' sum of squared deltas / sum of their ||a||^2).
        a1, b1 = (bf16_to_f32(x["model.layers.1.mlp.up_proj.weight"]).astype(np.float64) for x in (self.a, self.b))
        self.assertTrue(math.isclose(num(doc["layer_strip"][1]["rel_change"]),
                                     math.sqrt(math.fsum(((b1 - a1) ** 2).ravel()) / math.fsum((a1 * a1).ravel())), rel_tol=1e-12))
        self.assertEqual(len(self.diff(self.path("a.safetensors"), self.path("b.safetensors"), "--top", "1")["ranking"]["tensors"]), 1)

    def test_tiles_of_every_level_equal_numpy_and_show_the_changed_rows(self):
        self.make()
        name = "model.layers.0.mlp.up_proj.weight"
        a, b = bf16_to_f32(self.a[name]).astype(np.float64), bf16_to_f32(self.b[name]).astype(np.float64)
        for level in (0, 1, 2):
            doc = self.diff(self.path("a.safetensors"), self.path("b.safetensors"), name, "--level", str(level))
            tiles = self.assert_pyramid(doc["pairs"][0], a, b, level)
            if level == 0:
                self.assertEqual((tiles["rows"], tiles["cols"]), (2, 3))
                # Changed rows 5, 77, 260 and columns 3, 400: every tile holds a changed row; the changed count of
                # tile (0, 2) (rows 0-255, cols 512-519) is its 3... 2 changed rows x 8 columns.
                t02 = [t for t in tiles["tiles"] if (t["ty"], t["tx"]) == (0, 2)][0]
                self.assertEqual(t02["changed"], int((a[0:256, 512:520] != b[0:256, 512:520]).sum()))
        self.assertEqual(self.diff(self.path("a.safetensors"), self.path("b.safetensors"), name, "--level", "3", code=2).code, 2)

    def test_the_index_is_reused_and_rebuilt_when_a_file_changes(self):
        self.make()
        first = self.diff(self.path("a.safetensors"), self.path("b.safetensors"))
        self.assertTrue(first["index"]["persisted"])
        self.assertTrue(os.path.exists(first["index"]["database"]))
        self.assertFalse(any(p["reused"] for p in first["pairs"]))
        again = self.diff(self.path("a.safetensors"), self.path("b.safetensors"))
        self.assertTrue(all(p["reused"] for p in again["pairs"]))
        for p, q in zip(first["pairs"], again["pairs"]):
            self.assertEqual(p["difference"], q["difference"])
        # B rewritten with other values: every pyramid is built again.
        write_safetensors(self.path("b.safetensors"), [(k, ("BF16", v)) for k, v in self.a.items()] +
                          [("model.embed_tokens.weight", self.emb), ("model.norm.weight", self.norm)])
        os.utime(self.path("b.safetensors"), ns=(1, 1))
        third = self.diff(self.path("a.safetensors"), self.path("b.safetensors"))
        self.assertFalse(any(p["reused"] for p in third["pairs"]))
        self.assertIn("changed", third["index"]["warning"])
        self.assertEqual(third["pairs"][0]["difference"]["changed"], 0)

    def test_a_damaged_index_record_is_refused_naming_the_database(self):
        self.make()
        index = self.path("d.sqlite")
        self.diff(self.path("a.safetensors"), self.path("b.safetensors"), "--index", index)
        db = sqlite3.connect(index)
        db.execute("UPDATE diff_tiles SET record = substr(record, 1, 40) WHERE level = 0 AND ty = 1 AND tx = 1")
        db.commit()
        db.close()
        r = self.diff(self.path("a.safetensors"), self.path("b.safetensors"), "--index", index, code=3)
        self.assertIn(index, r.err)
        self.assertIn("tile 0/0/1/1", r.err)
        self.assertIn("40 bytes", r.err)
        write_safetensors(self.path("c.safetensors"), [("model.norm.weight", self.norm)])
        r = self.diff(self.path("a.safetensors"), self.path("c.safetensors"), "--index", index, code=2)
        self.assertIn("belongs to checkpoints", r.err)
        with open(self.path("not.sqlite"), "wb") as f:
            f.write(b"this is not a database" * 100)
        r = self.diff(self.path("a.safetensors"), self.path("b.safetensors"), "--index", self.path("not.sqlite"), code=3)
        self.assertIn("not a Tensormorph difference index", r.err)

    def test_results_do_not_depend_on_threads(self):
        self.make()
        docs = [self.diff(self.path("a.safetensors"), self.path("b.safetensors"), "model.layers.0.mlp.up_proj.weight",
                          "--level", "0", "--threads", t, "--index", self.path(f"t{t}.sqlite")) for t in ("1", "3")]
        for d in docs:
            for p in d["pairs"]:
                p.pop("seconds")
            d.pop("index")
        self.assertEqual(docs[0], docs[1])

    def test_histogram_buckets_at_binade_edges_and_clamps(self):
        """Δ exactly at ±2^k, below 2^-63 (both signs, and -0), beyond 2^64: each lands as docs/diff.md says."""
        deltas = np.array([2.0 ** -3, -(2.0 ** -3), 2.0 ** -2 * 1.5, -(2.0 ** -2) * 1.5, 1.0, -1.0, 2.0 ** -70,
                           -(2.0 ** -70), 2.0 ** 70, -(2.0 ** 70), 0.0, 3.0, -3.0, 2.0 ** -63, -(2.0 ** -63)])
        a = np.zeros(deltas.size)
        a[-1] = -0.0
        write_safetensors(self.path("e0.safetensors"), [("x", a)])
        write_safetensors(self.path("e1.safetensors"), [("x", a + deltas)])
        doc = self.diff(self.path("e0.safetensors"), self.path("e1.safetensors"))
        got = doc["pairs"][0]["difference"]
        shared = bins_of(deltas)
        self.assert_figures(got, figures(a, a + deltas, shared), "edges")
        lo, span, bins = shared
        self.assertEqual(bins, 32)
        self.assertEqual(num(got["histogram"]["edges"][0]), -(2.0 ** 70))
        self.assertEqual(num(got["histogram"]["edges"][-1]), 2.0 ** 70)

    def test_torch_save_fine_tune(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed: the torch.save fine-tune is not written")
        rng = np.random.default_rng(7)
        w = torch.from_numpy((rng.standard_normal((40, 70)) * 0.1).astype(np.float32)).to(torch.bfloat16)
        ft = w.clone()
        ft[7, :] += 0.25
        torch.save({"layers.3.weight": w}, self.path("base.pt"))
        torch.save({"layers.3.weight": ft}, self.path("tuned.pt"))
        doc = self.diff(self.path("base.pt"), self.path("tuned.pt"))
        a, b = w.float().numpy().astype(np.float64), ft.float().numpy().astype(np.float64)
        self.assert_figures(doc["pairs"][0]["difference"], figures(a, b, bins_of((b - a).ravel())), "torch")
        self.assertEqual(doc["pairs"][0]["layer"], 3)
        self.assertEqual(doc["pairs"][0]["difference"]["changed"], int((a != b).sum()))


class Conversion(DiffCase):
    """A Hugging Face-style llama model (safetensors) and its GGUF conversion with llama.cpp's names and its Q/K row
    permutation (4 heads for Q, 2 KV heads for K, head dimension 16)."""

    def hf_tensors(self):
        rng = np.random.default_rng(3)
        t = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, HIDDEN)), "model.norm.weight": 1 + rng.standard_normal(HIDDEN) * 0.1,
             "lm_head.weight": rng.standard_normal((VOCAB, HIDDEN))}
        for i in range(2):
            p = f"model.layers.{i}."
            t.update({p + "input_layernorm.weight": 1 + rng.standard_normal(HIDDEN) * 0.1,
                      p + "post_attention_layernorm.weight": 1 + rng.standard_normal(HIDDEN) * 0.1,
                      p + "self_attn.q_proj.weight": rng.standard_normal((HIDDEN, HIDDEN)),
                      p + "self_attn.k_proj.weight": rng.standard_normal((HIDDEN // HEADS * KV_HEADS, HIDDEN)),
                      p + "self_attn.v_proj.weight": rng.standard_normal((HIDDEN // HEADS * KV_HEADS, HIDDEN)),
                      p + "self_attn.o_proj.weight": rng.standard_normal((HIDDEN, HIDDEN)),
                      p + "mlp.gate_proj.weight": rng.standard_normal((FF, HIDDEN)),
                      p + "mlp.up_proj.weight": rng.standard_normal((FF, HIDDEN)),
                      p + "mlp.down_proj.weight": rng.standard_normal((HIDDEN, FF))})
        return {k: (v * 0.05).astype(np.float32) for k, v in t.items()}

    GGUF_NAMES = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output",
                  "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
                  "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                  "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}

    @staticmethod
    def HF_NAMES(gguf):
        """The Hugging Face name of a llama GGUF name (docs/diff.md's table)."""
        inverse = {v: k for k, v in Conversion.GGUF_NAMES.items()}
        base = gguf[: -len(".weight")]
        if base.startswith("blk."):
            i, role = base[4:].split(".", 1)
            return f"model.layers.{i}.{inverse[role]}.weight"
        return inverse[base] + ".weight"

    def gguf_name(self, hf):
        base = hf[: -len(".weight")]
        if base.startswith("model.layers."):
            i, role = base[len("model.layers."):].split(".", 1)
            return f"blk.{i}.{self.GGUF_NAMES[role]}.weight"
        return self.GGUF_NAMES[base] + ".weight"

    def convert(self, hf, path, ggml_type="F32", permute=True):
        """What convert_hf_to_gguf.py does to a llama model's tensors (names, Q/K permutation, the type)."""
        tensors, stored = [], {}
        for name, w in hf.items():
            if permute and name.endswith("q_proj.weight"):
                w = llama_cpp_permute(w, HEADS)
            if permute and name.endswith("k_proj.weight"):
                w = llama_cpp_permute(w, KV_HEADS)
            data = w.astype(np.float16) if ggml_type == "F16" and w.ndim == 2 else w
            stored[name] = data.astype(np.float64)
            tensors.append((self.gguf_name(name), "F16" if data.dtype == np.float16 else "F32", list(reversed(w.shape)), data))
        write_gguf(path, [("general.architecture", "STRING", "llama"), ("llama.attention.head_count", "UINT32", HEADS),
                          ("llama.attention.head_count_kv", "UINT32", KV_HEADS), ("llama.block_count", "UINT32", 2)], tensors)
        return stored

    def test_f32_conversion_is_unchanged_once_the_permutation_is_undone(self):
        hf = self.hf_tensors()
        write_safetensors(self.path("model.safetensors"), list(hf.items()))
        self.convert(hf, self.path("model.gguf"))
        doc = self.diff(self.path("model.safetensors"), self.path("model.gguf"))
        self.assertEqual(doc["name_mapping"], "llama.cpp GGUF names to Hugging Face names (B is GGUF)")
        self.assertEqual((len(doc["pairs"]), doc["only_in_a"], doc["only_in_b"], doc["skipped"]), (len(hf), [], [], []))
        for p in doc["pairs"]:
            self.assertEqual(p["name_b"], self.gguf_name(p["name"]))
            self.assertEqual((p["difference"]["changed"], num(p["difference"]["rel_change"])), (0, 0.0), p["name"])
            if "q_proj" in p["name"] or "k_proj" in p["name"]:
                q = p["qk_permutation"]
                self.assertEqual((q["verdict"], p["rows"]), ("permuted (undone)", "unpermuted"))
                self.assertEqual(q["heads"], HEADS if "q_proj" in p["name"] else KV_HEADS)
                self.assertEqual(q["sample_rows"], 16)
                self.assertEqual(num(q["sum_sq_delta_unpermuted"]), 0.0)
                self.assertGreater(num(q["sum_sq_delta_as_stored"]), 0.0)
            else:
                self.assertNotIn("qk_permutation", p)
        # The other direction (A is the GGUF file) pairs and un-permutes the same way.
        back = self.diff(self.path("model.gguf"), self.path("model.safetensors"))
        self.assertEqual(back["name_mapping"], "llama.cpp GGUF names to Hugging Face names (A is GGUF)")
        self.assertTrue(all(p["difference"]["changed"] == 0 for p in back["pairs"]))

    def test_f16_conversion_figures_equal_numpy_in_hugging_face_row_order(self):
        hf = self.hf_tensors()
        write_safetensors(self.path("model.safetensors"), list(hf.items()))
        self.convert(hf, self.path("f16.gguf"), "F16")
        name = "model.layers.1.self_attn.k_proj.weight"
        doc = self.diff(self.path("model.safetensors"), self.path("f16.gguf"), name, "--level", "0")
        a = hf[name].astype(np.float64)
        b = hf[name].astype(np.float16).astype(np.float64)  # the GGUF rows un-permuted are HF's rows rounded to f16
        self.assert_pyramid(doc["pairs"][0], a, b, 0)
        self.assert_figures(doc["pairs"][0]["difference"], figures(a, b, bins_of((b - a).ravel())), name)

    def test_a_gguf_file_without_the_permutation_is_detected_as_such(self):
        hf = self.hf_tensors()
        write_safetensors(self.path("model.safetensors"), list(hf.items()))
        self.convert(hf, self.path("plain.gguf"), permute=False)
        doc = self.diff(self.path("model.safetensors"), self.path("plain.gguf"))
        for p in doc["pairs"]:
            self.assertEqual(p["difference"]["changed"], 0, p["name"])
            if "qk_permutation" in p:
                self.assertEqual((p["qk_permutation"]["verdict"], p["rows"]), ("not permuted", "stored"))

    def test_unknown_head_count_is_said(self):
        hf = self.hf_tensors()
        write_safetensors(self.path("model.safetensors"), list(hf.items()))
        name = "model.layers.0.self_attn.q_proj.weight"
        write_gguf(self.path("nohead.gguf"), [("general.architecture", "STRING", "llama")],
                   [("blk.0.attn_q.weight", "F32", [HIDDEN, HIDDEN], hf[name])])
        doc = self.diff(self.path("model.safetensors"), self.path("nohead.gguf"))
        self.assertEqual(len(doc["pairs"]), 1)
        self.assertIn("llama.attention.head_count", doc["pairs"][0]["qk_permutation"]["unchecked"])
        self.assertEqual(len(doc["only_in_a"]), len(hf) - 1)


class OllamaFixture(DiffCase):
    """llama-2-tiny-random.gguf (ollama's test data, written by llama.cpp's tools: /work/shared/fixtures/README.md)
    against a Hugging Face-style safetensors file of the same weights: each tensor exported by `tensormorph export`,
    Q and K rows put back into Hugging Face order by numpy (the inverse of convert_hf_to_gguf.py's permutation)."""

    def test_the_permutation_of_a_real_gguf_file_is_found_and_undone(self):
        fixture = os.path.join(os.environ.get("TM_FIXTURES", ""), "llama-2-tiny-random.gguf")
        if not os.path.exists(fixture):
            self.skipTest(f"{fixture} is absent (the shared fixtures folder is not beside this checkout)")
        listing = run(["ls", fixture, "--json"], cache_home=self.cache).json()
        names = [t["name"] for t in listing["tensors"]]
        tensors = []
        for name in names:
            out = self.path(name + ".npy")
            r = run(["export", fixture, name, "-o", out], cache_home=self.cache)
            self.assertEqual(r.code, 0, r.err)
            w = np.load(out)
            heads = 2  # llama.attention.head_count and head_count_kv of the file
            if name.endswith(("attn_q.weight", "attn_k.weight")):  # GGUF row h*D + 2i + j holds HF row h*D + j*D/2 + i
                w = w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
            tensors.append((Conversion.HF_NAMES(name), w))
        write_safetensors(self.path("hf.safetensors"), tensors)
        doc = self.diff(fixture, self.path("hf.safetensors"))
        self.assertEqual((doc["only_in_a"], doc["only_in_b"], doc["skipped"]), ([], [], []))
        verdicts = {p["name"]: p["qk_permutation"]["verdict"] for p in doc["pairs"] if "qk_permutation" in p}
        self.assertEqual(verdicts, {"blk.0.attn_q.weight": "permuted (undone)", "blk.0.attn_k.weight": "permuted (undone)"})
        self.assertTrue(all(p["difference"]["changed"] == 0 for p in doc["pairs"]), [p["name"] for p in doc["pairs"]])


class Quantized(DiffCase):
    def test_q8_0_against_f32_equals_numpy_of_the_decoded_values(self):
        rng = np.random.default_rng(8)
        w = (rng.standard_normal((48, 320)) * 0.02).astype(np.float32)
        blocks, decoded = quantize_q8_0(w.ravel())
        kv = [("general.architecture", "STRING", "llama")]
        write_gguf(self.path("f32.gguf"), kv, [("blk.2.ffn_up.weight", "F32", [320, 48], w)])
        write_gguf(self.path("q8.gguf"), kv, [("blk.2.ffn_up.weight", "Q8_0", [320, 48], blocks)])
        doc = self.diff(self.path("f32.gguf"), self.path("q8.gguf"), "blk.2.ffn_up.weight", "--level", "0")
        a, b = w.astype(np.float64), decoded.reshape(w.shape).astype(np.float64)
        self.assertEqual(doc["name_mapping"], "exact names")
        self.assertEqual((doc["pairs"][0]["type_b"], doc["pairs"][0]["layer"]), ("Q8_0", 2))
        self.assert_figures(doc["pairs"][0]["difference"], figures(a, b, bins_of((b - a).ravel())), "q8_0")
        self.assert_pyramid(doc["pairs"][0], a, b, 0)
        self.assertTrue(doc["pairs"][0]["placement"], "the dequantization's placement is reported")


class GgufPyQuantized(DiffCase):
    """Quantized matrices in a file written by llama.cpp's own gguf-py (the shared fixtures' gguf/tiny-mixed.gguf:
    Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 quantized by gguf.quants.quantize; Q2_K to Q6_K and IQ types as random valid
    blocks) against an F32 GGUF (tests/tools/gguf_write.py) of their reference values (what gguf-py's dequantize
    reads back) with every third row moved by 0.25: each pair's figures equal numpy of the reference values and the
    written F32 values, and only the moved rows count as changed."""

    def test_every_gguf_py_quantized_matrix_against_its_reference_values_with_moved_rows(self):
        fixtures = os.environ.get("TM_FIXTURES", "/work/shared/fixtures")
        gguf = os.path.join(fixtures, "gguf", "tiny-mixed.gguf")
        if not os.path.isfile(gguf):
            self.skipTest(f"{gguf} is absent (the shared fixtures): the gguf-py quantized pairs are not checked")
        with open(os.path.join(fixtures, "gguf", "tiny-mixed.ref.json")) as f:
            ref = json.load(f)
        values = np.fromfile(os.path.join(fixtures, "gguf", "tiny-mixed.ref.f32"), dtype="<f4")
        with open(os.path.join(fixtures, "gguf", "tiny-mixed.expected.json")) as f:
            types = {t["name"]: t["ggml_type"] for t in json.load(f)["tensors"]}
        chosen, moved = [], {}
        for name, r in ref.items():
            shape = r["shape"]
            if len(shape) != 2 or types[name] in ("F32", "F16", "BF16"):
                continue
            first = r["offset"] // 4
            a = values[first:first + r["count"]].reshape(shape)
            b = a.copy()
            b[::3] += np.float32(0.25)
            chosen.append(name)
            moved[name] = (a.astype(np.float64), b.astype(np.float64))
        self.assertIn("blk.0.attn_q.weight", chosen)
        self.assertGreaterEqual(len({types[n] for n in chosen}), 3, chosen)
        write_gguf(self.path("moved.gguf"), [("general.architecture", "STRING", "test")],
                   [(n, "F32", list(reversed(moved[n][1].shape)), moved[n][1].astype(np.float32)) for n in chosen])
        doc = self.diff(gguf, self.path("moved.gguf"), *chosen)
        pairs = {p["name"]: p for p in doc["pairs"]}
        self.assertEqual(sorted(pairs), sorted(chosen), doc["skipped"])
        for name in chosen:
            a, b = moved[name]
            self.assertEqual(pairs[name]["type_a"], types[name])
            self.assert_figures(pairs[name]["difference"], figures(a, b, bins_of((b - a).ravel())), f"{name} ({types[name]})")
            self.assertEqual(pairs[name]["difference"]["changed"], int(np.count_nonzero(a != b)), name)
            ops = [p["op"] for p in pairs[name]["placement"]]
            self.assertIn("diff.tile_stats", ops, pairs[name]["placement"])


class Adapter(DiffCase):
    """A PEFT LoRA adapter folder (adapter_config.json as PEFT writes it, adapter_model.safetensors with PEFT's
    base_model.model.NAME.lora_A/lora_B.weight names, written by tests/tools/safetensors_write.py: peft is not in
    Debian) over a base model: each map equals numpy merging it, W + s * (B @ A) in float64."""

    def make(self, config, fan_in_fan_out=False, rank=4):
        rng = np.random.default_rng(9)
        self.base = {"model.layers.0.self_attn.q_proj.weight": (rng.standard_normal((64, 300)) * 0.02).astype(np.float32),
                     "model.layers.1.self_attn.v_proj.weight": (rng.standard_normal((32, 300)) * 0.02).astype(np.float32),
                     "model.norm.weight": np.ones(300, np.float32)}
        if fan_in_fan_out:
            self.base = {k: (v.T.copy() if v.ndim == 2 else v) for k, v in self.base.items()}
        write_safetensors(self.path("base.safetensors"), list(self.base.items()))
        folder = self.path("adapter")
        os.makedirs(folder)
        self.lora = {}
        tensors = []
        for name, w in self.base.items():
            if w.ndim != 2:
                continue
            out, inp = (w.shape[1], w.shape[0]) if fan_in_fan_out else w.shape
            a = (rng.standard_normal((rank, inp)) * 0.1).astype(np.float32)
            b = (rng.standard_normal((out, rank)) * 0.1).astype(np.float32)
            module = name[: -len(".weight")]
            tensors += [(f"base_model.model.{module}.lora_A.weight", a), (f"base_model.model.{module}.lora_B.weight", b)]
            self.lora[name] = (a.astype(np.float64), b.astype(np.float64))
        tensors.append(("base_model.model.score.weight", np.zeros((2, 2), np.float32)))  # modules_to_save: not a LoRA pair
        write_safetensors(os.path.join(folder, "adapter_model.safetensors"), tensors)
        cfg = {"peft_type": "LORA", "r": rank, "lora_alpha": 16, "fan_in_fan_out": fan_in_fan_out, "use_rslora": False,
               "target_modules": ["q_proj", "v_proj"], "rank_pattern": {}, "alpha_pattern": {}, "use_dora": False}
        cfg.update(config)
        with open(os.path.join(folder, "adapter_config.json"), "w") as f:
            json.dump(cfg, f)
        return folder

    def check(self, doc, scale, fan_in_fan_out=False, level=None):
        self.assertTrue(doc["pairs"])
        for p in doc["pairs"]:
            w = self.base[p["name"]].astype(np.float64)
            a, b = self.lora[p["name"]]
            delta = scale * (b @ a)
            merged = w + (delta.T if fan_in_fan_out else delta)
            want = figures(w, merged, bins_of((merged - w).ravel()))
            got = p["difference"]
            self.assertEqual(got["histogram"]["counts"], want.pop("hist"))
            for key, v in want.items():  # numpy's B @ A sums in another order: a few float64 ulps apart
                self.assertTrue(math.isclose(num(got[key]), v, rel_tol=1e-9) if not isinstance(v, int) else got[key] == v,
                                f"{p['name']}: {key} {got[key]} != {v}")
            if level is not None:
                for t in p["tiles"]["tiles"]:
                    sub = figures(w[t["row_begin"]:t["row_end"], t["col_begin"]:t["col_end"]],
                                  merged[t["row_begin"]:t["row_end"], t["col_begin"]:t["col_end"]])
                    self.assertEqual(t["changed"], sub["changed"])
                    self.assertTrue(math.isclose(t["sum_sq_delta"], sub["sum_sq_delta"], rel_tol=1e-9))

    def test_lora_adapter_maps_equal_numpy_merging_it(self):
        folder = self.make({})
        doc = self.diff(self.path("base.safetensors"), folder)
        self.assertEqual(doc["adapter"]["rank"], 4)
        self.assertEqual(doc["adapter"]["scale"], 4.0)
        self.assertEqual(doc["only_in_b"], ["base_model.model.score.weight"])
        self.assertEqual(len(doc["pairs"]), 2)
        self.assertEqual([p["type_b"] for p in doc["pairs"]], ["LoRA r=4", "LoRA r=4"])
        self.check(doc, 16 / 4)
        name = "model.layers.0.self_attn.q_proj.weight"
        one = self.diff(self.path("base.safetensors"), folder, name, "--level", "0")
        self.assertEqual([p["name"] for p in one["pairs"]], [name])
        self.assertEqual(len(one["pairs"][0]["tiles"]["tiles"]), 1)  # 64 x 300: one tile of 64 x 1024
        self.check(one, 16 / 4, level=0)

    def test_rslora_and_fan_in_fan_out(self):
        folder = self.make({"use_rslora": True}, fan_in_fan_out=True)
        doc = self.diff(self.path("base.safetensors"), folder)
        self.assertTrue(doc["adapter"]["fan_in_fan_out"])
        self.check(doc, 16 / math.sqrt(4), fan_in_fan_out=True)

    def test_adapter_refusals(self):
        for config, field in (({"use_dora": True}, "use_dora"), ({"peft_type": "IA3"}, "peft_type"), ({"r": 0}, "r"),
                              ({"rank_pattern": {"q_proj": 8}}, "rank_pattern"), ({"lora_alpha": "x"}, "lora_alpha")):
            folder = self.make(config)
            r = self.diff(self.path("base.safetensors"), folder, code=3)
            self.assertIn("adapter_config.json: " + field, r.err)
            shutil.rmtree(folder)
        folder = self.make({"r": 2})  # the tensors are rank 4
        doc = self.diff(self.path("base.safetensors"), folder)
        self.assertEqual(doc["pairs"], [])
        self.assertIn("not [r, in] and [out, r] with r = 2", doc["skipped"][0]["reason"])
        shutil.rmtree(folder)
        folder = self.make({})
        os.remove(os.path.join(folder, "adapter_model.safetensors"))
        r = self.diff(self.path("base.safetensors"), folder, code=6)
        self.assertIn("adapter_model.safetensors: missing", r.err)


class Refusals(DiffCase):
    def write_pair(self):
        rng = np.random.default_rng(1)
        write_safetensors(self.path("a.safetensors"), [("w", rng.standard_normal((8, 8)).astype(np.float32)),
                                                       ("ids", np.arange(6, dtype=np.int64)),
                                                       ("only_a", np.zeros(3, np.float32))])
        write_safetensors(self.path("b.safetensors"), [("w", rng.standard_normal((8, 4)).astype(np.float32)),
                                                       ("ids", np.arange(6, dtype=np.float32)),
                                                       ("only_b", np.zeros(3, np.float32))])

    def test_shape_and_dtype_mismatches_are_skipped_with_the_reason(self):
        self.write_pair()
        doc = self.diff(self.path("a.safetensors"), self.path("b.safetensors"))
        self.assertEqual(doc["pairs"], [])
        reasons = {s["name"]: s["reason"] for s in doc["skipped"]}
        self.assertIn("shape [8, 8] in A against [8, 4] in B", reasons["w"])
        self.assertIn("dtype I64 in A against F32 in B", reasons["ids"])
        self.assertEqual((doc["only_in_a"], doc["only_in_b"]), (["only_a"], ["only_b"]))

    def test_bad_arguments_and_truncated_files(self):
        self.write_pair()
        a, b = self.path("a.safetensors"), self.path("b.safetensors")
        r = self.diff(a, b, "nosuch", code=2)
        self.assertIn("'nosuch'", r.err)
        r = self.diff(a, b, "--level", "0", code=2)
        self.assertIn("name the tensors", r.err)
        with open(b, "rb") as f:
            data = f.read()
        with open(self.path("cut.safetensors"), "wb") as f:
            f.write(data[: len(data) - 40])
        r = self.diff(a, self.path("cut.safetensors"), code=3)
        self.assertIn("cut.safetensors", r.err)
        r = self.diff(a, self.path("missing.safetensors"), code=6)
        self.assertIn("missing.safetensors", r.err)

    def test_human_output_names_the_ranking_and_the_strip(self):
        hf = Conversion.hf_tensors(self)
        write_safetensors(self.path("model.safetensors"), list(hf.items()))
        Conversion.convert(Conversion("gguf_name"), hf, self.path("model.gguf"), "F16")
        r = run(["diff", self.path("model.safetensors"), self.path("model.gguf"), "--top", "3"], cache_home=self.cache)
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("per-layer strip, layer 0 to 1:", r.out)
        self.assertIn("Q/K permutation of model.layers.0.self_attn.q_proj.weight (blk.0.attn_q.weight): permuted (undone)", r.out)
        self.assertIn("the 3 with the largest relative change", r.out)


if __name__ == "__main__":
    unittest.main()
