"""End-to-end tests of the tensormorph CLI: help, JSON output, every bad-input path and its exact
error, constraints from flags and settings, approximation consent, calibration."""
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import run  # noqa: E402


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class Help(unittest.TestCase):
    def test_help_on_every_subcommand(self):
        for sub in (["stats"], ["backends"], ["config"], ["config", "get"], ["config", "set"], ["config", "unset"],
                    ["config", "list"], ["calibrate"], ["demo"], ["info"], ["ls"], ["export"], []):
            r = run(sub + ["--help"])
            self.assertEqual(r.code, 0, sub)
            self.assertIn("--help", r.out, sub)

    def test_every_subcommand_help_ends_with_an_example_of_itself(self):
        """Issue 51: each --help text gives one example, a command line of that very subcommand."""
        def subcommands(path):
            out = run(path + ["--help"]).out
            section = out.split("Subcommands:\n", 1)[1].split("\n\n", 1)[0] if "Subcommands:" in out else ""
            return [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()]

        todo, seen = [[]], 0
        while todo:
            path = todo.pop()
            for name in subcommands(path):
                sub = path + [name]
                todo.append(sub)
                r = run(sub + ["--help"])
                self.assertEqual(r.code, 0, sub)
                tail = r.out.rstrip("\n").splitlines()[-2:]
                self.assertEqual(tail[0], "Example:", (sub, r.out[-300:]))
                self.assertTrue((tail[1] + " ").startswith("  tensormorph " + " ".join(sub) + " "), (sub, tail))
                seen += 1
        self.assertGreater(seen, 35)

    def test_no_subcommand_is_a_usage_error(self):
        r = run([])
        self.assertEqual(r.code, 2)
        self.assertIn("tensormorph: error: A subcommand is required", r.err)

    def test_option_errors_are_exit_2_with_the_prefix(self):
        # CLI11's own errors exited 104..109 without the prefix every other error has.
        d = tempfile.mkdtemp(prefix="tm-usage-")
        try:
            raw = write(os.path.join(d, "x.bin"), struct.pack("<4f", 1, 2, 3, 4))
            cases = [
                (["stats", "--bogus"], "argument was not expected: --bogus"),
                (["stem", "virtual"], "A subcommand is required"),
                (["stats", "--raw", raw, "--dtype", "f32", "--threads", "nine"], "--threads"),
                # accepted before: threads without bound, a negative budget (read as 2^64 - 5), empty and zero shapes
                (["stats", "--raw", raw, "--dtype", "f32", "--threads", "100000"], "--threads: Value 100000 not in range 1 to 4096"),
                (["stats", "--raw", raw, "--dtype", "f32", "--threads", "0"], "not in range 1 to 4096"),
                (["stem", "demo", "--out", d, "--threads", "100000"], "not in range 1 to 4096"),
                (["stats", "--raw", raw, "--dtype", "f32", "--memory-budget", "-5"], "--memory-budget: expected a byte count"),
                (["stats", "--raw", raw, "--dtype", "f32", "--memory-budget", "0"], "--memory-budget must be more than 0 bytes"),
                (["stats", "--raw", raw, "--dtype", "f32", "--shape", ""], "--shape: expected dimensions"),
                (["stats", "--raw", raw, "--dtype", "f32", "--shape", "0"], "--shape: dimension 0 is '0', expected a positive integer"),
                (["stats", "--raw", raw, "--dtype", "f32", "--shape", "2,0"], "dimension 1 is '0'"),
                (["config", "set", "compute.threads", "-3"], "setting compute.threads must be an integer 1..4096, got '-3'"),
                (["config", "set", "compute.threads", "0"], "must be an integer 1..4096"),
                (["config", "set", "compute.memory_budget", "-5"], "setting compute.memory_budget: expected a byte count"),
                (["config", "set", "compute.split", "maybe"], "setting compute.split: expected auto, on or off, got 'maybe'"),
                (["config", "set", "stem.resident_device_memory", "bogus"],
                 "setting stem.resident_device_memory: expected a byte count like 1048576 or 512M, got 'bogus'"),
                (["stats", "--raw", raw, "--dtype", "f32", "--split", "yes"], "--split: expected auto, on or off, got 'yes'"),
            ]
            for args, want in cases:
                r = run(args, config_home=d)
                self.assertEqual(r.code, 2, f"{args}: {r.err}")
                self.assertTrue(r.err.startswith("tensormorph: error: "), f"{args}: {r.err}")
                self.assertIn(want, r.err, args)
            self.assertFalse(os.path.exists(os.path.join(d, "tensormorph", "settings.json")))  # nothing was stored
            self.assertEqual(run(["stats", "--raw", raw, "--dtype", "f32", "--threads", "4096", "--shape", "2x2"]).code, 0)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Stats(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-cli-")

    def f32_file(self, values, name="t.f32"):
        return write(os.path.join(self.dir, name), struct.pack("<%df" % len(values), *values))

    def test_stats_json_has_stats_and_placement(self):
        path = self.f32_file([1.0, -2.0, 0.0, float("nan"), float("inf"), 3.5])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--shape", "2,3", "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual(doc["shape"], [2, 3])
        s = doc["stats"]
        self.assertEqual((s["count"], s["finite_count"], s["nan_count"], s["inf_count"], s["zero_count"]), (6, 4, 1, 1, 1))
        self.assertEqual((s["min"], s["max"], s["abs_max"], s["sum"]), (-2.0, 3.5, 3.5, 2.5))
        self.assertAlmostEqual(s["mean"], 0.625, places=15)
        self.assertEqual(sum(s["histogram"]["counts"]), 4)
        self.assertEqual(s["quantiles"]["method"], "radix_select")
        self.assertEqual([q["value"] for q in s["quantiles"]["values"]][2], 0.5)  # median of -2,0,1,3.5
        ops = [p["op"] for p in doc["placement"]]
        self.assertEqual(ops, ["stats.moments", "stats.histogram", "stats.quantiles"])
        for p in doc["placement"]:
            self.assertEqual(p["backend"], "cpu")
            self.assertIn(p["reason"], ("sole_supporter", "cheapest"))
            self.assertEqual(p["bytes_transferred"], 0)
            self.assertFalse(p["software_adapter"])

    def test_human_table_lists_placement(self):
        path = self.f32_file([1.0, 2.0])
        r = run(["stats", "--raw", path, "--dtype", "f32"])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("placement: cpu (stats.moments", r.out)
        self.assertIn("nothing fell back", r.out)
        self.assertNotIn("rejected", r.out)  # the full placement is --explain's
        r = run(["stats", "--raw", path, "--dtype", "f32", "--explain"])
        self.assertEqual(r.code, 0, r.err)
        self.assertRegex(r.out, r"placement:\n  stats\.moments +cpu/")

    def test_unknown_backend_names_are_refused_listing_the_known_ones(self):
        path = self.f32_file([1.0, 2.0])
        for flag in ("--prefer", "--never", "--backend"):
            r = run(["stats", "--raw", path, "--dtype", "f32", flag, "vulcan"])
            self.assertEqual(r.code, 2, (flag, r.err))
            self.assertIn(flag + ": unknown backend 'vulcan' (known: ", r.err)
            self.assertIn("vulkan", r.err)
        # A backend the project knows but this machine lacks may still be preferred or excluded.
        r = run(["stats", "--raw", path, "--dtype", "f32", "--prefer", "metal", "--never", "metal"])
        self.assertEqual(r.code, 0, r.err)
        cfg = tempfile.mkdtemp(prefix="tm-cfg-")
        r = run(["config", "set", "compute.never", "cpu,vulcan"], config_home=cfg)
        self.assertEqual(r.code, 2, r.err)
        self.assertIn("compute.never: unknown backend 'vulcan'", r.err)
        self.assertEqual(run(["config", "set", "compute.prefer", "metal"], config_home=cfg).code, 0)
        # A name stored before this check is refused when a command reads it, naming the setting and the fix.
        with open(os.path.join(cfg, "tensormorph", "settings.json"), "w") as f:
            json.dump({"compute.prefer": "vulcan"}, f)
        r = run(["stats", "--raw", path, "--dtype", "f32"], config_home=cfg)
        self.assertEqual(r.code, 2, r.err)
        self.assertIn("setting compute.prefer (change it with tensormorph config set or unset): unknown backend 'vulcan'", r.err)
        self.assertEqual(run(["config", "unset", "compute.prefer"], config_home=cfg).code, 0)
        self.assertEqual(run(["stats", "--raw", path, "--dtype", "f32"], config_home=cfg).code, 0)

    def test_integer_extremes_are_exact(self):
        path = write(os.path.join(self.dir, "t.i64"), struct.pack("<3q", 2**63 - 1, 2**63 - 2, -(2**63)))
        r = run(["stats", "--raw", path, "--dtype", "i64", "--json"])
        self.assertEqual(r.code, 0, r.err)
        exact = r.json()["stats"]["exact"]
        self.assertEqual(exact, {"min": str(-(2**63)), "max": str(2**63 - 1), "sum": str(2**63 - 3)})

    def test_offset_selects_the_tensor(self):
        path = write(os.path.join(self.dir, "o.bin"), b"HEADER!!" + struct.pack("<2f", 4.0, 6.0))
        r = run(["stats", "--raw", path, "--dtype", "f32", "--offset", "8", "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["stats"]["mean"], 5.0)

    # --- bad input: each path has its exact error, file and field named, and a distinct exit code ---
    def test_missing_file(self):
        r = run(["stats", "--raw", os.path.join(self.dir, "nope.bin"), "--dtype", "f32"])
        self.assertEqual(r.code, 6)
        self.assertIn("nope.bin: cannot open: No such file or directory", r.err)

    def test_directory_instead_of_file(self):
        r = run(["stats", "--raw", self.dir, "--dtype", "f32"])
        self.assertEqual(r.code, 6)
        self.assertIn("not a regular file", r.err)

    def test_fifos_and_symlink_loops_are_io_errors_not_hangs(self):
        # Each of these blocked forever on a FIFO (opening one for reading waits for a writer), and a
        # symbolic-link loop exited 70 (filesystem_error) or said "no such file".
        fifo = os.path.join(self.dir, "fifo")
        os.mkfifo(fifo)
        loop = os.path.join(self.dir, "loop1")
        os.symlink(os.path.join(self.dir, "loop2"), loop)
        os.symlink(loop, os.path.join(self.dir, "loop2"))
        run(["demo", "--out", os.path.join(self.dir, "demo"), "--layers", "1", "--hidden", "64", "--intermediate", "64",
             "--vocab", "64", "--heads", "2", "--kv-heads", "2", "--shards", "1"])
        demo = os.path.join(self.dir, "demo")
        self.assertTrue(os.path.isfile(os.path.join(demo, "config.json")))
        for target, why in ((fifo, "not a regular file"), (loop, "symbolic links form a loop")):
            for args in (["stats", "--raw", target, "--dtype", "f32"], ["stats", target], ["index", target],
                         ["info", target], ["stem", "inspect", target], ["stats", demo, "--index", target]):
                r = run(args, timeout=20)
                self.assertEqual(r.code, 6, f"{args}: {r.err}")
                self.assertIn(target if "--raw" not in args else os.path.basename(target), r.err)
                if "--raw" not in args or target == fifo:
                    self.assertIn(why, r.err, args)
        os.remove(fifo)
        os.remove(loop)
        os.remove(os.path.join(self.dir, "loop2"))

    def test_truncated_file(self):
        path = self.f32_file([1.0] * 10)
        r = run(["stats", "--raw", path, "--dtype", "f32", "--shape", "4,4"])
        self.assertEqual(r.code, 3)
        self.assertIn(path + ": shape needs 64 bytes of f32 from offset 0, but the file has only 40 bytes there", r.err)

    def test_offset_past_end(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--offset", "100"])
        self.assertEqual(r.code, 3)
        self.assertIn("--offset 100 is past the end of the file (4 bytes)", r.err)

    def test_partial_element_without_shape(self):
        path = write(os.path.join(self.dir, "odd.bin"), b"1234567")
        r = run(["stats", "--raw", path, "--dtype", "f32"])
        self.assertEqual(r.code, 3)
        self.assertIn("7 bytes after offset 0 are not a whole number of f32 elements", r.err)

    def test_unknown_dtype(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f17"])
        self.assertEqual(r.code, 2)
        self.assertIn("--dtype: unknown type 'f17' (known: f64, f32, f16, bf16", r.err)

    def test_bad_shape_field(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--shape", "1,-3"])
        self.assertEqual(r.code, 2)
        self.assertIn("--shape: dimension 1 is '-3', expected a positive integer", r.err)

    def test_shape_that_overflows(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--shape", "4294967296,4294967296,16"])
        self.assertEqual(r.code, 2)
        self.assertIn("the element count overflows 64 bits at dimension 1", r.err)

    def test_shape_bytes_that_overflow(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f64", "--shape", "4294967296,1073741824"])
        self.assertEqual(r.code, 2)
        self.assertIn("byte size overflows 64 bits", r.err)

    def test_bad_quantile_and_range(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--quantiles", "0.5,1.5"])
        self.assertEqual(r.code, 2)
        self.assertIn("--quantiles: 1.5 is outside [0, 1]", r.err)
        r = run(["stats", "--raw", path, "--dtype", "f32", "--hist-range", "2,1"])
        self.assertEqual(r.code, 2)
        self.assertIn("histogram range must be finite with lo <= hi", r.err)

    def test_explicit_histogram_edges(self):
        path = self.f32_file([-5.0, 0.1, 0.2, 1.5, 2.0, 9.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--hist-edges", "0,1,2", "--json"])
        self.assertEqual(r.code, 0, r.err)
        h = r.json()["stats"]["histogram"]
        self.assertEqual((h["edges"], h["counts"], h["below"], h["above"]), ([0, 1, 2], [2, 2], 1, 1))
        r = run(["stats", "--raw", path, "--dtype", "f32", "--hist-edges", "0,2,1"])
        self.assertEqual(r.code, 2)
        self.assertIn("histogram edges: edge 2 must be finite and greater than the one before", r.err)

    def test_too_many_quantiles(self):
        path = self.f32_file([1.0, 2.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--quantiles", ",".join(["0.5"] * 17)])
        self.assertEqual(r.code, 2)
        self.assertIn("at most 16 quantile probabilities per request, got 17", r.err)

    def test_bad_memory_budget(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--memory-budget", "12Q"])
        self.assertEqual(r.code, 2)
        self.assertIn("--memory-budget: unknown size suffix 'Q'", r.err)

    # --- constraints and honesty ---
    def test_strict_backend_that_is_unavailable(self):
        path = write(os.path.join(self.dir, "u8.bin"), bytes(range(200)))
        r = run(["stats", "--raw", path, "--dtype", "u8", "--backend", "testabsent"], plugins=True)
        self.assertEqual(r.code, 4)
        self.assertIn("--backend testabsent cannot serve it (unavailable:no_driver", r.err)
        self.assertIn("nothing was substituted", r.err)

    def test_strict_backend_that_is_not_installed(self):
        path = self.f32_file([1.0])
        r = run(["stats", "--raw", path, "--dtype", "f32", "--backend", "metal"])
        self.assertEqual(r.code, 4)
        self.assertIn("backend 'metal' is not installed", r.err)

    def test_strict_plugin_backend_serves_its_kernel_and_refuses_others(self):
        path = write(os.path.join(self.dir, "u8.bin"), bytes(range(200)))
        r = run(["stats", "--raw", path, "--dtype", "u8", "--backend", "testaccel", "--no-histogram", "--no-quantiles",
                 "--json"], plugins=True)
        self.assertEqual(r.code, 0, r.err)
        p = r.json()["placement"][0]
        self.assertEqual((p["backend"], p["reason"], p["device_kind"], p["bytes_transferred"]),
                         ("testaccel", "user_pinned", "gpu", 200))
        self.assertEqual(r.json()["stats"]["exact"]["sum"], str(sum(range(200))))
        r = run(["stats", "--raw", path, "--dtype", "u8", "--backend", "testaccel"], plugins=True)
        self.assertEqual(r.code, 4)
        self.assertIn("stats.bitpattern_histogram on u8", r.err)

    def test_settings_prefer_and_never(self):
        cfg = tempfile.mkdtemp(prefix="tm-cfg-")
        self.assertEqual(run(["config", "set", "compute.prefer", "testaccel"], config_home=cfg).code, 0)
        r = run(["config", "get", "compute.prefer"], config_home=cfg)
        self.assertEqual(r.out.strip(), "testaccel")
        r = run(["config", "get", "compute.prefer", "--json"], config_home=cfg)
        self.assertEqual(r.json(), {"key": "compute.prefer", "value": "testaccel"})
        path = write(os.path.join(self.dir, "u8.bin"), bytes(range(100)))
        r = run(["stats", "--raw", path, "--dtype", "u8", "--json"], config_home=cfg, plugins=True)
        self.assertEqual(r.code, 0, r.err)
        placement = {p["op"]: p for p in r.json()["placement"]}
        self.assertEqual(placement["stats.moments"]["backend"], "testaccel")
        self.assertEqual(placement["stats.moments"]["reason"], "user_preferred")
        self.assertEqual(placement["stats.bitpattern_histogram"]["backend"], "cpu")
        self.assertEqual(placement["stats.bitpattern_histogram"]["reason"], "fallback_missing_kernel")
        # 8/16-bit dtypes: the histogram is binned from the exact pattern counts, and the report says so.
        self.assertEqual(placement["stats.histogram"]["reason"], "derived_from_bitpattern_histogram")
        self.assertEqual(run(["config", "set", "compute.never", "cpu"], config_home=cfg).code, 0)
        r = run(["stats", "--raw", path, "--dtype", "u8"], config_home=cfg, plugins=True)
        self.assertEqual(r.code, 4)
        self.assertIn("cpu: disabled_by_policy", r.err)
        self.assertEqual(run(["config", "unset", "compute.never"], config_home=cfg).code, 0)
        self.assertEqual(run(["stats", "--raw", path, "--dtype", "u8"], config_home=cfg, plugins=True).code, 0)

    def test_bad_threads_setting(self):
        cfg = tempfile.mkdtemp(prefix="tm-cfg-")
        self.assertEqual(run(["config", "set", "compute.threads", "2K"], config_home=cfg).code, 2)  # refused when set
        os.makedirs(os.path.join(cfg, "tensormorph"))
        write(os.path.join(cfg, "tensormorph", "settings.json"), b'{"compute.threads": "2K"}')  # and when read
        r = run(["stats", "--raw", self.f32_file([1.0]), "--dtype", "f32"], config_home=cfg)
        self.assertEqual(r.code, 2)
        self.assertIn("setting compute.threads must be an integer 1..4096, got '2K'", r.err)

    def test_unknown_setting_and_corrupt_settings(self):
        cfg = tempfile.mkdtemp(prefix="tm-cfg-")
        r = run(["config", "set", "compute.prefered", "x"], config_home=cfg)
        self.assertEqual(r.code, 2)
        self.assertIn("unknown setting 'compute.prefered'", r.err)
        os.makedirs(os.path.join(cfg, "tensormorph"))
        write(os.path.join(cfg, "tensormorph", "settings.json"), b"{oops")
        r = run(["backends"], config_home=cfg)
        self.assertEqual(r.code, 3)
        self.assertIn("settings.json: not valid JSON", r.err)

    def test_exact_quantiles_beyond_budget_need_consent(self):
        path = self.f32_file([float(i % 1000) for i in range(300000)])
        args = ["stats", "--raw", path, "--dtype", "f32", "--memory-budget", "600K", "--no-histogram"]
        r = run(args)
        self.assertEqual(r.code, 5)
        self.assertIn("only an approximation can serve this request", r.err)
        self.assertIn("over_memory_budget", r.err)
        self.assertIn("--allow-approx", r.err)
        self.assertIn("quantiles.bitpattern_sketch", r.err)
        r = run(args + ["--allow-approx", "quantiles.bitpattern_sketch", "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertFalse(doc["stats"]["quantiles"]["exact"])
        q = doc["placement"][-1]
        self.assertEqual(q["consent"], "--allow-approx quantiles.bitpattern_sketch")
        median = doc["stats"]["quantiles"]["values"][2]
        self.assertLessEqual(median["lo"], 499.5)
        self.assertGreaterEqual(median["hi"], 499.5)


def safetensors_file(path, tensors, metadata=None):
    """Writes a safetensors file: tensors is a list of (name, dtype, shape, raw bytes)."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    return write(path, struct.pack("<Q", len(text)) + text + b"".join(blobs))


class PluginPlacement(unittest.TestCase):
    """The seed case of per-operation fallback: the testaccel plugin decodes Q8_0 blocks only. Preferring it,
    a GGUF holding Q8_0 and Q4_0 tensors gets its Q8_0 dequantization on the plugin and the Q4_0 one on the CPU,
    the report naming why, and the same values either way."""

    def setUp(self):
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
        from gguf_write import write_gguf
        self.dir = tempfile.mkdtemp(prefix="tm-fallback-")
        blocks = 64
        q8 = bytearray()
        q4 = bytearray()
        for b in range(blocks):  # scales 0.5 .. (normal halves), codes spanning the range
            q8 += struct.pack("<e", 0.5 + b / 64) + bytes((i * 7 + b) % 256 for i in range(32))
            q4 += struct.pack("<e", 0.25 + b / 128) + bytes((i * 11 + b) % 256 for i in range(16))
        self.path = os.path.join(self.dir, "mixed.gguf")
        write_gguf(self.path, [("general.architecture", "STRING", "test")],
                   [("q8", "Q8_0", [32 * blocks], bytes(q8)), ("q4", "Q4_0", [32 * blocks], bytes(q4))])

    def stats(self, *extra):
        r = run(["stats", self.path, "--json", *extra], plugins=True)
        self.assertEqual(r.code, 0, r.err)
        return {t["name"]: t for t in r.json()["tensors"]}

    def test_one_block_format_on_the_plugin_the_others_fall_back(self):
        preferred = self.stats("--prefer", "testaccel")
        dq8 = next(p for p in preferred["q8"]["placement"] if p["op"] == "dequantize.ggml")
        dq4 = next(p for p in preferred["q4"]["placement"] if p["op"] == "dequantize.ggml")
        self.assertEqual((dq8["backend"], dq8["reason"]), ("testaccel", "user_preferred"))
        self.assertEqual((dq4["backend"], dq4["reason"]), ("cpu", "fallback_missing_kernel"))
        why = [c for c in dq4["rejected"] if c["backend"] == "testaccel"]
        self.assertEqual(len(why), 1, dq4)
        self.assertIn("Q4_0", why[0]["detail"])
        plain = self.stats("--backend", "cpu")
        for name in ("q8", "q4"):
            self.assertEqual(preferred[name]["stats"], plain[name]["stats"], name)


class CheckpointStats(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-ckpt-")
        self.path = safetensors_file(os.path.join(self.dir, "m.safetensors"), [
            ("w", "F32", [2, 2], struct.pack("<4f", 1.0, -3.0, 0.5, float("nan"))),
            ("ids", "I64", [3], struct.pack("<3q", 5, -7, 2**62)),
            ("scales", "F8_E8M0", [2], b"\x7f\x80"),
        ], {"format": "pt"})

    def test_every_tensor_or_the_named_ones(self):
        r = run(["stats", self.path, "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual(doc["format"], "safetensors")
        by_name = {t["name"]: t for t in doc["tensors"]}
        self.assertEqual(by_name["w"]["stats"]["nan_count"], 1)
        self.assertEqual((by_name["w"]["stats"]["min"], by_name["w"]["stats"]["max"]), (-3.0, 1.0))
        self.assertEqual(by_name["ids"]["stats"]["exact"]["sum"], str(5 - 7 + 2**62))
        self.assertIsNone(by_name["scales"]["stats"])  # recognised, no kernel yet: said so, not misread
        self.assertIn("no kernel yet for safetensors dtype F8_E8M0", by_name["scales"]["unavailable"])
        r = run(["stats", self.path, "w", "--json"])
        self.assertEqual([t["name"] for t in r.json()["tensors"]], ["w"])

    def test_bad_requests_and_files(self):
        r = run(["stats", self.path, "nope"])
        self.assertEqual(r.code, 2)
        self.assertIn("no tensor named 'nope'", r.err)
        r = run(["stats", self.path, "--raw", self.path, "--dtype", "u8"])
        self.assertEqual(r.code, 2)
        self.assertIn("give either a checkpoint PATH or --raw FILE", r.err)
        junk = write(os.path.join(self.dir, "junk.bin"), b"0123456789abcdef")
        r = run(["stats", junk])
        self.assertEqual(r.code, 3)
        self.assertIn("neither GGUF (magic 'GGUF'), safetensors", r.err)
        lying = write(os.path.join(self.dir, "lying.safetensors"), open(self.path, "rb").read()[:-4])
        r = run(["stats", lying])
        self.assertEqual(r.code, 3)
        self.assertIn("(file truncated?)", r.err)


class Export(unittest.TestCase):
    def test_native_widened_and_bool(self):
        import numpy as np
        d = tempfile.mkdtemp(prefix="tm-export-")
        path = safetensors_file(os.path.join(d, "m.safetensors"), [
            ("h", "F16", [5], struct.pack("<5e", 1.0, -2.5, 0.0, 65504.0, 6e-08)),
            ("b", "BF16", [1, 2], struct.pack("<2H", 0x3F80, 0x7FC0)),
            ("m", "BOOL", [3], b"\x00\x07\x01"),
            ("q", "F8_E8M0", [1], b"\x7f"),
        ])
        out = os.path.join(d, "o.npy")
        self.assertEqual(run(["export", path, "h", "-o", out]).code, 0)
        a = np.load(out)
        self.assertEqual((a.dtype, a.shape), (np.float16, (5,)))
        self.assertEqual(a.tolist(), np.array([1.0, -2.5, 0.0, 65504.0, 6e-08], dtype=np.float16).tolist())
        r = run(["export", path, "b", "-o", out, "--json"])
        self.assertTrue(r.json()["widened_to_float32"])
        a = np.load(out)
        self.assertEqual((a.dtype, a.shape, a[0, 0]), (np.float32, (1, 2), 1.0))
        self.assertTrue(np.isnan(a[0, 1]))
        self.assertEqual(run(["export", path, "m", "-o", out]).code, 0)
        self.assertEqual(np.load(out).tolist(), [False, True, True])
        r = run(["export", path, "q", "-o", out])
        self.assertEqual(r.code, 4)
        self.assertIn("no kernel yet for safetensors dtype F8_E8M0", r.err)
        r = run(["export", path, "zz", "-o", out])
        self.assertEqual(r.code, 2)
        self.assertIn("no tensor named 'zz'", r.err)
        r = run(["export", path, "h", "-o", os.path.join(d, "no-such-dir", "o.npy")])
        self.assertEqual(r.code, 6)
        self.assertIn("no-such-dir/o.npy: cannot write", r.err)


class ShardedCheckpoints(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-shards-")
        self.a = safetensors_file(os.path.join(self.dir, "model-00001-of-00002.safetensors"),
                                  [("x", "F32", [2], struct.pack("<2f", 1.0, 2.0))])
        self.b = safetensors_file(os.path.join(self.dir, "model-00002-of-00002.safetensors"),
                                  [("y", "BF16", [2], struct.pack("<2H", 0x3F80, 0xC000))])
        self.index = os.path.join(self.dir, "model.safetensors.index.json")
        self.write_index({"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}, 12)

    def write_index(self, weight_map, total_size):
        with open(self.index, "w") as f:
            json.dump({"metadata": {"total_size": total_size}, "weight_map": weight_map}, f)

    def names(self, path):
        r = run(["stats", path, "--json"])
        self.assertEqual(r.code, 0, r.err)
        return sorted(t["name"] for t in r.json()["tensors"])

    def test_directory_and_index_open_every_shard(self):
        self.assertEqual(self.names(self.dir), ["x", "y"])
        self.assertEqual(self.names(self.index), ["x", "y"])
        r = run(["stats", self.index, "y", "--json"])
        self.assertEqual(r.json()["tensors"][0]["stats"]["min"], -2.0)

    def test_missing_and_inconsistent_shards_are_named(self):
        os.rename(self.b, self.b + ".away")
        r = run(["stats", self.index])
        self.assertEqual(r.code, 3)
        self.assertIn("shard model-00002-of-00002.safetensors (listed in weight_map) is missing", r.err)
        os.rename(self.b + ".away", self.b)
        self.write_index({"x": "model-00002-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}, 12)
        r = run(["stats", self.index])
        self.assertEqual(r.code, 3)
        self.assertIn("weight_map lists 'x' in model-00002-of-00002.safetensors, which does not contain it", r.err)
        self.write_index({"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}, 13)
        r = run(["stats", self.index])
        self.assertEqual(r.code, 3)
        self.assertIn("metadata.total_size is 13, the shards' tensors hold 12 bytes", r.err)
        self.write_index({"x": "../../etc/passwd"}, 12)
        r = run(["stats", self.index])
        self.assertEqual(r.code, 3)
        self.assertIn("outside the checkpoint's directory", r.err)

    def test_malformed_index_and_directories(self):
        write(self.index, b"[1, 2]")
        r = run(["stats", self.index])
        self.assertEqual(r.code, 3)
        self.assertIn("model.safetensors.index.json: expected an object with a weight_map", r.err)
        write(self.index, b'{"weight_map": {"x": 7}}')
        r = run(["stats", self.index])
        self.assertEqual(r.code, 3)
        self.assertIn("weight_map['x'] must be a file name", r.err)
        # A shard name the file system refuses (longer than a name may be): missing, with the reason, not a crash.
        long_name = "m" * 300 + ".safetensors"
        write(self.index, ('{"weight_map": {"x": "%s"}}' % long_name).encode())
        r = run(["ls", self.index])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("(listed in weight_map) is missing (File name too long)", r.err)
        write(self.index, b"{not json")
        r = run(["stats", self.dir])
        self.assertEqual(r.code, 3)
        self.assertIn("model.safetensors.index.json: not valid JSON", r.err)
        write(os.path.join(self.dir, "other.safetensors.index.json"), b"{}")
        r = run(["stats", self.dir])
        self.assertEqual(r.code, 3)
        self.assertIn("holds 2 *.safetensors.index.json files; name one", r.err)
        empty = tempfile.mkdtemp(prefix="tm-empty-")
        r = run(["stats", empty])
        self.assertEqual(r.code, 3)
        self.assertIn("holds no *.safetensors file, no *.safetensors.index.json, no pytorch_model.bin, no DCP .metadata, no DeepSpeed", r.err)

    def test_same_tensor_in_two_shards(self):
        os.remove(self.index)
        safetensors_file(os.path.join(self.dir, "extra.safetensors"), [("x", "F32", [1], struct.pack("<f", 3.0))])
        r = run(["stats", self.dir])
        self.assertEqual(r.code, 3)
        self.assertIn("tensor 'x' is also in", r.err)

    def test_info_and_ls(self):
        r = run(["info", self.dir, "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual((doc["format"], doc["tensor_count"], doc["parameters"], doc["tensor_bytes"]), ("safetensors", 2, 4, 12))
        self.assertEqual(doc["by_type"], {"BF16": {"tensors": 1, "parameters": 2, "bytes": 4, "bits_per_weight": 16.0},
                                          "F32": {"tensors": 1, "parameters": 2, "bytes": 8, "bits_per_weight": 32.0}})
        self.assertEqual(len(doc["files"]), 2)
        r = run(["ls", self.index, "--sort", "name", "--json"])
        self.assertEqual([t["name"] for t in r.json()["tensors"]], ["x", "y"])
        r = run(["ls", self.index, "--filter", "y*", "--json"])
        self.assertEqual([(t["name"], t["stored_type"], t["shape"], t["readable"]) for t in r.json()["tensors"]],
                         [("y", "BF16", [2], True)])
        r = run(["ls", self.index, "--sort", "colour"])
        self.assertEqual(r.code, 2)
        self.assertIn("--sort: unknown field 'colour'", r.err)

    def test_gguf_split_set_with_a_missing_shard(self):
        fixtures = os.environ.get("TM_FIXTURES", "")
        shard = os.path.join(fixtures, "gguf", "split", "tiny-split-00001-of-00002.gguf")
        if not os.path.exists(shard):
            self.skipTest("SKIPPED: reference fixtures not found")
        copy = os.path.join(self.dir, "tiny-split-00001-of-00002.gguf")
        write(copy, open(shard, "rb").read())
        r = run(["stats", copy])
        self.assertEqual(r.code, 3)
        self.assertIn("split set of 2 shards: shard " + os.path.join(self.dir, "tiny-split-00002-of-00002.gguf") + " is missing", r.err)


class GgufTextThatIsNotUtf8(unittest.TestCase):
    """Found by tests/fuzz/fuzz_gguf: GGUF strings are bytes. A Latin-1 metadata value, key or tensor name made
    info/ls/stats --json exit 70 (nlohmann type_error 316). Values are shown with U+FFFD; keys and tensor names
    (identifiers every output carries) are bad input naming the offset."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-gguf-latin1-")

    def tearDown(self):
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    def gguf(self, name, key, value, tensor):
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
        from gguf_write import write_gguf
        import numpy as np
        path = os.path.join(self.dir, name)
        write_gguf(path, [(key, "STRING", value)], [(tensor, "F32", [2], np.zeros(2, np.float32))])
        return path

    def test_a_latin1_value_is_shown_escaped(self):
        path = self.gguf("value.gguf", "general.name", b"caf\xe9", "w")
        for command in ("info", "ls", "stats"):
            r = run([command, path, "--json"])
            self.assertEqual(r.code, 0, command + ": " + r.err)
        self.assertEqual(json.loads(run(["info", path, "--json"]).out)["metadata"]["general.name"], "caf\\xE9")

    def test_a_latin1_key_or_tensor_name_is_bad_input(self):
        r = run(["ls", self.gguf("key.gguf", b"caf\xe9", b"x", "w"), "--json"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("at byte 24: KV key 'caf\\xE9' is not valid UTF-8", r.err)
        r = run(["stats", self.gguf("name.gguf", "general.name", b"x", b"w\xe9"), "--json"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn("tensor name 'w\\xE9' is not valid UTF-8", r.err)


class Backends(unittest.TestCase):
    def test_backends_json_reports_devices_kernels_and_reasons(self):
        r = run(["backends", "--json"], plugins=True)
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        by_name = {b["name"]: b for b in doc["backends"]}
        cpu = by_name["cpu"]
        self.assertTrue(cpu["available"])
        self.assertEqual(cpu["devices"][0]["kind"], "cpu")
        self.assertGreater(cpu["devices"][0]["memory_bytes"], 0)
        self.assertIn("f64", cpu["devices"][0]["features"])
        precisions = {(k["op"], k["precision"]) for k in cpu["kernels"]}
        self.assertIn(("stats.moments", "exact"), precisions)
        self.assertIn(("stats.quantiles", "deterministic"), precisions)
        self.assertEqual(by_name["testabsent"]["reason"], "no_driver")
        self.assertFalse(by_name["testabsent"]["available"])
        self.assertEqual(by_name["testaccel"]["devices"][0]["host_link_bytes_per_s"], 8e9)
        failures = doc["plugin_load_failures"]
        self.assertEqual([f["reason"] for f in failures], ["incompatible_abi"])
        self.assertEqual(doc["plugin_dir_source"], "TENSORMORPH_PLUGIN_DIR")
        missing = {b["name"]: b for b in doc["not_installed"]}
        # Known to the project, absent from this plugin directory: reported with its matrix levels, not hidden.
        self.assertIn("vulkan", missing)
        self.assertEqual(missing["vulkan"]["capability_levels"]["stats.moments"], "partial")
        self.assertEqual(missing["cuda"]["capability_levels"]["stats.moments"], "compiled")
        self.assertEqual(missing["metal"]["capability_levels"]["stats.moments"], "not-implemented")
        self.assertNotIn("cpu", missing)

    def test_plugin_dir_setting_and_default(self):
        cfg = tempfile.mkdtemp(prefix="tm-cfg-")
        r = run(["backends", "--json"], config_home=cfg)
        self.assertEqual(r.json()["plugin_dir_source"], "default")
        self.assertNotIn("testaccel", [b["name"] for b in r.json()["backends"]])
        from cli_harness import PLUGIN_DIR
        run(["config", "set", "compute.plugin_dir", PLUGIN_DIR], config_home=cfg)
        r = run(["backends", "--json"], config_home=cfg)
        self.assertEqual(r.json()["plugin_dir_source"], "compute.plugin_dir")
        self.assertIn("testaccel", [b["name"] for b in r.json()["backends"]])

    def test_never_flag_shows_disabled_by_policy(self):
        r = run(["backends", "--json", "--never", "testaccel"], plugins=True)
        by_name = {b["name"]: b for b in r.json()["backends"]}
        self.assertEqual(by_name["testaccel"]["reason"], "disabled_by_policy")


class BackendsUserView(unittest.TestCase):
    """Issue 51: test plugins are no user's backend (never listed, even from the matrix); WebGPU is listed as running
    in the viewer's page, with the adapter a page last reported (core/page_adapter.h) or 'none seen'."""

    def test_test_plugins_are_not_listed_and_webgpu_runs_in_the_page(self):
        r = run(["backends"])
        self.assertEqual(r.code, 0, r.err)
        self.assertNotIn("testaccel", r.out)
        self.assertIn("webgpu  [runs in the viewer's page]", r.out)
        self.assertIn("last adapter a page reported: none seen", r.out)
        doc = run(["backends", "--json"]).json()
        self.assertNotIn("testaccel", [b["name"] for b in doc["not_installed"]])
        self.assertNotIn("webgpu", [b["name"] for b in doc["not_installed"]])
        self.assertEqual([(b["name"], b["last_reported_adapter"]) for b in doc["in_page"]], [("webgpu", None)])

    def record(self, text):
        cache = tempfile.mkdtemp(prefix="tm-cache-")
        os.makedirs(os.path.join(cache, "tensormorph"))
        path = os.path.join(cache, "tensormorph", "webgpu-adapter.json")
        with open(path, "w") as f:
            f.write(text)
        return cache, path

    def test_a_kept_report_is_named(self):
        cache, _ = self.record('{"available": true, "name": "SwiftShader", "software": true, "reported_at": "2026-12-06T12:00:00Z"}')
        r = run(["backends"], cache_home=cache)
        self.assertIn("last adapter a page reported: SwiftShader (software adapter), reported 2026-12-06T12:00:00Z", r.out)
        cache, _ = self.record('{"available": false, "reason": "navigator.gpu is absent", "reported_at": "2026-12-06T12:00:00Z"}')
        self.assertIn("none available in the page (navigator.gpu is absent)", run(["backends"], cache_home=cache).out)

    def test_a_damaged_record_is_refused_naming_the_file_and_field(self):
        for text, what in [('{"available": tru', "not JSON"),
                           ('{"available": "yes", "reported_at": "x"}', "field 'available': expected true or false"),
                           ('{"available": true, "name": "' + "x" * 300 + '", "reported_at": "x"}',
                            "field 'name': expected a string of at most 256 bytes"),
                           ('{"available": true}', "field 'reported_at': missing"),
                           ('[1]', "expected a JSON object")]:
            cache, path = self.record(text)
            r = run(["backends"], cache_home=cache)
            self.assertEqual(r.code, 3, (text, r.err))
            self.assertIn(path, r.err)
            self.assertIn(what, r.err)


class Calibrate(unittest.TestCase):
    def test_calibration_is_cached_and_used(self):
        cfg = tempfile.mkdtemp(prefix="tm-cfg-")
        r = run(["calibrate", "--size-mib", "4", "--repeats", "1", "--json"], config_home=cfg, plugins=True)
        self.assertEqual(r.code, 0, r.err)
        results = r.json()["results"]
        self.assertTrue(any(x["backend"] == "testaccel" for x in results))
        self.assertTrue(all(x["bytes_per_s"] > 0 for x in results))
        self.assertTrue(os.path.exists(os.path.join(cfg, "tensormorph", "calibration.json")))
        r = run(["backends", "--json"], config_home=cfg, plugins=True)
        self.assertGreater(r.json()["calibrated_entries"], 0)
        path = write(os.path.join(tempfile.mkdtemp(), "x.f32"), struct.pack("<4f", 1, 2, 3, 4))
        r = run(["stats", "--raw", path, "--dtype", "f32", "--json"], config_home=cfg, plugins=True)
        self.assertTrue(r.json()["placement"][0]["throughput_calibrated"])


class Demo(unittest.TestCase):
    # A small llama shape: head_dim 16, kv dim 32; 9 tensors per layer + embed, final norm, lm_head.
    SMALL = ["--hidden", "64", "--intermediate", "160", "--layers", "2", "--heads", "4", "--kv-heads", "2",
             "--vocab", "256"]
    DAMAGED = "model.layers.0.mlp.down_proj.weight"

    def expected_shapes(self):
        h, i, kv, v = 64, 160, 32, 256
        shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h], "lm_head.weight": [v, h]}
        for layer in range(2):
            p = "model.layers.%d." % layer
            shapes.update({p + "self_attn.q_proj.weight": [h, h], p + "self_attn.k_proj.weight": [kv, h],
                           p + "self_attn.v_proj.weight": [kv, h], p + "self_attn.o_proj.weight": [h, h],
                           p + "mlp.gate_proj.weight": [i, h], p + "mlp.up_proj.weight": [i, h],
                           p + "mlp.down_proj.weight": [h, i], p + "input_layernorm.weight": [h],
                           p + "post_attention_layernorm.weight": [h]})
        return shapes

    def demo(self, *extra):
        out = tempfile.mkdtemp(prefix="tm-demo-")
        r = run(["demo", "--out", out, "--json"] + self.SMALL + list(extra))
        self.assertEqual(r.code, 0, r.err)
        return out, r.json()

    def test_demo_then_stats(self):
        out, doc = self.demo()
        shapes = self.expected_shapes()
        total = sum(2 * (s[0] * s[1] if len(s) == 2 else s[0]) for s in shapes.values())
        self.assertEqual(doc["path"], os.path.join(out, "model.safetensors.index.json"))
        self.assertEqual(doc["files"], [os.path.join(out, "model-0000%d-of-00002.safetensors" % k) for k in (1, 2)])
        self.assertEqual((doc["tensors"], doc["bytes"], doc["damaged_tensor"]), (len(shapes), total, self.DAMAGED))
        with open(doc["path"]) as f:
            index = json.load(f)
        self.assertEqual(index["metadata"]["total_size"], total)
        self.assertEqual(sorted(index["weight_map"]), sorted(shapes))
        self.assertEqual(sorted(set(index["weight_map"].values())), [os.path.basename(f) for f in doc["files"]])

        r = run(["ls", out, "--json"])
        self.assertEqual(r.code, 0, r.err)
        listed = {t["name"]: (t["stored_type"], t["shape"]) for t in r.json()["tensors"]}
        self.assertEqual(listed, {name: ("BF16", shape) for name, shape in shapes.items()})

        r = run(["stats", out, self.DAMAGED, "--json"])
        self.assertEqual(r.code, 0, r.err)
        s = r.json()["tensors"][0]["stats"]
        self.assertEqual((s["count"], s["nan_count"], s["inf_count"], s["max"]), (64 * 160, 1, 1, 41.5))
        self.assertEqual(s["quantiles"]["method"], "bitpattern_histogram")
        self.assertTrue(s["quantiles"]["exact"])
        r = run(["stats", out, "--json"])
        self.assertEqual(r.code, 0, r.err)
        damaged = {t["name"]: (t["stats"]["nan_count"], t["stats"]["inf_count"]) for t in r.json()["tensors"]}
        self.assertEqual({n for n, c in damaged.items() if c != (0, 0)}, {self.DAMAGED})

    def test_demo_files_are_hf_shaped_and_deterministic(self):
        out, doc = self.demo("--shards", "3", "--threads", "1")
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        self.assertEqual((config["architectures"], config["torch_dtype"], config["hidden_size"], config["intermediate_size"],
                          config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"],
                          config["vocab_size"]), (["LlamaForCausalLM"], "bfloat16", 64, 160, 2, 4, 2, 256))
        self.assertEqual(len(doc["files"]), 3)
        for path in doc["files"]:
            with open(path, "rb") as f:
                blob = f.read()
            n = struct.unpack("<Q", blob[:8])[0]
            text = blob[8:8 + n]
            # Padded with fewer than 8 spaces to a multiple of 8 bytes, as the reference library does.
            self.assertEqual(n % 8, 0, path)
            self.assertTrue(text.rstrip(b" ").endswith(b"}") and n - len(text.rstrip(b" ")) < 8, text[-16:])
            header = json.loads(text)
            self.assertEqual(header.pop("__metadata__"), {"format": "pt"})
            self.assertEqual(len(blob), 8 + n + max(t["data_offsets"][1] for t in header.values()))
        again, _ = self.demo("--shards", "3", "--threads", "2")
        for path in doc["files"]:
            with open(path, "rb") as a, open(os.path.join(again, os.path.basename(path)), "rb") as b:
                self.assertEqual(a.read(), b.read(), path)

    def test_demo_bad_options(self):
        out = tempfile.mkdtemp(prefix="tm-demo-")
        for args, message in ((["--hidden", "60"], "--hidden 60 is not a multiple of --heads 8"),
                              (["--kv-heads", "3"], "--heads 8 is not a multiple of --kv-heads 3"),
                              (["--shards", "0"], "--shards 0 is outside [1, 99999]"),
                              (["--layers", "1", "--shards", "13"], "--shards 13 exceeds the model's 12 tensors"),
                              (["--vocab", "4"], "--vocab 4 is outside [8, 2097152]")):
            r = run(["demo", "--out", out] + args)
            self.assertEqual(r.code, 2, args)
            self.assertIn(message, r.err)
        self.assertEqual(os.listdir(out), [])
        blocker = write(os.path.join(out, "file"), b"")
        r = run(["demo", "--out", os.path.join(blocker, "sub")])
        self.assertEqual(r.code, 6)
        self.assertIn("cannot create the output directory", r.err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
