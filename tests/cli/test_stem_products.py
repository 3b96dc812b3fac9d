"""4D-STEM products (`tensormorph stem bf|abf|adf|haadf|df|mask|com|dpc|idpc|fft|mean-dp`) against an independent
numpy implementation of each definition in docs/stem.md, on a simulated acquisition read by h5py + hdf5plugin;
the DPC rotation against a brute-force angle search; iDPC against the simulation's ground-truth phase; bad input."""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import TM_BIN, figure_body, run, require_vulkan, run_on_terminal  # noqa: E402

try:
    import h5py
    import hdf5plugin  # noqa: F401
except ImportError:  # pragma: no cover
    h5py = None

SCAN, K = 12, 32


def annulus(shape, centre, inner, outer):
    """The contract's mask: inner <= d <= outer, d in float32 from pixel index to centre."""
    k, l = np.meshgrid(np.arange(shape[0], dtype=np.float32), np.arange(shape[1], dtype=np.float32), indexing="ij")
    dr = k - np.float32(centre[0])
    dc = l - np.float32(centre[1])
    d = np.sqrt(dr * dr + dc * dc)
    return (d >= np.float32(inner)) & (d <= np.float32(outer))


def curl2_interior(u, v):
    du_dr = (u[2:, 1:-1] - u[:-2, 1:-1]) / 2
    du_dc = (u[1:-1, 2:] - u[1:-1, :-2]) / 2
    dv_dr = (v[2:, 1:-1] - v[:-2, 1:-1]) / 2
    dv_dc = (v[1:-1, 2:] - v[1:-1, :-2]) / 2
    return np.mean((dv_dr - du_dc) ** 2)


@unittest.skipIf(h5py is None, "h5py/hdf5plugin not installed (scripts/install-deps installs them)")
class StemProducts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-products-")
        r = run(["stem", "demo", "--out", cls.dir, "--scan", "%d,%d" % (SCAN, SCAN), "--detector", str(K), "--files", "2",
                 "--json"])
        assert r.code == 0, r.err
        cls.master = r.json()["master"]
        with h5py.File(cls.master, "r") as f:
            g = f["entry/data"]
            raw = np.concatenate([g[k][()] for k in sorted(g.keys())]).astype(np.uint64)
            mask = f["entry/instrument/detector/detectorSpecific/pixel_mask"][()]
            cls.truth = f["entry/sample/simulation/object_phase"][()]
            angle = f["entry/sample/simulation/detector_angle_per_pixel"]
            assert angle.attrs["units"] in ("mrad", b"mrad"), angle.attrs["units"]
            cls.mrad_per_px = float(angle[()])
        raw[raw == 65535] = 0
        raw[:, mask > 0] = 0
        cls.data = raw.reshape(SCAN, SCAN, K, K)  # what the products see
        mean = cls.data.sum(axis=(0, 1)) / (SCAN * SCAN)
        thr = mean.mean() + mean.std()
        rows, cols = np.nonzero(mean > thr)
        cls.centre = (rows.mean(), cols.mean())
        cls.radius = math.sqrt(len(rows) / math.pi)
        cls.mean = mean

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def product(self, name, *args, expect=0):
        out = os.path.join(self.dir, name + ".npy")
        r = run(["stem", name, self.master, "-o", out, "--json"] + list(args))
        self.assertEqual(r.code, expect, r.err)
        return (np.load(out), r.json()) if expect == 0 else r

    def test_presets_equal_numpy_masked_sums(self):
        r = self.radius
        for name, (inner, outer) in {"bf": (0, r), "abf": (r / 2, r), "adf": (r, 2 * r), "haadf": (2 * r, 4 * r),
                                     "df": (r, np.inf)}.items():
            with self.subTest(name=name):
                img, rep = self.product(name)
                self.assertEqual(img.dtype, np.uint64)
                self.assertAlmostEqual(rep["disk"]["radius"], r, places=9)
                self.assertAlmostEqual(rep["disk"]["row"], self.centre[0], places=9)
                m = annulus((K, K), self.centre, inner, outer)
                np.testing.assert_array_equal(img, self.data[:, :, m].sum(axis=2))
                self.assertEqual([p["op"] for p in rep["placement"]],  # disk pass, then sums, each with its chunks' decoding
                                 ["stem.pattern_reduce", "decode.bitshuffle_lz4", "stem.frame_sums", "decode.bitshuffle_lz4"])
                self.assertEqual(rep["detector"]["evaluated_as"], "total - complement" if m.sum() > K * K / 2 else "direct")

    def test_mask_in_pixels_mrad_and_from_files(self):
        img, _ = self.product("mask", "--center", "16,15", "--inner", "3", "--outer", "9.5")
        np.testing.assert_array_equal(img, self.data[:, :, annulus((K, K), (16, 15), 3, 9.5)].sum(axis=2))
        # mrad: through the one rule for the angular pixel size — the file records detector_angle_per_pixel
        # (docs/stem.md, "Calibration"), so that, not the 20 mrad semi-angle over the detected disk radius.
        img, rep = self.product("mask", "--inner-mrad", "20", "--outer-mrad", "40")
        px = self.mrad_per_px
        self.assertNotAlmostEqual(px, 20 / self.radius, places=6)  # the two rules differ on this file
        np.testing.assert_array_equal(img, self.data[:, :, annulus((K, K), self.centre, 20 / px, 40 / px)].sum(axis=2))
        self.assertAlmostEqual(rep["mrad_per_pixel"], px, places=9)
        self.assertEqual(rep["detector"]["angle_per_pixel"]["source"], "file: entry/sample/simulation/detector_angle_per_pixel")
        # An explicit --detector-mrad-per-px wins, and --detector-bin scales it (per unbinned pixel).
        img, rep = self.product("mask", "--inner-mrad", "6", "--outer-mrad", "12", "--detector-mrad-per-px", "1.5",
                                "--detector-bin", "2", "--center", "8,7.5")
        binned = self.data.reshape(SCAN, SCAN, K // 2, 2, K // 2, 2).sum(axis=(3, 5))
        np.testing.assert_array_equal(img, binned[:, :, annulus((K // 2, K // 2), (8, 7.5), 2, 4)].sum(axis=2))
        self.assertEqual(rep["mrad_per_pixel"], 3.0)
        self.assertEqual(rep["detector"]["angle_per_pixel"]["source"], "--detector-mrad-per-px")
        self.assertEqual(rep["disk"]["source"], "detected, partly given")
        self.assertEqual((rep["disk"]["row"], rep["disk"]["col"]), (8.0, 7.5))
        user = np.zeros((K, K), dtype=np.uint8)
        user[3:9, 20:30] = 1
        user[0, 0] = 7
        path = os.path.join(self.dir, "user.npy")
        np.save(path, user)
        img, _ = self.product("mask", "--mask", path)
        np.testing.assert_array_equal(img, self.data[:, :, user > 0].sum(axis=2))

    def test_given_radii_override_a_preset(self):
        """adf/bf with --inner/--outer or --inner-mrad/--outer-mrad is that annulus, not the preset's (and not
        served from the prepared cache): the detector given wins, as for mask."""
        img, rep = self.product("adf", "--inner", "3", "--outer", "9.5", "--center", "16,15")
        np.testing.assert_array_equal(img, self.data[:, :, annulus((K, K), (16, 15), 3, 9.5)].sum(axis=2))
        self.assertEqual((rep["detector"]["inner_px"], rep["detector"]["outer_px"]), (3.0, 9.5))
        px = self.mrad_per_px
        img, rep = self.product("bf", "--inner-mrad", "20", "--outer-mrad", "40")
        np.testing.assert_array_equal(img, self.data[:, :, annulus((K, K), self.centre, 20 / px, 40 / px)].sum(axis=2))
        self.assertEqual(rep["detector"]["given_in"], "mrad")
        fft, _ = self.product("fft", "--of", "adf", "--inner", "3", "--outer", "9.5", "--center", "16,15")
        direct = self.data[:, :, annulus((K, K), (16, 15), 3, 9.5)].sum(axis=2).astype(np.float64)
        np.testing.assert_allclose(fft, np.fft.fftshift(np.log1p(np.abs(np.fft.fft2(direct)))), atol=1e-9)

    def test_centre_of_mass(self):
        com, _ = self.product("com")
        s = self.data.sum(axis=(2, 3)).astype(np.float64)
        k = np.arange(K, dtype=np.float64)
        mu_r = (self.data.sum(axis=3) * k).sum(axis=2) / s
        mu_c = (self.data.sum(axis=2) * k).sum(axis=2) / s
        np.testing.assert_allclose(com[0], mu_r - mu_r.mean(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(com[1], mu_c - mu_c.mean(), rtol=0, atol=1e-12)

    def test_dpc_rotation_is_the_brute_force_minimum_of_the_curl(self):
        com, _ = self.product("com")
        dpc, rep = self.product("dpc")
        best = None
        for transpose in (False, True):
            u, v = (com[1], com[0]) if transpose else (com[0], com[1])
            for theta in np.linspace(0, np.pi, 20001)[:-1]:
                c2 = curl2_interior(u * np.cos(theta) - v * np.sin(theta), u * np.sin(theta) + v * np.cos(theta))
                if best is None or c2 < best[0]:
                    best = (c2, theta, transpose)
        rot = rep["rotation"]
        self.assertEqual(rot["transpose"], best[2])
        diff = (rot["angle_rad"] - best[1] + np.pi / 2) % np.pi - np.pi / 2
        self.assertLess(abs(diff), 2e-4, (rot, best))
        self.assertLessEqual(rot["mean_curl2"], best[0] * (1 + 1e-9))
        theta = rot["angle_rad"]
        u, v = (com[1], com[0]) if rot["transpose"] else (com[0], com[1])
        np.testing.assert_allclose(dpc[0], u * np.cos(theta) - v * np.sin(theta), atol=1e-12)
        np.testing.assert_allclose(dpc[1], u * np.sin(theta) + v * np.cos(theta), atol=1e-12)

    def test_idpc_follows_the_formula_and_recovers_the_phase(self):
        dpc, _ = self.product("dpc")
        idpc, _ = self.product("idpc")
        nr = np.fft.fftfreq(SCAN)[:, None]
        nc = np.fft.fftfreq(SCAN)[None, :]
        n2 = nr ** 2 + nc ** 2
        n2[0, 0] = 1
        phi_hat = -0.25j * (nr * np.fft.fft2(dpc[0]) + nc * np.fft.fft2(dpc[1])) / n2
        phi_hat[0, 0] = 0
        phi = np.real(np.fft.ifft2(phi_hat))
        np.testing.assert_allclose(idpc, -(phi - phi.mean()), atol=1e-10)
        # The simulated object's phase under the probe centre at each scan position (step 2 px, window K).
        truth = self.truth[K // 2:K // 2 + 2 * SCAN:2, K // 2:K // 2 + 2 * SCAN:2]
        self.assertGreater(abs(np.corrcoef(idpc.ravel(), truth.ravel())[0, 1]), 0.8)

    def test_patterns_and_fft(self):
        mean, rep = self.product("mean-dp")
        np.testing.assert_allclose(mean, self.mean, rtol=1e-15)
        self.assertEqual(rep["placement"][0]["op"], "stem.pattern_reduce")
        mx, _ = self.product("mean-dp", "--max")
        np.testing.assert_array_equal(mx, self.data.max(axis=(0, 1)))
        fft, _ = self.product("fft")
        np.testing.assert_allclose(fft, np.fft.fftshift(np.log1p(np.abs(np.fft.fft2(self.mean)))), atol=1e-9)
        bf, _ = self.product("bf")
        fft_bf, _ = self.product("fft", "--of", "bf")
        np.testing.assert_allclose(fft_bf, np.fft.fftshift(np.log1p(np.abs(np.fft.fft2(bf.astype(np.float64))))), atol=1e-9)

    def test_regions_and_bins_apply_to_products(self):
        img, _ = self.product("bf", "--scan-region", "2,10,1,12", "--detector-bin", "2", "--center", "8,8", "--radius", "3")
        binned = self.data[2:10, 1:12].reshape(8, 11, K // 2, 2, K // 2, 2).sum(axis=(3, 5))
        np.testing.assert_array_equal(img, binned[:, :, annulus((K // 2, K // 2), (8, 8), 0, 3)].sum(axis=2))

    def test_vulkan_gives_the_same_products(self):
        require_vulkan(self)
        for args in (["bf"], ["abf"], ["adf"], ["haadf"], ["df"], ["mask", "--inner", "3", "--outer", "9"], ["com"], ["dpc"],
                     ["idpc"], ["fft", "--of", "adf"]):
            with self.subTest(args=args):
                cpu, _ = self.product(*args, "--center", "16,15", "--radius", "4")
                vk_out, rep = self.product(*args, "--center", "16,15", "--radius", "4", "--backend", "vulkan")
                self.assertEqual(rep["placement"][0]["backend"], "vulkan")
                np.testing.assert_array_equal(vk_out, cpu)  # exact integer sums: the same floats after them
        # --prefer: frame sums run on Vulkan, the pattern (no Vulkan kernel) falls back to the CPU, reported.
        _, rep = self.product("bf", "--prefer", "vulkan")
        placed = {p["op"]: p["backend"] for p in rep["placement"]}
        self.assertEqual(placed, {"stem.pattern_reduce": "cpu", "stem.frame_sums": "vulkan", "decode.bitshuffle_lz4": "cpu"})

    def test_vulkan_sums_the_resident_copy_from_its_device_copy(self):
        """With a resident copy and --backend vulkan, stem.compact_sums reads the copy's image uploaded once to the
        device: the same products as the CPU, and the report says where the copy lives, its bytes and when it was built."""
        require_vulkan(self)
        for args in (["bf"], ["adf"], ["mask", "--inner", "3", "--outer", "9"], ["com"]):
            with self.subTest(args=args):
                cpu, cpu_rep = self.product(*args, "--center", "16,15", "--radius", "4", "--resident-memory", "1G")
                self.assertTrue(cpu_rep["provenance"]["resident"].get("bytes"), cpu_rep["provenance"]["resident"])
                vk_out, rep = self.product(*args, "--center", "16,15", "--radius", "4", "--resident-memory", "1G",
                                           "--backend", "vulkan")
                np.testing.assert_array_equal(vk_out, cpu)
                sums = [p for p in rep["placement"] if p["op"] == "stem.compact_sums"]
                self.assertEqual(len(sums), 1, rep["placement"])
                self.assertEqual(sums[0]["backend"], "vulkan")
                copy = rep["provenance"]["resident"]["device_copy"]
                self.assertTrue(copy["location"].startswith("vulkan/"), copy)
                self.assertEqual(copy["device"], sums[0]["device"])
                self.assertGreater(copy["bytes"], 0)
                self.assertTrue(copy["built_now"])  # one command: built on its first product
                self.assertEqual(sums[0]["bytes_transferred"], copy["bytes"])
                self.assertRegex(copy["built_at"], r"^\d{4}-\d\d-\d\dT")
                listed = rep["provenance"]["resident"]["device_copies"]
                self.assertEqual([c["location"] for c in listed], [copy["location"]])
                # The CPU computes from the host copy in place.
                cpu_sums = [p for p in cpu_rep["placement"] if p["op"] == "stem.compact_sums"]
                self.assertEqual([(p["backend"], p["reason"]) for p in cpu_sums], [("cpu", "resident_data")])
                self.assertNotIn("device_copy", cpu_rep["provenance"]["resident"])

    def test_split_frame_sums_give_the_same_products(self):
        """--split on (docs/backends.md "Split placement"): each batch's positions shared between the CPU and
        Vulkan, every position's sums computed by one of them, so the products equal the CPU's alone; the report's
        stem.frame_sums lists both shares and the positions each summed."""
        require_vulkan(self)
        for args in (["bf"], ["mask", "--inner", "3", "--outer", "9"], ["com"]):
            with self.subTest(args=args):
                alone, _ = self.product(*args, "--split", "off")
                split, rep = self.product(*args, "--split", "on")
                np.testing.assert_array_equal(split, alone)
                sums = next(p for p in rep["placement"] if p["op"] == "stem.frame_sums")
                shares = {s["backend"]: s for s in sums["split"]}
                self.assertEqual(set(shares), {"cpu", "vulkan"}, sums)
                self.assertTrue(all(s["units"] > 0 and s["failed"] is None for s in shares.values()), shares)
                self.assertEqual(sum(s["units"] for s in shares.values()), split.shape[-1] * split.shape[-2])

    def test_a_turned_scan_gives_the_known_dpc_angle(self):
        """Simulated with the scan's axes turned by theta against the detector's: the DPC rotation that
        makes the measured field curl-free is -theta (mod 180 degrees)."""
        for theta in (30.0, -65.0):
            with self.subTest(theta=theta):
                d = tempfile.mkdtemp(prefix="tm-stem-rot-")
                try:
                    r = run(["stem", "demo", "--out", d, "--scan", "48,48", "--detector", "64", "--scan-rotation-deg", str(theta),
                             "--json"])
                    self.assertEqual(r.code, 0, r.err)
                    r = run(["stem", "dpc", r.json()["master"], "-o", os.path.join(d, "dpc.npy"), "--json"])
                    self.assertEqual(r.code, 0, r.err)
                    rot = r.json()["rotation"]
                    want = (-theta) % 180.0
                    diff = abs((rot["angle_deg"] - want + 90.0) % 180.0 - 90.0)
                    self.assertLess(diff, 2.0, rot)
                    self.assertFalse(rot["transpose"])
                finally:
                    shutil.rmtree(d, ignore_errors=True)

    def test_png_output_is_the_colour_mapped_product(self):
        from PIL import Image
        import matplotlib
        for name, cmap in (("bf", "gray"), ("idpc", "viridis")):
            with self.subTest(name=name):
                values, _ = self.product(name)
                out = os.path.join(self.dir, name + ".png")
                r = run(["stem", name, self.master, "-o", out, "--json", "--colormap", cmap])
                self.assertEqual(r.code, 0, r.err)
                rep = r.json()
                lo, hi = rep["display"]["limits"]
                self.assertEqual((lo, hi), (values.min(), values.max()))
                with Image.open(out) as img:
                    self.assertEqual(img.text["tensormorph:product"], name)
                    self.assertEqual(img.text["tensormorph:colormap"], cmap)
                    self.assertGreaterEqual(len(img.text["tensormorph:ticks"].split(";")), 2)  # a labelled colour bar
                    _, _, cw, ch = map(int, img.text["tensormorph:cells_box"].split(","))
                    px = figure_body(img)
                sx, sy = cw // values.shape[1], ch // values.shape[0]
                cells = px[: values.shape[0] * sy : sy, : values.shape[1] * sx : sx]
                # matplotlib's colour map of the normalised values, channels rounded: the expected image
                n = (values.astype(np.float64) - lo) / (hi - lo)
                k = np.minimum(np.floor(n * 256), 255).astype(int)
                lut = matplotlib.colormaps[cmap].resampled(256)(np.arange(256))
                want = np.floor(lut[k] * 255 + 0.5).astype(np.uint8)
                self.assertTrue((cells == want).all())

    def run_on_terminal(self, args):
        """Runs the CLI with stderr on a pseudo-terminal (stdout a pipe); returns (exit code, stdout, terminal text)."""
        env = dict(os.environ, XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="tm-cfg-"), XDG_CACHE_HOME=tempfile.mkdtemp(prefix="tm-cache-"))
        env.pop("TENSORMORPH_PLUGIN_DIR", None)
        code, out, seen = run_on_terminal([TM_BIN] + args, env, timeout=60)
        return code, out.decode(), seen.decode(errors="replace")

    def test_progress_line_on_a_terminal_only(self):
        out = os.path.join(self.dir, "progress-bf.npy")
        code, stdout, terminal = self.run_on_terminal(["stem", "bf", self.master, "-o", out, "--no-cache"])
        self.assertEqual(code, 0, terminal)
        frames = int(np.prod(np.load(out).shape))
        # every pass (the disk's mean pattern, then the image) ends its line at its last frame
        ends = re.findall(r"decoding \[#{24}\] 100\.0%  (\d+)/(\d+) frames", terminal)
        self.assertGreaterEqual(len(ends), 1, terminal)
        for done, total in ends:
            self.assertEqual((int(done), int(total)), (frames, frames))
        self.assertNotIn("decoding", stdout)
        # --json: nothing drawn on the terminal either; a pipe: nothing drawn
        code, stdout, terminal = self.run_on_terminal(["stem", "bf", self.master, "-o", out, "--no-cache", "--json"])
        self.assertEqual(code, 0, terminal)
        self.assertNotIn("decoding", terminal)
        r = run(["stem", "bf", self.master, "-o", out, "--no-cache"])
        self.assertEqual(r.code, 0, r.err)
        self.assertNotIn("decoding", r.err)

    def test_ssb_fit_progress_on_a_terminal(self):
        out = os.path.join(self.dir, "progress-ssb.npy")
        code, stdout, terminal = self.run_on_terminal(["stem", "ssb", self.master, "--fit", "-o", out, "--estimate-trials", "12"])
        self.assertEqual(code, 0, terminal)
        report = json.load(open(out + ".json"))
        fit = report["fit"]
        # the search's line ends at its planned count (the trials and the estimate's loss), the simplex's at its count
        search = re.findall(r"fit: search \[[#.]{24}\] (\d+)/(\d+) evaluations  best loss (\S+)", terminal)
        simplex = re.findall(r"fit: simplex (\d+) evaluations  best loss (\S+)", terminal)
        self.assertTrue(search and simplex, terminal)
        self.assertEqual(search[-1][0], search[-1][1])
        self.assertEqual(int(search[-1][1]), fit["trials"] + (1 if fit["search"] == "around the estimate" else 0))
        self.assertEqual(int(simplex[-1][0]), fit["nelder_mead"]["evaluations"])
        best = min(fit["nelder_mead"]["loss"], fit["tpe_best_loss"], fit["estimate"].get("loss", math.inf))
        self.assertAlmostEqual(float(simplex[-1][1]), best, delta=1e-5 * best)  # printed with 6 digits
        self.assertNotIn("fit:", stdout)

    def test_the_table_reads_as_text(self):
        # the detector and the summary in words and numbers, not JSON (--json keeps the document)
        out = os.path.join(self.dir, "table-mask.npy")
        r = run(["stem", "mask", self.master, "--inner", "3", "--outer", "9", "-o", out])
        self.assertEqual(r.code, 0, r.err)
        rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in r.out.splitlines() if re.match(r"^\w[\w -]*\s{2,}", line))
        values = np.load(out)
        pixels = json.load(open(out + ".json"))["detector"]["pixels"]
        self.assertRegex(rows["detector"], r"^annulus 3 to 9 px \([\d.]+ to [\d.]+ mrad\), %d pixels, evaluated as \w+" % pixels)
        self.assertEqual(rows["summary"], "min %d, max %d, mean %s" % (values.min(), values.max(), ("%.9g" % values.mean())))
        self.assertNotIn("{", r.out.split("placement:")[0])
        # an open annulus (df: out to the detector's edge, "inf" in the report) reads as such
        r = run(["stem", "df", self.master, "-o", os.path.join(self.dir, "table-df.npy")])
        self.assertEqual(r.code, 0, r.err)
        self.assertRegex(r.out, r"detector\s+annulus [\d.]+ to inf px \([\d.]+ to inf mrad\), \d+ pixels")
        r = run(["stem", "com", self.master, "-o", os.path.join(self.dir, "table-com.npy")])
        self.assertEqual(r.code, 0, r.err)
        self.assertRegex(r.out, r"summary\s+u: min \S+, max \S+, mean \S+; v: min \S+, max \S+, mean \S+")

    def test_field_png_labels_its_two_components(self):
        from PIL import Image
        for name in ("com", "dpc"):
            with self.subTest(name=name):
                out = os.path.join(self.dir, name + "-field.png")
                r = run(["stem", name, self.master, "-o", out])
                self.assertEqual(r.code, 0, r.err)
                with Image.open(out) as img:
                    self.assertEqual(img.text["tensormorph:components"], "u: top half of the cells, v: bottom half")
                    _, _, cw, ch = map(int, img.text["tensormorph:cells_box"].split(","))
                    px = figure_body(img)
                gap = px[:ch, cw:cw + 8]  # between the cells and the colour bar: transparent but for the labels
                ink = (gap[..., 3] == 255) & (gap[..., :3] < 64).all(axis=-1)
                rows = np.nonzero(ink.any(axis=1))[0]
                half = ch // 2
                self.assertTrue(ink[half].sum() >= 5, "the mark where v begins")
                top, bottom = rows[rows < half], rows[rows > half]
                self.assertEqual(len(top), 7)  # one glyph ("U") in the top half, one ("V") below
                self.assertEqual(len(bottom), 7)
                self.assertLess(abs((top.min() + top.max()) / 2 - half / 2), 2)
                self.assertFalse((gap[..., 3] == 255).all(), "the rest of the gap stays transparent")
        # a single-component product has no component labels
        with Image.open(self.render_png("bf")) as img:
            self.assertNotIn("tensormorph:components", img.text)

    def render_png(self, name):
        out = os.path.join(self.dir, name + "-plain.png")
        r = run(["stem", name, self.master, "-o", out])
        self.assertEqual(r.code, 0, r.err)
        return out

    def test_prepared_products_equal_computed_ones_and_follow_the_source(self):
        cache = os.path.join(self.dir, "cache.sqlite")
        r = run(["stem", "prepare", self.master, "--cache", cache, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual([d["name"] for d in r.json()["detectors"]], ["bf", "abf", "adf", "haadf", "df"])
        for args in (["bf"], ["abf"], ["adf"], ["haadf"], ["df"], ["com"], ["dpc"], ["idpc"], ["mean-dp"],
                     ["mean-dp", "--max"], ["fft"], ["fft", "--of", "adf"]):
            with self.subTest(args=args):
                cached, rep = self.product(*args, "--cache", cache)
                self.assertTrue(rep["cache"]["hit"], rep.get("cache"))
                self.assertEqual(rep["placement"], [])  # nothing ran
                computed, rep2 = self.product(*args, "--cache", cache, "--no-cache")
                self.assertNotIn("cache", rep2)
                self.assertEqual(cached.dtype, computed.dtype)
                self.assertTrue(np.array_equal(cached, computed))
                if "disk" in rep2:
                    self.assertEqual([rep["disk"][k] for k in ("row", "col", "radius")],
                                     [rep2["disk"][k] for k in ("row", "col", "radius")])
                    self.assertEqual(rep["detector"]["pixels"], rep2["detector"]["pixels"])
                if "rotation" in rep2:
                    self.assertEqual(rep["rotation"]["angle_rad"], rep2["rotation"]["angle_rad"])
        # Another request shape, a given disk, or a custom detector are computed, not served.
        _, rep = self.product("bf", "--cache", cache, "--scan-bin", "2")
        self.assertFalse(rep["cache"]["hit"])
        _, rep = self.product("bf", "--cache", cache, "--radius", "5", "--center", "16,16")
        self.assertNotIn("cache", rep)
        # A changed acquisition (a data file rewritten) has another source signature: a miss.
        data_file = sorted(f for f in os.listdir(self.dir) if f.endswith(".h5") and "master" not in f)[0]
        path = os.path.join(self.dir, data_file)
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        try:
            _, rep = self.product("bf", "--cache", cache)
            self.assertFalse(rep["cache"]["hit"])
        finally:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        # A damaged entry is a clear error naming the database.
        import sqlite3
        con = sqlite3.connect(cache)
        con.execute("UPDATE arrays SET data = x'00' WHERE name = 'adf'")
        con.commit()
        con.close()
        r = self.product("adf", "--cache", cache, expect=3)
        self.assertIn(cache, r.err)
        self.assertIn("adf", r.err)
        # A report of the wrong shape (a field missing, of another type, detectors not one per preset) is the
        # same clear error, never an internal one (exit 70).
        con = sqlite3.connect(cache)
        (report,) = con.execute("SELECT report FROM prepared").fetchone()
        doc = json.loads(report)
        for damage in ({"positions": "many"}, {"seconds": None}, {"detectors": doc["detectors"][:2]},
                       {"detectors": [{"name": d["name"]} for d in doc["detectors"]]}, {"disk": {"row": 1}}):
            with self.subTest(damage=list(damage)):
                con.execute("UPDATE prepared SET report = ?", (json.dumps({**doc, **damage}),))
                con.commit()
                r = self.product("bf", "--cache", cache, expect=3)
                self.assertIn(cache, r.err)
                self.assertIn("damaged", r.err)
        con.close()

    def test_bad_inputs_are_clear_errors(self):
        cases = [
            (["mask", "--center", "500,500", "--outer", "3"], 2, "outside the detector"),
            (["mask", "--center", "16,16", "--inner", "0", "--outer", "0"], 2, "--outer must be > 0"),
            (["bf", "--radius", "-2"], 2, "--radius: expected a number in (0, 1000000] (detector pixels), got '-2'"),
            (["bf", "--scan-region", "0,13,0,12"], 2, "--scan-region"),
            (["mask"], 2, "--inner/--outer"),
            (["bf", "--backend", "testaccel"], 4, "--backend testaccel cannot serve it (missing_kernel"),
        ]
        for args, code, text in cases:
            with self.subTest(args=args):
                r = run(["stem", args[0], self.master, "-o", os.path.join(self.dir, "x.npy")] + args[1:], plugins=True)
                self.assertEqual(r.code, code, r.err)
                self.assertIn(text, r.err)
        wrong = os.path.join(self.dir, "wrong.npy")
        np.save(wrong, np.ones((K, K + 1), dtype=bool))
        r = run(["stem", "mask", self.master, "-o", os.path.join(self.dir, "x.npy"), "--mask", wrong])
        self.assertEqual(r.code, 2)
        self.assertIn("the mask is 32x33", r.err)
        r = run(["stem", "bf", self.master, "-o", os.path.join(self.dir, "x.png"), "--limits", "1"])
        self.assertEqual(r.code, 2)
        self.assertIn("--limits 1", r.err)
        r = run(["stem", "bf", self.master, "-o", os.path.join(self.dir, "x.png"), "--colormap", "jet"])
        self.assertEqual(r.code, 2)
        self.assertIn("jet", r.err)

    def test_image_numbers_that_disagree_with_a_data_files_frames_are_named(self):
        """A data file whose image_nr_low..high do not span its frames is a readiness problem naming the file, both
        numbers and its frame count; numbers near the int64 limits, whose difference overflows a signed 64-bit
        integer (what the fuzzer found), are reported the same way, not a crash."""
        copy = os.path.join(self.dir, "numbers")
        shutil.copytree(os.path.dirname(self.master), copy, ignore=shutil.ignore_patterns("*.npy", "*.json", "*.png"))
        master = os.path.join(copy, os.path.basename(self.master))
        data1 = os.path.join(copy, sorted(f for f in os.listdir(copy) if "_data_" in f)[0])
        with h5py.File(data1, "r") as f:
            frames = f["entry/data/data"].shape[0]
        for low, high in ((1, frames + 4), (-8254613888959197942, 2482439361794448248)):
            with self.subTest(low=low, high=high):
                with h5py.File(data1, "r+") as f:
                    f["entry/data/data"].attrs["image_nr_low"] = np.int64(low)
                    f["entry/data/data"].attrs["image_nr_high"] = np.int64(high)
                r = run(["stem", "inspect", master, "--json"])
                self.assertEqual(r.code, 0, r.err)
                want = "%s: image_nr_low..high (%d..%d) disagrees with its %d frames" % (os.path.basename(data1), low, high, frames)
                self.assertTrue(any(want in p for p in r.json()["readiness"]["problems"]), (want, r.out[:2000]))

    def test_problems_that_change_values_are_in_the_report_and_exit_7(self):
        """A pixel mask of the wrong shape (not applied) and a data file whose frames overlap the previous one's
        change the numbers: the product is still written, its report lists the problems, and the exit is 7."""
        copy = os.path.join(self.dir, "problems")
        shutil.copytree(os.path.dirname(self.master), copy, ignore=shutil.ignore_patterns("*.npy", "*.json", "*.png"))
        master = os.path.join(copy, os.path.basename(self.master))
        with h5py.File(master, "r+") as f:
            det = f["entry/instrument/detector/detectorSpecific"]
            del det["pixel_mask"]
            det.create_dataset("pixel_mask", data=np.zeros((K, K + 1), dtype=np.uint32))
        out = os.path.join(copy, "bf.npy")
        for json_flag in (["--json"], []):
            with self.subTest(json=bool(json_flag)):
                r = run(["stem", "bf", master, "-o", out, "--no-cache"] + json_flag)
                self.assertEqual(r.code, 7, r.err)
                self.assertIn(out + " was computed from an acquisition whose problems change its values", r.err)
                self.assertIn("pixel mask shape does not match", r.err)
                with open(out + ".json") as f:
                    report = json.load(f)
                problems = report["acquisition_problems"]
                self.assertEqual(problems["status"], "incomplete")
                self.assertEqual(len(problems["changing_values"]), 1)
                self.assertIn("not applied", problems["changing_values"][0])
                self.assertEqual(np.load(out).shape, (SCAN, SCAN))  # written all the same
        # The second data file's frames said to start inside the first's: dropped, the values change.
        data2 = sorted(f for f in os.listdir(copy) if "_data_" in f)[1]
        with h5py.File(os.path.join(copy, data2), "r+") as f:
            f["entry/data/data"].attrs["image_nr_low"] = np.int64(1)
        r = run(["stem", "mean-dp", master, "-o", out, "--no-cache", "--scan-region", "0,2,0,%d" % SCAN, "--json"])
        self.assertEqual(r.code, 7, r.err)
        self.assertIn("overlap the previous data file's", r.err)
        # A problem that does not change the values (metadata only) is reported, exit 0.
        clean = os.path.join(self.dir, "clean-bf.npy")
        r = run(["stem", "bf", self.master, "-o", clean, "--no-cache", "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertNotIn("acquisition_problems", r.json())


if __name__ == "__main__":
    unittest.main(verbosity=2)
