"""tensormorph.stem: inspect, load, the products and ssb give what the CLI's `stem inspect`, `stem load`, `stem KIND`
and `stem ssb` give, on an
acquisition written by `tensormorph stem demo`; loaded frames equal h5py + hdf5plugin's; bad requests raise the
exception classes with the CLI's exit codes."""
import os

import numpy as np
import pytest

import tensormorph as tm


@pytest.fixture
def acquisition(cli, tmp_path):
    """A 24 x 24 scan of 64 x 64 frames, defocus 6 nm, C12 2 nm at 20 degrees, scan rotated 30 degrees."""
    doc = cli.json("stem", "demo", "--out", str(tmp_path / "acq"), "--scan", "24,24", "--detector", "64",
                   "--defocus-nm", "6", "--C12-nm", "2", "--phi12-deg", "20", "--scan-rotation-deg", "30")
    return doc["master"]


def test_inspect_is_the_cli_document(cli, acquisition):
    doc = tm.stem.inspect(acquisition)
    assert doc == cli.json("stem", "inspect", acquisition)
    assert doc["scan_shape"] == [24, 24] and doc["readiness"]["status"] == "complete"
    assert tm.stem.inspect(os.path.dirname(acquisition))["master"] == doc["master"]  # a folder with one master


def test_load_equals_h5py_and_owns_its_frames(acquisition):
    h5py = pytest.importorskip("h5py")
    pytest.importorskip("hdf5plugin")
    frames, provenance = tm.stem.load(acquisition, scan_region=(2, 6, 3, 11))
    assert frames.shape == (4, 8, 64, 64) and frames.dtype == np.uint16
    assert frames.base is not None and not frames.flags.owndata  # the decoded buffer, handed over without a copy
    with h5py.File(acquisition, "r") as f:
        mask = f["entry/instrument/detector/detectorSpecific/pixel_mask"][()]
        raw = np.concatenate([f["entry/data"][k][()] for k in sorted(f["entry/data"])])
    want = raw.reshape(24, 24, 64, 64)[2:6, 3:11].copy()
    want[..., mask > 0] = 0  # bad pixels zeroed, as the load contract says
    assert np.array_equal(frames, want)
    assert provenance["scan_region"] == [2, 6, 3, 11]
    assert provenance["output"]["shape"] == [4, 8, 64, 64]
    assert provenance["bad_pixels"]["zeroed"] is True
    # A detector bin sums 2 x 2 pixels (the dtype widens so that no sum can overflow).
    binned, _ = tm.stem.load(acquisition, scan_region=(2, 6, 3, 11), detector_bin=(2, 2))
    assert binned.shape == (4, 8, 32, 32)
    assert np.array_equal(binned.astype(np.uint64), want.astype(np.uint64).reshape(4, 8, 32, 2, 32, 2).sum(axis=(3, 5)))


def test_ssb_is_the_cli_document_and_fits_the_physical_branch(cli, acquisition, tmp_path):
    phase, report = tm.stem.ssb(acquisition, fit=True, threads=2)
    assert phase.shape == (24, 24) and phase.dtype == np.float64
    out = str(tmp_path / "phase.npy")
    doc = cli.json("stem", "ssb", acquisition, "--fit", "-o", out, "--threads", "2")
    assert report["aberrations"] == doc["aberrations"]  # byte-identical fitted values
    assert np.array_equal(phase, np.load(out))
    fit = report["fit"]
    assert fit["estimate"]["method"].startswith("parallax")
    assert fit["branch"]["chosen"] in ("as fitted", "conjugate")
    assert abs(report["aberrations"]["C10"] - 60) < 10, fit
    preview, rep = tm.stem.ssb(acquisition, C10=60, C12=20, phi12=20, scan_rotation_deg=30)
    assert rep["aberrations_source"].startswith("given")
    assert np.corrcoef(phase.ravel(), preview.ravel())[0, 1] > 0.9


@pytest.mark.parametrize("kind,args,options", [
    ("bf", [], {}),
    ("adf", [], {}),
    ("mask", ["--inner-mrad", "5", "--outer-mrad", "15"], {"inner_mrad": 5, "outer_mrad": 15}),
    ("com", [], {}),
    ("dpc", [], {}),
    ("idpc", [], {}),
    ("mean-dp", [], {}),
    ("mean-dp", ["--max"], {"max_pattern": True}),
    ("fft", ["--of", "bf"], {"of": "bf"}),
])
def test_products_are_the_cli_products(cli, acquisition, tmp_path, kind, args, options):
    out = str(tmp_path / "product.npy")
    doc = cli.json("stem", kind, acquisition, "-o", out, "--no-cache", *args)
    values, report = getattr(tm.stem, kind.replace("-", "_"))(acquisition, **options)
    want = np.load(out)
    assert values.dtype == want.dtype and values.shape == want.shape
    assert np.array_equal(values, want)  # the same exact numbers (uint64 sums, float64 fields)
    assert report["summary"] == doc["summary"]
    assert report["product"] == kind and report["placement"]


def test_bad_requests_raise_with_the_cli_exit_codes(acquisition):
    with pytest.raises(tm.InvalidArgument) as e:
        tm.stem.product(acquisition, "mask")
    assert "inner" in str(e.value)
    with pytest.raises(tm.InvalidArgument):
        tm.stem.product(acquisition, "nonsense")
    with pytest.raises(tm.InvalidArgument) as e:
        tm.stem.ssb(acquisition, fit=True, search="everywhere")
    assert e.value.exit_code == 2 and "search" in str(e.value)
    with pytest.raises(tm.InvalidArgument):
        tm.stem.load(acquisition, scan_region=(0, 99, 0, 4))
    with pytest.raises(tm.InvalidArgument):
        tm.stem.load(acquisition, threads=0)
    with pytest.raises(tm.PrecisionRefused):
        tm.stem.load(acquisition, memory_budget="1K")
    with pytest.raises(tm.IoError):
        tm.stem.inspect("/nonexistent/acquisition_master.h5")


def test_open_binds_the_functions_to_one_acquisition(acquisition):
    a = tm.stem.open(acquisition)
    assert isinstance(a, tm.stem.Acquisition)
    assert a.info == tm.stem.inspect(acquisition) and a.master == a.info["master"]
    assert a.scan_shape == (24, 24) and a.detector_shape == (64, 64) and a.dtype == "u16"
    assert a.readiness["status"] == "complete" and a.refresh() is a
    assert "24 x 24" in repr(a) and "complete 576/576" in repr(a)
    values, report = a.bf()
    assert np.array_equal(values, tm.stem.bf(acquisition)[0]) and report["product"] == "bf"
    assert np.array_equal(a.product("mean-dp")[0], tm.stem.mean_dp(acquisition)[0])
    # The scan shape given at open() reaches every call that takes one.
    tall = tm.stem.open(acquisition, scan_shape=(12, 48))
    assert tall.scan_shape == (12, 48) and tall.bf()[0].shape == (12, 48)
    assert tall.load(scan_region=(0, 2, 0, 3))[0].shape == (2, 3, 64, 64)


def test_calibration_is_what_ssb_uses(acquisition):
    a = tm.stem.open(acquisition)
    cal = a.calibration()
    _, report = a.ssb(C10=60, scan_rotation_deg=30)
    for key in ("energy", "semiangle", "scan_step", "detector_angle_per_pixel", "wavelength_A"):
        assert cal[key] == report["calibration"][key], key
    assert cal["disk"] == report["disk"] and cal["disk"]["source"] == "detected"
    assert cal["placement"]  # the pattern pass that detected the disk
    given = a.calibration(center=(31.5, 31.5), radius=10, energy_ev=200e3)
    assert given["disk"]["source"] == "given" and given["placement"] == []
    assert given["energy"] == {"value": 200e3, "unit": "eV", "source": "energy_ev"}
    assert given["wavelength_A"] > cal["wavelength_A"]  # 200 kV electrons are slower than 300 kV: a longer wavelength
    binned = a.calibration(scan_bin=(2, 1), center=(31.5, 31.5), radius=10)
    assert binned["scan_step"]["value"] is None and "binned" in binned["scan_step"]["missing"]


def test_prepare_then_products_come_from_the_cache(cli, acquisition, tmp_path):
    a = tm.stem.open(acquisition)
    _, first = a.adf()
    assert first["cache"]["hit"] is False  # the user cache (private to this test) holds nothing yet
    cache = str(tmp_path / "products.sqlite")
    prepared = a.prepare(cache=cache)
    theirs = cli.json("stem", "prepare", acquisition, "--cache", str(tmp_path / "cli.sqlite"))
    for key in ("key", "scan_shape", "frame_shape", "disk", "detectors"):
        assert prepared[key] == theirs[key], key
    assert prepared["database"] == cache
    for kind in ("bf", "adf", "df", "idpc"):
        hit, report = a.product(kind, cache=cache)
        assert report["cache"]["hit"] is True and report["cache"]["database"] == cache, kind
        computed, again = a.product(kind, cache=cache, use_cache=False)
        assert "cache" not in again
        assert np.array_equal(hit, computed), kind
        out = str(tmp_path / (kind + ".npy"))
        doc = cli.json("stem", kind, acquisition, "--cache", cache, "-o", out)
        assert doc["cache"]["hit"] is True and np.array_equal(hit, np.load(out)), kind
    # A request the prepared products do not serve (a given radius) is computed, and says nothing of the cache.
    _, custom = a.bf(cache=cache, radius=5)
    assert "cache" not in custom


def test_products_stay_resident_across_calls_until_dropped(acquisition):
    """The first product decodes the acquisition once into the resident copy; later ones read it (bit-identical
    to the CLI's streamed products: test_products_are_the_cli_products); drop_resident() lets it go."""
    tm.stem.drop_resident()
    a = tm.stem.open(acquisition)
    a.bf()
    copies = tm.stem.resident()["copies"]
    assert len(copies) == 1 and copies[0]["acquisition"] == a.master and copies[0]["order"] == "radial"
    uses = copies[0]["uses"]
    values, report = a.adf()
    assert report["provenance"]["resident"]["built_now"] is False
    assert report["detector"]["evaluated_as"] == "rank range"
    assert tm.stem.resident()["copies"][0]["uses"] > uses
    assert a.drop_resident() == 1 and tm.stem.resident()["copies"] == []
    assert tm.stem.resident()["evictions"][-1]["reason"] == "dropped"
    again, _ = a.adf()  # its disk pass builds the copy again, its image pass reads it
    assert np.array_equal(again, values) and tm.stem.resident()["copies"][0]["uses"] == 2


def test_progress_reports_frames_and_a_raising_callable_stops_the_call(acquisition, capfd):
    """progress= on the STEM calls: a callable gets {frames_done, frames_total, seconds} from the calling thread while
    frames are decoded (the resident copy's build, or the load), ending at every frame; True writes a line on
    stderr; what the callable raises is what the call raises."""
    frames = 24 * 24
    for call in (lambda p: tm.stem.product(acquisition, "bf", progress=p), lambda p: tm.stem.load(acquisition, progress=p)):
        tm.stem.drop_resident()
        seen = []
        call(seen.append)
        assert seen, "no progress reported"
        assert all(set(d) == {"frames_done", "frames_total", "seconds"} for d in seen)
        assert all(0 < d["frames_done"] <= d["frames_total"] == frames for d in seen)
        assert seen[-1]["frames_done"] == frames
    tm.stem.drop_resident()
    tm.stem.product(acquisition, "adf", progress=True)
    assert "tensormorph: decoded %d/%d frames (100%%)" % (frames, frames) in capfd.readouterr().err

    def stop(progress):
        raise KeyError("enough")

    tm.stem.drop_resident()
    with pytest.raises(KeyError, match="enough"):
        tm.stem.product(acquisition, "bf", progress=stop, use_cache=False)
    # a call already served by the resident copy decodes nothing, so reports nothing
    tm.stem.product(acquisition, "bf")
    seen = []
    tm.stem.product(acquisition, "adf", progress=seen.append)
    assert seen == []


def test_ssb_fit_reports_its_stages(acquisition):
    """ssb(fit=True, progress=...): the frames first, then the fit's stages with their evaluation counts; the last
    report is the simplex's, its counts equal the report's and its best loss is the lowest the fit evaluated."""
    seen = []
    _, report = tm.stem.ssb(acquisition, fit=True, estimate_trials=12, progress=seen.append)
    frames = [d for d in seen if "frames_done" in d]
    fit = [d for d in seen if "stage" in d]
    assert frames and frames[-1]["frames_done"] == frames[-1]["frames_total"]
    assert fit and fit[-1]["stage"] == "simplex" and fit[-1]["stage_planned"] == 0
    f = report["fit"]
    assert fit[-1]["evaluations"] == f["evaluations"]
    assert fit[-1]["stage_evaluations"] == f["nelder_mead"]["evaluations"]
    assert fit[-1]["best_loss"] == min(f["nelder_mead"]["loss"], f["tpe_best_loss"], f["estimate"].get("loss", float("inf")))
    assert all(a["evaluations"] < b["evaluations"] for a, b in zip(fit, fit[1:]))
    for d in fit:
        if d["stage"] == "search":
            assert 0 < d["stage_evaluations"] <= d["stage_planned"] == f["trials"] + (f["search"] == "around the estimate")
