"""The Vulkan backend through the CLI, on whatever Vulkan driver this machine has (Mesa lavapipe in CI):
discovery and reporting, strict and preferred placement, --never, the planner's default choice for host
data, results equal to the CPU's, and the reasons given when the loader or the driver is missing.

When the backend is unavailable the tests skip with the reason, unless TM_REQUIRE_VULKAN=1 (.ci/run),
which makes them fail instead."""
import os
import random
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from cli_harness import run  # noqa: E402
from gguf_write import write_gguf  # noqa: E402
from test_cli import safetensors_file  # noqa: E402


def vulkan_entry():
    r = run(["backends", "--json"])
    for b in r.json()["backends"]:
        if b["name"] == "vulkan":
            return b
    return None


VULKAN = vulkan_entry()
REQUIRED = os.environ.get("TM_REQUIRE_VULKAN") == "1"


def bf16(x):
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16


class VulkanCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if VULKAN and VULKAN["available"]:
            return
        why = "the plugin is not built" if not VULKAN else VULKAN["reason"] + ": " + VULKAN.get("detail", "")
        if REQUIRED:
            raise AssertionError("TM_REQUIRE_VULKAN=1 but the Vulkan backend is unavailable: " + why)
        raise unittest.SkipTest("Vulkan backend unavailable (" + why + ")")

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-vulkan-")
        rng = random.Random(5)
        n = 70000  # more than one canonical block, not a multiple of anything
        f32 = [rng.gauss(0, 1) for _ in range(n)] + [float("nan"), float("inf"), -0.0, 1e-45]
        bf = [bf16(x) for x in f32]
        i32 = [rng.randrange(-2**31, 2**31) for _ in range(n)]
        u8 = [rng.randrange(256) for _ in range(n)]
        f64 = [rng.gauss(5, 2) for _ in range(1000)]
        self.path = safetensors_file(os.path.join(self.dir, "mixed.safetensors"), [
            ("a.f32", "F32", [len(f32)], struct.pack("<%df" % len(f32), *f32)),
            ("b.bf16", "BF16", [len(bf)], struct.pack("<%dH" % len(bf), *bf)),
            ("c.i32", "I32", [n], struct.pack("<%di" % n, *i32)),
            ("d.u8", "U8", [n], bytes(u8)),
            ("e.f64", "F64", [1000], struct.pack("<1000d", *f64)),
        ])

    def stats(self, *flags, path=None, env=None):
        r = run(["stats", path or self.path, "--json", *flags], env_extra=env)
        self.assertEqual(r.code, 0, r.err)
        return {t["name"]: t for t in r.json()["tensors"]}

    def test_backends_lists_every_device_with_its_kind_and_limits(self):
        devices = VULKAN["devices"]
        self.assertGreater(len(devices), 0)
        for d in devices:
            self.assertIn(d["kind"], ("gpu", "integrated_gpu", "software_adapter"))
            self.assertGreater(d["max_buffer_binding_bytes"], 0)
            if d["name"].startswith("llvmpipe"):
                self.assertEqual(d["kind"], "software_adapter")
                self.assertEqual(d["max_buffer_binding_bytes"], 128 << 20)  # read from the device
        if REQUIRED:  # CI installs lavapipe
            self.assertTrue(any(d["name"].startswith("llvmpipe") for d in devices), devices)
        ops = {k["op"] for k in VULKAN["kernels"]}
        self.assertEqual(ops, {"stats.moments", "stats.histogram", "stats.bitpattern_histogram", "stats.quantiles",
                               "dequantize.ggml", "stem.frame_sums", "display.colorize", "stem.ssb_overlap", "lod.tile_stats",
                               "stem.compact_sums"})
        dequant = next(k for k in VULKAN["kernels"] if k["op"] == "dequantize.ggml")
        self.assertEqual(sorted(dequant["dtypes"]), ["Q4_0", "Q8_0"])
        # Every kernel is exact but SSB's, whose complex64 transforms are bounded against the CPU's.
        ssb = next(k for k in VULKAN["kernels"] if k["op"] == "stem.ssb_overlap")
        self.assertEqual((ssb["dtypes"], ssb["precision"]), (["quadratic"], "bounded(0.0002)"))
        self.assertTrue(all(k["precision"] == "exact" for k in VULKAN["kernels"] if k["op"] != "stem.ssb_overlap"))

    def test_split_on_shares_the_moments_between_cpu_and_vulkan_with_the_cpus_numbers(self):
        """--split on (docs/backends.md "Split placement"): stats.moments of a 5 MB tensor computed partly on the
        CPU and partly on lavapipe gives the statistics --split off gives; the JSON lists both shares with the blocks
        and bytes each computed, the text line says so, and a bad mode is refused naming the flag."""
        import numpy as np
        rng = np.random.default_rng(3)
        x = rng.standard_normal(1_250_003).astype(np.float32)
        x[[5, 700_001]] = [np.nan, np.inf]
        big = safetensors_file(os.path.join(self.dir, "big.safetensors"), [("x", "F32", [x.size], x.tobytes())])
        split = self.stats("--split", "on", "--index", os.path.join(self.dir, "split.db"), path=big)["x"]
        alone = self.stats("--split", "off", "--index", os.path.join(self.dir, "alone.db"), path=big)["x"]
        self.assertEqual(split["stats"], alone["stats"])
        moments = next(p for p in split["placement"] if p["op"] == "stats.moments")
        shares = moments["split"]
        self.assertEqual(sorted(s["backend"] for s in shares), ["cpu", "vulkan"], moments)
        self.assertTrue(all(s["units"] > 0 and s["failed"] is None for s in shares), shares)
        self.assertEqual(sum(s["units"] for s in shares), (x.size + 65535) // 65536)
        self.assertEqual(sum(s["bytes"] for s in shares), x.nbytes)
        self.assertIn("split over 2 backends", moments["split_why"])
        self.assertNotIn("split", next(p for p in alone["placement"] if p["op"] == "stats.moments"))
        r = run(["stats", big, "x", "--split", "on", "--index", os.path.join(self.dir, "text.db")])
        self.assertEqual(r.code, 0, r.err)
        self.assertRegex(r.out, r"placement: .*stats\.moments \d+% of a split.*stats\.moments \d+% of a split")
        r = run(["stats", big, "x", "--split", "maybe"])
        self.assertEqual(r.code, 2, r.err)
        self.assertIn("--split: expected auto, on or off, got 'maybe'", r.err)

    def test_strict_vulkan_equals_the_cpu_and_names_the_device(self):
        names = ("a.f32", "b.bf16", "c.i32", "d.u8")
        # f64 has no Vulkan kernel: strict requests name it; the four others run there entirely.
        for name in names:
            r = run(["stats", self.path, name, "--json", "--backend", "vulkan"])
            self.assertEqual(r.code, 0, r.err)
            vk = r.json()["tensors"][0]
            cpu = self.stats("--backend", "cpu")[name]
            self.assertEqual(vk["stats"], cpu["stats"], name)
            # Moved to the device once, by the first op; the later ops read the device copy.
            moved = [p["bytes_transferred"] for p in vk["placement"]]
            self.assertEqual(moved[0], vk["bytes"], (name, moved))
            self.assertEqual(set(moved[1:]), {0}, (name, moved))
            for p in vk["placement"]:
                self.assertEqual(p["backend"], "vulkan", (name, p))
                self.assertIn(p["reason"], ("user_pinned", "derived_from_bitpattern_histogram"), (name, p))
                self.assertEqual(p["device"], VULKAN["devices"][0]["name"])
        r = run(["stats", self.path, "e.f64", "--backend", "vulkan"])
        self.assertEqual(r.code, 4)
        self.assertIn("--backend vulkan cannot serve it (dtype_unsupported", r.err)
        self.assertIn("f64", r.err)
        self.assertIn("nothing was substituted", r.err)

    def test_prefer_places_what_it_can_and_reports_the_fallback(self):
        preferred = self.stats("--prefer", "vulkan")
        cpu = self.stats("--backend", "cpu")
        for name, t in preferred.items():
            self.assertEqual(t["stats"], cpu[name]["stats"], name)
        for p in preferred["a.f32"]["placement"]:
            self.assertEqual((p["backend"], p["reason"]), ("vulkan", "user_preferred"))
        moments = next(p for p in preferred["e.f64"]["placement"] if p["op"] == "stats.moments")
        self.assertEqual((moments["backend"], moments["reason"]), ("cpu", "fallback_missing_kernel"))
        why = next(r for r in moments["rejected"] if r["backend"] == "vulkan")
        self.assertEqual(why["reason"], "dtype_unsupported")
        self.assertIn("f64", why["detail"])

    def test_default_keeps_host_data_on_the_cpu_and_never_excludes_vulkan(self):
        # Under 4 MiB (a.f32 is 280 KB) the plugins are not considered: the CPU serves it without opening them.
        auto = self.stats()
        for p in auto["a.f32"]["placement"]:
            self.assertEqual(p["backend"], "cpu", p)
            why = next(r for r in p["rejected"] if r["backend"] == "vulkan")
            self.assertEqual(why["reason"], "below_open_threshold")
            self.assertIn("4.0 MiB", why["detail"])
        # From 4 MiB on, uncalibrated, both backends get the same default throughput; Vulkan also pays the copy
        # of the tensor to the device, so a one-pass statistic over host data stays on the CPU.
        n = (4 << 20) // 4
        big = safetensors_file(os.path.join(self.dir, "big.safetensors"),
                               [("big.f32", "F32", [n], struct.pack("<%df" % n, *([0.5] * n)))])
        for p in self.stats(path=big)["big.f32"]["placement"]:
            self.assertEqual(p["backend"], "cpu", p)
            why = next(r for r in p["rejected"] if r["backend"] == "vulkan")
            self.assertEqual(why["reason"], "costlier")
            self.assertIn("transfer", why["detail"])
        never = self.stats("--never", "vulkan", "--prefer", "vulkan")
        for t in never.values():
            for p in t["placement"]:
                self.assertEqual(p["backend"], "cpu")
        r = run(["backends", "--json", "--never", "vulkan"])
        entry = next(b for b in r.json()["backends"] if b["name"] == "vulkan")
        self.assertEqual(entry["reason"], "disabled_by_policy")
        r = run(["stats", self.path, "--backend", "vulkan", "--never", "vulkan"])
        self.assertEqual(r.code, 2)

    def test_diff_tiles_have_no_vulkan_kernel_and_say_so(self):
        """diff.tile_stats is CPU-only (docs/diff.md): pinned to Vulkan, diff stops naming the op; preferred, it falls
        back to the CPU with the reason in the pair's placement."""
        r = run(["diff", self.path, self.path, "a.f32", "--backend", "vulkan"])
        self.assertEqual(r.code, 4, r.err)
        self.assertIn("diff.tile_stats on f64 (70004 elements): --backend vulkan cannot serve it (missing_kernel: the backend "
                      "has no diff.tile_stats kernel); nothing was substituted", r.err)
        r = run(["diff", self.path, self.path, "a.f32", "--prefer", "vulkan", "--json"])
        self.assertEqual(r.code, 0, r.err)
        tiles = [p for p in r.json()["pairs"][0]["placement"] if p["op"] == "diff.tile_stats"]
        self.assertEqual([(p["backend"], p["reason"]) for p in tiles], [("cpu", "fallback_missing_kernel")])

    def test_index_on_vulkan_equals_the_cpu(self):
        """Indexing with Vulkan preferred (two workers calling the plugin at once) stores the statistics
        the CPU stores; pinned strictly, the first op Vulkan cannot serve stops it with the reason, with and
        without pyramids the f64 tensor's (Vulkan's lod.tile_stats takes f32, bf16 and f16 since issue 43, so
        the f32 tensor's tiles no longer stop it)."""
        r = run(["index", self.path, "--backend", "vulkan", "--json"])
        self.assertEqual(r.code, 4)
        self.assertIn("on f64", r.err)
        self.assertNotIn("on f32", r.err)
        r = run(["index", self.path, "--backend", "vulkan", "--no-pyramid", "--json"], cache_home=tempfile.mkdtemp(prefix="tm-vk-cache-"))
        self.assertEqual(r.code, 4)
        self.assertIn("stats.moments on f64", r.err)
        stored = {}
        for flags in (["--prefer", "vulkan"], ["--backend", "cpu"]):
            cache = tempfile.mkdtemp(prefix="tm-vk-cache-")
            r = run(["index", self.path, *flags, "--threads", "2", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            r = run(["stats", self.path, "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            stored[flags[1]] = {t["name"]: t for t in r.json()["tensors"]}
        for name in ("a.f32", "b.bf16", "c.i32", "d.u8"):
            self.assertEqual(stored["vulkan"][name]["stats"], stored["cpu"][name]["stats"], name)
            self.assertEqual({p["backend"] for p in stored["vulkan"][name]["placement"]}, {"vulkan"}, name)

    def test_quantized_dequantization_falls_back_alone(self):
        """Issue 4's seed case on a real backend: Vulkan decodes Q8_0 but has no Q4_K kernel. With Vulkan
        preferred, one request over both tensors decodes Q8_0 on Vulkan and Q4_K on the CPU, the report
        naming the format that fell back and why; every number equals the CPU's."""
        rng = random.Random(9)
        blocks = 64
        q8 = bytearray()
        for b in range(blocks):
            q8 += struct.pack("<e", 0.5 + b / 64) + bytes((i * 7 + b) % 256 for i in range(32))
        q4k = bytearray()
        for b in range(blocks * 32 // 256):  # 144-byte super-blocks: d, dmin (halves), scales, codes
            q4k += struct.pack("<ee", 0.01 + b / 512, 0.002) + bytes(rng.randrange(256) for _ in range(140))
        path = os.path.join(self.dir, "q.gguf")
        write_gguf(path, [("general.architecture", "STRING", "test")],
                   [("q8", "Q8_0", [32 * blocks], bytes(q8)), ("q4k", "Q4_K", [32 * blocks], bytes(q4k))])
        preferred = self.stats("--prefer", "vulkan", path=path)
        cpu = self.stats("--backend", "cpu", path=path)
        q8_dq = next(p for p in preferred["q8"]["placement"] if p["op"] == "dequantize.ggml")
        q4k_dq = next(p for p in preferred["q4k"]["placement"] if p["op"] == "dequantize.ggml")
        self.assertEqual((q8_dq["backend"], q8_dq["reason"]), ("vulkan", "user_preferred"))
        self.assertEqual((q4k_dq["backend"], q4k_dq["reason"]), ("cpu", "fallback_missing_kernel"))
        why = next(r for r in q4k_dq["rejected"] if r["backend"] == "vulkan")
        self.assertEqual(why["reason"], "dtype_unsupported")
        self.assertIn("Q4_K", why["detail"])
        for name in ("q8", "q4k"):
            self.assertEqual(preferred[name]["stats"], cpu[name]["stats"], name)
        r = run(["stats", path, "q4k", "--backend", "vulkan"])
        self.assertEqual(r.code, 4)
        self.assertIn("dequantize.ggml on Q4_K", r.out)
        self.assertIn("could not be served by --backend vulkan", r.err)


class VulkanUnavailable(unittest.TestCase):
    """The reasons given when Vulkan cannot run here: no loader, no driver. Needs only the plugin."""

    @classmethod
    def setUpClass(cls):
        if not VULKAN:
            if REQUIRED:
                raise AssertionError("TM_REQUIRE_VULKAN=1 but the Vulkan plugin was not built")
            raise unittest.SkipTest("the Vulkan plugin was not built")

    def entry(self, env):
        r = run(["backends", "--json"], env_extra=env)
        return next(b for b in r.json()["backends"] if b["name"] == "vulkan")

    def test_missing_loader(self):
        e = self.entry({"TENSORMORPH_VULKAN_LOADER": "libvulkan-absent.so.1"})
        self.assertFalse(e["available"])
        self.assertEqual(e["reason"], "missing_dependency")
        self.assertIn("libvulkan-absent.so.1", e["detail"])

    def test_missing_driver_is_reported_and_refuses_a_strict_request(self):
        env = {"VK_ICD_FILENAMES": "/nonexistent/icd.json", "VK_DRIVER_FILES": "/nonexistent/icd.json"}
        e = self.entry(env)
        self.assertFalse(e["available"])
        self.assertEqual(e["reason"], "no_driver")
        self.assertIn("mesa-vulkan-drivers", e["detail"])
        path = os.path.join(tempfile.mkdtemp(), "x.f32")
        with open(path, "wb") as f:
            f.write(struct.pack("<4f", 1, 2, 3, 4))
        r = run(["stats", "--raw", path, "--dtype", "f32", "--backend", "vulkan"], env_extra=env)
        self.assertEqual(r.code, 4)
        self.assertIn("unavailable:no_driver", r.err)
        r = run(["stats", "--raw", path, "--dtype", "f32", "--json"], env_extra=env)
        self.assertEqual(r.code, 0, r.err)  # nothing asked for Vulkan: the CPU serves


if __name__ == "__main__":
    unittest.main()
