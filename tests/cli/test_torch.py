"""torch.save checkpoints through the CLI: the committed fixtures of tests/fixtures/torch (written by
tests/tools/torch_write.py with torch 1.13) against the values torch computed for them (expected.json).
Needs no torch."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import check_listing, run  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch")
with open(os.path.join(FIXTURES, "expected.json")) as f:
    EXPECTED = json.load(f)["files"]


def read_npy(path):
    import numpy as np
    return np.load(path)


def readable(name, want):
    """Every tensor is readable but the view that expands its storage beyond its file."""
    return name != "huge"


LEGACY = ("legacy.pt", "legacy_state_dict.pt", "legacy_tuple.pt", "legacy_windows.pt")


def fix_zip_crc(data, member):
    """data (a zip's bytes) with `member`'s CRC-32 recomputed in its local header and central directory entry,
    as a writer would after changing its bytes."""
    import io
    import struct
    import zipfile
    import zlib
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(member)
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len
    crc = struct.pack("<I", zlib.crc32(bytes(data[start:start + info.file_size])))
    data[info.header_offset + 14:info.header_offset + 18] = crc
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack("<H", data[at + 28:at + 30])[0]
        if data[at + 46:at + 46 + n] == member.encode():
            data[at + 16:at + 20] = crc
            return data
        at = data.find(b"PK\x01\x02", at + 4)
    raise AssertionError("no central directory entry for " + member)


class TorchSave(unittest.TestCase):
    def test_ls_lists_every_tensor_with_its_type_and_shape(self):
        for name in ("state_dict.pt", "protocol4.pt", "tensor.pt", "parameter.pt", "strided.pt"):
            r = run(["ls", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            want = EXPECTED[name]["tensors"]
            got = check_listing(self, r.json(), "torch", want, readable=readable, what=name)
            for n, w in want.items():
                # A view's strides are listed as torch has them; a row-major tensor has none.
                self.assertEqual(got[n].get("strides"), None if w["contiguous"] else w["stride"], n)
        huge = {t["name"]: t for t in run(["ls", os.path.join(FIXTURES, "strided.pt"), "--json"]).json()["tensors"]}["huge"]
        self.assertIn("a view that expands storage", huge["unavailable"])
        self.assertIn("to 40000000000 bytes, more than its file holds", huge["unavailable"])

    def test_stats_match_torch(self):
        for name in ("state_dict.pt", "strided.pt"):
            r = run(["stats", os.path.join(FIXTURES, name), "--json"])
            self.assertEqual(r.code, 0, r.err)
            want = EXPECTED[name]["tensors"]
            seen = 0
            for t in r.json()["tensors"]:
                w = want[t["name"]]
                if not readable(t["name"], w):
                    self.assertIsNone(t["stats"], t["name"])
                    continue
                s = t["stats"]
                self.assertEqual(s["count"], w["elements"], t["name"])
                self.assertEqual(s["min"], float(w["min"]), t["name"])
                self.assertEqual(s["max"], float(w["max"]), t["name"])
                self.assertAlmostEqual(s["sum"], w["sum"], delta=abs(w["sum"]) * 1e-12 + 1e-9, msg=t["name"])
                seen += not w["contiguous"]
            self.assertGreaterEqual(seen, 2, name)

    def test_strided_views_export_in_row_major_order(self):
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            for file, name in (("state_dict.pt", "views.transposed"), ("state_dict.pt", "views.column"),
                               ("strided.pt", "bf16_t"), ("strided.pt", "i32_t"), ("strided.pt", "f16_permuted"),
                               ("strided.pt", "f64_column"), ("strided.pt", "u8_every_other"),
                               ("strided.pt", "bool_t"), ("strided.pt", "f32_expanded")):
                w = EXPECTED[file]["tensors"][name]
                npy = os.path.join(out, name + ".npy")
                r = run(["export", os.path.join(FIXTURES, file), name, "-o", npy])
                self.assertEqual(r.code, 0, r.err)
                a = read_npy(npy)
                self.assertEqual(list(a.shape), w["shape"], name)
                got = [float(v) for v in a.astype("float64").reshape(-1)]
                self.assertEqual(got, [float(v) for v in w["values"]], name)
            r = run(["export", os.path.join(FIXTURES, "strided.pt"), "huge", "-o", os.path.join(out, "huge.npy")])
            self.assertEqual(r.code, 4, r.err)
            self.assertIn("more than its file holds", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_strided_views_from_the_index(self):
        """The strides are kept in the index: a view read after reopening only the index reads the same values,
        its statistics and pyramid are computed from the gathered values, and render draws it."""
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            path = os.path.join(FIXTURES, "strided.pt")
            cache = os.path.join(out, "cache")
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            r = run(["stats", path, "bf16_t", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            t = r.json()["tensors"][0]
            self.assertEqual(t["source"], "index")
            self.assertEqual(t["strides"], [1, 7])
            self.assertEqual(t["stats"]["min"], EXPECTED["strided.pt"]["tensors"]["bf16_t"]["min"])
            npy = os.path.join(out, "t.npy")
            r = run(["export", path, "f16_permuted", "-o", npy], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual([float(v) for v in read_npy(npy).astype("float64").reshape(-1)],
                             EXPECTED["strided.pt"]["tensors"]["f16_permuted"]["values"])
            r = run(["tile", path, "bf16_t", "--level", "0", "--tile", "0,0", "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            tile = r.json()
            self.assertEqual(tile["stats"]["count"], 35)
            self.assertEqual(tile["stats"]["min"], EXPECTED["strided.pt"]["tensors"]["bf16_t"]["min"])
            png = os.path.join(out, "t.png")
            r = run(["render", path, "bf16_t", "-o", png], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_info_metadata_export_and_index(self):
        path = os.path.join(FIXTURES, "state_dict.pt")
        r = run(["info", path, "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("1234", json.dumps(r.json()))
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            npy = os.path.join(out, "rows.npy")
            r = run(["export", path, "views.rows", "-o", npy])
            self.assertEqual(r.code, 0, r.err)
            with open(npy, "rb") as f:
                data = f.read()
            # float32 rows 1..2 of arange(24).reshape(4, 6) - 7.5: the last 48 bytes of the .npy
            import struct
            self.assertEqual(list(struct.unpack("<12f", data[-48:])), [float(v) - 7.5 for v in range(6, 18)])
            cache = os.path.join(out, "cache")
            fresh = run(["ls", path, "--json"], cache_home=cache).json()["tensors"]
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            r = run(["index", path], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            self.assertIn("0 computed now", r.out)
            # The inventory read back from the index is the one the file gave.
            again = run(["ls", path, "--json"], cache_home=cache).json()["tensors"]
            for t in fresh + again:
                t.pop("stats_indexed")
            self.assertEqual(again, fresh)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_directories_of_pytorch_model_bin(self):
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            # A lone pytorch_model.bin.
            single = os.path.join(out, "single")
            os.makedirs(single)
            shutil.copy(os.path.join(FIXTURES, "parameter.pt"), os.path.join(single, "pytorch_model.bin"))
            r = run(["ls", single, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(sorted(t["name"] for t in r.json()["tensors"]), ["p", "q"])
            # Shards with transformers' pytorch_model.bin.index.json (total_size: 6 + 4 + 9 float32).
            sharded = os.path.join(out, "sharded")
            os.makedirs(sharded)
            one, two = "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"
            shutil.copy(os.path.join(FIXTURES, "parameter.pt"), os.path.join(sharded, one))
            shutil.copy(os.path.join(FIXTURES, "tensor.pt"), os.path.join(sharded, two))
            index = {"metadata": {"total_size": 76}, "weight_map": {"p": one, "q": one, "tensor": two}}
            with open(os.path.join(sharded, "pytorch_model.bin.index.json"), "w") as f:
                json.dump(index, f)
            for path in (sharded, os.path.join(sharded, "pytorch_model.bin.index.json")):
                r = run(["stats", path, "--json"])
                self.assertEqual(r.code, 0, r.err)
                doc = r.json()
                self.assertEqual(doc["format"], "torch")
                got = {t["name"]: t["stats"] for t in doc["tensors"]}
                self.assertEqual(got["p"]["sum"], 3.0)
                self.assertEqual(got["tensor"]["count"], 9)
            index["weight_map"]["tensor"] = one
            with open(os.path.join(sharded, "pytorch_model.bin.index.json"), "w") as f:
                json.dump(index, f)
            r = run(["ls", sharded])
            self.assertEqual(r.code, 3)
            self.assertIn("weight_map lists 'tensor' in " + one + ", which does not contain it", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_legacy_files_match_torch(self):
        """Files torch 1.13 wrote with _use_new_zipfile_serialization=False, and our own writer's imitation of
        a Windows file (sys_info: long is 4 bytes), against the values torch computed."""
        for name in LEGACY:
            path = os.path.join(FIXTURES, name)
            want = EXPECTED[name]["tensors"]
            r = run(["ls", path, "--json"])
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(r.json()["format"], "torch")
            got = {t["name"]: t for t in r.json()["tensors"]}
            self.assertEqual(set(got), set(want), name)
            for n, w in want.items():
                self.assertEqual(got[n]["shape"], w["shape"], n)
                self.assertEqual(got[n]["stored_type"], w["stored_type"], n)
                self.assertEqual(got[n].get("strides"), None if w["contiguous"] else w["stride"], n)
            r = run(["stats", path, "--json"])
            self.assertEqual(r.code, 0, r.err)
            for t in r.json()["tensors"]:
                w, s = want[t["name"]], t["stats"]
                self.assertEqual(s["count"], w["elements"], t["name"])
                self.assertEqual(s["min"], float(w["min"]), t["name"])
                self.assertEqual(s["max"], float(w["max"]), t["name"])
                self.assertAlmostEqual(s["sum"], w["sum"], delta=abs(w["sum"]) * 1e-12 + 1e-9, msg=t["name"])
            info = json.dumps(run(["info", path, "--json"]).json())
            for k, v in EXPECTED[name]["metadata"].items():
                self.assertIn(json.dumps(v), info, k)

    def test_legacy_shards_with_their_index(self):
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            one, two = "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"
            shutil.copy(os.path.join(FIXTURES, "legacy_windows.pt"), os.path.join(out, one))
            shutil.copy(os.path.join(FIXTURES, "legacy.pt"), os.path.join(out, two))
            index = {"metadata": {"total_size": 48 + 48 + 16 + 40 + 6 + 8},  # every tensor's bytes, views too
                     "weight_map": {"embed.weight": one, "embed.weight_t": one, "embed.row": one, "counts": one, "mask": one, "w": two}}
            with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
                json.dump(index, f)
            r = run(["stats", out, "--json"])
            self.assertEqual(r.code, 0, r.err)
            got = {t["name"]: t["stats"] for t in r.json()["tensors"]}
            self.assertEqual(got["w"]["sum"], 2.0)
            self.assertEqual(got["counts"]["max"], float(2 ** 33))
            self.assertEqual(got["mask"]["max"], 255.0)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_damaged_and_refused_files_name_the_problem(self):
        import io
        import struct
        import tarfile
        import zipfile
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            # torch 0.3's tar format, by name.
            tar = os.path.join(out, "old.tar.pt")
            with tarfile.open(tar, "w", format=tarfile.PAX_FORMAT) as t:
                for member in ("sys_info", "pickle", "tensors", "storages"):
                    info = tarfile.TarInfo(member)
                    info.size = 4
                    t.addfile(info, io.BytesIO(b"\x80\x02N."))
            r = run(["ls", tar])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn("torch.save's format of torch 0.3 and earlier, which is not supported", r.err)
            # A name that is not UTF-8 (a stray 0xE1, as Python's unpickler refuses) and an empty name.
            with open(os.path.join(FIXTURES, "legacy_windows.pt"), "rb") as f:
                legacy = f.read()
            key = b"X\x04\x00\x00\x00mask"
            self.assertEqual(legacy.count(key), 1)
            for replacement, message in ((b"X\x04\x00\x00\x00m\xe1sk", "is not valid UTF-8 ('m\\xE1sk')"),
                                         (b"X\x00\x00\x00\x00", "a dict key is the empty string, which tensor '' is named under")):
                bad = os.path.join(out, "bad_name.pt")
                with open(bad, "wb") as f:
                    f.write(legacy.replace(key, replacement))
                r = run(["ls", bad])
                self.assertEqual(r.code, 3, r.err)
                self.assertIn(message, r.err)
                self.assertIn("bad_name.pt", r.err)
            # A zip member whose bytes do not match their CRC-32: data.pkl at open; a storage above 1 MiB
            # when a full pass reads it (stats, index), not when it is only listed.
            with open(os.path.join(FIXTURES, "tensor.pt"), "rb") as f:
                data = bytearray(f.read())
            at = data.find(b"_rebuild_tensor_v2")
            data[at + 17] ^= 1
            damaged = os.path.join(out, "damaged.pt")
            with open(damaged, "wb") as f:
                f.write(data)
            r = run(["ls", damaged])
            self.assertEqual(r.code, 3, r.err)
            self.assertIn("entry 'tensor/data.pkl'", r.err)
            self.assertRegex(r.err, r"CRC-32 recorded in the central directory is 0x[0-9a-f]{8}, its bytes' is 0x[0-9a-f]{8}")
            n = 300000  # 1.2 MB of float32
            pkl = (b"\x80\x02}(X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
                   b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuJ" + struct.pack("<i", n) + b"tQK\x00J" + struct.pack("<i", n) +
                   b"\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtRu.")
            big = os.path.join(out, "big.pt")
            with zipfile.ZipFile(big, "w", zipfile.ZIP_STORED) as z:
                z.writestr("big/data.pkl", pkl)
                z.writestr("big/data/0", struct.pack("<%df" % n, *([0.5] * n)))
                z.writestr("big/byteorder", "little")
            with open(big, "rb") as f:
                data = bytearray(f.read())
            self.assertEqual(run(["stats", big, "--json"]).json()["tensors"][0]["stats"]["sum"], 150000.0)
            data[data.find(struct.pack("<f", 0.5) * 4) + 1000] ^= 0x40
            with open(big, "wb") as f:
                f.write(data)
            r = run(["ls", big])
            self.assertEqual(r.code, 0, r.err)
            for command in (["stats", big], ["index", big]):
                r = run(command)
                self.assertEqual(r.code, 3, command)
                self.assertIn("entry 'big/data/0' (1200000 bytes): CRC-32 recorded in the central directory", r.err, command)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_refusals_name_the_problem(self):
        out = tempfile.mkdtemp(prefix="tm-torch-")
        try:
            with open(os.path.join(FIXTURES, "tensor.pt"), "rb") as f:
                data = bytearray(f.read())
            # Replace the rebuild function's name by one of the same length outside the allow-list.
            at = data.find(b"_rebuild_tensor_v2")
            self.assertGreater(at, 0)
            data[at:at + 18] = b"_rebuild_tensor_v9"
            data = fix_zip_crc(data, "tensor/data.pkl")  # as a writer would: the change is not damage
            bad = os.path.join(out, "bad.pt")
            with open(bad, "wb") as f:
                f.write(data)
            r = run(["ls", bad])
            self.assertEqual(r.code, 3)
            self.assertIn("global 'torch._utils._rebuild_tensor_v9' is not on the allow-list", r.err)
            self.assertIn("data.pkl", r.err)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
