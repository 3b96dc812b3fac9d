#!/usr/bin/python3
"""GET /api/acquisitions/{id}/chunks on HDF5 layouts other than Dectris's: a 4-D EMD datacube in one-frame
bitshuffle+LZ4 chunks (served as stored, each chunk HDF5's own), a contiguous datacube (each frame's bytes,
filter "none"), and multi-frame gzip chunks (not served: 409 naming the frame, its file and codec; the summary's
stored_chunks is false so the page never asks)."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_serve import Server, http_get, private_env  # noqa: E402
from test_stem_hdf5_array import KC, KR, RC, RR, h5py, write_emd1  # noqa: E402

if h5py is not None:
    import hdf5plugin


@unittest.skipIf(h5py is None, "h5py/hdf5plugin not installed (scripts/install-deps installs them)")
class ServeStemChunks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-stem-chunks-")
        cls.env = private_env(cls.tmp)
        rng = np.random.default_rng(11)
        cls.data = rng.poisson(3.0, size=(RR, RC, KR, KC)).astype(np.uint16)
        cls.emd = os.path.join(cls.tmp, "cube.emd")
        write_emd1(cls.emd, cls.data, chunks=(1, 1, KR, KC), **hdf5plugin.Bitshuffle(cname="lz4"))
        cls.contiguous = os.path.join(cls.tmp, "contiguous.emd")
        write_emd1(cls.contiguous, cls.data)
        cls.gzip = os.path.join(cls.tmp, "gzip.h5")
        with h5py.File(cls.gzip, "w") as f:
            f.create_dataset("frames", data=cls.data.reshape(RR * RC, KR, KC), chunks=(4, KR, KC), compression="gzip")
        cls.server = Server([cls.emd, cls.contiguous, cls.gzip + ":/frames"], cls.env)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def chunks(self, acq, query, expect=200):
        status, headers, body = http_get(self.server.host, self.server.port, "/api/acquisitions/%s/chunks?%s" % (acq, query))
        self.assertEqual(status, expect, body[:300])
        if expect != 200:
            return json.loads(body)
        size = int(headers["x-chunks-manifest-bytes"])
        return json.loads(body[:size]), body[size:]

    def summary(self, acq):
        return json.loads(http_get(self.server.host, self.server.port, "/api/acquisitions/" + acq)[2])

    def test_one_frame_lz4_chunks_of_a_4d_datacube_are_served_as_stored(self):
        self.assertIs(self.summary("a0")["stored_chunks"], True)
        manifest, data = self.chunks("a0", "start=3&count=9")
        with h5py.File(self.emd, "r") as f:
            ds = f["experiment/datacube/data"]
            for c in manifest["chunks"]:
                with self.subTest(frame=c["frame"]):
                    r, col = divmod(c["frame"], RC)
                    stored = ds.id.read_direct_chunk((r, col, 0, 0))[1]
                    self.assertEqual(c["filter"], "bitshuffle_lz4")
                    self.assertEqual(bytes(data[c["offset"]:c["offset"] + c["bytes"]]), bytes(stored))
        self.assertEqual([c["frame"] for c in manifest["chunks"]], list(range(3, 12)))
        self.assertEqual(manifest["files"], ["cube.emd"])

    def test_a_contiguous_datacube_is_served_frame_by_frame_unfiltered(self):
        self.assertIs(self.summary("a1")["stored_chunks"], True)
        manifest, data = self.chunks("a1", "start=%d&count=2" % (RR * RC - 2))
        frames = self.data.reshape(RR * RC, KR, KC)
        for k, c in enumerate(manifest["chunks"]):
            self.assertEqual((c["filter"], c["block_bytes"], c["bytes"]), ("none", 0, KR * KC * 2))
            self.assertEqual(bytes(data[c["offset"]:c["offset"] + c["bytes"]]), frames[RR * RC - 2 + k].tobytes())

    def test_gzip_chunks_are_not_served_and_the_summary_says_so(self):
        self.assertIs(self.summary("a2")["stored_chunks"], False)
        error = self.chunks("a2", "start=0&count=4", expect=409)["error"]
        self.assertIn("gzip.h5, frame 0", error)
        self.assertIn("which only the server decodes", error)


if __name__ == "__main__":
    unittest.main()
