"""The CUDA and HIP plugins and kernel self-test admission through the CLI, on a machine without those
GPUs (CI): both plugins listed with the runtime's reason, `--backend cuda` failing with it, `--prefer cuda`
falling back op by op with the reason in the placement report; a deliberately wrong kernel (test plugin
testwrong) refused by its self-test while the statistics stay the CPU's; `backends --self-test` passing for
the host-emulated CUDA/HIP kernels (gpuemu) and failing, naming the kernel, for testwrong.

On a machine with a CUDA or HIP device the unavailable-reason cases skip with a note (scripts/device-check
runs the GPU parity suite there instead)."""
import os
import random
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import PLUGIN_DIR, run  # noqa: E402
from test_cli import safetensors_file  # noqa: E402

TESTS_DIR = os.path.dirname(PLUGIN_DIR)
WRONG_DIR = os.path.join(TESTS_DIR, "plugins-wrong")
EMULATED_DIR = os.path.join(TESTS_DIR, "gpu-emulated")
REASONS = ("no_driver", "no_device", "driver_too_old", "missing_dependency")


def entries():
    return {b["name"]: b for b in run(["backends", "--json"]).json()["backends"]}


class GpuPluginsCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-gpu-")
        rng = random.Random(3)
        n = 70000
        f32 = [rng.gauss(0, 1) for _ in range(n)]
        u8 = [rng.randrange(256) for _ in range(n)]
        cls.path = safetensors_file(os.path.join(cls.dir, "m.safetensors"), [
            ("a.f32", "F32", [n], struct.pack("<%df" % n, *f32)),
            ("b.u8", "U8", [n], bytes(u8)),
        ])
        cls.backends = entries()

    def gpu(self, name):
        b = self.backends.get(name)
        if b is None:
            self.skipTest(name + " plugin not built here (toolkit absent)")
        if b["available"]:
            self.skipTest(name + " has a device here: scripts/device-check tests it")
        return b

    def test_plugins_are_listed_unavailable_with_the_runtimes_reason_and_level_compiled(self):
        listed = [name for name in ("cuda", "hip") if name in self.backends]
        if not listed:
            self.skipTest("neither plugin is built here (the sanitizer build, or no toolkit)")
        for name in listed:
            with self.subTest(name):
                b = self.gpu(name)
                self.assertIn(b["reason"], REASONS, b)
                self.assertTrue(b["detail"], b)
                self.assertEqual(b["parity_levels"]["stats.moments"], "compiled")
                self.assertEqual(b["parity_levels"]["dequantize.ggml.Q4_K"], "compiled")
                self.assertEqual(b["parity_levels"]["dequantize.ggml.IQ2_XXS"], "not-implemented")
        text = run(["backends"]).out
        self.assertIn("compiled = built and tested on the host (emulated), never run on this hardware in CI", text)

    def test_strict_request_fails_with_the_reason_and_prefer_falls_back_reported(self):
        b = self.gpu("cuda")
        r = run(["stats", self.path, "a.f32", "--backend", "cuda"])
        self.assertEqual(r.code, 4, r.err)
        self.assertIn("unavailable:" + b["reason"], r.err)
        self.assertIn("nothing was substituted", r.err)
        r = run(["stats", self.path, "--json", "--prefer", "cuda"])
        self.assertEqual(r.code, 0, r.err)
        cpu = run(["stats", self.path, "--json", "--backend", "cpu"]).json()
        for got, want in zip(r.json()["tensors"], cpu["tensors"]):
            self.assertEqual(got["stats"], want["stats"])
            for p in got["placement"]:
                self.assertEqual(p["backend"], "cpu", p)
                if p["reason"] == "derived_from_bitpattern_histogram":
                    continue  # computed from another op's counts, not placed itself
                self.assertEqual(p["reason"], "fallback_missing_kernel", p)
                cuda = [x for x in p["rejected"] if x["backend"] == "cuda"]
                self.assertEqual(cuda[0]["reason"], "unavailable:" + b["reason"], p)
        r = run(["stats", self.path, "a.f32", "--prefer", "cuda"])
        self.assertIn("fell back: stats.moments to cpu (no preferred backend could serve it)", r.out)

    def test_wrong_kernel_is_refused_by_its_self_test_and_results_stay_the_cpus(self):
        env = {"TENSORMORPH_PLUGIN_DIR": WRONG_DIR}
        r = run(["stats", self.path, "b.u8", "--json", "--prefer", "testwrong"], env_extra=env)
        self.assertEqual(r.code, 0, r.err)
        t = r.json()["tensors"][0]
        cpu = run(["stats", self.path, "b.u8", "--json", "--backend", "cpu"]).json()["tensors"][0]
        self.assertEqual(t["stats"], cpu["stats"])
        moments = next(p for p in t["placement"] if p["op"] == "stats.moments")
        self.assertEqual(moments["backend"], "cpu")
        refused = [x for x in moments["rejected"] if x["backend"] == "testwrong"]
        self.assertEqual(refused[0]["reason"], "self_test_failed", moments)
        self.assertIn("differs from the CPU", refused[0]["detail"])
        # Its correct kernel still serves: the bit-pattern counts behind the u8 histogram.
        bits = [p for p in t["placement"] if p["op"] == "stats.bitpattern_histogram"]
        self.assertTrue(bits and bits[0]["backend"] == "testwrong", t["placement"])
        r = run(["stats", self.path, "b.u8", "--backend", "testwrong"], env_extra=env)
        self.assertEqual(r.code, 4)
        self.assertIn("failed its self-test", r.err)
        # The default text says it in one line; --explain gives every op with the backends passed over.
        r = run(["stats", self.path, "b.u8", "--prefer", "testwrong"], env_extra=env)
        line = [x for x in r.out.splitlines() if x.startswith("placement")]
        self.assertEqual(len(line), 1, r.out)
        self.assertIn("fell back: stats.moments to cpu (testwrong failed its self-test)", line[0])
        self.assertRegex(line[0], r"testwrong( \(software adapter\))? \([^)]*stats\.bitpattern_histogram")
        self.assertNotIn("rejected", r.out)
        r = run(["stats", self.path, "b.u8", "--prefer", "testwrong", "--explain"], env_extra=env)
        self.assertIn("rejected testwrong", r.out)
        self.assertIn("self_test_failed", r.out)

    def test_backends_self_test_lists_every_verdict_and_fails_on_a_wrong_kernel(self):
        r = run(["backends", "--self-test", "--json"], env_extra={"TENSORMORPH_PLUGIN_DIR": EMULATED_DIR})
        self.assertEqual(r.code, 0, r.err)
        verdicts = [v for v in r.json()["self_tests"] if v["backend"] == "gpuemu"]
        self.assertGreaterEqual(len(verdicts), 40)  # every kernel x every dtype or format it declares
        self.assertEqual({v["status"] for v in verdicts}, {"passed"}, [v for v in verdicts if v["status"] != "passed"])
        r = run(["backends", "--self-test"], env_extra={"TENSORMORPH_PLUGIN_DIR": WRONG_DIR})
        self.assertEqual(r.code, 4, r.out + r.err)
        self.assertIn("self-test testwrong/testwrong device stats.moments on u8: failed", r.out)
        self.assertIn("failed its self-test", r.err)

    def test_stem_products_decode_their_chunks_on_the_gpu_backend_with_the_same_numbers(self):
        stem = os.path.join(self.dir, "stem")
        r = run(["stem", "demo", "--out", stem, "--scan", "6,5", "--detector", "24", "--files", "2"])
        self.assertEqual(r.code, 0, r.err)
        master = os.path.join(stem, "demo_master.h5")
        env = {"TENSORMORPH_PLUGIN_DIR": EMULATED_DIR}
        outs = {}
        for backend in ("cpu", "gpuemu"):
            out = os.path.join(self.dir, backend + ".npy")
            r = run(["stem", "mask", master, "--center", "12,12", "--inner", "2", "--outer", "8", "-o", out, "--json",
                     "--backend", backend], env_extra=env)
            self.assertEqual(r.code, 0, r.err)
            placed = {p["op"]: p["backend"] for p in r.json()["placement"]}
            self.assertEqual(placed, {"stem.pattern_reduce": backend, "stem.frame_sums": backend, "decode.bitshuffle_lz4": backend})
            # On the device backend the frames are decoded into its memory and read there, never on the host.
            self.assertEqual(r.json()["provenance"]["frames_on_device"]["resident"], backend == "gpuemu")
            with open(out, "rb") as f:
                outs[backend] = f.read()
        self.assertEqual(outs["gpuemu"], outs["cpu"])  # the same .npy bytes
        # --prefer: decoding goes where the preference says, like every other op.
        r = run(["stem", "mask", master, "--center", "12,12", "--inner", "2", "--outer", "8", "-o",
                 os.path.join(self.dir, "t.npy"), "--json", "--prefer", "gpuemu"], env_extra=env)
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual({p["op"]: p["backend"] for p in r.json()["placement"]}["decode.bitshuffle_lz4"], "gpuemu")


if __name__ == "__main__":
    unittest.main()
