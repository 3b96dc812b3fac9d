"""Remote checkpoints through the faces (docs/remote.md): diff and compare of two remote checkpoints, render, tile
and export of a remote tensor, and the header cache, on Debian's nginx on loopback (RemoteCase of test_remote.py,
whose parsing and fault cases run in the ASan pass too; these run in the release pass). Every remote result equals
the local run on the same files, with URLs where the local run shows paths."""
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import run  # noqa: E402
import remote_servers  # noqa: E402
import test_serve  # noqa: E402
from test_remote import BAD_INPUT, RemoteCase, fetched_bytes, normalise, write_safetensors  # noqa: E402


class TestRenderAndExport(RemoteCase):
    """render (one tensor, one tile) and export of a remote checkpoint: the same PNG bytes, documents and .npy as the
    local run, fetching that tensor only; --overview of a remote checkpoint not yet indexed is refused, naming the
    command that indexes it, and draws once it is indexed."""

    def test_render_tile_and_export_equal_the_local_run(self):
        out = tempfile.mkdtemp(prefix="tm-remote-out-")
        local_png, remote_png = os.path.join(out, "local.png"), os.path.join(out, "remote.png")
        local = run(["render", os.path.join(self.root, "model.safetensors"), "embed.weight", "-o", local_png, "--json"])
        remote = run(["render", self.nginx.url("model.safetensors"), "embed.weight", "-o", remote_png, "--json"])
        self.assertEqual(remote.code, 0, remote.err)
        with open(local_png, "rb") as a, open(remote_png, "rb") as b:
            self.assertEqual(a.read(), b.read())
        want, got = local.json(), remote.json()
        want.pop("out"), got.pop("out")
        self.assertEqual(normalise(want, self.root + "/"), normalise(got, self.nginx.url()))
        got_bytes, _, _ = fetched_bytes(remote.err)
        self.assertLessEqual(got_bytes, self.single_header + self.single["embed.weight"].nbytes, remote.err)
        self.assertGreaterEqual(got_bytes, self.single_header + self.single["embed.weight"].nbytes)
        local, remote = self.both(["tile", "embed.weight", "--level", "0", "--tile", "0,0", "--json"], "model.safetensors")
        self.assert_same(local, remote)
        local_npy, remote_npy = os.path.join(out, "local.npy"), os.path.join(out, "remote.npy")
        self.assertEqual(run(["export", os.path.join(self.root, "model.safetensors"), "norm.weight", "-o", local_npy]).code, 0)
        r = run(["export", self.nginx.url("model.safetensors"), "norm.weight", "-o", remote_npy])
        self.assertEqual(r.code, 0, r.err)
        np.testing.assert_array_equal(np.load(remote_npy), self.single["norm.weight"])
        with open(local_npy, "rb") as a, open(remote_npy, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_overview_of_an_unindexed_remote_checkpoint_is_refused_then_drawn_once_indexed(self):
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        out = tempfile.mkdtemp(prefix="tm-remote-out-")
        url = self.nginx.url("model.safetensors")
        r = run(["render", url, "--overview", "-o", out], cache_home=cache)
        self.assertEqual(r.code, 4, r.err)
        self.assertIn("run `tensormorph index " + url + "` first", r.err)
        self.assertEqual(run(["index", url], cache_home=cache).code, 0)
        r = run(["render", url, "--overview", "-o", out, "--json"], cache_home=cache)
        self.assertEqual(r.code, 0, r.err)
        self.assertTrue(os.path.isfile(os.path.join(out, "overview.png")))


class TestHeaderCache(RemoteCase):
    """Reopening within remote.header_max_age_s makes no request; a file changed on the server after its headers were
    cached fails the first command that reads data, naming the URL, and the next command fetches the headers again;
    the cache folder stays within remote.header_cache_bytes."""

    def config(self, **settings):
        home = tempfile.mkdtemp(prefix="tm-cfg-")
        for k, v in settings.items():
            r = run(["config", "set", "remote." + k, str(v)], config_home=home)
            self.assertEqual(r.code, 0, r.err)
        return home

    def test_reopening_is_served_from_the_cache_and_max_age_0_asks_again(self):
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        url = self.nginx.url("sharded/model.safetensors.index.json")
        first = run(["info", url, "--json"], cache_home=cache)
        second = run(["info", url, "--json"], cache_home=cache)
        self.assertEqual(first.code, 0, first.err)
        self.assertEqual(second.out, first.out)
        self.assertEqual(fetched_bytes(second.err), (0, 0, 0), second.err)
        self.assertIn("from the header cache", second.err)
        stats = run(["stats", url, "layers.1.w2", "--json"], cache_home=cache)  # data through cached headers
        local = run(["stats", os.path.join(self.root, "sharded/model.safetensors.index.json"), "layers.1.w2", "--json"])
        self.assertEqual(normalise(local.json(), self.root + "/"), normalise(stats.json(), self.nginx.url()))
        asked = run(["info", url, "--json"], cache_home=cache, config_home=self.config(header_max_age_s=0))
        self.assertEqual(asked.out, first.out)
        self.assertGreater(fetched_bytes(asked.err)[1], 0, asked.err)

    def test_a_file_changed_after_caching_fails_naming_it_then_is_fetched_again(self):
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        path = os.path.join(self.root, "changing.safetensors")
        shutil.copy(os.path.join(self.root, "model.safetensors"), path)
        url = self.nginx.url("changing.safetensors")
        self.assertEqual(run(["info", url], cache_home=cache).code, 0)
        changed = {k: v.copy() for k, v in self.single.items()}
        changed["embed.weight"] += 1
        time.sleep(1.1)  # nginx's ETag is the modification second and the size
        write_safetensors(path, changed, {"format": "pt"})
        r = run(["stats", url, "embed.weight", "--json"], cache_home=cache)
        self.assertEqual(r.code, BAD_INPUT, r.err)
        self.assertIn(url, r.err)
        self.assertIn("the headers came from the cache", r.err)
        again = run(["stats", url, "embed.weight", "--json"], cache_home=cache)
        self.assertEqual(again.code, 0, again.err)
        local = run(["stats", path, "embed.weight", "--json"])
        self.assertEqual(normalise(local.json(), self.root + "/"), normalise(again.json(), self.nginx.url()))

    def test_the_cache_folder_is_bounded(self):
        cache = tempfile.mkdtemp(prefix="tm-remote-cache-")
        home = self.config(header_cache_bytes=1 << 20)
        pad = {"pad": "x" * (600 << 10)}  # a 600 KiB header each
        for k in range(3):
            write_safetensors(os.path.join(self.root, "padded%d.safetensors" % k), {"w": np.ones((4, 4), np.float32)}, pad)
            r = run(["info", self.nginx.url("padded%d.safetensors" % k)], cache_home=cache, config_home=home)
            self.assertEqual(r.code, 0, r.err)
        allocated = 0
        for dirpath, _, files in os.walk(os.path.join(cache, "tensormorph", "remote")):
            allocated += sum(os.stat(os.path.join(dirpath, f)).st_blocks * 512 for f in files)
        self.assertLessEqual(allocated, 1 << 20)
        left = os.listdir(os.path.join(cache, "tensormorph", "remote", "http", "127.0.0.1_%d" % self.nginx.port))
        self.assertIn("padded2.safetensors", left)       # the newest stays
        self.assertNotIn("padded0.safetensors", left)    # the oldest went first


class TestDiff(RemoteCase):
    def diff(self, a, b, cache):
        return run(["diff", a, b, "--json"], cache_home=cache)

    def test_diff_of_remote_checkpoints_equals_the_local_run_and_fetches_each_tensor_once(self):
        """`diff URL URL` and `diff PATH URL` give the local document (paths shown as URLs aside, and the difference
        index's own location); the transfer is the headers plus each compared tensor's bytes once per side."""
        local = self.diff(os.path.join(self.root, "model.safetensors"), os.path.join(self.root, "tuned.safetensors"),
                          tempfile.mkdtemp(prefix="tm-remote-cache-"))
        self.assertEqual(local.code, 0, local.err)
        ranked = [p["name"] for p in local.json()["pairs"]]
        self.assertIn("embed.weight", ranked)
        for a, b in ((self.nginx.url("model.safetensors"), self.nginx.url("tuned.safetensors")),
                     (os.path.join(self.root, "model.safetensors"), self.nginx.url("tuned.safetensors"))):
            remote = self.diff(a, b, tempfile.mkdtemp(prefix="tm-remote-cache-"))
            self.assertEqual(remote.code, 0, remote.err)
            want, got = local.json(), remote.json()
            for doc in (want, got):  # the difference index's location and the pairs' timings are the run's own
                doc.pop("index")
                for pair in doc["pairs"]:
                    pair.pop("seconds")
            self.assertEqual(normalise(want, self.root + "/"), normalise(got, self.nginx.url(), self.root + "/"))
            transfers = re.findall(r"fetched (\d+) bytes", remote.err)
            self.assertEqual(len(transfers), 2 if a.startswith("http") else 1, remote.err)
            self.assertEqual(int(transfers[-1]), self.tuned_header + self.tuned_bytes, remote.err)

    def test_compare_of_remote_checkpoints_equals_the_local_run(self):
        local = run(["compare", os.path.join(self.root, "model.safetensors"), os.path.join(self.root, "tuned.safetensors"), "--json"])
        self.assertEqual(local.code, 0, local.err)
        remote = run(["compare", self.nginx.url("model.safetensors"), self.nginx.url("tuned.safetensors"), "--json"])
        self.assertEqual(remote.code, 0, remote.err)
        self.assertEqual(normalise(local.json(), self.root + "/"), normalise(remote.json(), self.nginx.url()))
        transfers = [int(b) for b in re.findall(r"fetched (\d+) bytes", remote.err)]
        self.assertEqual(transfers, [self.single_header + sum(a.nbytes for a in self.single.values()),
                                     self.tuned_header + self.tuned_bytes], remote.err)

    def test_a_missing_remote_side_names_the_url(self):
        r = self.diff(self.nginx.url("model.safetensors"), self.nginx.url("absent.safetensors"), tempfile.mkdtemp(prefix="tm-remote-cache-"))
        self.assertNotEqual(r.code, 0)
        self.assertIn(self.nginx.url("absent.safetensors"), r.err)


class TestServe(RemoteCase):
    """`serve URL` beside `serve PATH` of the same file, in one server: the inventory, the statistics, stored tiles,
    cells below the stored levels (the values, fetched on demand), profiles, outliers and renders of the remote
    checkpoint equal the local one's; at start the server fetches the headers only."""

    def test_a_remote_checkpoint_is_served_as_the_local_one(self):
        import signal
        from urllib.parse import quote
        tmp = tempfile.mkdtemp(prefix="tm-remote-serve-")
        env = test_serve.private_env(tmp)
        srv = test_serve.Server([os.path.join(self.root, "model.safetensors"), self.nginx.url("model.safetensors"),
                                 os.path.join(self.root, "tuned.safetensors"), self.nginx.url("tuned.safetensors")], env)
        try:
            def get(path):
                status, headers, body = test_serve.http_get(srv.host, srv.port, path)
                self.assertEqual(status, 200, (path, body[:300]))
                return headers, body

            _, body = get("/api/checkpoints")
            listed = {c["id"]: c for c in __import__("json").loads(body)["checkpoints"]}
            self.assertEqual(listed["1"]["path"], self.nginx.url("model.safetensors"))
            json = __import__("json")
            rows = json.loads(get("/api/tensors?limit=100")[1])["tensors"]
            by = {(r["checkpoint"], r["name"]): r for r in rows}
            for name in self.single:
                local, remote = dict(by[("0", name)]), dict(by[("1", name)])
                local.pop("checkpoint"), remote.pop("checkpoint")
                self.assertEqual(local, remote, name)
                self.assertIsNotNone(remote["stats"], name)
                a, b = (json.loads(get(f"/api/tensors/{c}/{quote(name)}")[1]) for c in "01")
                a.pop("checkpoint"), b.pop("checkpoint")
                self.assertEqual(a, b, name)
            for path in ("/api/tiles/{}/embed.weight?level=0&x=0&y=0", "/api/profile/{}/embed.weight?row=3",
                         "/api/profile/{}/embed.weight?col=7", "/api/render/{}/embed.weight.png?level=0&x=0&y=0",
                         "/api/outliers/{}/embed.weight?top=2"):
                with self.subTest(path=path):
                    a, b = get(path.format("0"))[1], get(path.format("1"))[1]
                    if path.startswith("/api/outliers"):
                        a, b = json.loads(a), json.loads(b)
                        a.pop("checkpoint"), b.pop("checkpoint")
                    self.assertEqual(a, b)
            headers_local, cells_local = get("/api/cells/0/embed.weight?level=0&x=0&y=0")
            headers_remote, cells_remote = get("/api/cells/1/embed.weight?level=0&x=0&y=0")
            self.assertEqual(headers_remote["x-tensormorph-source"], "values")
            self.assertEqual(cells_local, cells_remote)
            # A command on the same server's files, with the same cache folder, runs beside the server (each process
            # holds its fetched bytes in its own memory; the folder's lock is shared while in use).
            r = run(["stats", self.nginx.url("model.safetensors"), "embed.weight", "--json"], cache_home=env["XDG_CACHE_HOME"], timeout=60)
            self.assertEqual(r.code, 0, r.err)
            self.assertEqual(r.json()["tensors"][0]["stats"]["mean"], json.loads(get("/api/tensors/1/embed.weight")[1])["stats"]["mean"])
            # The difference of the two remote checkpoints (1, 3) equals the local pair's (0, 2): the document, a
            # tile's statistics and a tile's values.
            def strip(doc):
                doc.get("index", {}).pop("database", None)  # keyed by the files' identities: another file
                text = json.dumps(doc).replace(self.nginx.url(), "@").replace(self.root + "/", "@")
                text = re.sub(r'"seconds": [0-9.e+-]+', '"seconds": 0', text)
                return json.loads(re.sub(r'"(checkpoint|checkpoint_a|checkpoint_b)": "[0-3]"', r'"\1": "?"', text))
            for path in ("/api/diff/{}/{}?top=5", "/api/diff/{}/{}/tiles/embed.weight?level=0&x=0&y=0"):
                with self.subTest(path=path):
                    self.maxDiff = None
                    self.assertEqual(strip(json.loads(get(path.format(0, 2))[1])), strip(json.loads(get(path.format(1, 3))[1])))
            a, b = get("/api/diff/0/2/values/embed.weight?level=0&x=0&y=0")[1], get("/api/diff/1/3/values/embed.weight?level=0&x=0&y=0")[1]
            self.assertEqual(a, b)
            self.assertTrue(np.any(np.frombuffer(b, "<f8") != 0))  # every 5th row was changed
            # The cells are the values' means over each cell (the values were fetched, not holes read as zeros).
            rows, cols = map(int, headers_remote["x-tensormorph-cells"].split(","))
            cr, cc = map(int, headers_remote["x-tensormorph-cell-size"].split(","))
            w = self.single["embed.weight"].astype(np.float64)
            want = w.reshape(rows, cr, cols, cc).mean(axis=(1, 3)).ravel()
            np.testing.assert_allclose(np.frombuffer(cells_remote, "<f8"), want, rtol=1e-12)
        finally:
            srv.proc.send_signal(signal.SIGTERM)
            _, err = srv.proc.communicate(timeout=30)
        # At start: the headers only (the sidecars are absent).
        m = re.search(r"checkpoint 1: fetched (\d+) bytes", err)
        self.assertIsNotNone(m, err)
        self.assertEqual(int(m.group(1)), self.single_header, err)
        self.assertEqual(srv.proc.returncode, 0, err)

    def test_level0_cells_of_a_large_tensor_fetch_the_rows_they_show(self):
        """A level-0 tile of a 32 MiB tensor served remotely (after indexing, which fetched every tensor and let each
        go) fetches the 1 MiB blocks of the rows it shows, not the tensor (GET /api/checkpoints' remote.bytes_received
        before and after), equals the local server's cells and numpy's values, and a second request of the same tile
        fetches nothing (the blocks are kept under the budget)."""
        import json
        from test_remote import write_safetensors as write
        rng = np.random.default_rng(11)
        wide = rng.standard_normal((2048, 4096)).astype(np.float32)
        path = os.path.join(self.root, "wide.safetensors")
        write(path, {"wide": wide})
        tmp = tempfile.mkdtemp(prefix="tm-remote-serve-")
        srv = test_serve.Server([path, self.nginx.url("wide.safetensors")], test_serve.private_env(tmp))
        try:
            def get(p):
                code, headers, body = test_serve.http_get(srv.host, srv.port, p)
                self.assertEqual(code, 200, (p, body[:300]))
                return headers, body

            def received():
                listed = {c["id"]: c for c in json.loads(get("/api/checkpoints")[1])["checkpoints"]}
                self.assertNotIn("remote", listed["0"])
                return listed["1"]["remote"]["bytes_received"]

            tile = "/api/cells/{}/wide?level=0&x=3&y=2"
            before = received()
            headers_local, cells_local = get(tile.format(0))
            headers, cells = get(tile.format(1))
            fetched = received() - before
            self.assertEqual(headers["x-tensormorph-source"], "values")
            self.assertEqual(headers["x-tensormorph-cell-size"], "1,1")
            self.assertEqual(cells, cells_local)
            r0, r1 = map(int, headers["x-tensormorph-tile-rows"].split(","))
            c0, c1 = map(int, headers["x-tensormorph-tile-cols"].split(","))
            self.assertGreater(c0, 0)
            np.testing.assert_array_equal(np.frombuffer(cells, "<f8"), wide[r0:r1, c0:c1].astype(np.float64).ravel())
            block = 1 << 20
            first, last = (r0 * wide.shape[1] * 4) // block, (r1 * wide.shape[1] * 4 - 1) // block
            print(f"level-0 tile rows {r0}:{r1} cols {c0}:{c1}: fetched {fetched} bytes of the tensor's {wide.nbytes}", file=sys.stderr)
            self.assertLessEqual(fetched, (last - first + 1) * block, (r0, r1, fetched))
            self.assertGreaterEqual(fetched, (r1 - r0) * wide.shape[1] * 4)
            self.assertLess(fetched, wide.nbytes // 4)
            before = received()
            self.assertEqual(get(tile.format(1))[1], cells)
            self.assertEqual(received(), before)
        finally:
            srv.stop()
            os.remove(path)

    def test_level0_tiles_read_side_by_side_under_a_small_budget_are_exact(self):
        """The same 32 MiB tensor under compute.memory_budget 80M (20 MiB kept; indexing's exact quantiles need 66):
        sixteen level-0 tiles over all eight row bands (32 MiB of blocks) in four threads at once, each read while
        others' blocks are evicted, every one equal to numpy's values (a block freed under a reader reads as zeros)."""
        import json
        from concurrent.futures import ThreadPoolExecutor
        from test_remote import write_safetensors as write
        rng = np.random.default_rng(12)
        wide = rng.standard_normal((2048, 4096)).astype(np.float32)
        path = os.path.join(self.root, "wide2.safetensors")
        write(path, {"wide": wide})
        tmp = tempfile.mkdtemp(prefix="tm-remote-serve-")
        env = test_serve.private_env(tmp)
        os.makedirs(os.path.join(env["XDG_CONFIG_HOME"], "tensormorph"))
        with open(os.path.join(env["XDG_CONFIG_HOME"], "tensormorph", "settings.json"), "w") as f:
            json.dump({"compute.memory_budget": "80M"}, f)
        srv = test_serve.Server([self.nginx.url("wide2.safetensors")], env)
        try:
            def tile(xy):
                code, headers, body = test_serve.http_get(srv.host, srv.port, "/api/cells/0/wide?level=0&x=%d&y=%d" % xy)
                self.assertEqual(code, 200, body[:300])
                r0, r1 = map(int, headers["x-tensormorph-tile-rows"].split(","))
                c0, c1 = map(int, headers["x-tensormorph-tile-cols"].split(","))
                return np.array_equal(np.frombuffer(body, "<f8"), wide[r0:r1, c0:c1].astype(np.float64).ravel())
            tiles = [(x, y) for y in range(8) for x in (0, 9)]
            with ThreadPoolExecutor(4) as pool:
                self.assertEqual(list(pool.map(tile, tiles)), [True] * len(tiles))
            # The first band's blocks were evicted (least recently read): read again, fetched again, still exact.
            def received():
                return json.loads(test_serve.http_get(srv.host, srv.port, "/api/checkpoints")[2])["checkpoints"][0]["remote"]["bytes_received"]
            before = received()
            self.assertTrue(tile((0, 0)))
            self.assertGreaterEqual(received() - before, 4 << 20)
        finally:
            srv.stop()
            os.remove(path)

    def test_committed_tensors_are_served_while_later_batches_are_fetched(self):
        """Four 16 MiB float16 tensors under a 64 MiB budget are indexed in batches of 16 MiB, one tensor each; the
        proxy stalls the second batch's first response for 4 s. Meanwhile the first batch's tensors are answered with their statistics (the
        job lets go of the index between batches) and the second's are refused with 503 naming the job."""
        import json
        from test_remote import write_safetensors as write
        rng = np.random.default_rng(3)
        big = {f"t{k}": rng.standard_normal(1 << 23, dtype=np.float32).astype(np.float16) for k in range(4)}
        header = write(os.path.join(self.root, "big.safetensors"), big)
        proxy = remote_servers.FaultProxy(self.nginx.port, "stall", count=1, min_offset=header + (16 << 20), stall_s=4)
        tmp = tempfile.mkdtemp(prefix="tm-remote-serve-")
        env = test_serve.private_env(tmp)
        os.makedirs(os.path.join(env["XDG_CONFIG_HOME"], "tensormorph"))
        with open(os.path.join(env["XDG_CONFIG_HOME"], "tensormorph", "settings.json"), "w") as f:
            json.dump({"compute.memory_budget": "64M", "remote.stall_timeout_s": "1"}, f)
        srv = test_serve.Server([proxy.url("big.safetensors")], env, wait_indexed=False)
        try:
            def status(name):
                code, _, body = test_serve.http_get(srv.host, srv.port, "/api/tensors/0/" + name)
                return code, body
            deadline = time.time() + 60
            while time.time() < deadline and status("t0")[0] != 200:
                time.sleep(0.05)
            code, body = status("t0")
            self.assertEqual(code, 200, body[:300])
            self.assertAlmostEqual(json.loads(body)["stats"]["mean"], float(big["t0"].astype(np.float64).mean()), places=12)
            self.assertEqual([j["state"] for j in srv.jobs()], ["running"])
            code, body = status("t3")
            self.assertEqual(code, 503, body[:300])
            self.assertIn(b"being indexed", body)
            srv.wait_indexed(time.time() + 60)
            code, body = status("t3")
            self.assertEqual(code, 200, body[:300])
            self.assertAlmostEqual(json.loads(body)["stats"]["mean"], float(big["t3"].astype(np.float64).mean()), places=12)
            self.assertEqual(proxy.spoiled, 1)
        finally:
            srv.stop()
            proxy.stop()
            os.remove(os.path.join(self.root, "big.safetensors"))


if __name__ == "__main__":
    unittest.main()
