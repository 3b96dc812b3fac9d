#!/usr/bin/python3
"""`tensormorph serve` with 4D-STEM acquisitions beside a checkpoint: the inventory lists them with readiness
(current while files come and go), and the products, the calibration and single frames it computes on its
backends equal what the CLI writes for the same request, number for number. Bad requests get a clear message
and never take the server down."""
import http.client
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_serve import ServedCase, Server, http_get, private_env, write_small_safetensors  # noqa: E402


class ServeStemTest(ServedCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-stem-")
        cls.env = private_env(cls.tmp)
        cls.stem = os.path.join(cls.tmp, "stem")
        r = cls.tm("stem", "demo", "--out", cls.stem, "--scan", "8,8", "--detector", "32", "--files", "2")
        assert r.returncode == 0, r.stderr
        cls.master = os.path.join(cls.stem, "demo_master.h5")
        # A second copy whose last data file comes and goes (an acquisition still being written).
        cls.partial = os.path.join(cls.tmp, "partial")
        shutil.copytree(cls.stem, cls.partial)
        cls.moved = os.path.join(cls.tmp, "moved_data_000002.h5")
        shutil.move(os.path.join(cls.partial, "demo_data_000002.h5"), cls.moved)
        cls.small = os.path.join(cls.tmp, "small.safetensors")
        write_small_safetensors(cls.small)
        cls.server = Server([cls.small, cls.master, cls.partial], cls.env)

    def get(self, path):
        status, headers, body = http_get(self.server.host, self.server.port, path)
        return status, headers, body

    def get_json(self, path, expect=200):
        status, _, body = self.get(path)
        self.assertEqual(status, expect, body[:500])
        return json.loads(body)

    def request_json(self, method, path):
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=60)
        try:
            conn.request(method, path)
            r = conn.getresponse()
            body = r.read()
            self.assertEqual(r.status, 200, body[:500])
            return json.loads(body)
        finally:
            conn.close()

    def cli_npy(self, *args):
        out = os.path.join(self.tmp, "cli-%d.npy" % abs(hash(args)))
        r = self.tm(*args, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def test_the_inventory_lists_acquisitions_beside_checkpoints_with_readiness(self):
        self.assertIn("1 checkpoint(s) and 2 acquisition(s)", "".join(self.server.lines))
        self.assertEqual(len(self.get_json("/api/checkpoints")["checkpoints"]), 1)
        listed = {a["id"]: a for a in self.get_json("/api/acquisitions")["acquisitions"]}
        self.assertEqual(sorted(listed), ["a0", "a1"])
        a0 = listed["a0"]
        self.assertEqual(a0["detector_shape"], [32, 32])
        self.assertEqual(a0["dtype"], "u16")
        self.assertEqual(a0["name"], "demo_master.h5")
        self.assertEqual(a0["readiness"]["status"], "complete", a0["readiness"])
        self.assertEqual(a0["scan_shape"], [8, 8])
        self.assertEqual(listed["a1"]["readiness"]["status"], "incomplete", listed["a1"]["readiness"])
        self.assertEqual(self.get_json("/api/acquisitions/a0")["master"], a0["master"])

    def test_products_equal_the_clis_number_for_number(self):
        cases = [("bf", "", ["stem", "bf", self.master]),
                 ("mask", "inner=3&outer=9", ["stem", "mask", self.master, "--inner", "3", "--outer", "9"]),
                 ("mean-dp", "", ["stem", "mean-dp", self.master]),
                 ("mean-dp", "max=1", ["stem", "mean-dp", self.master, "--max"]),
                 ("dpc", "", ["stem", "dpc", self.master]),
                 ("fft", "of=bf", ["stem", "fft", self.master, "--of", "bf"])]
        for kind, query, cli in cases:
            with self.subTest(kind=kind, query=query):
                cli_file = self.cli_npy(*cli)
                status, _, body = self.get("/api/acquisitions/a0/products/%s?%s" % (kind, query + ("&" if query else "") + "format=npy"))
                self.assertEqual(status, 200, body[:300])
                with open(cli_file, "rb") as f:
                    self.assertEqual(body, f.read(), "the .npy bytes")
                doc = self.get_json("/api/acquisitions/a0/products/%s?%s" % (kind, query))
                want = np.load(cli_file)
                self.assertEqual(doc["shape"], list(want.shape))
                np.testing.assert_array_equal(np.array(doc["values"], dtype=want.dtype).reshape(want.shape), want)
                self.assertTrue(doc["placement"], "what ran is reported")
                self.assertEqual(doc["acquisition"], "a0")

    def test_products_come_from_the_resident_copy_which_the_server_lists_and_drops(self):
        self.get("/api/acquisitions/a0/products/bf?format=npy")  # builds the copy if no test did yet
        doc = self.get_json("/api/acquisitions/a0/products/adf")
        self.assertIs(doc["provenance"]["resident"]["built_now"], False)
        self.assertEqual(doc["detector"]["evaluated_as"], "rank range", "an annulus about the disk: two running totals")
        self.assertEqual({p["reason"] for p in doc["placement"]}, {"resident_data"})
        store = self.get_json("/api/stem/resident")
        self.assertGreater(store["budget"], 0, "serve keeps acquisitions resident by default")
        master = self.get_json("/api/acquisitions/a0")["master"]
        copy = [c for c in store["copies"] if c["acquisition"] == master]
        self.assertEqual(len(copy), 1, store)
        self.assertEqual((copy[0]["where"], copy[0]["positions"], copy[0]["order"]), ("host", 64, "radial"))
        self.assertLess(copy[0]["bytes_per_frame"], copy[0]["dense_bytes_per_frame"])
        self.assertEqual(self.get_json("/api/compute")["resident"]["copies"], store["copies"], "the Compute panel's view")
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=30)
        conn.request("DELETE", "/api/stem/resident")
        dropped = json.loads(conn.getresponse().read())
        conn.close()
        self.assertEqual(dropped["copies"], [])
        self.assertEqual(dropped["evictions"][-1]["reason"], "dropped")
        again = self.get_json("/api/acquisitions/a0/products/adf")
        self.assertEqual(again["values"], doc["values"], "rebuilt, the same numbers")

    def test_a_frame_equals_the_clis_export_and_calibration_names_its_sources(self):
        cli_file = self.cli_npy("stem", "export", self.master, "--frame", "3,5")
        want = np.load(cli_file).reshape(32, 32)
        doc = self.get_json("/api/acquisitions/a0/frame?row=3&col=5")
        self.assertEqual(doc["position"], [3, 5])
        np.testing.assert_array_equal(np.array(doc["values"], dtype=want.dtype).reshape(32, 32), want)
        cal = self.get_json("/api/acquisitions/a0/calibration")
        self.assertEqual(cal["energy"]["value"], 300000.0)
        self.assertIn("source", cal["detector_angle_per_pixel"])
        self.assertIn("radius", cal["disk"])
        # SSB's overrides, by the same names: the value and its source.
        cal = self.get_json("/api/acquisitions/a0/calibration?kv=200&scan_step_A=1.5")
        self.assertEqual((cal["energy"]["value"], cal["energy"]["source"]), (200000.0, "kv"))
        self.assertEqual((cal["scan_step"]["value"], cal["scan_step"]["source"]), (1.5, "scan_step_A"))

    def test_bad_requests_get_a_clear_message_and_the_server_stays_up(self):
        cases = [("/api/acquisitions/a0/products/mask?inner=50&outer=60", 400, "the mask is outside the detector"),
                 ("/api/acquisitions/a0/products/mask?inner=5.2&outer=5.3", 400, "no pixel of the 32x32 detector"),
                 ("/api/acquisitions/a0/products/mask?inner=9&outer=3", 400, "inner"),
                 ("/api/acquisitions/a0/products/mask", 400, "give inner/outer"),
                 ("/api/acquisitions/a0/frame?row=8&col=0", 400, "scan position (8, 0) is outside the 8 x 8 scan"),
                 ("/api/acquisitions/a0/frame?row=1", 400, "'row' and 'col'"),
                 ("/api/acquisitions/a0/calibration?kv=-1", 400, "kv"),
                 ("/api/acquisitions/a0/calibration?scan_step_A=abc", 400, "scan_step_A"),
                 ("/api/acquisitions/a0/frame?row=1&col=x", 400, "col"),
                 ("/api/acquisitions/a0/products/bf?center=1", 400, "center"),
                 ("/api/acquisitions/a0/products/bf?format=png", 400, "format"),
                 ("/api/acquisitions/a9", 404, "no acquisition 'a9'"),
                 ("/api/acquisitions/a0/products/nope", 404, "no product 'nope'")]
        for path, status, words in cases:
            with self.subTest(path=path):
                doc = self.get_json(path, expect=status)
                self.assertIn(words, doc["error"])
        self.assertEqual(self.get_json("/api/health")["status"], "ok")

    def test_chunks_are_the_stored_bytes_with_their_manifest_and_bad_windows_are_refused(self):
        # GET …/chunks (the page's WGSL decoder reads it): each frame's chunk exactly as HDF5's chunk index holds it
        # (h5py's read_direct_chunk), across the two data files, with the block size its header gives and the
        # masking the products apply; windows outside the acquisition and malformed parameters are 400 naming them.
        import h5py
        self.assertIs(self.get_json("/api/acquisitions/a0")["stored_chunks"], True)
        status, headers, body = self.get("/api/acquisitions/a0/chunks?start=30&count=10")
        self.assertEqual(status, 200, body[:300])
        size = int(headers["x-chunks-manifest-bytes"])
        self.assertEqual(size % 4, 0)
        manifest, data = json.loads(body[:size]), body[size:]
        self.assertEqual((manifest["start"], manifest["count"], manifest["frames_total"]), (30, 10, 64))
        self.assertEqual((manifest["dtype"], manifest["element_size"], manifest["frame_shape"], manifest["frame_bytes"]), ("u16", 2, [32, 32], 2048))
        self.assertEqual(manifest["sentinel"], 65535)
        self.assertEqual(manifest["data_bytes"], len(data))
        stored = {}
        with h5py.File(self.master, "r") as f:
            first = 0
            for name in sorted(f["entry/data"].keys()):
                link = f["entry/data"].get(name, getlink=True)
                with h5py.File(os.path.join(self.stem, link.filename), "r") as d:
                    ds = d[link.path]
                    for local in range(ds.shape[0]):
                        if 30 <= first + local < 40:
                            stored[first + local] = (link.filename, ds.id.read_direct_chunk((local, 0, 0))[1])
                    first += ds.shape[0]
            mask = f["entry/instrument/detector/detectorSpecific/pixel_mask"][()]
        self.assertEqual(manifest["bad_pixels"], [int(i) for i in np.flatnonzero(mask.ravel() > 0)])
        self.assertGreater(len(manifest["bad_pixels"]), 0)
        self.assertEqual([c["frame"] for c in manifest["chunks"]], list(range(30, 40)))
        self.assertEqual(len(set(manifest["files"])), 2)
        for c in manifest["chunks"]:
            with self.subTest(frame=c["frame"]):
                filename, chunk = stored[c["frame"]]
                self.assertEqual(c["offset"] % 4, 0)
                self.assertEqual(bytes(data[c["offset"]:c["offset"] + c["bytes"]]), bytes(chunk))
                self.assertEqual(c["filter"], "bitshuffle_lz4")
                self.assertEqual(c["block_bytes"], int.from_bytes(chunk[8:12], "big"))
                self.assertEqual(manifest["files"][c["file"]], os.path.basename(filename))
        cases = [("start=60&count=5", "frames [60, 65) are not a non-empty window of the acquisition's 64 frames"),
                 ("start=64&count=1", "frames [64, 65)"),
                 ("count=3", "'start' and 'count'"),
                 ("start=0&count=0", "count"),
                 ("start=0&count=x", "count"),
                 ("start=0&count=2&rows=1,2", "rows")]
        for query, words in cases:
            with self.subTest(query=query):
                self.assertIn(words, self.get_json("/api/acquisitions/a0/chunks?" + query, expect=400)["error"])
        self.assertIn("no acquisition 'a9'", self.get_json("/api/acquisitions/a9/chunks?start=0&count=1", expect=404)["error"])

    def test_a_path_that_is_no_acquisition_stops_serve_before_it_listens(self):
        junk = os.path.join(self.tmp, "junk.h5")
        with open(junk, "wb") as f:
            f.write(b"not an HDF5 file")
        for path, words in ((junk, junk + ": cannot open as HDF5: file signature not found"),
                            (os.path.join(self.tmp, "absent.h5"), os.path.join(self.tmp, "absent.h5") + ": no such file")):
            with self.subTest(path=path):
                r = self.tm("serve", "--port", "0", path)
                self.assertEqual(r.returncode, 6, r.stdout + r.stderr)
                self.assertIn(words, r.stderr)
                self.assertNotIn("serving", r.stdout)

    def test_an_acquisition_being_written_reports_readiness_and_updates(self):
        doc = self.get_json("/api/acquisitions/a1/products/bf", expect=409)
        self.assertIn("not complete", doc["error"])
        self.assertIn("demo_data_000002.h5", doc["error"])
        self.get_json("/api/acquisitions/a1/frame?row=0&col=0", expect=409)
        target = os.path.join(self.partial, "demo_data_000002.h5")
        try:
            shutil.copy(self.moved, target)  # the writer finishes
            a1 = self.get_json("/api/acquisitions/a1")
            self.assertEqual(a1["readiness"]["status"], "complete", a1["readiness"])
            bf = self.get_json("/api/acquisitions/a1/products/bf")
            bf0 = self.get_json("/api/acquisitions/a0/products/bf")
            self.assertEqual(bf["values"], bf0["values"])
            # A damaged (truncated) data file: readiness says so; nothing crashes.
            with open(target, "r+b") as f:
                f.truncate(4096)
            a1 = self.get_json("/api/acquisitions/a1")
            self.assertEqual(a1["readiness"]["status"], "incomplete", a1["readiness"])
            self.get_json("/api/acquisitions/a1/products/bf", expect=409)
        finally:
            if os.path.exists(target):
                os.remove(target)
        self.assertEqual(self.get_json("/api/health")["status"], "ok")

    def read_event(self, response, deadline):
        """The next (name, data) of a Server-Sent Events response, skipping comment lines; None past the deadline."""
        name, data = None, None
        while time.time() < deadline:
            line = response.fp.readline()
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: "):])
            elif line == "" and name is not None:
                return name, data
        return None

    def open_events(self, server, acquisition, wait_s=10):
        """A readiness stream, waiting up to wait_s for a slot (a stream whose client left is freed at its next
        heartbeat, within 2 s)."""
        deadline = time.time() + wait_s
        while True:
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            conn.request("GET", "/api/acquisitions/%s/events" % acquisition)
            r = conn.getresponse()
            if r.status != 503 or time.time() > deadline:
                break
            r.read()
            conn.close()
            time.sleep(0.2)
        self.assertEqual(r.status, 200)
        self.assertTrue(r.getheader("Content-Type").startswith("text/event-stream"), r.getheader("Content-Type"))
        return conn, r

    def test_readiness_events_push_the_summary_then_each_change(self):
        target = os.path.join(self.partial, "demo_data_000002.h5")
        conn, r = self.open_events(self.server, "a1")
        try:
            name, first = self.read_event(r, time.time() + 10)
            self.assertEqual(name, "readiness")
            self.assertEqual(first["id"], "a1")
            self.assertEqual(first["readiness"], self.get_json("/api/acquisitions/a1")["readiness"], "the summary's readiness")
            self.assertEqual(first["readiness"]["status"], "incomplete")
            shutil.copy(self.moved, target)  # the writer finishes: an event within a poll or two
            t0 = time.time()
            event = self.read_event(r, t0 + 10)
            self.assertIsNotNone(event, "no event after the data file arrived")
            name, second = event
            self.assertEqual(name, "readiness")
            self.assertEqual(second["readiness"]["status"], "complete", second["readiness"])
            self.assertGreater(second["readiness"]["frames_present"], first["readiness"]["frames_present"])
            self.assertLess(time.time() - t0, 5)
            os.remove(target)  # and gone again
            name, third = self.read_event(r, time.time() + 10)
            self.assertEqual(third["readiness"]["status"], "incomplete")
        finally:
            conn.close()
            if os.path.exists(target):
                os.remove(target)
        self.get_json("/api/acquisitions/a9/events", expect=404)
        self.assertEqual(self.get_json("/api/health")["status"], "ok")

    def test_readiness_streams_are_bounded_and_freed_when_their_clients_go(self):
        streams = [self.open_events(self.server, "a0") for _ in range(4)]
        try:
            for _, r in streams:
                self.assertEqual(self.read_event(r, time.time() + 10)[0], "readiness")
            doc = self.get_json("/api/acquisitions/a0/events", expect=503)
            self.assertIn("poll GET /api/acquisitions/a0", doc["error"])
            self.assertEqual(self.get_json("/api/acquisitions/a0")["id"], "a0", "other requests are still served")
        finally:
            for conn, _ in streams:
                conn.close()
        # Each is freed at its next write (a heartbeat within 2 s): all four slots again.
        streams = [self.open_events(self.server, "a0", wait_s=6) for _ in range(4)]
        for conn, _ in streams:
            conn.close()

    def test_an_open_readiness_stream_does_not_hold_shutdown(self):
        server = Server([self.partial], self.env)
        try:
            conn, r = self.open_events(server, "a0")
            self.assertEqual(self.read_event(r, time.time() + 10)[0], "readiness")
            t0 = time.time()
            code, _ = server.stop()
            self.assertEqual(code, 0)
            self.assertLess(time.time() - t0, 5, "the stream ended with the server")
            conn.close()
        finally:
            if server.proc.poll() is None:
                server.proc.kill()

    def test_ssb_preview_equals_the_clis_stem_ssb(self):
        cases = [("c10=80&c12=15&phi12=25", ["--C10", "80", "--C12", "15", "--phi12", "25"]),
                 ("c10=-40&semiangle_mrad=18&rotation_deg=5&kv=200",
                  ["--C10", "-40", "--semiangle-mrad", "18", "--scan-rotation-deg", "5", "--kv", "200"])]
        for query, flags in cases:
            with self.subTest(query=query):
                cli_file = self.cli_npy("stem", "ssb", self.master, *flags)
                status, _, body = self.get("/api/acquisitions/a0/ssb?%s&format=npy" % query)
                self.assertEqual(status, 200, body[:300])
                with open(cli_file, "rb") as f:
                    self.assertEqual(body, f.read(), "the .npy bytes")
                doc = self.get_json("/api/acquisitions/a0/ssb?" + query)
                want = np.load(cli_file)
                self.assertEqual(doc["shape"], [8, 8])
                self.assertEqual(doc["dtype"], "<f8")
                np.testing.assert_array_equal(np.array(doc["values"], dtype=np.float64).reshape(want.shape), want)
                with open(cli_file + ".json") as f:
                    report = json.load(f)
                self.assertEqual(doc["aberrations"], report["aberrations"])
                for key, value in report["calibration"].items():  # the same numbers; sources named by each face
                    self.assertEqual(doc["calibration"][key]["value"] if isinstance(value, dict) else doc["calibration"][key],
                                     value["value"] if isinstance(value, dict) else value, key)
                self.assertTrue(doc["placement"])
        doc = self.get_json("/api/acquisitions/a0/ssb?c10=80&c12=15&phi12=25&semiangle_mrad=18")
        self.assertEqual(doc["calibration"]["semiangle"]["value"], 18.0)
        self.assertEqual(doc["calibration"]["semiangle"]["source"], "semiangle_mrad")

    def test_bad_ssb_parameters_are_400_naming_the_parameter(self):
        cases = [("c10=abc", "'c10'"), ("c12=-1", "'c12'"), ("phi12=inf", "'phi12'"), ("kv=0", "'kv'"),
                 ("semiangle_mrad=-3", "'semiangle_mrad'"), ("scan_step_A=x", "'scan_step_A'"), ("center=4", "'center'"),
                 ("radius=0", "'radius'"), ("detector_bin=0", "'detector_bin'"), ("rotation_deg=nan", "'rotation_deg'"),
                 ("format=png", "'format'"), ("c10=1&c10=2", "'c10'")]
        for query, words in cases:
            with self.subTest(query=query):
                self.assertIn(words, self.get_json("/api/acquisitions/a0/ssb?" + query, expect=400)["error"])
        self.get_json("/api/acquisitions/a1/ssb", expect=409)  # still being written
        self.get_json("/api/acquisitions/a9/ssb", expect=404)

    def test_a_movie_equals_the_clis_stem_movie_and_bad_requests_are_400(self):
        cases = [("sweep=outer&inner=0&from=2&to=12&steps=5&center=16,16&colormap=magma",
                  ["--sweep", "outer", "--inner", "0", "--from", "2", "--to", "12", "--steps", "5", "--center", "16,16", "--colormap", "magma"]),
                 ("along=0,0:7,5&transform=log", ["--patterns-along", "0,0:7,5", "--transform", "log"])]
        for query, flags in cases:
            with self.subTest(query=query):
                out = os.path.join(self.tmp, "movie.gif")
                r = self.tm("stem", "movie", self.master, *flags, "-o", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                status, headers, body = self.get("/api/acquisitions/a0/movie?" + query)
                self.assertEqual(status, 200, body[:300])
                self.assertEqual(headers["content-type"], "image/gif")
                with open(out, "rb") as f:
                    self.assertEqual(body, f.read(), "the GIF bytes stem movie writes")
        status, headers, body = self.get("/api/acquisitions/a0/movie?along=0,0:3,3&format=mp4")
        self.assertEqual(status, 200, body[:300])
        self.assertEqual((headers["content-type"], body[4:8], headers["x-movie-frames"]), ("video/mp4", b"ftyp", "4"))
        # Encoded in memory (no scratch file), the MP4 is the file stem movie writes, byte for byte.
        out = os.path.join(self.tmp, "movie.mp4")
        r = self.tm("stem", "movie", self.master, "--patterns-along", "0,0:3,3", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, "rb") as f:
            self.assertEqual(body, f.read(), "the MP4 bytes stem movie writes")
        bad = [("", "along"), ("along=0,0", "'along'"), ("along=0,0:9,9", "outside the scan"), ("along=0,0:1,1&steps=0", "'steps'"),
               ("sweep=middle&from=1&to=2", "'sweep'"), ("sweep=outer&from=1", "'from' and 'to'"), ("along=0,0:1,1&format=avi", "'format'"),
               ("along=0,0:1,1&fps=0", "'fps'"), ("along=0,0:1,1&sweep=outer", "one of"), ("sweep=outer&inner=5&from=-1&to=3", "parameter 'from': expected a number from 0 to 1000000 (detector pixels), got '-1'"),
               ("along=0,0:1,1&colormap=nosuch", "nosuch")]
        for query, words in bad:
            with self.subTest(query=query):
                self.assertIn(words, self.get_json("/api/acquisitions/a0/movie?" + query, expect=400)["error"])
        self.get_json("/api/acquisitions/a1/movie?along=0,0:1,1", expect=409)  # still being written
        self.get_json("/api/acquisitions/a9/movie?along=0,0:1,1", expect=404)

    def test_a_named_request_reports_its_progress_and_can_be_cancelled(self):
        """progress_id names a product, SSB or movie request: GET /api/progress/ID then says where it is (kept once it
        ends), DELETE cancels it, also before it arrives (the request is then refused as cancelled, 409)."""
        status, _, body = self.get("/api/acquisitions/a0/products/bf?progress_id=t-bf-1")
        self.assertEqual(status, 200, body[:300])
        doc = self.get_json("/api/progress/t-bf-1")
        self.assertEqual((doc["id"], doc["finished"], doc["outcome"], doc["cancel_requested"]), ("t-bf-1", True, "done", False))
        self.assertLessEqual(doc["done"], doc["total"])
        fit = self.get_json("/api/acquisitions/a0/ssb?fit=1&trials=6&estimate_trials=4&seed=1&progress_id=t-fit-1")
        doc = self.get_json("/api/progress/t-fit-1")
        self.assertEqual(doc["outcome"], "done")
        self.assertTrue(doc["stage"].startswith("fitting the aberrations: "), doc)
        self.assertGreaterEqual(doc["done"], 1)
        self.assertIn("fit", fit)
        status, headers, _ = self.get("/api/acquisitions/a0/movie?along=0,0:0,3&progress_id=t-movie-1")
        self.assertEqual(status, 200)
        self.assertEqual(self.get_json("/api/progress/t-movie-1")["outcome"], "done")
        # Cancelled before it arrives: the entry says so, and the request is refused as cancelled.
        cancelled = self.request_json("DELETE", "/api/progress/t-cancel-1")
        self.assertEqual((cancelled["cancel_requested"], cancelled["outcome"]), (True, "cancelled"))
        for path in ("products/adf?", "ssb?fit=1&", "movie?along=0,0:0,3&"):
            with self.subTest(path=path):
                self.assertIn("cancelled", self.get_json("/api/acquisitions/a0/%sprogress_id=t-cancel-1" % path, expect=409)["error"])
                self.assertEqual(self.get_json("/api/progress/t-cancel-1")["outcome"], "cancelled")
        self.assertIn("'progress_id'", self.get_json("/api/acquisitions/a0/products/bf?progress_id=bad!id", expect=400)["error"])
        self.assertIn("'progress_id'", self.get_json("/api/acquisitions/a0/products/bf?progress_id=" + "x" * 65, expect=400)["error"])
        unseen = self.get_json("/api/progress/never-seen")
        self.assertEqual((unseen["seen"], unseen["finished"], unseen["outcome"]), (False, False, None))
        self.assertTrue(self.get_json("/api/progress/t-bf-1")["seen"])

    def test_views_equal_the_clis_region_and_bin_and_bad_views_are_400(self):
        # The page's views: products and the block for a scan region and a detector bin, as the CLI's flags give them.
        query = "scan_region=1,6,2,7&detector_bin=2"
        cli_file = self.cli_npy("stem", "mask", self.master, "--inner", "0", "--outer", "5", "--center", "8,8",
                                "--scan-region", "1,6,2,7", "--detector-bin", "2")
        status, _, body = self.get("/api/acquisitions/a0/products/mask?inner=0&outer=5&center=8,8&format=npy&" + query)
        self.assertEqual(status, 200, body[:300])
        with open(cli_file, "rb") as f:
            self.assertEqual(body, f.read(), "the .npy bytes of stem mask --scan-region --detector-bin")
        exported = self.cli_npy("stem", "export", self.master, "--scan-region", "1,6,2,7", "--detector-bin", "2")
        status, headers, body = self.get("/api/acquisitions/a0/block?" + query)
        self.assertEqual(status, 200, body[:300])
        want = np.load(exported)
        self.assertEqual(headers["x-block-shape"], ",".join(str(n) for n in want.shape))
        got = np.frombuffer(body[:want.nbytes], dtype=want.dtype).reshape(want.shape)
        np.testing.assert_array_equal(got, want)
        self.assertEqual(int(headers["x-block-view-bytes"]), want.nbytes)
        # Bands of the view's rows (what the page fetches to show progress): each equal to those rows of the view,
        # each saying the whole view's size; rows past the view or empty are 400.
        for r0, r1 in ((0, 2), (2, 5), (4, 5)):
            with self.subTest(rows=(r0, r1)):
                status, headers, body = self.get("/api/acquisitions/a0/block?%s&rows=%d,%d" % (query, r0, r1))
                self.assertEqual(status, 200, body[:300])
                self.assertEqual(headers["x-block-shape"], ",".join(str(n) for n in (r1 - r0,) + want.shape[1:]))
                self.assertEqual(int(headers["x-block-view-bytes"]), want.nbytes)
                band = want[r0:r1]
                np.testing.assert_array_equal(np.frombuffer(body[:band.nbytes], dtype=want.dtype).reshape(band.shape), band)
        for rows in ("3,3", "0,6", "4,2"):
            with self.subTest(rows=rows):
                self.assertIn("'rows'", self.get_json("/api/acquisitions/a0/block?%s&rows=%s" % (query, rows), expect=400)["error"])
        bad = [("scan_region=1,2,3", "'scan_region'"), ("scan_region=1,2,3,4,5", "'scan_region'"), ("scan_region=a,b,c,d", "'scan_region'"),
               ("detector_bin=0", "'detector_bin'"), ("detector_bin=2000", "'detector_bin'"), ("scan_region=0,99,0,8", "99")]
        for q, words in bad:
            for endpoint in ("products/bf?", "block?"):
                with self.subTest(query=q, endpoint=endpoint):
                    self.assertIn(words, self.get_json("/api/acquisitions/a0/" + endpoint + q, expect=400)["error"])
        self.assertIn("'detector_bin'", self.get_json("/api/acquisitions/a0/frame?row=0&col=0&detector_bin=0", expect=400)["error"])

    def test_a_rectangle_detector_equals_the_cli_and_a_numpy_sum_of_the_frames(self):
        frames = np.load(self.cli_npy("stem", "export", self.master))
        self.assertEqual(frames.shape, (8, 8, 32, 32))
        for rect in ("2,3,10,12", "0,0,32,32", "31,0,32,1", "12,20,20,31"):
            with self.subTest(rect=rect):
                r0, c0, r1, c1 = map(int, rect.split(","))
                cli_file = self.cli_npy("stem", "mask", self.master, "--rect", rect)
                status, _, body = self.get("/api/acquisitions/a0/products/mask?rect=%s&format=npy" % rect)
                self.assertEqual(status, 200, body[:300])
                with open(cli_file, "rb") as f:
                    self.assertEqual(body, f.read(), "the .npy bytes")
                want = frames[:, :, r0:r1, c0:c1].astype(np.uint64).sum(axis=(2, 3))
                np.testing.assert_array_equal(np.load(cli_file), want)
                doc = self.get_json("/api/acquisitions/a0/products/mask?rect=" + rect)
                self.assertEqual(doc["detector"]["kind"], "rectangle")
                self.assertEqual(doc["detector"]["rect"], [r0, c0, r1, c1])
                self.assertEqual(doc["detector"]["pixels"], (r1 - r0) * (c1 - c0))
        # A disk (inner 0) is an annulus too, and so is one covering the whole frame.
        for outer in ("5", "100"):
            cli_file = self.cli_npy("stem", "mask", self.master, "--inner", "0", "--outer", outer)
            status, _, body = self.get("/api/acquisitions/a0/products/mask?inner=0&outer=%s&format=npy" % outer)
            self.assertEqual(status, 200, body[:300])
            with open(cli_file, "rb") as f:
                self.assertEqual(body, f.read())
        np.testing.assert_array_equal(np.load(cli_file), frames.astype(np.uint64).sum(axis=(2, 3)))

    def test_a_rectangle_outside_the_frame_or_empty_is_refused_clearly(self):
        cases = [("2,3,40,12", "outside the 32x32 detector"), ("0,0,32,33", "outside the 32x32 detector"),
                 ("5,3,5,12", "is empty"), ("2,12,10,3", "is empty")]
        for rect, words in cases:
            with self.subTest(rect=rect):
                doc = self.get_json("/api/acquisitions/a0/products/mask?rect=" + rect, expect=400)
                self.assertIn(words, doc["error"])
                self.assertIn(rect, doc["error"], "the rectangle is named")
                r = self.tm("stem", "mask", self.master, "--rect", rect, "-o", os.path.join(self.tmp, "bad.npy"))
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(words, r.stderr)
        for query, words in (("rect=1,2,3", "'rect'"), ("rect=1,2,3,4,5", "'rect'"), ("rect=a,2,3,4", "'rect'"),
                             ("rect=0,0,4,4&inner=2", "--rect excludes"), ("rect=0,0,4,4&outer=2", "--rect excludes")):
            with self.subTest(query=query):
                self.assertIn(words, self.get_json("/api/acquisitions/a0/products/mask?" + query, expect=400)["error"])
        self.assertIn("'rect'", self.get_json("/api/acquisitions/a0/products/bf?rect=0,0,4,4", expect=400)["error"])
        r = self.tm("stem", "mask", self.master, "--rect", "0,0,4,4", "--inner", "2", "-o", os.path.join(self.tmp, "bad.npy"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--rect excludes --inner", r.stderr)


if __name__ == "__main__":
    unittest.main()
