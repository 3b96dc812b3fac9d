#!/usr/bin/python3
"""`tensormorph serve` with 4D-STEM acquisitions beside a checkpoint: the inventory lists them with readiness
(current while files come and go), and the products, the calibration and single frames it computes on its
backends equal what the CLI writes for the same request, number for number. Bad requests get a clear message
and never take the server down."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import TM_BIN  # noqa: E402
from test_serve import Server, http_get, private_env, write_small_safetensors  # noqa: E402


class ServeStemTest(unittest.TestCase):
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

    @classmethod
    def tearDownClass(cls):
        code, _ = cls.server.stop()
        assert code == 0, code
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def tm(cls, *args):
        return subprocess.run([TM_BIN] + list(args), capture_output=True, text=True, env=cls.env, timeout=300)

    def get(self, path):
        status, headers, body = http_get(self.server.host, self.server.port, path)
        return status, headers, body

    def get_json(self, path, expect=200):
        status, _, body = self.get(path)
        self.assertEqual(status, expect, body[:500])
        return json.loads(body)

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

    def test_bad_requests_get_a_clear_message_and_the_server_stays_up(self):
        cases = [("/api/acquisitions/a0/products/mask?inner=50&outer=60", 400, "the mask is outside the detector"),
                 ("/api/acquisitions/a0/products/mask?inner=5.2&outer=5.3", 400, "no pixel of the 32x32 detector"),
                 ("/api/acquisitions/a0/products/mask?inner=9&outer=3", 400, "inner"),
                 ("/api/acquisitions/a0/products/mask", 400, "give inner/outer"),
                 ("/api/acquisitions/a0/frame?row=8&col=0", 400, "scan position (8, 0) is outside the 8 x 8 scan"),
                 ("/api/acquisitions/a0/frame?row=1", 400, "'row' and 'col'"),
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


if __name__ == "__main__":
    unittest.main()
