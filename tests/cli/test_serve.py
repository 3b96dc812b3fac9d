"""`tensormorph serve` end to end (Debian's python3, standard library only): every endpoint of the JSON API
against the CLI's own answers (tile bytes decoded and compared with `tile --json`, statistics with
`stats --json`, compute constraints read back through `config get`), bad requests (400 naming the
parameter, 404 for unknown checkpoints and tensors), traversal attempts that must never return a file's
bytes, the token (refused at start without one on a non-loopback host; 401 without, 200 with), without a
token a Host header that is foreign, empty, missing or given twice (403), --http-threads out of 1..256 (exit
2), a client that connects and sends nothing while others are served, and a clean stop on SIGTERM. Slow and
too many clients: test_serve_load.py."""
import http.client
import json
import os
import re
import signal
import socket
import struct
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import TM_BIN  # noqa: E402

DAMAGED = "model.layers.0.mlp.down_proj.weight"
EMBED = "model.embed_tokens.weight"   # [8000, 512] bf16: 32 x 2 level-0 tiles, several levels
SLASHED = "odd/name.with/slash"       # a tensor name with slashes and dots
SECRET = b"TOPSECRET-4f1c"            # beside the web root: no request may return it
TILE_FIXED = struct.Struct("<4Q5d")   # count, nan, inf, zero, min, max, abs_max, sum, m2


def write_small_safetensors(path):
    """Two float32 tensors written by hand (no numpy): SLASHED [3, 5] = 0..14 and 'plain' [4] = -1.5."""
    tensors = [(SLASHED, [3, 5], struct.pack("<15f", *range(15))), ("plain", [4], struct.pack("<4f", *[-1.5] * 4))]
    header, offset = {}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(d for _, _, d in tensors))


def private_env(tmp):
    """This process's environment with HOME and the XDG config and cache folders fresh under tmp, and no
    TENSORMORPH_PLUGIN_DIR: the server reads and writes nothing of the user's."""
    env = dict(os.environ)
    env.pop("TENSORMORPH_PLUGIN_DIR", None)
    for var in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        env[var] = tempfile.mkdtemp(prefix="tm-serve-env-", dir=tmp)
    return env


def http_get(host, port, path, timeout=30, headers=None, source=None):
    """(status, headers with lower-case names, body) of GET path on a fresh connection, optionally from
    another loopback address (`source`)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout, source_address=(source, 0) if source else None)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


class ServedCase(unittest.TestCase):
    """A test class around one `tensormorph serve` its setUpClass starts (cls.server) with a private folder (cls.tmp)
    and environment (cls.env): tearDownClass stops the server, which must exit 0, and removes the folder; tm() runs
    the CLI in the same environment."""

    @classmethod
    def tearDownClass(cls):
        code, _ = cls.server.stop()
        assert code == 0, code
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def tm(cls, *args):
        return subprocess.run([TM_BIN] + list(args), capture_output=True, text=True, env=cls.env, timeout=300)


class Server:
    """A `tensormorph serve` process on a free port; url is what it printed."""

    def __init__(self, args, env, wait_indexed=True):
        self.proc = subprocess.Popen([TM_BIN, "serve", "--port", "0"] + args, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        deadline = time.time() + 300
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("serve exited early: " + self.proc.stderr.read())
            self.lines.append(line)
            m = re.search(r"serving \d+ checkpoint\(s\)(?: and \d+ acquisition\(s\))? on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                parsed = urllib.parse.urlsplit(self.url)
                self.host, self.port = parsed.hostname, parsed.port
                if wait_indexed:
                    self.wait_indexed(deadline)
                return
        raise AssertionError("serve printed no URL")

    def jobs(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("GET", "/api/jobs")
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200, (r.status, body[:300])
            return json.loads(body)["jobs"]
        finally:
            conn.close()

    def wait_indexed(self, deadline):
        """Until every indexing job has ended (the server answers while it indexes)."""
        while time.time() < deadline:
            if all(j["state"] != "running" for j in self.jobs()):
                return
            time.sleep(0.05)
        raise AssertionError("indexing did not finish: " + json.dumps(self.jobs()))

    def stop(self):
        """SIGTERM; returns (exit code, remaining stdout)."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        return self.proc.returncode, out


class ServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-")
        cls.env = private_env(cls.tmp)
        cls.demo = os.path.join(cls.tmp, "demo")
        r = cls.tm_run("demo", "--out", cls.demo, "--layers", "1", "--no-gguf", "--json")
        assert r.returncode == 0, r.stderr
        cls.small = os.path.join(cls.tmp, "small.safetensors")
        write_small_safetensors(cls.small)
        # A web root with two files; a secret beside it and a symlink inside pointing at the secret.
        cls.web = os.path.join(cls.tmp, "web")
        os.makedirs(os.path.join(cls.web, "assets"))
        with open(os.path.join(cls.web, "index.html"), "w") as f:
            f.write("<!doctype html><title>viewer</title>")
        with open(os.path.join(cls.web, "assets", "app.js"), "w") as f:
            f.write("console.log('viewer');")
        with open(os.path.join(cls.tmp, "secret.txt"), "wb") as f:
            f.write(SECRET)
        os.symlink(os.path.join(cls.tmp, "secret.txt"), os.path.join(cls.web, "link.txt"))
        cls.server = Server([cls.demo, cls.small, "--web-root", cls.web], cls.env)

    @classmethod
    def tearDownClass(cls):
        if cls.server.proc.poll() is None:
            cls.server.proc.kill()
            cls.server.proc.wait()

    @classmethod
    def tm_run(cls, *args):
        return subprocess.run([TM_BIN] + list(args), capture_output=True, text=True, env=cls.env, timeout=300)

    # ---- HTTP helpers ----------------------------------------------------------------------------

    def request(self, path, method="GET", body=None, headers=None, server=None):
        """(status, headers, body bytes) for a path sent verbatim (no client-side normalisation)."""
        s = server or self.server
        conn = http.client.HTTPConnection(s.host, s.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def get_json(self, path, status=200):
        code, headers, body = self.request(path)
        self.assertEqual(code, status, body[:500])
        self.assertTrue(headers["content-type"].startswith("application/json"), headers)
        return json.loads(body)

    def error(self, path, status, mentions=None, method="GET", body=None, headers=None):
        code, _, data = self.request(path, method, body, headers)
        self.assertEqual(code, status, (path, data[:300]))
        doc = json.loads(data)
        self.assertIn("error", doc)
        if mentions:
            self.assertIn(mentions, doc["error"], path)
        return doc

    @staticmethod
    def q(name):
        return urllib.parse.quote(name, safe="")

    # ---- catalog ---------------------------------------------------------------------------------

    def test_health(self):
        doc = self.get_json("/api/health")
        version = self.tm_run("--version").stdout.strip()
        self.assertEqual((doc["name"], doc["status"]), ("tensormorph", "ok"))
        self.assertIn(doc["version"], version)

    def test_checkpoints(self):
        doc = self.get_json("/api/checkpoints")["checkpoints"]
        self.assertEqual([c["id"] for c in doc], ["0", "1"])
        ls = json.loads(self.tm_run("ls", self.demo, "--json").stdout)["tensors"]
        self.assertEqual(doc[0]["tensor_count"], len(ls))
        self.assertEqual(doc[0]["parameters"], sum(t["elements"] for t in ls))
        self.assertEqual(doc[0]["format"], "safetensors")
        self.assertEqual(doc[1]["tensor_count"], 2)

    def test_tensor_list_filter_sort_page(self):
        doc = self.get_json("/api/tensors")
        ls = json.loads(self.tm_run("ls", self.demo, "--json").stdout)["tensors"]
        self.assertEqual(doc["total"], len(ls) + 2)
        by_name = {(t["checkpoint"], t["name"]): t for t in doc["tensors"]}
        for t in ls:
            row = by_name[("0", t["name"])]
            self.assertEqual((row["dtype"], row["shape"], row["parameters"], row["bytes"]),
                             ("bf16", t["shape"], t["elements"], t["bytes"]))
        self.assertEqual(by_name[("0", DAMAGED)]["stats"]["nan_count"], 1)
        self.assertEqual(by_name[("1", SLASHED)]["stats"]["max"], 14.0)
        names = [t["name"] for t in doc["tensors"]]
        self.assertEqual(names, sorted(names))

        doc = self.get_json("/api/tensors?q=mlp.down&sort=size&order=desc")
        self.assertEqual([t["name"] for t in doc["tensors"]], [DAMAGED])
        doc = self.get_json("/api/tensors?sort=size&order=desc")
        sizes = [t["bytes"] for t in doc["tensors"]]
        self.assertEqual(sizes, sorted(sizes, reverse=True))
        doc = self.get_json("/api/tensors?sort=dtype")
        self.assertEqual([t["dtype"] for t in doc["tensors"]], sorted(t["dtype"] for t in doc["tensors"]))
        first = self.get_json("/api/tensors?limit=3")["tensors"]
        second = self.get_json("/api/tensors?limit=3&offset=3")["tensors"]
        self.assertEqual(len(first), 3)
        self.assertEqual([t["name"] for t in first + second], names[:6])
        self.assertEqual(self.get_json("/api/tensors?q=" + self.q("/name.with/"))["total"], 1)
        self.assertEqual(self.get_json("/api/tensors?q=nothing-like-this")["tensors"], [])

    def test_tensor_list_bad_parameters(self):
        self.error("/api/tensors?sort=colour", 400, "'sort'")
        self.error("/api/tensors?order=up", 400, "'order'")
        self.error("/api/tensors?limit=abc", 400, "'limit'")
        self.error("/api/tensors?limit=-1", 400, "'limit'")
        self.error("/api/tensors?limit=100000000", 400, "'limit'")
        self.error("/api/tensors?offset=1e3", 400, "'offset'")
        self.error("/api/tensors?sort=name&sort=size", 400, "'sort'")

    def test_tensor_detail(self):
        doc = self.get_json("/api/tensors/0/" + self.q(DAMAGED))
        cli = json.loads(self.tm_run("stats", self.demo, DAMAGED, "--json").stdout)["tensors"][0]
        self.assertEqual((doc["name"], doc["checkpoint"], doc["shape"], doc["stored_type"]),
                         (DAMAGED, "0", cli["shape"], "BF16"))
        for key in ("count", "nan_count", "inf_count", "zero_count", "min", "max", "abs_max", "sum", "mean", "std"):
            self.assertEqual(doc["stats"][key], cli["stats"][key], key)
        self.assertEqual(doc["stats"]["histogram"]["counts"], cli["stats"]["histogram"]["counts"])
        self.assertEqual(doc["stats"]["quantiles"], cli["stats"]["quantiles"])
        self.assertEqual(doc["stats"], cli["stats"])  # one encoder: the whole document, histogram edges included
        self.assertEqual(doc["placement"], cli["placement"])
        self.assertIsNone(doc["quantization"])
        p = doc["pyramid"]
        self.assertEqual(p["tile_size"], [256, 256])
        self.assertEqual(p["levels"][0]["grid"], [6, 2])  # [512, 1376] in 256 x 256 tiles: 6 columns, 2 rows
        self.assertEqual(p["levels"][-1]["grid"], [1, 1])
        self.assertEqual(p["tile_record_bytes"], 72 + 8 * p["histogram_bins"])
        # The list row names the same shard and offset as the detail, and that shard holds the tensor's bytes.
        row = next(r for r in self.get_json("/api/tensors?q=" + self.q(DAMAGED))["tensors"] if r["name"] == DAMAGED)
        self.assertEqual((row["file"], row["offset"]), (doc["file"], doc["offset"]))
        files = {f["name"]: f["size"] for f in self.get_json("/api/checkpoints")["checkpoints"][0]["files"]}
        self.assertLessEqual(doc["offset"] + doc["bytes"], files[doc["file"]])

    def test_tensor_names_with_slashes_and_dots(self):
        for path in ("/api/tensors/1/" + self.q(SLASHED), "/api/tensors/1/" + SLASHED):
            doc = self.get_json(path)
            self.assertEqual(doc["name"], SLASHED)
            self.assertEqual((doc["stats"]["min"], doc["stats"]["max"], doc["stats"]["count"]), (0.0, 14.0, 15))

    def test_unknown_checkpoint_or_tensor_is_404(self):
        self.error("/api/tensors/7/" + self.q(DAMAGED), 404, "checkpoint")
        self.error("/api/tensors/0/no.such.tensor", 404, "no.such.tensor")
        self.error("/api/tensors/1/" + self.q(DAMAGED), 404)
        self.error("/api/tiles/0/no.such?level=0&x=0&y=0", 404)
        self.error("/api/render/9/plain.png", 404)
        self.error("/api/nothing", 404)
        self.error("/api/compute", 404, method="DELETE")

    # ---- tiles and images ------------------------------------------------------------------------

    def cli_tile(self, name, level, x, y):
        r = self.tm_run("tile", self.demo, name, "--level", str(level), "--tile", f"{x},{y}", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_binary_tiles_match_the_cli(self):
        detail = self.get_json("/api/tensors/0/" + self.q(EMBED))
        levels = detail["pyramid"]["levels"]
        self.assertGreater(len(levels), 3)
        bins = detail["pyramid"]["histogram_bins"]
        cases = [(0, 0, 0), (0, 1, 31), (1, 0, 7), (len(levels) - 1, 0, 0)]
        for level, x, y in cases:
            with self.subTest(level=level, x=x, y=y):
                code, headers, body = self.request(f"/api/tiles/0/{self.q(EMBED)}?level={level}&x={x}&y={y}")
                self.assertEqual(code, 200, body[:300])
                self.assertEqual(headers["content-type"], "application/octet-stream")
                self.assertEqual(len(body), TILE_FIXED.size + 8 * bins)
                self.assertEqual(int(headers["x-tensormorph-tile-bins"]), bins)
                count, nan, inf, zero, mn, mx, amax, total, m2 = TILE_FIXED.unpack_from(body)
                hist = list(struct.unpack_from(f"<{bins}Q", body, TILE_FIXED.size))
                cli = self.cli_tile(EMBED, level, x, y)
                s = cli["stats"]
                self.assertEqual((count, nan, inf, zero), (s["count"], s["nan_count"], s["inf_count"], s["zero_count"]))
                self.assertEqual((mn, mx, amax, total), (s["min"], s["max"], s["abs_max"], s["sum"]))
                finite = count - nan - inf
                self.assertAlmostEqual((m2 / finite) ** 0.5, s["std"], delta=1e-12 + 1e-12 * s["std"])
                self.assertEqual(hist, cli["histogram"]["counts"])
                self.assertEqual(headers["x-tensormorph-tile-rows"], "%d,%d" % tuple(cli["rows"]))
                doc = self.get_json(f"/api/tiles/0/{self.q(EMBED)}?level={level}&x={x}&y={y}&format=json")
                self.assertEqual(doc["placement"], [])
                self.assertEqual(doc["checkpoint"], "0")
                del doc["placement"], doc["checkpoint"]
                self.assertEqual(doc, cli)

    def test_damaged_tile_counts(self):
        top = len(self.get_json("/api/tensors/0/" + self.q(DAMAGED))["pyramid"]["levels"]) - 1
        code, _, body = self.request(f"/api/tiles/0/{self.q(DAMAGED)}?level={top}&x=0&y=0")
        self.assertEqual(code, 200)
        count, nan, inf, _, _, mx, _, _, _ = TILE_FIXED.unpack_from(body)
        self.assertEqual((nan, inf, mx), (1, 1, 41.5))

    def test_tile_bad_parameters(self):
        base = f"/api/tiles/0/{self.q(EMBED)}"
        levels = len(self.get_json("/api/tensors/0/" + self.q(EMBED))["pyramid"]["levels"])
        self.error(base + "?x=0&y=0", 400, "'level'")
        self.error(base + "?level=0&y=0", 400, "'x'")
        self.error(base + "?level=0&x=0", 400, "'y'")
        self.error(base + f"?level={levels}&x=0&y=0", 400, "'level'")
        self.error(base + "?level=0&x=2&y=0", 400, "'x'")
        self.error(base + "?level=0&x=0&y=32", 400, "'y'")
        self.error(base + "?level=0&x=0&y=0&slice=1", 400, "'slice'")
        self.error(base + "?level=-1&x=0&y=0", 400, "'level'")
        self.error(base + "?level=zero&x=0&y=0", 400, "'level'")
        self.error(base + "?level=0&x=0&y=0&format=xml", 400, "'format'")
        self.error(base + "?level=99999999999999999999&x=0&y=0", 400, "'level'")

    def test_render_png(self):
        for query in ("", "?level=0", "?level=0&x=1&y=3&stat=envelope", "?stat=abs_max&transform=log&colormap=magma",
                      "?level=1&limits=-0.5,0.5&colormap=RdBu_r&transform=signed-log"):
            with self.subTest(query=query):
                code, headers, body = self.request(f"/api/render/0/{self.q(EMBED)}.png{query}")
                self.assertEqual(code, 200, body[:300])
                self.assertEqual(headers["content-type"], "image/png")
                self.assertEqual(body[:8], b"\x89PNG\r\n\x1a\n")
                placement = json.loads(headers["x-tensormorph-placement"])
                self.assertEqual(placement[0]["op"], "display.colorize")
                self.assertTrue(placement[0]["backend"])
        code, _, body = self.request("/api/render/1/" + self.q(SLASHED) + ".png")
        self.assertEqual((code, body[:4]), (200, b"\x89PNG"))

    def test_render_json_reports_placement(self):
        doc = self.get_json(f"/api/render/0/{self.q(EMBED)}.png?level=1&stat=max&format=json")
        self.assertEqual((doc["stat"], doc["level"], doc["source"], doc["checkpoint"]), ("max", 1, "pyramid level 1", "0"))
        self.assertEqual(doc["placement"][0]["op"], "display.colorize")
        self.assertIn("reason", doc["placement"][0])
        self.assertEqual(len(doc["histogram"]["counts"]), 256)

    def test_render_bad_parameters(self):
        base = f"/api/render/0/{self.q(EMBED)}.png"
        self.error(base + "?stat=median", 400, "'stat'")
        self.error(base + "?transform=sqrt", 400, "'transform'")
        self.error(base + "?colormap=rainbow", 400, "'colormap'")
        self.error(base + "?limits=1", 400, "'limits'")
        self.error(base + "?limits=a,b", 400, "'limits'")
        self.error(base + "?limits=2,1", 400, "'limits'")
        self.error(base + "?limits=nan,1", 400, "'limits'")
        self.error(base + "?level=0&x=0", 400, "'y'")
        self.error(base + "?x=0&y=0", 400, "'level'")
        self.error(base + "?level=40", 400, "'level'")
        self.error(base + "?slice=3", 400, "'slice'")
        self.error(base + "?log_floor=0&transform=log", 400, "'log_floor'")
        self.error(base + "?format=binary", 400, "'format'")

    def cells(self, query, name=EMBED):
        code, headers, body = self.request(f"/api/cells/0/{self.q(name)}{query}")
        self.assertEqual(code, 200, body[:300])
        self.assertEqual(headers["content-type"], "application/octet-stream")
        rows, cols = map(int, headers["x-tensormorph-cells"].split(","))
        return headers, rows, cols, list(struct.unpack(f"<{len(body) // 8}d", body))

    def test_cells_of_a_tile_are_the_values(self):
        # Level-0 tile (1, 3) of EMBED holds 256 x 256 elements, one per cell: its cells are the bf16
        # values themselves, read here from the shard at the offset the API gives.
        detail = self.get_json("/api/tensors/0/" + self.q(EMBED))
        headers, rows, cols, values = self.cells("?level=0&x=1&y=3")
        self.assertEqual((rows, cols, headers["x-tensormorph-cell-size"]), (256, 256, "1,1"))
        self.assertEqual((headers["x-tensormorph-tile-rows"], headers["x-tensormorph-tile-cols"]), ("768,1024", "256,512"))
        self.assertEqual((headers["x-tensormorph-source"], headers["x-tensormorph-stat"]), ("values", "mean"))
        width = detail["shape"][1]
        with open(os.path.join(self.demo, detail["file"]), "rb") as f:
            expected = []
            for r in range(768, 1024):
                f.seek(detail["offset"] + 2 * (r * width + 256))
                raw = f.read(2 * 256)
                expected += [struct.unpack("<f", b"\0\0" + raw[2 * i:2 * i + 2])[0] for i in range(256)]
        self.assertEqual(values, expected)
        _, _, _, mins = self.cells("?level=0&x=1&y=3&stat=min")
        self.assertEqual(mins, expected)
        _, _, _, stds = self.cells("?level=0&x=1&y=3&stat=std")
        self.assertEqual(set(stds), {0.0})

    def test_cells_of_a_level_are_its_tiles(self):
        levels = self.get_json("/api/tensors/0/" + self.q(EMBED))["pyramid"]["levels"]
        grid_cols, grid_rows = levels[1]["grid"]
        headers, rows, cols, means = self.cells("?level=1")
        self.assertEqual((rows, cols, headers["x-tensormorph-source"]), (grid_rows, grid_cols, "pyramid level 1"))
        _, _, _, env = self.cells("?level=1&stat=envelope")
        self.assertEqual(len(env), 2 * rows * cols)  # every cell's min, then every cell's max
        for y in range(rows):
            for x in range(cols):
                _, _, body = self.request(f"/api/tiles/0/{self.q(EMBED)}?level=1&x={x}&y={y}")
                count, nan, inf, _, mn, mx, _, total, _ = TILE_FIXED.unpack_from(body)
                k = y * cols + x
                self.assertEqual(means[k], total / (count - nan - inf))
                self.assertEqual((env[k], env[rows * cols + k]), (mn, mx))

    def test_outliers_are_the_values_extremes(self):
        """GET /api/outliers: the largest |x| of each of the top tiles by abs max, and the NaN and Inf positions,
        equal to what numpy finds in the exported values (ties: the first tile, then the first element)."""
        import numpy as np
        npy = os.path.join(self.tmp, "outliers-down_proj.npy")
        r = self.tm_run("export", self.demo, DAMAGED, "-o", npy)
        self.assertEqual(r.returncode, 0, r.stderr)
        v = np.load(npy).astype(np.float64)
        tr, tc = self.get_json("/api/tensors/0/" + self.q(DAMAGED))["pyramid"]["tile_size"]
        tiles = []
        for ty in range(-(-v.shape[0] // tr)):
            for tx in range(-(-v.shape[1] // tc)):
                block = v[ty * tr:(ty + 1) * tr, tx * tc:(tx + 1) * tc]
                a = np.abs(np.where(np.isfinite(block), block, 0.0))
                k = int(np.argmax(a))
                r0, c0 = divmod(k, block.shape[1])
                tiles.append((-a.max(), ty, tx, ty * tr + r0, tx * tc + c0, float(block[r0, c0])))
        tiles.sort()
        doc = self.get_json(f"/api/outliers/0/{self.q(DAMAGED)}?top=5&nonfinite=4")
        got = [(o["row"], o["col"], o["value"]) for o in doc["outliers"] if o["kind"] == "abs_max"]
        self.assertEqual(got, [(t[3], t[4], t[5]) for t in tiles[:5]])
        self.assertEqual(got[0][2], 41.5)
        self.assertEqual((doc["nan"], doc["inf"], doc["tiles_ranked"], doc["checkpoint"]), (1, 1, len(tiles), "0"))
        nan = [[o["row"], o["col"], o["value"]] for o in doc["outliers"] if o["kind"] == "nan"]
        inf = [[o["row"], o["col"], o["value"]] for o in doc["outliers"] if o["kind"] == "inf"]
        self.assertEqual(nan, [[int(i), int(j), "NaN"] for i, j in np.argwhere(np.isnan(v))])
        self.assertEqual(inf, [[int(i), int(j), "±Inf"] for i, j in np.argwhere(np.isinf(v))])
        self.assertTrue(all(o["cell"] == [1, 1] for o in doc["outliers"]))
        # A clean tensor lists no NaN or Inf; bad parameters are named.
        clean = self.get_json(f"/api/outliers/0/{self.q(EMBED)}?top=3")
        self.assertEqual([o["kind"] for o in clean["outliers"]], ["abs_max"] * 3)
        self.error(f"/api/outliers/0/{self.q(DAMAGED)}?top=257", 400, "'top'")
        self.error(f"/api/outliers/0/{self.q(DAMAGED)}?nonfinite=5000", 400, "'nonfinite'")
        self.error(f"/api/outliers/0/{self.q(DAMAGED)}?top=many", 400, "'top'")
        self.error("/api/outliers/0/no.such.tensor", 404)

    def test_profiles_are_the_values_of_a_row_or_column(self):
        """GET /api/profile: one row or column of the view, every value as float64 (NaN and Inf included), equal to
        the exported values; out-of-range and ambiguous requests are 400 naming the parameter."""
        import numpy as np
        npy = os.path.join(self.tmp, "profile-down_proj.npy")
        r = self.tm_run("export", self.demo, DAMAGED, "-o", npy)
        self.assertEqual(r.returncode, 0, r.stderr)
        v = np.load(npy).astype(np.float64)
        base = f"/api/profile/0/{self.q(DAMAGED)}"
        nan_row, nan_col = (int(x) for x in np.argwhere(np.isnan(v))[0])
        for query, want, header in ((f"?row={nan_row}", v[nan_row], f"row,{nan_row}"), ("?col=1", v[:, 1], "col,1"),
                                    (f"?row={v.shape[0] - 1}", v[-1], f"row,{v.shape[0] - 1}")):
            with self.subTest(query=query):
                code, headers, body = self.request(base + query)
                self.assertEqual(code, 200, body[:300])
                got = np.frombuffer(body, dtype="<f8")
                np.testing.assert_array_equal(got, want)  # NaN compares equal to NaN here
                self.assertEqual(headers["x-tensormorph-profile"], header)
                self.assertEqual(headers["x-tensormorph-view"], "1,%d,%d" % v.shape)
        self.error(base, 400, "exactly one")
        self.error(base + "?row=1&col=1", 400, "exactly one")
        self.error(base + "?row=%d" % v.shape[0], 400, "'row'")
        self.error(base + "?col=%d" % v.shape[1], 400, "'col'")
        self.error(base + "?row=0&slice=1", 400, "'slice'")
        self.error(base + "?row=x", 400, "'row'")
        self.error("/api/profile/0/no.such.tensor?row=0", 404)

    def test_cells_bad_parameters(self):
        base = f"/api/cells/0/{self.q(EMBED)}"
        self.error(base + "?stat=median", 400, "'stat'")
        self.error(base + "?level=0&x=0", 400, "'y'")
        self.error(base + "?x=0&y=0", 400, "'level'")
        self.error(base + "?level=40", 400, "'level'")
        self.error(base + "?level=0&x=0&y=32", 400, "'y'")
        self.error(base + "?slice=3", 400, "'slice'")
        self.error("/api/cells/0/no.such.tensor", 404)
        self.error("/api/cells/7/" + self.q(EMBED), 404)

    # ---- compute -----------------------------------------------------------------------------------

    def put_compute(self, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.request("/api/compute", "PUT", data, {"Content-Type": content_type})

    def test_compute_get_and_put_persist(self):
        doc = self.get_json("/api/compute")
        cpu = [b for b in doc["backends"] if b["name"] == "cpu"]
        self.assertEqual(len(cpu), 1)
        self.assertTrue(cpu[0]["available"])
        self.assertTrue(cpu[0]["devices"])
        self.assertIn("display.colorize", [o["op"] for o in cpu[0]["ops"]])
        for b in doc["backends"]:
            if not b["available"]:
                self.assertTrue(b["reason"], b)
        listed = {b["name"] for b in doc["backends"]}
        missing = {b["name"] for b in doc["not_installed"]}
        self.assertIn("cuda", missing | listed)  # from the parity matrix when this build has no CUDA plugin
        self.assertFalse(listed & missing)
        settings = os.path.join(self.env["XDG_CONFIG_HOME"], "tensormorph", "settings.json")
        self.assertEqual(doc["settings_file"], settings)
        # Each backend entry is `backends --json`'s (kernels with their inputs), and every op some backend
        # has gets the planner's placement for a representative request.
        cli = {b["name"]: b for b in json.loads(self.tm_run("backends", "--json").stdout)["backends"]}
        for b in doc["backends"]:
            self.assertEqual({k: v for k, v in b.items() if k != "ops"}, cli[b["name"]], b["name"])
        preview = {p["op"]: p for p in doc["placement_preview"]}
        ops = {k["op"] for b in doc["backends"] for k in b["kernels"] if not k["approx_step"]}
        self.assertEqual(set(preview), ops)
        self.assertEqual(preview["stats.moments"]["request"], {"bytes": 64 << 20, "on_host": True, "dtype": "f32"})
        self.assertEqual(preview["stats.moments"]["placement"]["backend"], "cpu")
        self.assertEqual(preview["stem.frame_sums"]["request"]["dtype"], "f32")  # float frames (EMPAD) have an f32 kernel
        self.assertEqual(preview["dequantize.ggml"]["request"]["format"], "Q4_0")  # format ops: the first format
        self.assertEqual(preview["stem.ssb_overlap"]["request"]["format"], "quadratic")

        code, _, body = self.put_compute({"prefer": ["cpu"]})
        self.assertEqual(code, 200, body)
        doc = json.loads(body)
        self.assertEqual(doc["constraints"]["prefer"], ["cpu"])
        self.assertEqual(doc["effective"]["prefer"], ["cpu"])
        r = self.tm_run("config", "get", "compute.prefer")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "cpu"))
        with open(settings) as f:
            self.assertEqual(json.load(f)["compute.prefer"], "cpu")
        self.assertEqual(self.get_json("/api/compute")["constraints"]["prefer"], ["cpu"])
        # The new constraint reaches the placement of the next render, and the preview says why.
        doc = self.get_json(f"/api/render/0/{self.q(EMBED)}.png?format=json")
        self.assertEqual(doc["placement"][0]["backend"], "cpu")
        moments = {p["op"]: p for p in self.get_json("/api/compute")["placement_preview"]}["stats.moments"]["placement"]
        self.assertEqual((moments["backend"], moments["reason"]), ("cpu", "user_preferred"))

        self.assertEqual(self.put_compute({"never": ["cpu"]})[0], 400)  # would be both preferred and never used
        code, _, body = self.put_compute({"prefer": []})
        self.assertEqual(code, 200, body)
        self.assertEqual(json.loads(body)["constraints"]["prefer"], [])
        self.assertEqual(self.tm_run("config", "get", "compute.prefer").returncode, 2)

    def test_compute_put_validation(self):
        def bad(body, mentions, **kw):
            code, _, data = self.put_compute(body, **kw)
            self.assertEqual(code, 400, data)
            self.assertIn(mentions, json.loads(data)["error"])
        bad({"prefer": ["warp-drive"]}, "'prefer'")
        bad({"never": "cpu"}, "'never'")
        bad({"prefer": [3]}, "'prefer'")
        bad({"prefer": ["cpu", "cpu"]}, "'prefer'")
        bad({"colour": ["cpu"]}, "'colour'")
        bad(b"{not json", "JSON")
        bad(b"[]", "JSON object")
        bad(b"[" * 500000 + b"]" * 500000, "nested deeper than 64 levels")  # bodies get the limits of files
        bad(b'{"prefer": ["cpu"], "prefer": []}', "key 'prefer' appears twice")
        bad(b'{"prefer": ["cpu"]}\x00{"never": ["cpu"]}', "NUL byte at offset 19")
        bad({"prefer": ["cpu"]}, "Content-Type", content_type="text/plain")
        code, _, data = self.put_compute(b"[" + b" " * (2 << 20) + b"]")
        self.assertEqual(code, 413, data[:200])
        self.assertEqual(self.tm_run("config", "get", "compute.prefer").returncode, 2)

    # ---- files -------------------------------------------------------------------------------------

    def test_static_files(self):
        code, headers, body = self.request("/")
        self.assertEqual((code, body), (200, b"<!doctype html><title>viewer</title>"))
        self.assertTrue(headers["content-type"].startswith("text/html"))
        code, headers, body = self.request("/assets/app.js")
        self.assertEqual(code, 200)
        self.assertTrue(headers["content-type"].startswith("text/javascript"))
        self.assertEqual(self.request("/assets/missing.js")[0], 404)

    def test_traversal_never_returns_files(self):
        attempts = ["/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt", "/%2e%2e%2fsecret.txt",
                    "/assets/../../secret.txt", "/assets/%2e%2e/%2e%2e/secret.txt", "//etc/passwd", "/etc/passwd",
                    "/%2Fetc%2Fpasswd", "/link.txt", "/.%2e/secret.txt", "/index.html%00.js", "/%00", "/assets%5c..%5csecret.txt",
                    "/api/tensors/0/..%2f..%2fsecret.txt", "/api/tensors/0/%2Fetc%2Fpasswd", "/api/tensors/../../etc/passwd",
                    "/api/tensors/%2e%2e/secret.txt", "/api/tiles/..%2f..%2fetc/passwd?level=0&x=0&y=0",
                    "/api/tiles/0/%00?level=0&x=0&y=0", "/api/render/0/%2e%2e%2fsecret.txt.png",
                    "/api/render/0/" + self.q(self.tmp + "/secret.txt") + ".png", "/api/tensors/0/" + self.q(self.small),
                    "http://127.0.0.1/../secret.txt", "/api/../secret.txt"]
        for path in attempts:
            with self.subTest(path=path):
                code, _, body = self.request(path)
                self.assertIn(code, (400, 404), body[:200])
                self.assertNotIn(SECRET, body)
                self.assertNotIn(b"root:x:0", body)

    def test_host_header_must_be_loopback_without_token(self):
        code, _, body = self.request("/api/health", headers={"Host": "evil.example:80"})
        self.assertEqual(code, 403, body)
        self.assertEqual(self.request("/api/health", headers={"Host": "localhost"})[0], 200)

    def raw(self, data):
        """The status and body of the answer to raw request bytes (http.client always sends one Host)."""
        with socket.create_connection((self.server.host, self.server.port), timeout=30) as s:
            s.sendall(data)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        return int(head.split()[1]), body

    def test_empty_missing_or_twice_given_host_is_refused_without_token(self):
        for headers, why in ((b"Host: \r\n", b"no Host header"), (b"", b"no Host header"),
                             (b"Host: 127.0.0.1\r\nHost: evil.example\r\n", b"2 Host headers")):
            for version in (b"HTTP/1.1", b"HTTP/1.0"):
                with self.subTest(headers=headers, version=version):
                    code, body = self.raw(b"GET /api/health " + version + b"\r\n" + headers + b"Connection: close\r\n\r\n")
                    self.assertEqual(code, 403, body)
                    self.assertIn(why, body)
        code, body = self.raw(b"GET /api/health HTTP/1.1\r\nHost: [::1]:9\r\nConnection: close\r\n\r\n")
        self.assertEqual(code, 200, body)

    def test_http_threads_out_of_range_is_refused(self):
        for value in ("0", "-1", "257"):
            with self.subTest(value=value):
                # Refused at once; a server that accepted the value would serve until the timeout.
                r = subprocess.run([TM_BIN, "serve", self.small, "--port", "0", "--http-threads", value], capture_output=True,
                                   text=True, env=self.env, timeout=60)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("tensormorph: error: --http-threads: expected 1 to 256", r.stderr)

    # ---- robustness --------------------------------------------------------------------------------

    def test_silent_client_does_not_block_others(self):
        silent = socket.create_connection((self.server.host, self.server.port))
        partial = socket.create_connection((self.server.host, self.server.port))
        partial.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finishes its headers
        try:
            start = time.time()
            results = []

            def fetch():
                results.append(self.request("/api/tensors?limit=5")[0])
            threads = [threading.Thread(target=fetch) for _ in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(20)
            self.assertEqual(results, [200] * 6)
            self.assertLess(time.time() - start, 5)
        finally:
            silent.close()
            partial.close()

    def test_port_in_use_is_refused(self):
        r = subprocess.run([TM_BIN, "serve", self.small, "--port", str(self.server.port)], capture_output=True, text=True,
                           env=self.env, timeout=120)
        self.assertEqual(r.returncode, 6, r.stdout + r.stderr)
        self.assertIn("cannot listen", r.stderr)

    def test_zz_sigterm_stops_cleanly(self):
        # Its own server, so the shared one stays up for the other tests.
        s = Server([self.small], self.env)
        self.assertEqual(self.request("/api/health", server=s)[0], 200)
        code, out = s.stop()
        self.assertEqual(code, 0)
        self.assertIn("server stopped", out)


# Indexing paced to this average read rate (serve --index-max-rate) when a test must catch a job running:
# the JobsTest demo (~220 MB) then takes several seconds.
SLOW_RATE = "40M"


def read_events(conn, path, timeout=300):
    """The Server-Sent Events of GET path, as (event, data JSON) pairs, until the server ends the stream."""
    conn.request("GET", path)
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read()[:300])
    assert r.getheader("Content-Type").startswith("text/event-stream"), r.getheaders()
    events, name, data = [], None, None
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = r.readline()  # chunked transfer decoded by http.client
        if not line:
            return events
        line = line.decode().rstrip("\n")
        if line.startswith(":"):  # a comment: the stream's heartbeat
            continue
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and name is not None:
            events.append((name, data))
            name, data = None, None
    raise AssertionError("the event stream did not end")


class JobsTest(unittest.TestCase):
    """Indexing runs as a job while the server already answers: its progress as an event stream, the
    checkpoint refused (503) until it is indexed, a clean stop in the middle, and a restart that keeps
    what was committed."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-jobs-")
        cls.env = private_env(cls.tmp)
        cls.demo = os.path.join(cls.tmp, "demo")
        r = subprocess.run([TM_BIN, "demo", "--out", cls.demo, "--layers", "8", "--hidden", "1024", "--intermediate", "2816", "--no-gguf",
                            "--json"], capture_output=True, text=True, env=cls.env, timeout=300)
        assert r.returncode == 0, r.stderr

    def conn(self, s):
        return http.client.HTTPConnection(s.host, s.port, timeout=60)

    def get(self, s, path):
        status, _, body = http_get(s.host, s.port, path, timeout=60)
        return status, body

    def fresh_cache(self):
        """A new, empty index folder: everything is computed again while we watch."""
        self.env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tm-serve-cache-", dir=self.tmp)

    def job(self, s):
        code, body = self.get(s, "/api/jobs/0")
        self.assertEqual(code, 200, body[:300])
        return json.loads(body)

    def wait_tensors_done(self, s, n):
        deadline = time.time() + 120
        while time.time() < deadline:
            j = self.job(s)
            if j["tensors_done"] >= n:
                return j
            time.sleep(0.05)
        raise AssertionError("no tensor committed: " + json.dumps(self.job(s)))

    def test_a_stop_while_indexing_then_resume(self):
        self.fresh_cache()
        # Paced (--index-max-rate) so the stop comes after some tensors are committed and well before the end.
        s = Server([self.demo, "--index-max-rate", SLOW_RATE], self.env, wait_indexed=False)
        j = self.wait_tensors_done(s, 1)
        code, out = s.stop()
        self.assertEqual(code, 0)
        self.assertIn("server stopped", out)
        self.assertEqual(j["state"], "running", j)
        s = Server([self.demo], self.env, wait_indexed=False)
        try:
            c = self.conn(s)
            events = read_events(c, "/api/jobs/0/events")
            c.close()
            self.assertEqual(events[-1][0], "done", events[-1])
            report = events[-1][1]["report"]
            self.assertEqual(report["computed"] + report["already_indexed"], 75)
            self.assertGreaterEqual(report["already_indexed"], j["tensors_done"])  # what the stopped run committed
            self.assertGreater(report["computed"], 0)
            print(f"\nresumed: {report['already_indexed']} tensor(s) kept from the stopped run, {report['computed']} computed")
        finally:
            s.stop()

    def test_b_progress_stream_and_refusals_while_indexing(self):
        self.fresh_cache()
        s = Server([self.demo, "--index-max-rate", SLOW_RATE], self.env, wait_indexed=False)
        try:
            code, body = self.get(s, "/api/tensors/0/model.embed_tokens.weight")
            self.assertEqual(code, 503, body[:300])
            self.assertIn("being indexed", json.loads(body)["error"])
            c = self.conn(s)
            events = read_events(c, "/api/jobs/0/events")
            c.close()
            self.assertGreaterEqual(len(events), 3)  # paced over seconds: progress on the way
            names = [e for e, _ in events]
            self.assertTrue(all(n == "progress" for n in names[:-1]), names)
            self.assertEqual(names[-1], "done", events[-1])
            versions = [d["version"] for _, d in events]
            self.assertEqual(versions, sorted(set(versions)))
            done_bytes = [d["bytes_done"] for _, d in events]
            self.assertEqual(done_bytes, sorted(done_bytes))
            last = events[-1][1]
            self.assertEqual((last["state"], last["kind"], last["checkpoint"], last["error"]), ("done", "index", "0", None))
            self.assertEqual(last["tensors_done"], last["tensors_total"])
            self.assertEqual(last["bytes_done"], last["bytes_total"])
            self.assertEqual(last["report"]["computed"], last["tensors_total"])
            print(f"\nindexing stream: {len(events)} event(s), {last['bytes_total']} bytes in {last['seconds']:.2f} s")
            # Finished: the same stream gives the final event at once and ends; the job and checkpoint say so.
            c = self.conn(s)
            again = read_events(c, "/api/jobs/0/events", timeout=30)
            c.close()
            self.assertEqual([e for e, _ in again], ["done"])
            code, body = self.get(s, "/api/jobs/0")
            self.assertEqual((code, json.loads(body)["state"]), (200, "done"))
            code, body = self.get(s, "/api/checkpoints")
            self.assertEqual(json.loads(body)["checkpoints"][0]["index"]["state"], "ready")
            code, body = self.get(s, "/api/tensors/0/model.embed_tokens.weight")
            self.assertEqual(code, 200, body[:300])
            self.assertEqual(self.get(s, "/api/jobs/7")[0], 404)
            self.assertEqual(self.get(s, "/api/jobs/7/events")[0], 404)
        finally:
            s.stop()

    def test_bad_index_max_rate_is_refused(self):
        for rate, why in (("0", "more than 0"), ("fast", "expected a byte count"), ("12Q", "unknown size suffix"),
                          ("99999999999T", "overflows")):
            r = subprocess.run([TM_BIN, "serve", self.demo, "--port", "0", "--index-max-rate", rate], capture_output=True,
                               text=True, env=self.env, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--index-max-rate", r.stderr)
            self.assertIn(why, r.stderr)

    def test_c_at_most_four_event_streams(self):
        self.fresh_cache()
        s = Server([self.demo, "--index-max-rate", SLOW_RATE], self.env, wait_indexed=False)
        conns = []
        try:
            for _ in range(4):
                c = self.conn(s)
                c.request("GET", "/api/jobs/0/events")
                r = c.getresponse()
                self.assertEqual(r.status, 200)
                r.readline()  # the stream is open: its first line has come
                conns.append((c, r))
            self.assertEqual(self.job(s)["state"], "running")
            code, body = self.get(s, "/api/jobs/0/events")
            self.assertEqual(code, 503, body[:300])
            self.assertIn("too many event streams", json.loads(body)["error"])
            self.assertEqual(self.get(s, "/api/health")[0], 200)  # the other workers still answer
            conns.pop()[0].close()  # a client going away frees its stream
            deadline = time.time() + 30
            while (code := self.get(s, "/api/jobs/0/events")[0]) == 503 and time.time() < deadline:
                time.sleep(0.2)
            self.assertIn(code, (200,), "a closed stream was not freed")
        finally:
            for c, _ in conns:
                c.close()
            s.stop()


def write_f32_safetensors(path, rows=300, cols=400):
    """One float32 tensor `w` of pseudo-random values (f32 quantiles need radix select's ~33 MiB workspace)."""
    n = rows * cols
    data = struct.pack(f"<{n}f", *[((i * 7919) % 10007) / 10007.0 - 0.5 for i in range(n)])
    header = json.dumps({"w": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


class ConsentTest(unittest.TestCase):
    """Under a memory budget too small for exact quantiles, indexing fails naming the fallback ladder; the
    Compute panel's preview shows the ladder; consent (session only, never saved) lets a re-run job compute
    approximate quantiles, stored and reported as such; the CLI, which gave no consent, does not use them."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-consent-")
        cls.env = private_env(cls.tmp)
        cls.f32 = os.path.join(cls.tmp, "f32.safetensors")
        write_f32_safetensors(cls.f32)
        r = subprocess.run([TM_BIN, "config", "set", "compute.memory_budget", "2M"], capture_output=True, text=True, env=cls.env)
        assert r.returncode == 0, r.stderr

    def call(self, s, method, path, body=None):
        c = http.client.HTTPConnection(s.host, s.port, timeout=60)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def test_consent_then_reindex(self):
        s = Server([self.f32], self.env)  # waits until the first job has ended (it fails)
        try:
            code, jobs = self.call(s, "GET", "/api/jobs")
            first = jobs["jobs"][0]
            self.assertEqual(first["state"], "failed", first)
            self.assertIn("fallback ladder", first["error"])
            self.assertEqual(first["report"], {"needs_consent": True})
            code, cks = self.call(s, "GET", "/api/checkpoints")
            self.assertEqual(cks["checkpoints"][0]["index"]["state"], "failed")
            self.assertIs(cks["checkpoints"][0]["index"]["needs_consent"], True)
            code, doc = self.call(s, "GET", "/api/tensors/0/w")
            self.assertEqual(code, 500)
            self.assertIn("could not be indexed", doc["error"])

            code, compute = self.call(s, "GET", "/api/compute")
            self.assertEqual(compute["consent"]["allow_approx"], [])
            self.assertEqual(compute["consent"]["scope"], "session")
            preview = {p["op"]: p for p in compute["placement_preview"]}["stats.quantiles"]
            self.assertIsNone(preview["placement"])
            self.assertTrue(preview["needs_consent"])
            steps = [l["step"] for l in preview["ladder"]]
            self.assertIn("quantiles.sampling", steps)

            code, doc = self.call(s, "PUT", "/api/compute", {"allow_approx": ["quantiles.nonsense"]})
            self.assertEqual(code, 400)
            self.assertIn("'allow_approx'", doc["error"])
            code, doc = self.call(s, "PUT", "/api/compute", {"allow_approx": "quantiles.sampling"})
            self.assertEqual(code, 400)
            code, compute = self.call(s, "PUT", "/api/compute", {"allow_approx": ["quantiles.sampling"]})
            self.assertEqual(code, 200, compute)
            self.assertEqual(compute["consent"]["allow_approx"], ["quantiles.sampling"])
            preview = {p["op"]: p for p in compute["placement_preview"]}["stats.quantiles"]
            self.assertEqual(preview["placement"]["approx_step"], "quantiles.sampling")
            # Consent is never saved to the settings file.
            r = subprocess.run([TM_BIN, "config", "list"], capture_output=True, text=True, env=self.env)
            self.assertNotIn("allow_approx", r.stdout + r.stderr)

            code, doc = self.call(s, "POST", "/api/jobs", {"kind": "index"})
            self.assertEqual(code, 400)
            code, doc = self.call(s, "POST", "/api/jobs", {"kind": "index", "checkpoint": "9"})
            self.assertEqual(code, 404)
            code, doc = self.call(s, "POST", "/api/jobs", {"kind": "reindex", "checkpoint": "0"})
            self.assertEqual(code, 400)
            code, job = self.call(s, "POST", "/api/jobs", {"kind": "index", "checkpoint": "0"})
            self.assertEqual(code, 202, job)
            s.wait_indexed(time.time() + 120)
            code, job = self.call(s, "GET", "/api/jobs/" + job["id"])
            self.assertEqual(job["state"], "done", job)
            code, detail = self.call(s, "GET", "/api/tensors/0/w")
            self.assertEqual(code, 200, detail)
            q = detail["stats"]["quantiles"]
            self.assertEqual((q["method"], q["exact"]), ("quantiles.sampling", False))
        finally:
            s.stop()
        # The CLI gave no consent: under the same budget it refuses (exit 5) rather than use the stored ones,
        # and with room for the exact kernel it computes them exactly.
        r = subprocess.run([TM_BIN, "stats", self.f32, "w", "--json"], capture_output=True, text=True, env=self.env, timeout=120)
        self.assertEqual(r.returncode, 5, r.stdout + r.stderr)
        self.assertIn("--allow-approx", r.stderr)
        r = subprocess.run([TM_BIN, "stats", self.f32, "w", "--json", "--memory-budget", "1G"], capture_output=True, text=True,
                           env=self.env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = json.loads(r.stdout)["tensors"][0]
        self.assertEqual((t["source"], t["stats"]["quantiles"]["exact"]), ("computed", True))


class TokenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-token-")
        cls.env = private_env(cls.tmp)
        cls.small = os.path.join(cls.tmp, "small.safetensors")
        write_small_safetensors(cls.small)

    def get(self, server, path, headers=None):
        return http_get(server.host, server.port, path, headers=headers)

    def test_non_loopback_host_needs_a_token(self):
        for host in ("0.0.0.0", "::", "192.0.2.1"):
            r = subprocess.run([TM_BIN, "serve", self.small, "--host", host, "--port", "0"], capture_output=True, text=True,
                               env=self.env, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--token", r.stderr)
        r = subprocess.run([TM_BIN, "serve", self.small, "--token", "short"], capture_output=True, text=True, env=self.env,
                           timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_token_required_on_every_request(self):
        token = "s3cret-token-123"
        s = Server([self.small, "--token", token], self.env, wait_indexed=False)
        try:
            self.assertTrue(s.url.endswith("?token=" + token), s.url)
            for path in ("/api/health", "/api/tensors", "/", "/api/tiles/0/plain?level=0&x=0&y=0", "/nothing"):
                code, headers, body = self.get(s, path)
                self.assertEqual(code, 401, (path, body))
                self.assertIn("error", json.loads(body))
                self.assertEqual(self.get(s, path, {"Authorization": "Bearer wrong-token-0000"})[0], 401)
            code, _, body = self.get(s, "/api/health", {"Authorization": "Bearer " + token})
            self.assertEqual(code, 200, body)
            code, headers, _ = self.get(s, "/api/tensors?token=" + token)
            self.assertEqual(code, 200)
            self.assertIn("tm_token=" + token, headers["set-cookie"])
            self.assertEqual(self.get(s, "/api/health", {"Cookie": "tm_token=" + token})[0], 200)
            self.assertEqual(self.get(s, "/?token=" + token)[0], 200)
            self.assertEqual(self.get(s, "/api/health?token=" + token + "x")[0], 401)
        finally:
            code, _ = s.stop()
            self.assertEqual(code, 0)

    def test_generated_token(self):
        s = Server([self.small, "--generate-token"], self.env, wait_indexed=False)
        try:
            token = urllib.parse.parse_qs(urllib.parse.urlsplit(s.url).query)["token"][0]
            self.assertRegex(token, "^[0-9a-f]{32}$")
            self.assertEqual(self.get(s, "/api/health")[0], 401)
            self.assertEqual(self.get(s, "/api/health", {"Authorization": "Bearer " + token})[0], 200)
        finally:
            s.stop()


if __name__ == "__main__":
    unittest.main()
