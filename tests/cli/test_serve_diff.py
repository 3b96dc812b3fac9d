"""`tensormorph serve A B`'s difference endpoints (docs/api.md "Differences") on the changed-rows fixture
(diff_serve_fixture.py): the document equals `tensormorph diff A B --json`, every tile of levels 0-2 equals the
CLI's `--level` tiles and numpy's figures (relative 1e-12; counts, extremes and histogram counts exact), a tile's
values equal numpy's b - a exactly; bad parameters are 400 naming the parameter, unknown checkpoints and tensors
404, a shape mismatch 409 with the diff's reason. A Q8_0 GGUF against its F32 source: the tiles report the
dequantization's placement, and figures and values equal numpy's of the decoded values; a rank-3 tensor's slices."""
import json
import math
import os
import struct
import sys
import tempfile
import unittest
import urllib.parse

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cli_harness import TM_BIN  # noqa: E402,F401
from diff_reference import figures  # noqa: E402
from gguf_write import write_gguf  # noqa: E402
from test_compare import quantize_q8_0  # noqa: E402
from diff_serve_fixture import CHANGED, CHANGED_ROWS, COLUMN, MISMATCH, NORM, ONLY_A, level_tiles, make  # noqa: E402
import test_serve  # noqa: E402  (its helpers; imported as a module so that its suite is not collected here)
from test_serve import Server, private_env  # noqa: E402

EXACT = ("count", "changed", "nonfinite", "max_abs_delta", "min_delta", "max_delta")
SUMS = ("sum_delta", "sum_sq_delta", "rel_change", "cosine")


def without_timing(doc):
    """The document without what differs between two runs (seconds, reused) and the server's own ids."""
    doc = json.loads(json.dumps(doc))
    doc.pop("checkpoint_a", None)
    doc.pop("checkpoint_b", None)
    for p in doc["pairs"]:
        p.pop("seconds")
        p.pop("reused")
    return doc


class ServeDiffTest(unittest.TestCase):
    _base = test_serve.ServeTest
    request, get_json, error, q = _base.request, _base.get_json, _base.error, staticmethod(_base.q)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-diff-")
        cls.env = private_env(cls.tmp)
        cls.a, cls.b, cls.values = make(cls.tmp)
        cls.server = Server([cls.a, cls.b], cls.env)

    @classmethod
    def tearDownClass(cls):
        if cls.server.proc.poll() is None:
            cls.server.proc.kill()
            cls.server.proc.wait()

    def cli(self, *args):
        r = self._base.tm_run.__func__(self.__class__, "diff", self.a, self.b, *args, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def tiles(self, name, query):
        return self.get_json(f"/api/diff/0/1/tiles/{self.q(name)}?{query}")

    def assert_figures(self, got, want, where):
        for k in EXACT:
            self.assertEqual(got[k], want[k], (where, k))
        for k in SUMS:
            g, w = got[k], want[k]
            if isinstance(w, str) or isinstance(g, str):
                self.assertEqual(g, w, (where, k))
            else:
                self.assertTrue(math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-300), (where, k, g, w))

    def test_document_equals_the_cli(self):
        doc = self.get_json("/api/diff/0/1?top=5")
        self.assertEqual((doc["checkpoint_a"], doc["checkpoint_b"]), ("0", "1"))
        self.assertEqual(without_timing(doc), without_timing(self.cli("--top", "5")))
        self.assertEqual(doc["ranking"]["tensors"][0]["name"], CHANGED)
        self.assertEqual(doc["only_in_a"], [ONLY_A])
        self.assertEqual([s["name"] for s in doc["skipped"]], [MISMATCH])
        self.assertEqual(len(self.get_json("/api/diff/0/1?top=1")["ranking"]["tensors"]), 1)

    def test_level_tiles_equal_the_cli_and_numpy(self):
        for name in (CHANGED, COLUMN):
            va, vb = (v.astype(np.float64) for v in self.values[name])
            for level in range(3):
                got = self.tiles(name, f"level={level}")
                cli = self.cli(name, "--level", str(level))["pairs"][0]["tiles"]
                self.assertEqual(got["grid"], {"rows": cli["rows"], "cols": cli["cols"]})
                want = level_tiles(va, vb, level)
                self.assertEqual(len(got["tiles"]), len(want))
                for g, c, w in zip(got["tiles"], cli["tiles"], want):
                    where = (name, level, w["ty"], w["tx"])
                    for k in ("tx", "ty", "row_begin", "row_end", "col_begin", "col_end"):
                        self.assertEqual(g[k], w[k], where)
                        self.assertEqual(g[k], c[k], where)
                    self.assert_figures(g, w, where)
                    c = {k: v for k, v in c.items() if k not in ("histogram", "slice")}
                    self.assertEqual({k: v for k, v in g.items()}, c, where)

    def test_changed_rows_are_where_they_are(self):
        got = self.tiles(CHANGED, "level=0")
        changed = {(t["ty"], t["tx"]): t["changed"] for t in got["tiles"]}
        # rows 300-303 lie in tile row 1 (256-511), row 520 in tile row 2; 256 + 44 columns per row.
        self.assertEqual(changed, {(0, 0): 0, (0, 1): 0, (1, 0): 4 * 256, (1, 1): 4 * 44, (2, 0): 256, (2, 1): 44})

    def test_one_tile_with_its_histogram(self):
        cli = self.cli(CHANGED, "--level", "1")["pairs"][0]["tiles"]["tiles"]
        for t in cli:
            got = self.tiles(CHANGED, f"level=1&x={t['tx']}&y={t['ty']}")
            self.assertEqual(got["histogram"], t["histogram"])
            self.assertEqual({k: got[k] for k in t if k != "slice"}, {k: v for k, v in t.items() if k != "slice"})

    def test_window(self):
        got = self.tiles(CHANGED, "level=0&window=1,2,1,3")
        self.assertEqual(got["window"], [1, 2, 1, 3])
        self.assertEqual([(t["ty"], t["tx"]) for t in got["tiles"]], [(1, 1), (2, 1)])

    def test_values_equal_numpy(self):
        va, vb = (v.astype(np.float64) for v in self.values[CHANGED])
        for x, y in ((0, 1), (1, 2), (0, 0)):
            code, headers, body = self.request(f"/api/diff/0/1/values/{self.q(CHANGED)}?level=0&x={x}&y={y}")
            self.assertEqual(code, 200, body[:300])
            r0, r1 = map(int, headers["x-tensormorph-tile-rows"].split(","))
            c0, c1 = map(int, headers["x-tensormorph-tile-cols"].split(","))
            self.assertEqual((r0, c0), (256 * y, 256 * x))
            got = np.frombuffer(body, "<f8").reshape(r1 - r0, c1 - c0)
            self.assertTrue(np.array_equal(got, vb[r0:r1, c0:c1] - va[r0:r1, c0:c1]), (x, y))
        rows = sorted({int(r) for r in np.nonzero(got)[0]})  # tile (0, 0): nothing changed
        self.assertEqual(rows, [])
        code, headers, body = self.request(f"/api/diff/0/1/values/{self.q(CHANGED)}?level=0&x=0&y=1")
        d = np.frombuffer(body, "<f8").reshape(256, 256)
        self.assertEqual(sorted(256 + int(r) for r in set(np.nonzero(d)[0])), [r for r in CHANGED_ROWS if 256 <= r < 512])

    def test_bad_requests_name_the_parameter(self):
        t = f"/api/diff/0/1/tiles/{self.q(CHANGED)}"
        v = f"/api/diff/0/1/values/{self.q(CHANGED)}"
        for path, mention in [
            (t, "parameter 'level' is required"),
            (t + "?level=3", "parameter 'level'"),
            (t + "?level=x", "parameter 'level'"),
            (t + "?level=0&slice=1", "parameter 'slice'"),
            (t + "?level=0&x=1", "parameter 'y'"),
            (t + "?level=0&x=2&y=0", "parameter 'x'"),
            (t + "?level=0&x=0&y=3", "parameter 'y'"),
            (t + "?level=0&window=0,3,0,1", "parameter 'window'"),
            (t + "?level=0&window=0,1", "parameter 'window'"),
            (t + "?level=0&x=0&y=0&window=0,1,0,1", "parameter 'window'"),
            (t + "?level=0&colour=1", "parameter 'colour'"),
            (t + "?level=0&level=1", "parameter 'level'"),
            (v + "?level=0&x=0", "parameter 'y'"),
            (v + "?level=0&x=0&y=0&window=0,1,0,1", "parameter 'window'"),
            ("/api/diff/0/1?top=0", "parameter 'top'"),
            ("/api/diff/0/1?level=0", "parameter 'level'"),
        ]:
            self.error(path, 400, mention)

    def test_unknown_and_refused(self):
        self.error("/api/diff/0/9", 404, "no checkpoint with id '9'")
        self.error(f"/api/diff/7/1/tiles/{self.q(CHANGED)}?level=0", 404, "no checkpoint with id '7'")
        self.error("/api/diff/0/1/tiles/no.such?level=0", 404, "no tensor named 'no.such'")
        self.error(f"/api/diff/0/1/tiles/{self.q(ONLY_A)}?level=0", 404, "has no counterpart")
        doc = self.error(f"/api/diff/0/1/tiles/{self.q(MISMATCH)}?level=0", 409, "shape [8, 8] in A against [8, 4] in B")
        self.assertIn(MISMATCH, doc["error"])
        self.error(f"/api/diff/0/1/values/{self.q(MISMATCH)}?level=0&x=0&y=0", 409, "not compared")

    def test_a_one_row_tensor(self):
        got = self.tiles(NORM, "level=0")
        self.assertEqual(got["view"]["rows"], 1)
        self.assertEqual([t["changed"] for t in got["tiles"]], [0])
        self.assertEqual(got["difference"]["rel_change"], 0)


class ServeQuantizedDiffTest(unittest.TestCase):
    """A Q8_0 GGUF against its F32 source, both served: the tiles carry the dequantization's placement (the pair's
    placed ops, as the document's), and the figures and values equal numpy's of the decoded Q8_0 values."""
    request, get_json = ServeDiffTest.request, ServeDiffTest.get_json
    NAME = "blk.2.ffn_up.weight"
    EXPERTS = "blk.2.ffn_gate_exps.weight"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-diff-q8-")
        cls.env = private_env(cls.tmp)
        rng = np.random.default_rng(8)
        cls.w = (rng.standard_normal((300, 320)) * 0.02).astype(np.float32)
        blocks, decoded = quantize_q8_0(cls.w.ravel())
        cls.decoded = decoded.reshape(cls.w.shape)
        kv = [("general.architecture", "STRING", "llama")]
        f32, q8 = os.path.join(cls.tmp, "f32.gguf"), os.path.join(cls.tmp, "q8.gguf")
        # A rank-3 tensor (2 slices of 40 x 64): slice 1's rows 5-6 changed in B.
        cls.e = rng.standard_normal((2, 40, 64)).astype(np.float32)
        cls.eb = cls.e.copy()
        cls.eb[1, 5:7] += np.float32(1.0)
        write_gguf(f32, kv, [(cls.NAME, "F32", [320, 300], cls.w), (cls.EXPERTS, "F32", [64, 40, 2], cls.e)])
        write_gguf(q8, kv, [(cls.NAME, "Q8_0", [320, 300], blocks), (cls.EXPERTS, "F32", [64, 40, 2], cls.eb)])
        cls.server = Server([f32, q8], cls.env)

    @classmethod
    def tearDownClass(cls):
        if cls.server.proc.poll() is None:
            cls.server.proc.kill()
            cls.server.proc.wait()

    def test_placement_figures_and_values(self):
        doc = self.get_json("/api/diff/0/1")
        got = self.get_json(f"/api/diff/0/1/tiles/{self.NAME}?level=0")
        self.assertTrue(got["placement"], "the dequantization's placement is reported")
        self.assertEqual(got["placement"], doc["pairs"][0]["placement"])
        self.assertTrue(all(p["backend"] for p in got["placement"]), got["placement"])
        a, b = self.w.astype(np.float64), self.decoded.astype(np.float64)
        for t in got["tiles"]:
            want = figures(a[t["row_begin"]:t["row_end"], t["col_begin"]:t["col_end"]], b[t["row_begin"]:t["row_end"], t["col_begin"]:t["col_end"]])
            ServeDiffTest.assert_figures(self, t, want, (t["ty"], t["tx"]))
        code, headers, body = self.request(f"/api/diff/0/1/values/{self.NAME}?level=0&x=1&y=1")
        self.assertEqual(code, 200, body[:300])
        d = np.frombuffer(body, "<f8").reshape(300 - 256, 320 - 256)
        self.assertTrue(np.array_equal(d, b[256:, 256:] - a[256:, 256:]))

    def test_slices_of_a_rank_3_tensor(self):
        for sl in (0, 1):
            got = self.get_json(f"/api/diff/0/1/tiles/{self.EXPERTS}?level=0&slice={sl}")
            self.assertEqual((got["view"]["slices"], got["view"]["rows"], got["view"]["cols"], got["slice"]), (2, 40, 64, sl))
            a, b = self.e[sl].astype(np.float64), self.eb[sl].astype(np.float64)
            for t in got["tiles"]:
                want = figures(a[t["row_begin"]:t["row_end"], t["col_begin"]:t["col_end"]], b[t["row_begin"]:t["row_end"], t["col_begin"]:t["col_end"]])
                ServeDiffTest.assert_figures(self, t, want, (sl, t["ty"], t["tx"]))
            self.assertEqual(sum(t["changed"] for t in got["tiles"]), 0 if sl == 0 else 2 * 64)
        code, _, body = self.request(f"/api/diff/0/1/values/{self.EXPERTS}?level=0&x=0&y=0&slice=1")
        self.assertEqual(code, 200, body[:300])
        d = np.frombuffer(body, "<f8").reshape(40, 64)
        self.assertTrue(np.array_equal(d, self.eb[1].astype(np.float64) - self.e[1].astype(np.float64)))
        code, _, body = self.request(f"/api/diff/0/1/tiles/{self.EXPERTS}?level=0&slice=2")
        self.assertEqual(code, 400)
        self.assertIn("parameter 'slice': 2 is outside the view's 2 slice(s)", json.loads(body)["error"])


if __name__ == "__main__":
    unittest.main()
