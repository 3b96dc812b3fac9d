#!/usr/bin/python3
"""`tensormorph serve` keeping an acquisition resident while it is being written: a product over the scan rows
already written is served from a copy of those rows; when the writer adds the last data file the copy is extended
by the new frames only (the frames it holds are reused, not decoded again), and every product equals the CLI's
streamed product byte for byte, before and after."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_serve import ServedCase, Server, http_get, private_env  # noqa: E402


class ServeStemResidentGrowingTest(ServedCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-resident-")
        cls.env = private_env(cls.tmp)
        cls.stem = os.path.join(cls.tmp, "stem")
        # 8 x 8 scan over two data files of 32 frames: while the second is missing, scan rows 0-3 are written.
        r = cls.tm("stem", "demo", "--out", cls.stem, "--scan", "8,8", "--detector", "32", "--files", "2")
        assert r.returncode == 0, r.stderr
        cls.master = os.path.join(cls.stem, "demo_master.h5")
        cls.second = os.path.join(cls.stem, "demo_data_000002.h5")
        cls.away = os.path.join(cls.tmp, "second.h5")
        shutil.move(cls.second, cls.away)
        cls.server = Server([cls.master, "--resident-memory", "1G"], cls.env)

    def get(self, path, expect=200):
        status, _, body = http_get(self.server.host, self.server.port, path)
        self.assertEqual(status, expect, body[:500])
        return body

    def cli_bytes(self, *args):
        """The CLI's streamed product (no resident copy in a one-shot command) as .npy bytes."""
        out = os.path.join(self.tmp, "cli.npy")
        r = self.tm(*args, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, "rb") as f:
            return f.read()

    # (HTTP product and query, the same product from the CLI)
    def cases(self, region):
        q = "scan_region=%s&" % region if region else ""
        cli = ["--scan-region", region] if region else []
        return [("bf?" + q, ["stem", "bf", self.master] + cli),
                ("adf?" + q, ["stem", "adf", self.master] + cli),
                ("mask?inner=3&outer=9&" + q, ["stem", "mask", self.master, "--inner", "3", "--outer", "9"] + cli),
                ("mask?rect=2,3,20,30&" + q, ["stem", "mask", self.master, "--rect", "2,3,20,30"] + cli),
                ("com?" + q, ["stem", "com", self.master] + cli),
                ("mean-dp?" + q, ["stem", "mean-dp", self.master] + cli)]

    def check_cases(self, region):
        for query, cli in self.cases(region):
            with self.subTest(query=query):
                body = self.get("/api/acquisitions/a0/products/%sformat=npy" % query)
                self.assertEqual(body, self.cli_bytes(*cli), "the .npy bytes equal the CLI's streamed product")

    def resident(self, query):
        doc = json.loads(self.get("/api/acquisitions/a0/products/" + query))
        self.assertIn("resident_data", {p["reason"] for p in doc["placement"]}, doc["placement"])
        return doc["provenance"]["resident"]

    def test_a_copy_of_the_rows_written_is_extended_when_the_rest_arrives(self):
        # Being written: the whole scan is refused as before; the rows written are served from a copy of them.
        self.assertIn(b"not complete", self.get("/api/acquisitions/a0/products/bf", expect=409))
        self.get("/api/acquisitions/a0/products/bf?scan_region=2,5,0,8", expect=409)  # row 4 is not written yet
        first = self.resident("bf?scan_region=0,4,0,8")  # (the disk's pattern pass built it; the sums read it)
        self.assertEqual((first["positions"], first["complete"], first["order"]), (32, False, "radial"), first)
        self.assertEqual((first["positions_reused"], first["positions_appended"], first["extensions"]), (0, 32, 0))
        self.check_cases("0,4,0,8")
        self.check_cases("1,3,2,7")
        # The writer adds the second data file: the next product extends the copy by its 32 positions.
        shutil.copy(self.away, self.second)
        grown = self.resident("adf")
        self.assertEqual((grown["positions"], grown["complete"]), (64, True), grown)
        self.assertEqual((grown["positions_reused"], grown["positions_appended"], grown["extensions"]), (32, 32, 1), grown)
        evictions = json.loads(self.get("/api/stem/resident"))["evictions"]
        self.assertIn("superseded", evictions[-1]["reason"], evictions)
        self.assertIn("32 positions reused", evictions[-1]["reason"], evictions)
        self.check_cases(None)
        self.check_cases("1,7,2,8")
        again = self.resident("bf")
        self.assertEqual((again["built_now"], again["built_at"], again["positions_reused"]), (False, grown["built_at"], 32), again)
        store = json.loads(self.get("/api/stem/resident"))
        self.assertEqual([(c["positions"], c["complete"]) for c in store["copies"]], [(64, True)], store)
        self.assertEqual(json.loads(self.get("/api/health"))["status"], "ok")


if __name__ == "__main__":
    unittest.main()
