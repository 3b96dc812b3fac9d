#!/usr/bin/python3
"""`tensormorph serve` reading the product cache of `stem prepare`: GET /api/acquisitions/{id}/prepared says whether
the cache answers the acquisition as it is now (the entry's key and build time) or why not (none, stale after the
files changed, damaged), and GET …/prepared/{kind} serves each prepared product as stored — the bytes `stem KIND
--cache DB -o x.npy` writes, nothing decoded, no pass placed. What the cache does not hold is refused with a reason
naming …/products, which computes it."""
import json
import os
import sqlite3
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_serve import ServedCase, Server, http_get, private_env  # noqa: E402

PRODUCTS = [("bf", ""), ("abf", ""), ("adf", ""), ("haadf", ""), ("df", ""), ("mean-dp", ""), ("mean-dp", "max=1"),
            ("com", ""), ("dpc", ""), ("idpc", ""), ("fft", "of=adf")]


class ServePreparedTest(ServedCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-prepared-")
        cls.env = private_env(cls.tmp)
        cls.db = os.path.join(cls.tmp, "cache", "products.sqlite")
        # fresh: prepared; stale: prepared, then a data file rewritten (its mtime); damaged: an array cut short;
        # unprepared: never prepared. Each its own acquisition (file names are part of the source signature: copies
        # with the same names, sizes and times would share one entry).
        cls.master = {}
        for name in ("fresh", "stale", "damaged", "unprepared"):
            r = cls.tm("stem", "demo", "--out", os.path.join(cls.tmp, name), "--prefix", name, "--scan", "8,6", "--detector", "32",
                       "--files", "2")
            assert r.returncode == 0, r.stderr
            cls.master[name] = os.path.join(cls.tmp, name, name + "_master.h5")
        for name in ("fresh", "stale", "damaged"):
            r = cls.tm("stem", "prepare", cls.master[name], "--cache", cls.db)
            assert r.returncode == 0, r.stderr
        later = time.time() + 5
        os.utime(os.path.join(cls.tmp, "stale", "stale_data_000001.h5"), (later, later))
        with sqlite3.connect(cls.db) as c:
            key = [k for k, r in c.execute("SELECT key, report FROM prepared")
                   if json.loads(r)["provenance"]["source"]["master"] == cls.master["damaged"]][0]
            c.execute("UPDATE arrays SET data = x'00' WHERE key = ? AND name = 'bf'", (key,))
        order = ["fresh", "stale", "damaged", "unprepared"]
        cls.server = Server([cls.master[n] for n in order] + ["--product-cache", cls.db], cls.env)
        cls.id = {n: "a%d" % i for i, n in enumerate(order)}

    def get(self, path, expect=200, server=None):
        s = server or self.server
        status, _, body = http_get(s.host, s.port, path)
        self.assertEqual(status, expect, body[:500])
        return body

    def get_json(self, path, expect=200, server=None):
        return json.loads(self.get(path, expect, server))

    def test_the_status_names_the_entry_that_answers_with_its_build_time(self):
        s = self.get_json("/api/acquisitions/%s/prepared" % self.id["fresh"])
        self.assertTrue(s["hit"] and s["exists"], s)
        self.assertEqual(s["database"], self.db)
        e = s["entry"]
        self.assertRegex(e["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertLessEqual(abs(e["created_at"] - time.time()), 600)
        self.assertEqual(e["key"]["source"], e["signature"])
        self.assertEqual(e["master"], self.master["fresh"])
        self.assertEqual(e["scan_shape"], [8, 6])
        self.assertEqual([d["name"] for d in e["detectors"]], ["bf", "abf", "adf", "haadf", "df"])
        self.assertIn("mean-dp", e["products"])
        self.assertEqual(s["others"], [])

    def test_each_prepared_product_is_the_clis_cached_bytes_and_nothing_runs(self):
        for kind, query in PRODUCTS:
            with self.subTest(kind=kind, query=query):
                flags = ["--max"] if query == "max=1" else ["--of", "adf"] if query.startswith("of=") else []
                out = os.path.join(self.tmp, "cli-%s-%s.npy" % (kind, query.replace("=", "")))
                r = self.tm("stem", kind, self.master["fresh"], *flags, "--cache", self.db, "-o", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out, "rb") as f:
                    cli = f.read()
                sep = "&" if query else ""
                served = self.get("/api/acquisitions/%s/prepared/%s?%s%sformat=npy" % (self.id["fresh"], kind, query, sep))
                self.assertEqual(served, cli)
                doc = self.get_json("/api/acquisitions/%s/prepared/%s%s" % (self.id["fresh"], kind, "?" + query if query else ""))
                self.assertTrue(doc["cache"]["hit"])
                self.assertEqual(doc["cache"]["created"], self.get_json("/api/acquisitions/a0/prepared")["entry"]["created"])
                self.assertEqual(doc["placement"], [])
                self.assertEqual(doc["decoded_bytes"], 0)

    def test_the_calibration_of_a_prepared_acquisition_takes_the_cached_disk_without_a_pass(self):
        status = self.get_json("/api/acquisitions/%s/prepared" % self.id["fresh"])
        cal = self.get_json("/api/acquisitions/%s/calibration" % self.id["fresh"])
        self.assertEqual((cal["disk"]["source"], cal["placement"], cal["prepared"]), ("detected (prepared)", [], status["entry"]["created"]))
        for k in ("row", "col", "radius", "area"):
            self.assertEqual(cal["disk"][k], status["entry"]["disk"][k])
        computed = self.get_json("/api/acquisitions/%s/calibration" % self.id["stale"])
        self.assertEqual(computed["disk"]["source"], "detected")
        self.assertNotIn("prepared", computed)
        self.assertTrue(computed["placement"])

    def test_a_stale_entry_is_not_served_and_says_why(self):
        s = self.get_json("/api/acquisitions/%s/prepared" % self.id["stale"])
        self.assertFalse(s["hit"])
        self.assertNotIn("entry", s)
        self.assertIn("stale: the acquisition's files changed after it was prepared", s["why"])
        self.assertEqual(len(s["others"]), 1)
        self.assertIn("stale", s["others"][0]["why"])
        self.assertRegex(s["others"][0]["created"], r"Z$")
        body = self.get("/api/acquisitions/%s/prepared/bf" % self.id["stale"], 409).decode()
        self.assertIn("not prepared: no entry for the acquisition as it is now: stale", body)

    def test_a_damaged_entry_names_the_database_and_the_array(self):
        s = self.get_json("/api/acquisitions/%s/prepared" % self.id["damaged"])
        self.assertFalse(s["hit"])
        self.assertIn(self.db, s["why"])
        self.assertIn("damaged (bf: expected 384 bytes)", s["why"])
        body = self.get("/api/acquisitions/%s/prepared/adf" % self.id["damaged"], 409).decode()
        self.assertIn("damaged (bf", body)

    def test_an_unprepared_acquisition_or_view_is_no_hit(self):
        s = self.get_json("/api/acquisitions/%s/prepared" % self.id["unprepared"])
        self.assertFalse(s["hit"])
        self.assertIn("the cache holds no entry for this acquisition", s["why"])
        s = self.get_json("/api/acquisitions/%s/prepared?detector_bin=2" % self.id["fresh"])
        self.assertFalse(s["hit"])
        self.assertIn("prepared for another load request (detector_bin [1,1])", s["why"])
        self.get("/api/acquisitions/%s/prepared/bf?detector_bin=2" % self.id["fresh"], 409)

    def test_what_the_cache_does_not_hold_is_refused_naming_the_products_endpoint(self):
        a = self.id["fresh"]
        for path, status, words in [
            ("prepared/mask?inner=1&outer=3", 404, "GET …/products/mask computes it"),
            ("prepared/bf?inner=1&outer=3", 404, "GET …/products/bf computes it"),
            ("prepared/bf?center=16,16", 404, "not prepared"),
            ("prepared/mask?rect=0,0,4,4", 404, "rectangle"),
            ("prepared/nope", 404, "no product 'nope'"),
            ("prepared/bf?inner=-1", 400, "inner"),
            ("prepared?inner=3", 400, "parameter 'inner'"),
            ("prepared?detector_bin=0", 400, "detector_bin"),
        ]:
            with self.subTest(path=path):
                self.assertIn(words, self.get("/api/acquisitions/%s/%s" % (a, path), status).decode())
        self.get("/api/acquisitions/nope/prepared", 404)

    def test_without_the_flag_the_users_cache_is_read_once_it_exists(self):
        server = Server([self.master["unprepared"]], self.env)
        try:
            s = self.get_json("/api/acquisitions/a0/prepared", server=server)
            default = os.path.join(self.env["XDG_CACHE_HOME"], "tensormorph", "stem", "products.sqlite")
            self.assertEqual((s["hit"], s["exists"], s["database"]), (False, False, default))
            self.assertIn("no product cache at " + default, s["why"])
            r = self.tm("stem", "prepare", self.master["unprepared"])
            self.assertEqual(r.returncode, 0, r.stderr)
            s = self.get_json("/api/acquisitions/a0/prepared", server=server)
            self.assertTrue(s["hit"], s)
            self.assertEqual(self.get_json("/api/acquisitions/a0/prepared/haadf", server=server)["cache"]["database"], default)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
