"""4D-STEM arrays in HDF5 files that are not Dectris's (docs/stem.md, "HDF5 arrays"): EMD 1.0 and EMD 0.2 array
groups found by their attributes, and any writer's dataset named as FILE:/path. Fixtures are written here with
h5py (HDF5's own library, the writer py4DSTEM and emdfile use) following the EMD layouts as emdfile and
py4DSTEM 0.x write them (neither package is in Debian: the group and attribute layout is ours to follow, the
bytes are h5py's). Every product equals numpy over the same frames; storage variants (contiguous, one-frame
chunks with bitshuffle+LZ4, multi-frame gzip chunks, big-endian pixels) give the same numbers; bad input is
refused naming the file."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import run  # noqa: E402

try:
    import h5py
    import hdf5plugin
except ImportError:  # pragma: no cover
    h5py = None

RR, RC, KR, KC = 6, 5, 16, 12


def write_emd1(path, data, **dataset_options):
    """EMD 1.0 as emdfile writes it: root attributes, a root group, an array group holding `data` and dim1..dim4."""
    with h5py.File(path, "w") as f:
        f.attrs["emd_group_type"] = "file"
        f.attrs["version_major"] = 1
        f.attrs["version_minor"] = 0
        root = f.create_group("experiment")
        root.attrs["emd_group_type"] = "root"
        cube = root.create_group("datacube")
        cube.attrs["emd_group_type"] = "array"
        cube.attrs["python_class"] = "DataCube"
        cube.create_dataset("data", data=data, **dataset_options)
        for axis, (name, units, step, n) in enumerate(
                [("R_x", "A", 0.5, data.shape[0]), ("R_y", "A", 0.5, data.shape[1]),
                 ("Q_x", "mrad", 1.25, data.shape[2]), ("Q_y", "mrad", 1.25, data.shape[3])], start=1):
            dim = cube.create_dataset("dim%d" % axis, data=np.arange(n) * step)
            dim.attrs["name"] = name
            dim.attrs["units"] = units
        f.create_dataset("experiment/metadata/beam_energy", data=300.0).attrs["units"] = "keV"


@unittest.skipIf(h5py is None, "h5py/hdf5plugin not installed (scripts/install-deps installs them)")
class StemHdf5Array(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-hdf5-")
        rng = np.random.default_rng(7)
        cls.data = rng.poisson(3.0, size=(RR, RC, KR, KC)).astype(np.uint16)
        cls.data[:, :, 6:10, 4:8] += 200  # a bright disk, so bf/com have structure
        cls.emd1 = os.path.join(cls.dir, "cube.emd")
        write_emd1(cls.emd1, cls.data, chunks=(1, 1, KR, KC), **hdf5plugin.Bitshuffle(cname="lz4"))
        cls.emd02 = os.path.join(cls.dir, "py4dstem_0x.h5")
        with h5py.File(cls.emd02, "w") as f:  # py4DSTEM 0.x: 4DSTEM_experiment/data/datacubes/NAME, emd_group_type 1
            g = f.create_group("4DSTEM_experiment/data/datacubes/datacube_0")
            g.attrs["emd_group_type"] = 1
            g.create_dataset("data", data=cls.data)  # contiguous
        cls.generic = os.path.join(cls.dir, "other_writer.h5")
        with h5py.File(cls.generic, "w") as f:
            f.create_dataset("scans/s1/frames", data=cls.data.reshape(RR * RC, KR, KC), chunks=(4, KR, KC), compression="gzip")
            f.create_dataset("scans/s1/big_endian", data=cls.data.astype(">u2"))
            f.create_dataset("scans/s1/signed", data=cls.data.astype(np.int16))
            f.create_dataset("scans/s1/flat", data=cls.data.reshape(-1))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def product(self, path, name, *args):
        out = os.path.join(self.dir, name + ".npy")
        r = run(["stem", name, path, "-o", out, "--json"] + list(args))
        self.assertEqual(r.code, 0, r.err)
        return np.load(out), r.json()

    def test_inspect_finds_each_layout(self):
        for path, layout, scan_source in [(self.emd1, "emd-array", "/experiment/datacube/data shape"),
                                          (self.emd02, "emd-array", "/4DSTEM_experiment/data/datacubes/datacube_0/data shape"),
                                          (self.generic + ":/scans/s1/frames", "dataset", None)]:
            with self.subTest(path=path):
                r = run(["stem", "inspect", path, "--json"])
                self.assertEqual(r.code, 0, r.err)
                doc = r.json()
                self.assertEqual(doc["format"], "hdf5-array")
                self.assertEqual(doc["layout"], layout)
                self.assertEqual(doc["readiness"]["status"], "complete", doc)
                self.assertEqual(doc["detector_shape"], [KR, KC])
                self.assertEqual(doc["dtype"], "u16")
                self.assertEqual(doc["readiness"]["frames_present"], RR * RC)
                if scan_source:
                    self.assertEqual(doc["scan_shape"], [RR, RC])
                    self.assertEqual(doc["scan_shape_source"], scan_source)

    def test_dataset_flag_names_the_dataset_as_the_path_suffix_does(self):
        d = self.data.astype(np.uint64)
        img, rep = self.product(self.generic, "bf", "--dataset", "/scans/s1/frames", "--scan-shape", "%d,%d" % (RR, RC),
                                "--center", "8,6", "--radius", "3.5")
        same, _ = self.product(self.generic + ":/scans/s1/frames", "bf", "--scan-shape", "%d,%d" % (RR, RC),
                               "--center", "8,6", "--radius", "3.5")
        np.testing.assert_array_equal(img, same)
        self.assertEqual(img.shape, d.shape[:2])
        self.assertGreater(int(img.sum()), 0)
        r = run(["stem", "inspect", self.generic, "--dataset", "/scans/s1/frames", "--json"])
        self.assertEqual(r.code, 0, r.err)
        self.assertEqual(r.json()["layout"], "dataset")
        for args, why in [(["--dataset", "scans/s1/frames"], "must start with '/'"),
                          (["--dataset", "/scans/s1/frames"], "already names a dataset")]:
            path = self.generic + (":/scans/s1/big_endian" if "already" in why else "")
            r = run(["stem", "inspect", path, *args])
            self.assertEqual(r.code, 2, (args, r.err))
            self.assertIn(why, r.err)

    def test_emd_dims_are_calibration(self):
        doc = run(["stem", "inspect", self.emd1, "--json"]).json()
        meta = doc["metadata"]
        self.assertEqual(doc["readiness"]["data_files"][0]["codec"], "bitshuffle+lz4")
        self.assertEqual(meta["experiment/datacube/scan_step"], {"value": 0.5, "units": "A"})
        self.assertEqual(meta["experiment/datacube/detector_angle_per_pixel"], {"value": 1.25, "units": "mrad"})
        self.assertEqual(meta["experiment/datacube/dim3/name"], {"value": "Q_x"})
        self.assertEqual(meta["experiment/metadata/beam_energy"], {"value": 300.0, "units": "keV"})

    def test_products_equal_numpy_in_every_storage(self):
        d = self.data.astype(np.uint64)
        decoders = {self.emd1: "bit-unshuffle", self.emd02: "copied as stored", self.generic + ":/scans/s1/frames": "HDF5 library",
                    self.generic + ":/scans/s1/big_endian": "HDF5 library"}
        for path, decoder in decoders.items():
            with self.subTest(path=path):
                extra = ["--scan-shape", "%d,%d" % (RR, RC)] if path.endswith("frames") else []
                img, rep = self.product(path, "mask", "--center", "8,6", "--inner", "0", "--outer", "3.5", *extra)
                k, l = np.meshgrid(np.arange(KR, dtype=np.float32), np.arange(KC, dtype=np.float32), indexing="ij")
                m = np.sqrt((k - 8) ** 2 + (l - 6) ** 2) <= 3.5
                np.testing.assert_array_equal(img, d[:, :, m].sum(axis=2))
                self.assertIn(decoder, rep["provenance"]["decoder"])
                mean, _ = self.product(path, "mean-dp", *extra)
                np.testing.assert_allclose(mean, d.sum(axis=(0, 1)) / (RR * RC), rtol=1e-15)

    def test_discover_lists_emd_files(self):
        r = run(["stem", "discover", self.dir, "--json"])
        self.assertEqual(r.code, 0, r.err)
        found = {os.path.realpath(a["master"]): a for a in r.json()}
        self.assertEqual(found[os.path.realpath(self.emd1)]["format"], "hdf5-array")
        self.assertEqual(found[os.path.realpath(self.emd1)]["status"], "complete")

    def test_bad_input_is_named(self):
        cases = [(self.generic + ":/scans/s1/signed", "unsigned"),
                 (self.generic + ":/scans/s1/flat", "rank 1"),
                 (self.generic + ":/scans/nothing", "no dataset /scans/nothing"),
                 (self.generic, "name the frames' dataset")]
        for path, text in cases:
            with self.subTest(path=path):
                r = run(["stem", "inspect", path])
                self.assertEqual(r.code, 3, r.err)
                self.assertIn(text, r.err)
                self.assertIn("other_writer.h5", r.err)
        two = os.path.join(self.dir, "two.emd")
        write_emd1(two, self.data)
        with h5py.File(two, "a") as f:
            f.copy("experiment/datacube", "experiment/datacube2")
        r = run(["stem", "inspect", two])
        self.assertEqual(r.code, 2, r.err)
        self.assertIn("2 4-D EMD arrays here", r.err)
        self.assertIn(two + ":/experiment/datacube2/data", r.err)
        cut = os.path.join(self.dir, "cut.emd")
        with open(self.emd1, "rb") as src, open(cut, "wb") as dst:
            dst.write(src.read()[:4096])
        r = run(["stem", "inspect", cut])
        self.assertIn(r.code, (3, 6), r.err)
        self.assertIn("cut.emd", r.err)


if __name__ == "__main__":
    unittest.main()
