"""Checkpoint.render and Checkpoint.tile: the image `tensormorph render` writes (pixel for pixel) and the documents
`render --json` and `tile --json` print, from the same render-domain code."""
import os

import numpy as np
import pytest

import tensormorph as tm
from safetensors_write import write_safetensors

Image = pytest.importorskip("PIL.Image")


@pytest.fixture
def ckpt(tmp_path):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((600, 700)).astype(np.float32)
    w[10, 20] = 40.0  # an outlier the envelope keeps
    path = str(tmp_path / "r.safetensors")
    write_safetensors(path, [("w", w), ("pos", np.abs(w[:64, :64]))])
    return path, w


@pytest.mark.parametrize("args,kwargs", [
    ([], {}),
    (["--level", "0", "--stat", "envelope"], {"level": 0, "stat": "envelope"}),
    (["--level", "0", "--tile", "1,2", "--colormap", "gray", "--limits", "-2,2"],
     {"level": 0, "tile": (1, 2), "colormap": "gray", "limits": (-2, 2)}),
    (["--transform", "signed-log", "--stat", "abs_max"], {"transform": "signed-log", "stat": "abs_max"}),
])
def test_render_is_the_cli_image_and_report(ckpt, cli, tmp_path, args, kwargs):
    path, _ = ckpt
    rgba, report = tm.open(path).render("w", **kwargs)
    out = str(tmp_path / "cli.png")
    theirs = cli.json("render", path, "w", "-o", out, *args)
    assert theirs.pop("out") == out
    assert report == theirs
    with Image.open(out) as png:  # the CLI's figure frames the render (title, axes) and labels its bar: compare the render
        x, y, _, _ = map(int, png.text["tensormorph:cells_box"].split(","))
        lx, _, _, lh = map(int, png.text["tensormorph:labels_box"].split(","))
        expected = np.asarray(png.convert("RGBA"))[y:y + lh, x:lx]
    assert rgba.dtype == np.uint8 and rgba.shape == expected.shape == (report["image"]["height"], report["image"]["width"], 4)
    assert np.array_equal(rgba, expected)


def test_tile_is_the_cli_document(ckpt, cli):
    path, w = ckpt
    c = tm.open(path)
    doc = c.tile("w", 0, 2, 1)
    assert doc == cli.json("tile", path, "w", "--level", "0", "--tile", "2,1")
    block = w[256:512, 512:700].astype(np.float64)
    assert doc["rows"] == [256, 512] and doc["cols"] == [512, 700]
    assert doc["stats"]["count"] == block.size and doc["stats"]["max"] == block.max() and doc["stats"]["min"] == block.min()
    assert doc["stats"]["mean"] == pytest.approx(block.mean(), rel=1e-12)


def test_render_and_tile_refuse_bad_requests(ckpt):
    c = tm.open(ckpt[0])
    with pytest.raises(tm.InvalidArgument, match="tile: give level="):
        c.render("w", tile=(0, 0))
    with pytest.raises(tm.InvalidArgument, match="jet"):
        c.render("w", colormap="jet")
    with pytest.raises(tm.InvalidArgument, match="median"):
        c.render("w", stat="median")
    with pytest.raises(tm.InvalidArgument, match="limits: LO 2 is above HI 1"):
        c.render("w", limits=(2, 1))
    with pytest.raises(tm.InvalidArgument, match="log_floor: expected a number > 0, got '0'"):
        c.render("w", log_floor=0)
    with pytest.raises(tm.InvalidArgument, match="level: expected an integer from 0 to 63, got '-1'"):
        c.render("w", level=-1)
    with pytest.raises(tm.InvalidArgument, match="level 0 has 3 x 3 tiles"):
        c.tile("w", 0, 9, 0)
    with pytest.raises(tm.InvalidArgument, match="no tensor named 'nope'"):
        c.render("nope")
