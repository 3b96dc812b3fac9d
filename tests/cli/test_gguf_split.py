"""GGUF split sets (NAME-0000i-of-0000N.gguf, as llama.cpp's gguf-split writes them) through the CLI:
a consistent set opens as one checkpoint from any shard with every tensor and its exact statistics;
every inconsistency (split.no, split.count, split.tensors.count, a missing KV, a missing shard, a tensor
in two shards) is refused with exit 3 and a message naming the file and the field.

The sets are written here with tests/tools/gguf_write.py, KV types as gguf-split uses them:
split.no UINT16 (0-based), split.count UINT16, split.tensors.count INT32 (on every shard).

Also single GGUF files at the edge of the layout: a vocabulary-only file (no tensors) that ends right
after its key-values, as llama.cpp's models/ggml-vocab-*.gguf do."""
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cli_harness import run  # noqa: E402
from gguf_write import gguf_bytes, write_gguf  # noqa: E402

BAD_INPUT = 3

# Dense test tensors: name -> (ggml type, ne in GGUF order, values in row-major order). Every F16 value
# is exactly representable, so the expected statistics are exact.
TENSORS = {
    "token_embd.weight": ("F32", [4, 3], np.arange(12, dtype=np.float32) - 5.5),
    "blk.0.attn_q.weight": ("F16", [8], np.array([0.5, -1.25, 2.0, 3.0, -4.0, 0.0, 8.0, 0.125], dtype=np.float16)),
    "blk.0.ffn_up.weight": ("F32", [2, 2, 2], np.array([10, -20, 30, 0.25, 7, 7, -1e3, 5], dtype=np.float32)),
    "output_norm.weight": ("F32", [5], np.array([1.0, 1.5, 2.0, 2.5, 100.0], dtype=np.float32)),
    "output.weight": ("F16", [4, 2], np.array([-0.5, 0.5, 1, 2, 4, 8, 16, -32], dtype=np.float16)),
}


def tensor(name):
    ggml, ne, values = TENSORS[name]
    return (name, ggml, ne, values)


def shard_path(directory, prefix, i, count):
    return os.path.join(directory, "%s-%05d-of-%05d.gguf" % (prefix, i, count))


def write_set(directory, layout, prefix="model", overrides=None, tensors_count=None):
    """Writes a split set: layout[i] lists the tensor names of shard i+1. overrides maps a shard number
    (1-based) to {key: (type, value)} to change a split KV, or {key: None} to leave it out.
    tensors_count: the split.tensors.count to declare (default: the true total). Returns the paths."""
    count = len(layout)
    total = sum(len(names) for names in layout) if tensors_count is None else tensors_count
    paths = []
    for i, names in enumerate(layout, start=1):
        split = {"split.no": ("UINT16", i - 1), "split.count": ("UINT16", count),
                 "split.tensors.count": ("INT32", total)}
        split.update((overrides or {}).get(i, {}))
        kvs = [("general.architecture", "STRING", "llama"), ("general.name", "STRING", "split test")]
        kvs += [(k, tv[0], tv[1]) for k, tv in split.items() if tv is not None]
        kvs.append(("llama.block_count", "UINT32", 1))
        path = shard_path(directory, prefix, i, count)
        write_gguf(path, kvs, [tensor(n) for n in names])
        paths.append(path)
    return paths


def expected_stats(name):
    v = TENSORS[name][2].astype(np.float64)
    return {"count": v.size, "min": float(v.min()), "max": float(v.max()), "sum": float(v.sum()),
            "mean": float(v.mean()), "std": float(v.std())}


class SplitTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tm-gguf-split-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def refused(self, path, *fragments):
        """Runs ls on path, asserts exit 3 and that stderr holds every fragment; returns stderr."""
        r = run(["ls", path, "--json"])
        self.assertEqual(r.code, BAD_INPUT, "expected exit 3 for %s, got %d; stdout %r stderr %r" % (path, r.code, r.out[:300], r.err))
        self.assertEqual(r.out, "")
        for fragment in fragments:
            self.assertIn(fragment, r.err)
        return r.err


class ConsistentSets(SplitTestCase):
    LAYOUTS = {
        2: [["token_embd.weight", "blk.0.attn_q.weight"], ["blk.0.ffn_up.weight", "output_norm.weight", "output.weight"]],
        # gguf-split --no-tensor-first-split: the first shard holds metadata only
        3: [[], ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight"], ["output_norm.weight", "output.weight"]],
    }

    def check_set(self, layout):
        paths = write_set(self.dir, layout, prefix="m%d" % len(layout))
        where = {name: paths[i] for i, names in enumerate(layout) for name in names}
        for opened in paths:
            with self.subTest(shards=len(layout), opened=os.path.basename(opened)):
                r = run(["ls", opened, "--json"])
                self.assertEqual(r.code, 0, r.err)
                doc = r.json()
                self.assertEqual(doc["format"], "gguf")
                self.assertEqual(sorted(t["name"] for t in doc["tensors"]), sorted(where))
                for t in doc["tensors"]:
                    ggml, ne, values = TENSORS[t["name"]]
                    self.assertEqual(t["file"], where[t["name"]], t["name"])
                    self.assertEqual((t["stored_type"], t["ne"], t["shape"], t["elements"], t["bytes"]),
                                     (ggml, ne, ne[::-1], values.size, values.nbytes), t["name"])

                r = run(["info", opened, "--json"])
                self.assertEqual(r.code, 0, r.err)
                doc = r.json()
                self.assertEqual([f["path"] for f in doc["files"]], paths)
                self.assertEqual([f["size"] for f in doc["files"]], [os.path.getsize(p) for p in paths])
                self.assertEqual(doc["tensor_count"], len(where))
                self.assertEqual(doc["parameters"], sum(TENSORS[n][2].size for n in where))
                self.assertEqual(doc["tensor_bytes"], sum(TENSORS[n][2].nbytes for n in where))
                self.assertEqual(doc["metadata"]["general.architecture"], "llama")

                r = run(["stats", opened, "--json", "--no-histogram", "--no-quantiles"])
                self.assertEqual(r.code, 0, r.err)
                got = {t["name"]: t["stats"] for t in r.json()["tensors"]}
                self.assertEqual(sorted(got), sorted(where))
                for name, stats in got.items():
                    want = expected_stats(name)
                    self.assertEqual((stats["count"], stats["min"], stats["max"], stats["sum"]),
                                     (want["count"], want["min"], want["max"], want["sum"]), name)
                    self.assertAlmostEqual(stats["mean"], want["mean"], places=12, msg=name)
                    self.assertAlmostEqual(stats["std"], want["std"], places=9, msg=name)

        # one tensor by name, from the last shard, opened through the first
        last = layout[-1][-1]
        r = run(["stats", paths[0], last, "--json", "--no-histogram", "--no-quantiles"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual([t["name"] for t in r.json()["tensors"]], [last])
        self.assertEqual(r.json()["tensors"][0]["stats"]["max"], expected_stats(last)["max"])

    def test_two_shards_open_from_either(self):
        self.check_set(self.LAYOUTS[2])

    def test_three_shards_open_from_any(self):
        self.check_set(self.LAYOUTS[3])

    def test_a_changed_shard_is_seen_on_the_next_open(self):
        """With the same cache directory across runs, a shard rewritten after the first open is read anew."""
        cache = tempfile.mkdtemp(prefix="tm-cache-", dir=self.dir)
        env = {"XDG_CACHE_HOME": cache}
        paths = write_set(self.dir, self.LAYOUTS[2])
        r = run(["stats", paths[0], "output_norm.weight", "--json", "--no-histogram", "--no-quantiles"], env_extra=env)
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["tensors"][0]["stats"]["max"], 100.0)
        TENSORS_SAVED = TENSORS["output_norm.weight"]
        try:
            TENSORS["output_norm.weight"] = ("F32", [5], np.array([1, 2, 3, 4, -9], dtype=np.float32))
            write_set(self.dir, self.LAYOUTS[2])
        finally:
            TENSORS["output_norm.weight"] = TENSORS_SAVED
        r = run(["stats", paths[0], "output_norm.weight", "--json", "--no-histogram", "--no-quantiles"], env_extra=env)
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual((r.json()["tensors"][0]["stats"]["min"], r.json()["tensors"][0]["stats"]["max"]), (-9.0, 4.0))
        write_set(self.dir, self.LAYOUTS[2], overrides={2: {"split.no": ("UINT16", 0)}})
        r = run(["ls", paths[0], "--json"], env_extra=env)
        self.assertEqual(r.code, BAD_INPUT, r.out[:300])
        self.assertIn("split.no 0 / split.count 2 disagree with the file name (shard 2 of 2)", r.err)


TWO = [["token_embd.weight", "blk.0.attn_q.weight"], ["output_norm.weight", "output.weight"]]
THREE = [["token_embd.weight"], ["blk.0.attn_q.weight", "blk.0.ffn_up.weight"], ["output_norm.weight"]]


class InconsistentSets(SplitTestCase):
    def test_split_no_disagrees_with_the_file_name(self):
        paths = write_set(self.dir, TWO, overrides={2: {"split.no": ("UINT16", 0)}})
        for opened in paths:
            with self.subTest(opened=os.path.basename(opened)):
                self.refused(opened, paths[1] + ": split.no 0 / split.count 2 disagree with the file name (shard 2 of 2)")
        # 1-based numbering by mistake: the first shard already disagrees
        paths = write_set(self.dir, TWO, prefix="onebased", overrides={1: {"split.no": ("UINT16", 1)}, 2: {"split.no": ("UINT16", 2)}})
        self.refused(paths[1], paths[0] + ": split.no 1 / split.count 2 disagree with the file name (shard 1 of 2)")

    def test_split_count_disagrees_with_the_file_name(self):
        paths = write_set(self.dir, THREE, overrides={2: {"split.count": ("UINT16", 2)}})
        for opened in paths:
            with self.subTest(opened=os.path.basename(opened)):
                self.refused(opened, paths[1] + ": split.no 1 / split.count 2 disagree with the file name (shard 2 of 3)")
        paths = write_set(self.dir, TWO, prefix="bigger", overrides={1: {"split.count": ("UINT16", 3)}})
        self.refused(paths[1], paths[0] + ": split.no 0 / split.count 3 disagree with the file name (shard 1 of 2)")

    def test_split_tensors_count_disagrees_with_the_shards(self):
        for declared in (5, 3, 0):
            with self.subTest(declared=declared):
                paths = write_set(self.dir, TWO, prefix="count%d" % declared, tensors_count=declared)
                self.refused(paths[1], paths[1] + ": split set declares %d tensors (split.tensors.count), its shards hold 4" % declared)

    def test_missing_or_malformed_split_kvs(self):
        cases = [
            ("no-split-no", {2: {"split.no": None}}, 2, "split.no"),
            ("no-split-count", {1: {"split.count": None}}, 1, "split.count"),
            ("no-tensors-count", {1: {"split.tensors.count": None}}, 1, "split.tensors.count"),
            ("string-split-no", {2: {"split.no": ("STRING", "1")}}, 2, "split.no"),
            ("float-split-count", {2: {"split.count": ("FLOAT32", 2.0)}}, 2, "split.count"),
            ("negative-split-no", {1: {"split.no": ("INT32", -1)}}, 1, "split.no"),
            ("negative-tensors-count", {1: {"split.tensors.count": ("INT32", -4)}}, 1, "split.tensors.count"),
        ]
        for prefix, overrides, culprit, key in cases:
            with self.subTest(case=prefix):
                paths = write_set(self.dir, TWO, prefix=prefix, overrides=overrides)
                for opened in paths:
                    self.refused(opened, paths[culprit - 1] + ": split set: " + key + " is missing or not a non-negative integer")

    def test_wider_integer_types_are_accepted(self):
        """gguf-split writes UINT16/INT32, other writers may use UINT32/UINT64/INT64: all are integers."""
        paths = write_set(self.dir, TWO, overrides={
            1: {"split.no": ("UINT32", 0), "split.count": ("UINT64", 2), "split.tensors.count": ("UINT64", 4)},
            2: {"split.no": ("INT64", 1), "split.count": ("INT32", 2), "split.tensors.count": None}})
        r = run(["ls", paths[1], "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(len(r.json()["tensors"]), 4)

    def test_missing_shard(self):
        paths = write_set(self.dir, THREE)
        os.remove(paths[1])
        for opened in (paths[0], paths[2]):
            with self.subTest(opened=os.path.basename(opened)):
                self.refused(opened, opened + ": split set of 3 shards: shard " + paths[1] + " is missing")
        os.remove(paths[0])
        self.refused(paths[2], "split set of 3 shards: shard " + paths[0] + " is missing")

    def test_same_tensor_in_two_shards(self):
        # split.tensors.count counts the duplicate, so only the uniqueness check can catch it
        layout = [["token_embd.weight", "output.weight"], ["output_norm.weight", "output.weight"]]
        paths = write_set(self.dir, layout)
        for opened in paths:
            with self.subTest(opened=os.path.basename(opened)):
                err = self.refused(opened, "tensor 'output.weight' is also in")
                self.assertIn(paths[0], err)
                self.assertIn(paths[1], err)

    def test_a_corrupt_shard_is_named(self):
        paths = write_set(self.dir, TWO)
        # the last tensor, output.weight (16 bytes), is followed by 16 bytes of padding: cut 4 bytes of its data
        with open(paths[1], "r+b") as f:
            f.truncate(os.path.getsize(paths[1]) - 20)
        self.refused(paths[0], paths[1] + ": ", "tensor 'output.weight'", "runs past the end of the file")
        with open(paths[1], "wb") as f:
            f.write(b"NOTGGUF!" * 8)
        self.refused(paths[0], paths[1] + ": ", "magic")

    def test_a_shard_number_outside_the_set_is_refused(self):
        """A name that cannot be a shard of its own set (shard 5 of 2, shard 0) must not open the set."""
        paths = write_set(self.dir, TWO)
        for name in ("model-00005-of-00002.gguf", "model-00000-of-00002.gguf", "model-00000-of-00000.gguf"):
            with self.subTest(name=name):
                path = os.path.join(self.dir, name)
                r = run(["ls", path, "--json"])
                # either as a missing file (Io, 6) or as a bad shard name (BadInput, 3); never a listing
                self.assertIn(r.code, (BAD_INPUT, 6), "%s opened with exit %d: %r" % (name, r.code, r.out[:200]))
                self.assertIn(path, r.err)
        self.assertTrue(all(os.path.exists(p) for p in paths))


class VocabularyOnly(SplitTestCase):
    """llama.cpp's vocabulary-only files: v3, 0 tensors, and the file ends right after the last KV value,
    without the padding that would align the (empty) data section. info and stats exited 6, "changed while
    it was being indexed": the index hashed the bytes before a data section placed past the end."""

    KVS = [("general.architecture", "STRING", "llama"), ("tokenizer.ggml.model", "STRING", "llama"),
           ("tokenizer.ggml.tokens", "ARRAY", ("STRING", ["<s>", "a", "b"]))]

    def write(self):
        # gguf_write pads the header to the alignment; the value written last ends in b"b", so stripping
        # the zeros removes exactly that padding
        padded = gguf_bytes(self.KVS, [])
        data = padded.rstrip(b"\0")
        self.assertEqual((len(data) % 32, len(padded)), (28, len(data) + 4))
        path = os.path.join(self.dir, "ggml-vocab-test.gguf")
        with open(path, "wb") as f:
            f.write(data)
        return path, len(data)

    def test_info_and_stats_read_it(self):
        path, size = self.write()
        r = run(["info", path, "--json"])
        self.assertEqual(r.code, 0, r.err)
        doc = r.json()
        self.assertEqual((doc["format"], doc["tensor_count"], doc["parameters"]), ("gguf", 0, 0))
        self.assertEqual(doc["files"], [{"path": path, "size": size}])
        self.assertEqual(doc["metadata"], {"general.architecture": "llama", "tokenizer.ggml.model": "llama"})
        r = run(["info", path])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("0 tensors", r.out)
        r = run(["stats", path, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["tensors"], [])

    def test_cut_inside_its_last_value_it_is_refused(self):
        path, size = self.write()
        with open(path, "r+b") as f:
            f.truncate(size - 1)
        for command in ("info", "stats"):
            with self.subTest(command=command):
                r = run([command, path])
                self.assertEqual(r.code, BAD_INPUT, r.err)
                self.assertIn(path + ": at byte 179: STRING value: string length 1 runs past the end of the file (size 187)", r.err)


class Version1(SplitTestCase):
    """GGUF v1 (llama.cpp's first GGUF files, 2023: 32-bit counts and lengths) reads as its v3 twin: the same
    metadata, listing and statistics, the version shown. Written by tests/tools/gguf_write.py (ours: no
    maintained writer produces v1)."""

    def test_reads_as_its_version3_twin(self):
        kvs = [("general.architecture", "STRING", "llama"), ("general.name", "STRING", "old"),
               ("llama.context_length", "UINT32", 2048), ("tokenizer.ggml.tokens", "ARRAY", ("STRING", ["<s>", "x"]))]
        tensors = [tensor("output_norm.weight"),
                   ("blk.0.attn_q.weight", "Q8_0", [32, 2], bytes(range(34)) * 2)]
        docs = {}
        for version in (1, 3):
            path = os.path.join(self.dir, "v%d.gguf" % version)
            write_gguf(path, kvs, tensors, version=version)
            info = run(["info", path, "--json"])
            self.assertEqual(info.code, 0, info.err)
            stats = run(["stats", path, "--json", "--no-histogram"])
            self.assertEqual(stats.code, 0, stats.err)
            docs[version] = (info.json(), stats.json())
        (info1, stats1), (info3, stats3) = docs[1], docs[3]
        self.assertEqual(info1["metadata"], info3["metadata"])
        self.assertEqual(info1["tensor_count"], 2)
        self.assertEqual([t["name"] for t in stats1["tensors"]], [t["name"] for t in stats3["tensors"]])
        for a, b in zip(stats1["tensors"], stats3["tensors"]):
            self.assertEqual((a["shape"], a["dtype"], a["stats"]), (b["shape"], b["dtype"], b["stats"]))


class Writer(SplitTestCase):
    """The test writer itself: every KV type reads back through the CLI, bad requests are refused."""

    def test_every_kv_type_reads_back(self):
        path = os.path.join(self.dir, "kinds.gguf")
        write_gguf(path, [
            ("u8", "UINT8", 255), ("i8", "INT8", -128), ("u16", "UINT16", 65535), ("i16", "INT16", -32768),
            ("u32", "UINT32", 2**32 - 1), ("i32", "INT32", -2**31), ("u64", "UINT64", 2**64 - 1),
            ("i64", "INT64", -2**63), ("f32", "FLOAT32", 0.25), ("f64", "FLOAT64", -1e300), ("b", "bool", True),
            ("s", "STRING", "h\u00e9llo"), ("a.s", "ARRAY", ("STRING", ["x", ""])), ("a.f", "ARRAY", ("FLOAT32", [1.5])),
            ("a.nested", "ARRAY", ("ARRAY", [("UINT8", [1, 2]), ("STRING", ["y"])])), ("a.empty", "ARRAY", ("INT64", [])),
        ], [tensor("output_norm.weight")], alignment=64)
        r = run(["info", path, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["metadata"], {
            "u8": "255", "i8": "-128", "u16": "65535", "i16": "-32768", "u32": "4294967295", "i32": "-2147483648",
            "u64": "18446744073709551615", "i64": "-9223372036854775808", "f32": "0.25", "f64": "-1e+300", "b": "true",
            "s": "h\u00e9llo", "general.alignment": "64"})
        r = run(["stats", path, "--json", "--no-histogram", "--no-quantiles"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["tensors"][0]["offset"] % 64, 0)
        self.assertEqual(r.json()["tensors"][0]["stats"]["max"], 100.0)

    def test_bad_requests_are_refused(self):
        path = os.path.join(self.dir, "bad.gguf")
        for kvs, tensors, fragment in [
            ([("k", "UINT8", 256)], [], "does not fit in UINT8"),
            ([("k", "INT99", 1)], [], "unknown GGUF value type"),
            ([("k", "STRING", "a"), ("k", "STRING", "b")], [], "given twice"),
            ([], [("t", "F32", [3], b"\0" * 8)], "needs 12 bytes, data has 8"),
            ([], [("t", "Q8_0", [16], b"")], "not a multiple of Q8_0's block of 32"),
            ([("general.alignment", "UINT32", 48)], [], "not a power of two"),
        ]:
            with self.subTest(fragment=fragment):
                with self.assertRaises(ValueError) as ctx:
                    write_gguf(path, kvs, tensors)
                self.assertIn(fragment, str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
