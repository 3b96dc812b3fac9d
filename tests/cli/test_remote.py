"""Remote checkpoints (docs/remote.md) on loopback: Debian's nginx, started here, serves safetensors files, a sharded
model.safetensors.index.json, GGUF files (one, and a split set) over HTTP and HTTPS (a self-signed certificate made
here), and the hf:// layout as static folders; a fault-injecting proxy of our own (remote_servers.FaultProxy) resets,
stalls, shortens, refuses (503 + Retry-After) or changes the ETag of responses. Every remote result must equal the
local run on the same files byte for byte in --json (file paths shown as URLs are the one difference, normalised),
or fail naming the URL and the cause.

The safetensors files are written here with numpy and json (the format's 8-byte length, JSON header, data);
the GGUF files are the shared fixtures (gguf/tiny-mixed.gguf, gguf/split/)."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import TM_BIN, run  # noqa: E402
import remote_servers  # noqa: E402

FIXTURES = os.environ.get("TM_FIXTURES", "/work/shared/fixtures")
TORCH_FIXTURES = os.path.join(HERE, "..", "fixtures", "torch")
INVALID, BAD_INPUT, IO = 2, 3, 6


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> numpy array (little-endian); dtype names as the safetensors library writes them."""
    names = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int8"): "I8", np.dtype("int32"): "I32"}
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return 8 + len(h)


def normalise(doc, *prefixes):
    """The document as text with each prefix (a URL base or a local folder) removed."""
    text = json.dumps(doc, sort_keys=True)
    for p in prefixes:
        text = text.replace(p, "")
    return text


def fetched_bytes(err):
    m = re.search(r"fetched (\d+) bytes in (\d+) requests \((\d+) retries\)", err)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


class RemoteCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="tm-remote-root-")
        rng = np.random.default_rng(7)
        cls.single = {
            "embed.weight": rng.standard_normal((64, 32)).astype(np.float32),
            "norm.weight": rng.standard_normal(32).astype(np.float16),
            "codes": rng.integers(-128, 127, (7, 5), dtype=np.int8),
        }
        cls.single_header = write_safetensors(os.path.join(cls.root, "model.safetensors"), cls.single, {"format": "pt"})
        # A fine-tune of it: every 5th row of embed.weight changed, norm.weight scaled (the diff cases).
        tuned = {k: v.copy() for k, v in cls.single.items()}
        tuned["embed.weight"][::5] += 0.25
        tuned["norm.weight"] = (tuned["norm.weight"] * np.float16(1.5)).astype(np.float16)
        cls.tuned_bytes = sum(a.nbytes for a in tuned.values())
        cls.tuned_header = write_safetensors(os.path.join(cls.root, "tuned.safetensors"), tuned, {"format": "pt"})
        os.makedirs(os.path.join(cls.root, "sharded"))
        cls.sharded_header = 0
        weight_map, total = {}, 0
        for k in range(3):
            shard = "model-%05d-of-00003.safetensors" % (k + 1)
            ts = {"layers.%d.w%d" % (k, j): rng.standard_normal((40 + j, 24)).astype(np.float32) for j in range(3)}
            cls.sharded_header += write_safetensors(os.path.join(cls.root, "sharded", shard), ts)
            for name, a in ts.items():
                weight_map[name] = shard
                total += a.nbytes
        index = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2).encode()
        with open(os.path.join(cls.root, "sharded", "model.safetensors.index.json"), "wb") as f:
            f.write(index)
        cls.sharded_header += len(index)
        with open(os.path.join(cls.root, "lying.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", 1 << 20) + b'{"a": 1}')
        os.makedirs(os.path.join(cls.root, "gguf"))
        # The GGUF cases need the shared fixtures; without them (CI's clean clone) they are skipped with a message.
        cls.have_gguf = os.path.isfile(os.path.join(FIXTURES, "gguf", "tiny-mixed.gguf")) and \
            os.path.isdir(os.path.join(FIXTURES, "gguf", "split"))
        if cls.have_gguf:
            shutil.copy(os.path.join(FIXTURES, "gguf", "tiny-mixed.gguf"), os.path.join(cls.root, "gguf"))
            for f in os.listdir(os.path.join(FIXTURES, "gguf", "split")):
                if f.endswith(".gguf"):
                    shutil.copy(os.path.join(FIXTURES, "gguf", "split", f), os.path.join(cls.root, "gguf"))
        else:
            print(f"test_remote: {FIXTURES}/gguf is absent: the GGUF cases are skipped", file=sys.stderr)
        # torch.save zips (tests/fixtures/torch, written by torch 1.13): one file, a legacy one, and a sharded
        # pytorch_model.bin.index.json of two of them as shards.
        torch_dir = os.path.join(cls.root, "torch")
        os.makedirs(torch_dir)
        for f in ("state_dict.pt", "strided.pt", "legacy.pt"):
            shutil.copy(os.path.join(TORCH_FIXTURES, f), torch_dir)
        shards = {"pytorch_model-00001-of-00002.bin": "state_dict.pt", "pytorch_model-00002-of-00002.bin": "strided.pt"}
        weight_map = {}
        for shard, source in shards.items():
            shutil.copy(os.path.join(TORCH_FIXTURES, source), os.path.join(torch_dir, shard))
            for t in json.loads(run(["ls", os.path.join(torch_dir, shard), "--json"]).out)["tensors"]:
                weight_map[t["name"]] = shard
        with open(os.path.join(torch_dir, "pytorch_model.bin.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
        # state_dict.pt rewritten by Python's zipfile (our writer, not torch's: its entries unaligned) with 1 MiB of
        # a storage nothing references at the end, so its headers are a small part of the file.
        import zipfile
        with zipfile.ZipFile(os.path.join(TORCH_FIXTURES, "state_dict.pt")) as src, \
                zipfile.ZipFile(os.path.join(torch_dir, "padded.pt"), "w", zipfile.ZIP_STORED) as out:
            for info in src.infolist():
                out.writestr(info, src.read(info.filename))
            out.writestr(src.infolist()[0].filename.split("/")[0] + "/data/unreferenced", b"\0" * (1 << 20))
        # ... and with a 404-byte extra field (an unknown record, id 0x6666) on every entry's headers: longer than the
        # first guess of a local header's length, so those headers are fetched in a second round.
        with zipfile.ZipFile(os.path.join(TORCH_FIXTURES, "state_dict.pt")) as src, \
                zipfile.ZipFile(os.path.join(torch_dir, "long_extra.pt"), "w", zipfile.ZIP_STORED) as out:
            for info in src.infolist():
                info.extra = struct.pack("<HH", 0x6666, 400) + b"x" * 400
                out.writestr(info, src.read(info.filename))
            out.writestr(src.infolist()[0].filename.split("/")[0] + "/data/unreferenced", b"\0" * (1 << 20))
        # The hub's layout: ORG/NAME/resolve/REVISION/FILE.
        for rev in ("main", "v1"):
            d = os.path.join(cls.root, "hub", "org", "tiny", "resolve", rev)
            os.makedirs(d)
            shutil.copy(os.path.join(cls.root, "model.safetensors"), d)
        cls.nginx = remote_servers.Nginx(cls.root, tls=True)

    @classmethod
    def tearDownClass(cls):
        cls.nginx.stop()
        shutil.rmtree(cls.root, ignore_errors=True)

    def both(self, args, name, url=None, env=None, cache_home=None, config_home=None):
        """The command on the local file and on its URL: (local Run, remote Run)."""
        local = run(args[:1] + [os.path.join(self.root, name)] + args[1:])
        remote = run(args[:1] + [url or self.nginx.url(name)] + args[1:], env_extra=env, cache_home=cache_home, config_home=config_home)
        return local, remote

    def assert_same(self, local, remote, url_base=None):
        self.assertEqual(local.code, 0, local.err)
        self.assertEqual(remote.code, 0, remote.err)
        self.assertEqual(normalise(local.json(), self.root + "/"),
                         normalise(remote.json(), url_base or self.nginx.url()))


class TestFirstLook(RemoteCase):
    def test_info_and_ls_of_each_layout_equal_the_local_run(self):
        gguf = ("gguf/tiny-mixed.gguf", "gguf/tiny-split-00001-of-00002.gguf") if self.have_gguf else ()
        for name in ("model.safetensors", "sharded/model.safetensors.index.json", *gguf):
            for cmd in ("info", "ls"):
                local, remote = self.both([cmd, "--json"], name)
                self.assert_same(local, remote)
                self.assertIsNotNone(fetched_bytes(remote.err), remote.err)

    def test_info_of_a_sharded_checkpoint_fetches_only_headers(self):
        self.nginx.clear_log()
        _, remote = self.both(["info", "--json"], "sharded/model.safetensors.index.json")
        got, requests, retries = fetched_bytes(remote.err)
        self.assertLessEqual(got, 1.1 * self.sharded_header, remote.err)
        self.assertGreaterEqual(got, self.sharded_header)
        self.assertEqual(retries, 0)
        log = self.nginx.log()
        sent = sum(b for status, _, b, _ in log if status in (200, 206))
        self.assertEqual(sent, got, log)
        self.assertTrue(all(status in (200, 206, 404) for status, _, _, _ in log), log)
        self.assertTrue(all(auth == "-" for _, _, _, auth in log), log)  # no token outside hf://

    def test_stats_of_one_tensor_fetches_that_tensor(self):
        local, remote = self.both(["stats", "--json"], "model.safetensors")
        self.assert_same(local, remote)
        for name in ("embed.weight", "codes"):
            local = run(["stats", os.path.join(self.root, "model.safetensors"), name, "--json"])
            remote = run(["stats", self.nginx.url("model.safetensors"), name, "--json"])
            self.assert_same(local, remote)
            got, _, _ = fetched_bytes(remote.err)
            self.assertLessEqual(got, self.single_header + self.single[name].nbytes, remote.err)
            self.assertGreaterEqual(got, self.single_header + self.single[name].nbytes)

    def test_stats_with_flags_the_index_does_not_store(self):
        if not self.have_gguf:
            self.skipTest("the shared fixtures' gguf/tiny-mixed.gguf is absent")
        local = run(["stats", os.path.join(self.root, "gguf/tiny-mixed.gguf"), "--bins", "16", "--json"])
        remote = run(["stats", self.nginx.url("gguf/tiny-mixed.gguf"), "--bins", "16", "--json"])
        self.assert_same(local, remote)

    def test_index_streams_every_tensor_and_the_index_serves_later_commands(self):
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        for name in ("sharded/model.safetensors.index.json", *(("gguf/tiny-split-00001-of-00002.gguf",) if self.have_gguf else ())):
            r = run(["index", self.nginx.url(name), "--json"], cache_home=cache)
            self.assertEqual(r.code, 0, r.err)
            doc = r.json()
            self.assertEqual(doc["computed"], doc["tensors"] - doc["unavailable"])
            local = run(["stats", os.path.join(self.root, name), "--json"])
            remote = run(["stats", self.nginx.url(name), "--json"], cache_home=cache)
            self.assert_same(local, remote)
            self.assertLess(fetched_bytes(remote.err)[0], 1.1 * 1024 * 1024)  # served by the index: headers only
            again = run(["index", self.nginx.url(name), "--json"], cache_home=cache)
            self.assertEqual(again.json()["computed"], 0, again.out)
        # The stand-ins keep headers only: their tensor bytes were released.
        blocks = 0
        for dirpath, _, files in os.walk(os.path.join(cache, "tensormorph", "remote")):
            blocks += sum(os.stat(os.path.join(dirpath, f)).st_blocks * 512 for f in files)
        self.assertLess(blocks, 1024 * 1024)

    def test_https_with_the_test_certificate(self):
        env = {"CURL_CA_BUNDLE": self.nginx.cert_file}
        local, remote = self.both(["info", "--json"], "model.safetensors", url=self.nginx.tls_url("model.safetensors"), env=env)
        self.assert_same(local, remote, url_base=self.nginx.tls_url())
        untrusted = run(["info", self.nginx.tls_url("model.safetensors")])
        self.assertEqual(untrusted.code, IO, untrusted.err)
        self.assertIn(self.nginx.tls_url("model.safetensors"), untrusted.err)
        self.assertIn("certificate", untrusted.err.lower())

    def test_hf_paths_resolve_against_the_endpoint_and_the_token_is_never_shown(self):
        env = {"HF_ENDPOINT": self.nginx.url("hub"), "HF_TOKEN": "hf_secret_for_the_test"}
        for path, rev in (("hf://org/tiny/model.safetensors", "main"), ("hf://org/tiny@v1/model.safetensors", "v1")):
            self.nginx.clear_log()
            local = run(["ls", os.path.join(self.root, "model.safetensors"), "--json"])
            remote = run(["ls", path, "--json"], env_extra=env)
            self.assertEqual(remote.code, 0, remote.err)
            self.assertEqual(normalise(local.json(), os.path.join(self.root, "model.safetensors")),
                             normalise(remote.json(), path))
            self.assertNotIn("hf_secret", remote.out + remote.err)
            log = self.nginx.log()
            self.assertTrue(log and all(auth == "Bearer hf_secret_for_the_test" for _, _, _, auth in log), log)
            self.assertTrue(all("/org/tiny/resolve/%s/" % rev in uri for _, _, _, _, uri in self.nginx.log(uris=True)))
        missing = run(["info", "hf://org/absent/model.safetensors"], env_extra=env)
        self.assertEqual(missing.code, IO, missing.err)
        self.assertIn("/org/absent/resolve/main/model.safetensors", missing.err)
        self.assertIn("HTTP 404", missing.err)
        self.assertNotIn("hf_secret", missing.err)


class TestTorchZip(RemoteCase):
    """torch.save zips (pytorch_model.bin): the headers are the zip's tail and central directory, its local headers and
    data.pkl; the storages are tensor bytes, fetched when read."""

    def test_info_stats_and_index_of_zips_and_a_sharded_bin_index_equal_the_local_run(self):
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        for name in ("torch/state_dict.pt", "torch/strided.pt", "torch/pytorch_model.bin.index.json"):
            for args in (["info", "--json"], ["ls", "--json"], ["stats", "--json"]):
                local, remote = self.both(args, name, cache_home=cache)
                self.assert_same(local, remote)
            got, _, _ = fetched_bytes(remote.err)
            self.assertGreater(got, 0, remote.err)
        # info fetches headers only: the end records, the directory, the local headers and data.pkl, not the storages.
        fresh = tempfile.mkdtemp(prefix="tm-remote-cache-")
        local, remote = self.both(["info", "--json"], "torch/padded.pt", cache_home=fresh)
        self.assert_same(local, remote)
        got, _, _ = fetched_bytes(remote.err)
        self.assertLess(got, 16 * 1024, remote.err)
        local, remote = self.both(["stats", "--json"], "torch/padded.pt", cache_home=fresh)
        self.assert_same(local, remote)
        self.assertLess(fetched_bytes(remote.err)[0], 16 * 1024, remote.err)  # the referenced storages only
        # Local headers longer than the first guess: fetched in a second round, the same results.
        for args in (["info", "--json"], ["stats", "--json"]):
            local, remote = self.both(args, "torch/long_extra.pt", cache_home=tempfile.mkdtemp(prefix="tm-remote-cache-"))
            self.assert_same(local, remote)
        # One tensor: a transposed view fetches the bytes of its storage it spans, and its values equal the local run.
        local = run(["stats", os.path.join(self.root, "torch/state_dict.pt"), "views.transposed", "--json"])
        remote = run(["stats", self.nginx.url("torch/state_dict.pt"), "views.transposed", "--json"], cache_home=fresh)
        self.assert_same(local, remote)
        # index streams every tensor once; stats then come from the index.
        r = run(["index", self.nginx.url("torch/pytorch_model.bin.index.json"), "--json"], cache_home=fresh)
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["computed"], r.json()["tensors"] - r.json()["unavailable"])
        local, remote = self.both(["stats", "--json"], "torch/pytorch_model.bin.index.json", cache_home=fresh)
        self.assert_same(local, remote)

    def test_a_legacy_torch_save_is_refused_by_name(self):
        r = run(["info", self.nginx.url("torch/legacy.pt")])
        self.assertEqual(r.code, 4, r.err)
        self.assertIn(self.nginx.url("torch/legacy.pt") + ": a torch.save file in the legacy (pre-1.6, not zip) format is not read remotely", r.err)

    def test_a_truncated_zip_names_the_url_and_offset(self):
        with open(os.path.join(self.root, "torch", "state_dict.pt"), "rb") as f:
            data = f.read()
        with open(os.path.join(self.root, "torch", "cut.pt"), "wb") as f:
            f.write(data[:len(data) - 30])  # the end record's tail gone
        r = run(["info", self.nginx.url("torch/cut.pt")])
        self.assertEqual(r.code, BAD_INPUT, r.err)
        self.assertIn(self.nginx.url("torch/cut.pt") + ": zip, byte ", r.err)
        self.assertIn("no end of central directory record", r.err)


class TestS3(RemoteCase):
    """s3:// paths against s3rver (npm; it checks every request's AWS Signature Version 4): the same documents as the
    local run, the secret never shown, and a wrong secret refused naming the URL."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not remote_servers.have_s3rver():
            cls.s3 = None
            print("test_remote: web/node_modules/s3rver is absent (scripts/install-deps installs it): the s3:// cases are skipped",
                  file=sys.stderr)
            return
        cls.s3 = remote_servers.S3rver("models")
        for name in ("model.safetensors", "tuned.safetensors", "sharded/model.safetensors.index.json",
                     *("sharded/model-%05d-of-00003.safetensors" % (k + 1) for k in range(3))):
            cls.s3.put(name, os.path.join(cls.root, name))

    @classmethod
    def tearDownClass(cls):
        if cls.s3:
            cls.s3.stop()
        super().tearDownClass()

    def setUp(self):
        if not self.s3:
            self.skipTest("s3rver is absent (web/node_modules)")

    def s3_run(self, args, secret=None, cache_home=None):
        return run(args, env_extra=self.s3.env(secret), cache_home=cache_home or tempfile.mkdtemp(prefix="tm-s3-cache-"))

    def test_info_ls_stats_and_index_equal_the_local_run(self):
        for name in ("model.safetensors", "sharded/model.safetensors.index.json"):
            for cmd in (["info", "--json"], ["ls", "--json"], ["stats", "--json"]):
                local = run(cmd[:1] + [os.path.join(self.root, name)] + cmd[1:])
                remote = self.s3_run(cmd[:1] + ["s3://models/" + name] + cmd[1:])
                self.assertEqual(local.code, 0, local.err)
                self.assertEqual(remote.code, 0, remote.err)
                self.assertEqual(normalise(local.json(), self.root + "/"), normalise(remote.json(), "s3://models/"), (cmd, name))
                self.assertIsNotNone(fetched_bytes(remote.err), remote.err)
                self.assertNotIn(self.s3.SECRET + "\n", remote.err)
        cache = tempfile.mkdtemp(prefix="tm-s3-cache-")
        r = self.s3_run(["index", "s3://models/sharded/model.safetensors.index.json", "--json"], cache_home=cache)
        self.assertEqual(r.code, 0, r.err)
        self.assertGreater(self.s3.gate.checked, 0, "no request passed the signature check")

    def test_diff_of_two_s3_objects_equals_the_local_run(self):
        local = run(["diff", os.path.join(self.root, "model.safetensors"), os.path.join(self.root, "tuned.safetensors"), "--json"],
                    cache_home=tempfile.mkdtemp(prefix="tm-s3-cache-"))
        remote = self.s3_run(["diff", "s3://models/model.safetensors", "s3://models/tuned.safetensors", "--json"])
        self.assertEqual(remote.code, 0, remote.err)
        want, got = local.json(), remote.json()
        for doc in (want, got):
            doc.pop("index")
            for pair in doc["pairs"]:
                pair.pop("seconds")
        self.assertEqual(normalise(want, self.root + "/"), normalise(got, "s3://models/"))

    def test_a_wrong_secret_is_refused_by_the_server_naming_the_url(self):
        r = self.s3_run(["info", "s3://models/model.safetensors"], secret="not-the-secret")
        self.assertNotEqual(r.code, 0)
        self.assertIn(self.s3.endpoint + "/models/model.safetensors", r.err)
        self.assertIn("HTTP 403 (S3 SignatureDoesNotMatch: ", r.err)
        self.assertNotIn("not-the-secret", r.err + r.out)


class TestRefusals(RemoteCase):
    def test_a_lying_header_length_names_the_url_and_offset(self):
        r = run(["info", self.nginx.url("lying.safetensors")])
        self.assertEqual(r.code, BAD_INPUT, r.err)
        self.assertIn(self.nginx.url("lying.safetensors") + ": offset 0: a safetensors header length of 1048576 bytes", r.err)

    def test_missing_file_and_malformed_urls(self):
        r = run(["info", self.nginx.url("absent.safetensors")])
        self.assertEqual(r.code, IO, r.err)
        self.assertIn(self.nginx.url("absent.safetensors") + " (bytes 0-7): HTTP 404", r.err)
        for bad in ("http://127.0.0.1:1", "http://127.0.0.1:1/a/../b.safetensors", "hf://org/model.safetensors",
                    "http://user:pw@127.0.0.1/x.safetensors", "http://127.0.0.1/x.safetensors?a=1"):
            r = run(["info", bad])
            self.assertEqual(r.code, INVALID, (bad, r.err))
            self.assertIn(bad + ": not a usable remote path", r.err)

    def test_malformed_s3_paths(self):
        for path, says in (("s3://bucket", "expected s3://BUCKET/KEY"), ("s3://Bad_Bucket/model.safetensors", "'Bad_Bucket' is not an S3 bucket name"),
                           ("s3://models/a/../b.safetensors", "empty, '.' or '..' path segment")):
            r = run(["info", path])
            self.assertEqual(r.code, INVALID, r.err)
            self.assertIn(path + ": not a usable remote path: " + says, r.err)

    def test_nothing_listens(self):
        url = "http://127.0.0.1:%d/model.safetensors" % remote_servers.free_port()
        cfg = tempfile.mkdtemp(prefix="tm-remote-cfg-")
        os.makedirs(os.path.join(cfg, "tensormorph"))
        with open(os.path.join(cfg, "tensormorph", "settings.json"), "w") as f:
            json.dump({"remote.attempts": "2"}, f)
        r = run(["info", url], config_home=cfg)
        self.assertEqual(r.code, IO, r.err)
        self.assertIn(url + " (bytes 0-7): failed after 2 attempts; last: Couldn't connect to server", r.err)


class TestFaults(RemoteCase):
    """Each fault spoils responses of tensor data (ranges past the headers) through the proxy."""

    def settings(self, **values):
        cfg = tempfile.mkdtemp(prefix="tm-remote-cfg-")
        os.makedirs(os.path.join(cfg, "tensormorph"))
        with open(os.path.join(cfg, "tensormorph", "settings.json"), "w") as f:
            json.dump({k.replace("__", "."): str(v) for k, v in values.items()}, f)
        return cfg

    def through_proxy(self, fault, count=1, cfg=None, name="model.safetensors", tensor="embed.weight", stall_s=4):
        proxy = remote_servers.FaultProxy(self.nginx.port, fault, count=count, min_offset=self.single_header, stall_s=stall_s)
        try:
            t0 = time.time()
            r = run(["stats", proxy.url(name), tensor, "--json"], config_home=cfg)
            return r, time.time() - t0, proxy
        finally:
            proxy.stop()

    def expect_same(self, r, proxy):
        local = run(["stats", os.path.join(self.root, "model.safetensors"), "embed.weight", "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(normalise(local.json(), self.root + "/"), normalise(r.json(), proxy.url()))

    def test_reset_mid_body_is_resumed(self):
        r, _, proxy = self.through_proxy("reset")
        self.expect_same(r, proxy)
        self.assertEqual(fetched_bytes(r.err)[2], 1, r.err)

    def test_short_body_is_resumed(self):
        r, _, proxy = self.through_proxy("short", count=2)
        self.expect_same(r, proxy)
        self.assertEqual(fetched_bytes(r.err)[2], 2, r.err)

    def test_503_honours_retry_after(self):
        r, seconds, proxy = self.through_proxy("503", count=2)
        self.expect_same(r, proxy)
        self.assertEqual(fetched_bytes(r.err)[2], 2, r.err)
        self.assertGreaterEqual(seconds, 2.0)  # Retry-After: 1, twice

    def test_stalled_body_is_retried_after_the_stall_timeout(self):
        cfg = self.settings(**{"remote__stall_timeout_s": 1})
        r, _, proxy = self.through_proxy("stall", cfg=cfg, stall_s=4)
        self.expect_same(r, proxy)
        self.assertEqual(fetched_bytes(r.err)[2], 1, r.err)

    def test_persistent_503_fails_naming_the_url_range_and_cause(self):
        cfg = self.settings(**{"remote__attempts": 2})
        r, _, proxy = self.through_proxy("503", count=100, cfg=cfg)
        self.assertEqual(r.code, IO, r.err)
        self.assertRegex(r.err, re.escape(proxy.url("model.safetensors")) + r" \(bytes \d+-\d+\): failed after 2 attempts; last: HTTP 503")

    def test_index_killed_mid_run_resumes_where_it_stopped(self):
        """A 48 MiB checkpoint of four 12 MiB f16 tensors (one fetch batch each at the minimum 16 MiB budget quarter):
        the proxy stalls a response past the first tensor; the run is killed while it waits. The rerun, through the
        same URL, fetches only what was not committed and ends with the local statistics."""
        rng = np.random.default_rng(3)
        big = {"t%d.weight" % k: rng.standard_normal((3072, 2048)).astype(np.float16) for k in range(4)}
        header = write_safetensors(os.path.join(self.root, "big.safetensors"), big)
        one = big["t0.weight"].nbytes
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        proxy = remote_servers.FaultProxy(self.nginx.port, "stall", count=1, min_offset=header + 2 * one, stall_s=60)
        env = dict(os.environ, XDG_CACHE_HOME=cache, XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="tm-cfg-"))
        try:
            first = subprocess.Popen([TM_BIN, "index", proxy.url("big.safetensors"), "--memory-budget", "64M", "--json"],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            deadline = time.time() + 60
            while proxy.spoiled == 0 and time.time() < deadline:
                time.sleep(0.1)
            self.assertEqual(proxy.spoiled, 1, "the run never reached the stalled response")
            time.sleep(3.0)  # the batches before it are committed meanwhile (the stall lasts 60 s)
            first.kill()
            first.communicate()
            again = run(["index", proxy.url("big.safetensors"), "--memory-budget", "64M", "--json"], cache_home=cache)
            remote = run(["stats", proxy.url("big.safetensors"), "--json"], cache_home=cache)
        finally:
            proxy.stop()
        self.assertEqual(again.code, 0, again.err)
        doc = again.json()
        self.assertGreaterEqual(doc["computed"], 1)
        self.assertLess(doc["computed"], 4, "nothing was committed before the kill")
        got, _, _ = fetched_bytes(again.err)
        self.assertLessEqual(got, header + doc["computed"] * one + 64 * 1024, again.err)
        local = run(["stats", os.path.join(self.root, "big.safetensors"), "--json"])
        self.assertEqual(remote.code, 0, remote.err)
        self.assertEqual(normalise(local.json(), self.root + "/"), normalise(remote.json(), proxy.url()))

    def test_etag_change_during_index_fails_naming_the_url_and_commits_nothing_wrong(self):
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        # The headers' requests pass (open, header, config.json, quantize_config.json); the data's carry another ETag.
        proxy = remote_servers.FaultProxy(self.nginx.port, "etag", count=4)
        try:
            r = run(["index", proxy.url("model.safetensors"), "--json"], cache_home=cache)
        finally:
            proxy.stop()
        self.assertEqual(r.code, BAD_INPUT, r.err)
        self.assertIn(proxy.url("model.safetensors") + ": the file changed during this run (its ETag is now \"changed-", r.err)
        # Nothing was committed: a clean run afterwards computes every tensor and equals the local statistics.
        again = run(["stats", self.nginx.url("model.safetensors"), "--json"], cache_home=cache)
        local = run(["stats", os.path.join(self.root, "model.safetensors"), "--json"])
        self.assert_same(local, again)


if __name__ == "__main__":
    unittest.main()
