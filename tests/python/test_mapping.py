"""Checkpoint as a read-only mapping (len, iteration, `in`, ckpt[name], keys/values/items/get), named results,
argument errors as tm.InvalidArgument, "did you mean" for unknown names, and the notebook views."""
import base64
import collections.abc
import re
import zlib

import numpy as np
import pytest

import tensormorph as tm


def test_a_checkpoint_is_a_mapping_of_names_to_arrays(small):
    path, tensors, bf16_values = small
    c = tm.open(path)
    names = [t["name"] for t in c.tensors]
    assert isinstance(c, collections.abc.Mapping)
    assert len(c) == len(names) and list(c) == names and c.keys() == names
    assert "f32" in c and "nope" not in c and 3 not in c
    for name, arr in tensors.items():
        np.testing.assert_array_equal(c[name], arr)
        assert c[name].dtype == arr.dtype
    np.testing.assert_array_equal(c["bf16"], bf16_values)
    assert c.get("nope") is None and c.get("nope", 5) == 5
    np.testing.assert_array_equal(c.get("f64"), tensors["f64"])
    it = c.items()
    first_name, first = next(it)
    assert first_name == names[0]
    np.testing.assert_array_equal(first, tensors[names[0]])
    values = c.values()
    np.testing.assert_array_equal(next(values), tensors[names[0]])
    with pytest.raises(tm.Unavailable):  # the e8m0 tensor has no dense dtype: reached, it raises
        list(c.values())


def test_a_missing_name_is_a_key_error_suggesting_close_names(small):
    c = tm.open(small[0])
    with pytest.raises(KeyError, match=r"no tensor named 'f3'.*did you mean 'f32'"):
        c["f3"]
    with pytest.raises(tm.InvalidArgument, match="indexed by tensor name"):
        c[0]
    with pytest.raises(tm.InvalidArgument, match=r"no tensor named 'f322'; did you mean 'f32'"):
        c.read("f322")


def test_products_and_renders_return_named_results(small, tmp_path, cli):
    c = tm.open(small[0])
    r = c.render("f32")
    assert isinstance(r, tm.Result) and isinstance(r, tuple) and len(r) == 2
    image, report = r
    assert image is r.values and report is r.report and image.shape[2] == 4
    assert "placement" in report or "limits" in report
    acq = str(tmp_path / "acq")
    assert cli.run("stem", "demo", "--out", acq, "--scan", "8,8", "--detector", "16").returncode == 0
    bf = tm.stem.open(acq).bf()
    assert isinstance(bf, tm.Result) and bf.values.shape == (8, 8) and bf.report["product"] == "bf"
    values, report = tm.stem.bf(acq)
    np.testing.assert_array_equal(values, bf.values)
    frames = tm.stem.load(acq)
    assert frames.values.shape == (8, 8, 16, 16) and isinstance(frames.report, dict)


@pytest.mark.parametrize("kwargs,pattern", [
    ({"level": 0, "tile": (-1, -1)}, r"tile \(x, y\): expected an integer from 0"),
    ({"level": 0, "tile": (0,)}, r"tile: expected \(x, y\), have \(0,\)"),
    ({"level": 0, "tile": "ab"}, r"tile: expected \(x, y\)"),
    ({"level": 0, "tile": (0.5, 0)}, r"tile \(x, y\): expected an integer"),
    ({"level": -1}, r"level: expected an integer from 0 to 63, got '-1'"),
    ({"level": True}, r"level: expected an integer from 0 to 63, got 'True'"),
    ({"level": 64}, r"level: expected an integer from 0 to 63, got '64'"),
    ({"limits": (0, float("inf"))}, r"limits: expected LO,HI \(2 numbers, each finite, data units\), got '0,inf'"),
    ({"stat": "median"}, r"stat: expected mean, min, max, abs_max, std or envelope, got 'median'"),
    ({"limits": (0, "a")}, r"limits: expected \(lo, hi\) of numbers"),
    ({"limits": (float("nan"), 1)}, r"limits: expected \(lo, hi\) of numbers"),
    ({"limits": 3}, r"limits: expected \(lo, hi\), have 3"),
])
def test_bad_render_arguments_are_invalid_argument_naming_them(small, kwargs, pattern):
    c = tm.open(small[0])
    with pytest.raises(tm.InvalidArgument, match=pattern):
        c.render("f32", **kwargs)


def png_sizes(html):
    sizes = []
    for data in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html):
        png = base64.b64decode(data)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        # The image data inflates to exactly one filter byte plus the samples per row.
        idat = png[png.index(b"IDAT") + 4: png.index(b"IEND") - 8]
        channels = {0: 1, 6: 4}[png[25]]
        assert len(zlib.decompress(idat)) == height * (1 + width * channels)
        sizes.append((width, height))
    return sizes


def test_notebook_views(small, tmp_path, cli):
    c = tm.open(small[0])
    html = c._repr_html_()
    assert "safetensors" in html and "f32" in html and "[3, 5]" in html and "unavailable" in html
    assert png_sizes(c.render("f32")._repr_html_())
    acq = str(tmp_path / "acq")
    assert cli.run("stem", "demo", "--out", acq, "--scan", "8,12", "--detector", "16").returncode == 0
    a = tm.stem.open(acq)
    assert "8 x 12" in a._repr_html_() and "complete" in a._repr_html_()
    assert png_sizes(a.bf()._repr_html_()) == [(12, 8)]
    assert png_sizes(a.com()._repr_html_()) == [(12, 8), (12, 8)]
    assert "Result(values=<array 8x12 uint64>" in repr(a.bf())
