"""Level of detail through the CLI: `tile` statistics against numpy over the elements each tile covers,
the top of the pyramid against the tensor's global statistics, `render` images (an injected outlier
visible at the coarsest level with the envelope and max statistics, limits in the PNG metadata), and
clear errors for requests outside the pyramid."""
import os
import sys
import tempfile
import unittest

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cli_harness import figure_body, run, require_vulkan  # noqa: E402
from safetensors_write import write_safetensors  # noqa: E402

ARG = 2


def bf16_bits(a):
    """Round-to-nearest-even float32 -> bf16 bit patterns (numpy has no bf16)."""
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


class RenderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-render-")
        cls.cache = tempfile.mkdtemp(prefix="tm-render-cache-")
        rng = np.random.default_rng(7)
        m = (rng.standard_normal((600, 1000)) * 0.02).astype(np.float32)
        m[10, 20] = np.nan
        m[599, 999] = np.inf
        m[300, 700] = 0.0
        cls.outlier = (513, 3)  # row, col: level-0 tile (2, 0)
        m[cls.outlier] = 50.0
        experts = rng.standard_normal((3, 300, 700))
        cls.expert_bits = bf16_bits(experts)
        cls.matrix = m.astype(np.float64)
        cls.experts = bf16_values(cls.expert_bits)
        cls.ckpt = os.path.join(cls.tmp, "model.safetensors")
        layers = [(f"blk.{k}.attn_q.weight", (rng.standard_normal((512, 256)) * (k + 1)).astype(np.float32)) for k in (10, 2, 1)]
        write_safetensors(cls.ckpt, [("w", m), ("experts", ("BF16", cls.expert_bits)),
                                     ("v", np.arange(100000, dtype=np.float32))] + layers)
        cls.layers = dict(layers)

    def tm(self, *args):
        return run(list(args), cache_home=self.cache)

    def tile(self, tensor, level, x, y, slice_=0):
        r = self.tm("tile", self.ckpt, tensor, "--level", str(level), "--tile", f"{x},{y}", "--slice", str(slice_), "--json")
        self.assertEqual(r.code, 0, r.err)
        return r.json()

    def check_against(self, j, values):
        r0, r1 = j["rows"]
        c0, c1 = j["cols"]
        region = values[r0:r1, c0:c1].ravel()
        finite = region[np.isfinite(region)]
        s = j["stats"]
        self.assertEqual(s["count"], region.size)
        self.assertEqual(s["nan_count"], int(np.isnan(region).sum()))
        self.assertEqual(s["inf_count"], int(np.isinf(region).sum()))
        self.assertEqual(s["zero_count"], int((region == 0).sum()))
        self.assertEqual(s["min"], finite.min())
        self.assertEqual(s["max"], finite.max())
        self.assertEqual(s["abs_max"], np.abs(finite).max())
        self.assertAlmostEqual(s["mean"], finite.mean(), delta=1e-12 + 1e-9 * abs(finite.mean()))
        self.assertAlmostEqual(s["std"], finite.std(), delta=1e-12 + 1e-9 * finite.std())
        self.assertEqual(sum(j["histogram"]["counts"]), finite.size)

    def test_every_tile_of_every_level_matches_numpy(self):
        first = self.tile("w", 0, 0, 0)
        self.assertEqual(first["tile_size"], [256, 256])
        self.assertEqual(first["levels"], 3)
        for level in range(first["levels"]):
            cols, rows = self.tile("w", level, 0, 0)["grid"]
            for y in range(rows):
                for x in range(cols):
                    with self.subTest(level=level, x=x, y=y):
                        self.check_against(self.tile("w", level, x, y), self.matrix)

    def test_slices_of_a_3d_tensor(self):
        for s in range(3):
            j = self.tile("experts", 0, 2, 1, s)
            self.assertEqual(j["slice"], s)
            self.assertEqual(j["view"]["slices"], 3)
            self.assertEqual(j["cols"], [512, 700])
            self.check_against(j, self.experts[s])

    def test_top_equals_global_statistics(self):
        stats = self.tm("stats", self.ckpt, "w", "--json")
        self.assertEqual(stats.code, 0, stats.err)
        g = stats.json()["tensors"][0]["stats"] if "tensors" in stats.json() else stats.json()[0]["stats"]
        top = self.tile("w", 2, 0, 0)["stats"]
        for k in ("count", "finite_count", "nan_count", "inf_count", "zero_count", "min", "max", "abs_max"):
            self.assertEqual(top[k], g[k], k)
        self.assertAlmostEqual(top["mean"], g["mean"], delta=1e-9 * abs(g["mean"]) + 1e-15)
        self.assertAlmostEqual(top["std"], g["std"], delta=1e-9 * g["std"])

    def test_vector_is_one_row_of_wide_tiles(self):
        j = self.tile("v", 0, 1, 0)
        self.assertEqual(j["tile_size"], [1, 65536])
        self.assertEqual(j["cols"], [65536, 100000])
        self.assertEqual(j["stats"]["min"], 65536.0)

    def render(self, *args):
        out = os.path.join(self.tmp, f"img{len(os.listdir(self.tmp))}.png")
        r = self.tm("render", self.ckpt, "w", "-o", out, "--json", *args)
        self.assertEqual(r.code, 0, r.err)
        with Image.open(out) as img:
            img.load()
            return r.json(), img

    def cell_pixels(self, j, img):
        """The cells' colours (one per cell; envelope: min and max side by side) as an array."""
        a = figure_body(img)
        sx, sy = j["image"]["scale"]
        rows, cols = j["cells"]
        per = 2 if j["stat"] == "envelope" else 1
        return a[: rows * sy : sy, : cols * per * sx : sx]

    def test_outlier_visible_at_the_coarsest_level_with_envelope_and_max(self):
        # The coarsest level is one cell: its envelope spans min..max, so the max half is the top colour.
        j, img = self.render("--level", "2", "--stat", "envelope", "--colormap", "viridis")
        self.assertEqual(j["cells"], [1, 1])
        self.assertEqual(j["limits"][1], 50.0)
        px = self.cell_pixels(j, img)
        self.assertEqual(px[0, 1].tolist(), [253, 231, 37, 255])  # viridis' last entry: the maximum
        self.assertEqual(px[0, 0].tolist(), [68, 1, 84, 255])  # its first: the minimum
        # max at the coarsest level with the weights' usual range as limits: saturated at the top.
        j, img = self.render("--level", "2", "--stat", "max", "--colormap", "viridis", "--limits", "-0.1,0.1")
        self.assertEqual(self.cell_pixels(j, img)[0, 0].tolist(), [253, 231, 37, 255])
        # One level finer (2 x 2 cells): only the quadrant holding the outlier is hot.
        j, img = self.render("--level", "1", "--stat", "max", "--colormap", "viridis")
        hot = np.argwhere((self.cell_pixels(j, img) == [253, 231, 37, 255]).all(axis=2))
        self.assertEqual(hot.tolist(), [[1, 0]])
        # Level 0: only the tile holding the outlier reaches the top colour.
        j, img = self.render("--level", "0", "--stat", "max", "--colormap", "viridis")
        px = self.cell_pixels(j, img)
        hot = np.argwhere((px == [253, 231, 37, 255]).all(axis=2))
        self.assertEqual(hot.tolist(), [[2, 0]])

    def test_mean_hides_the_outlier_that_max_shows(self):
        j, _ = self.render("--level", "2", "--stat", "mean")
        self.assertLess(j["limits"][1], 1.0)

    def test_png_metadata_and_colour_bar(self):
        j, img = self.render("--limits", "-0.05,0.05", "--colormap", "gray")
        self.assertEqual(img.text["tensormorph:limits"], "-0.050000000000000003,0.050000000000000003")
        self.assertEqual(img.text["tensormorph:colormap"], "gray")
        self.assertEqual(img.text["tensormorph:tensor"], "w")
        a = np.asarray(img.convert("RGBA"))
        bx, by, bw, bh = map(int, img.text["tensormorph:colour_bar_box"].split(","))
        self.assertEqual(a[by, bx + bw - 1].tolist(), [255, 255, 255, 255])  # bar: top = last entry
        self.assertEqual(a[by + bh - 1, bx + bw - 1].tolist(), [0, 0, 0, 255])
        # labelled ticks right of the bar: nice values inside the limits, the labels' ink in their panel
        self.assertEqual(img.text["tensormorph:ticks"], "0.04;0.02;0;-0.02;-0.04")
        lx, ly, lw, lh = map(int, img.text["tensormorph:labels_box"].split(","))
        cx, cy, _, _ = map(int, img.text["tensormorph:cells_box"].split(","))
        self.assertEqual((lx, ly, lh, figure_body(img).shape[1]), (bx + bw, by, bh, lx + lw - cx))
        # the frame: a title naming the tensor and the statistic, element indices along both axes
        self.assertEqual(img.text["tensormorph:figure_title"], "w: mean PER CELL")
        self.assertEqual(img.text["tensormorph:x_axis"].split(":")[0], "COLUMN")
        self.assertEqual(img.text["tensormorph:x_axis"].split(": ")[1].split(";")[0], "0")
        self.assertEqual(img.text["tensormorph:y_axis"].split(":")[0], "ROW")
        self.assertTrue((cx, cy) > (0, 0) and a.shape[0] > cy + bh)  # the axes left of and under the cells
        panel = a[:, lx:lx + lw, :3]
        self.assertTrue((panel == 34).all(axis=2).sum() > 50)  # ink
        self.assertTrue((panel == 255).all(axis=2).sum() > panel.shape[0] * panel.shape[1] // 2)  # paper
        # overview of a small tensor comes from the values: 600 x 1000 in cells of 1 element
        self.assertEqual(j["source"], "values")
        self.assertEqual(j["cell_size"], [1, 1])
        self.assertEqual(sum(j["histogram"]["counts"]) + j["histogram"]["nan"] + j["histogram"]["pos_inf"], 600 * 1000)

    def test_single_tile_render_is_element_resolution_at_level_0(self):
        j, img = self.render("--level", "0", "--tile", "0,2", "--stat", "max", "--colormap", "viridis")
        self.assertEqual(j["rows"], [512, 600])
        self.assertEqual(j["cols"], [0, 256])
        self.assertEqual(j["cell_size"], [1, 1])
        px = self.cell_pixels(j, img)
        hot = np.argwhere((px == [253, 231, 37, 255]).all(axis=2))
        self.assertEqual(hot.tolist(), [[513 - 512, 3]])

    def test_errors_name_the_problem(self):
        for args, needle in [
            (["tile", self.ckpt, "w", "--level", "0", "--tile", "4,0"], "level 0 has 4 x 3 tiles"),
            (["tile", self.ckpt, "w", "--level", "9", "--tile", "0,0"], "levels 0..2"),
            (["tile", self.ckpt, "experts", "--level", "0", "--tile", "0,0", "--slice", "3"], "3 slice(s)"),
            (["tile", self.ckpt, "w", "--level", "0", "--tile", "0"], "--tile: expected X,Y (2 unsigned integers), got '0'"),
            (["tile", self.ckpt, "nope", "--level", "0", "--tile", "0,0"], "no tensor named 'nope'"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--stat", "median"], "--stat: expected mean, min, max, abs_max, std or envelope, got 'median'"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--colormap", "jet"], "jet"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--view", "3,0"], "--view 3,0"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--tile", "0,0"], "--tile needs --level"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--limits", "1"], "--limits: expected LO,HI (2 numbers, each finite, data units), got '1'"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--limits", "2,1"], "--limits: LO 2 is above HI 1"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--log-floor", "0"], "--log-floor: expected a number > 0"),
            (["render", self.ckpt, "w", "-o", os.path.join(self.tmp, "x.png"), "--level", "0x1"], "--level: expected an integer from 0 to 63, got '0x1'"),
        ]:
            with self.subTest(args=args):
                r = self.tm(*args)
                self.assertEqual(r.code, ARG, r.err)
                self.assertIn(needle, r.err)

    def test_quantized_tensor_pyramid_matches_llama_cpp_reference_values(self):
        fixtures = os.environ.get("TM_FIXTURES", os.path.join(HERE, "..", "..", "..", "shared", "fixtures"))
        gguf = os.path.join(fixtures, "gguf", "tiny-mixed.gguf")
        if not os.path.exists(gguf):
            self.skipTest(f"reference fixtures not found at {fixtures} (see tests/README)")
        import json
        with open(os.path.join(fixtures, "gguf", "tiny-mixed.ref.json")) as f:
            refs = json.load(f)
        ref_data = np.fromfile(os.path.join(fixtures, "gguf", "tiny-mixed.ref.f32"), dtype="<f4")
        for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight"):
            with self.subTest(tensor=name):
                ref = refs[name]
                values = ref_data[ref["offset"] // 4 : ref["offset"] // 4 + ref["count"]].astype(np.float64)
                values = values.reshape(ref["shape"])
                r = run(["tile", gguf, name, "--level", "0", "--tile", "0,0", "--json"], cache_home=self.cache)
                self.assertEqual(r.code, 0, r.err)
                self.check_against(r.json(), values)

    def test_overview_contact_sheet(self):
        out = os.path.join(self.tmp, "sheet")
        r = self.tm("render", self.ckpt, "--overview", "-o", out, "--json")
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        names = [t["tensor"] for t in j["tensors"]]
        self.assertEqual(names, ["w", "experts", "v", "blk.10.attn_q.weight", "blk.2.attn_q.weight", "blk.1.attn_q.weight"])
        for t in j["tensors"]:
            with Image.open(os.path.join(out, t["file"])) as img:
                self.assertEqual(img.text["tensormorph:tensor"], t["tensor"])
        with Image.open(os.path.join(out, "overview.png")) as sheet:
            a = np.asarray(sheet.convert("RGBA"))
            for t in j["tensors"]:  # each thumbnail sits where the JSON says
                with Image.open(os.path.join(out, t["file"])) as img:
                    b = np.asarray(img.convert("RGBA"))
                    x, y = t["sheet"]["x"], t["sheet"]["y"]
                    self.assertTrue((a[y:y + b.shape[0], x:x + b.shape[1]] == b).all(), t["tensor"])
                    # under it, its caption: the name (its end kept after ".." when too wide) and the shape, drawn
                    # in light ink on the sheet's opaque dark background
                    cap = t["sheet"]["caption"]
                    name, shape = cap["lines"]
                    self.assertTrue(name == t["tensor"] or (name.startswith("..") and t["tensor"].endswith(name[2:])), name)
                    self.assertEqual(shape, "(" + ", ".join(str(n) for n in t["shape"]) + ")")
                    self.assertGreaterEqual(cap["y"], y + b.shape[0])
                    strip = a[cap["y"]:cap["y"] + cap["height"], x:x + max(b.shape[1], 120)]
                    ink = (strip[..., :3] > 200).all(axis=-1)
                    self.assertGreater(ink.sum(), 20 * len(name.replace(" ", "")) // 3, t["tensor"])  # the glyphs' pixels
                    self.assertTrue((strip[..., 3] == 255).all())
                    # the first line's ink spans about as many pixels as its characters take (6 each, one column gap)
                    cols = np.nonzero(ink[:8].any(axis=0))[0]
                    self.assertLessEqual(abs(int(cols.max()) + 2 - 6 * len(name)), 6, (name, cols.max()))
        with open(os.path.join(out, "index.html")) as f:
            html = f.read()
        self.assertIn("blk.10.attn_q.weight", html)

    def test_strips_order_layers_and_share_limits(self):
        out = os.path.join(self.tmp, "strips.png")
        r = self.tm("render", self.ckpt, "--strips", "blk.*.attn_q.weight", "--stat", "abs_max", "-o", out, "--json")
        self.assertEqual(r.code, 0, r.err)
        j = r.json()
        self.assertEqual([c["layer"] for c in j["columns"]], [1, 2, 10])
        self.assertEqual(j["bands"], 2)  # 512 rows in bands of 256
        top = max(np.abs(v).max() for v in self.layers.values())
        self.assertEqual(j["limits"][1], float(top))
        for args, needle in [(["--strips", "blk.attn_q.weight"], "one '*'"), (["--strips", "nope.*.x"], "no tensor name matches"),
                             (["--strips", "blk.*.attn_q.weight", "w"], "give no tensor")]:
            r = self.tm("render", self.ckpt, *args, "-o", out)
            self.assertEqual(r.code, ARG, r.err)
            self.assertIn(needle, r.err)

    def test_vulkan_draws_the_same_bytes(self):
        require_vulkan(self)
        images = {}
        for backend in ("cpu", "vulkan"):
            out = os.path.join(self.tmp, f"vk-{backend}.png")
            r = run(["render", self.ckpt, "w", "-o", out, "--stat", "envelope", "--transform", "signed-log", "--json",
                     "--backend", backend], cache_home=self.cache, plugins=False)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(r.json()["placement"][0]["backend"], backend)
            with Image.open(out) as img:
                images[backend] = np.asarray(img.convert("RGBA"))
        self.assertTrue((images["cpu"] == images["vulkan"]).all())

    def test_damaged_pyramid_in_the_index_is_bad_input(self):
        import sqlite3
        db = os.path.join(self.tmp, "damaged.sqlite")
        r = run(["index", self.ckpt, "--index", db])
        self.assertEqual(r.code, 0, r.err)
        con = sqlite3.connect(db)
        con.execute("DELETE FROM pyramid_tiles WHERE level = 0 AND ty = 1 AND tx = 2 AND tensor_id = "
                    "(SELECT id FROM tensors WHERE name = 'w')")
        con.commit()
        con.close()
        r = run(["render", self.ckpt, "w", "--index", db, "--level", "0", "-o", os.path.join(self.tmp, "d.png")])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("tiles are missing", r.err)
        self.assertIn(db, r.err)
        r = run(["tile", self.ckpt, "w", "--index", db, "--level", "0", "--tile", "2,1"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("tile missing", r.err)
        con = sqlite3.connect(db)
        con.execute("UPDATE pyramid_tiles SET record = x'0102' WHERE level = 1 AND ty = 0 AND tx = 0")
        con.commit()
        con.close()
        r = run(["tile", self.ckpt, "w", "--index", db, "--level", "1", "--tile", "0,0"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("pyramid tile record of 2 bytes", r.err)

    def test_unwritable_output_is_an_io_error(self):
        r = self.tm("render", self.ckpt, "w", "-o", "/nonexistent-dir/x.png")
        self.assertEqual(r.code, 6, r.err)
        self.assertIn("/nonexistent-dir/x.png", r.err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
