"""tm.open on a remote checkpoint (docs/remote.md): an http:// URL served by Debian's nginx on loopback (started here,
tests/cli/remote_servers.py) gives the same documents, arrays and images as the local file, with the URL where the
local run shows the path; values read are copies (the stand-in's bytes are released after each call)."""
import json
import os
import re
import sys

import numpy as np
import pytest

import tensormorph as tm
from safetensors_write import write_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
import remote_servers  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote-root")
    rng = np.random.default_rng(11)
    tensors = {"embed.weight": rng.standard_normal((300, 260)).astype(np.float32),
               "norm.weight": rng.standard_normal(260).astype(np.float16),
               "codes": rng.integers(-100, 100, (9, 7), dtype=np.int8)}
    write_safetensors(str(root / "model.safetensors"), list(tensors.items()))
    tuned = dict(tensors, **{"embed.weight": tensors["embed.weight"] + np.float32(0.5) * (np.arange(300)[:, None] % 7 == 0)})
    write_safetensors(str(root / "tuned.safetensors"), list(tuned.items()))
    nginx = remote_servers.Nginx(str(root))
    yield str(root), nginx, tensors
    nginx.stop()


def local_and_remote(served):
    root, nginx, _ = served
    return tm.open(os.path.join(root, "model.safetensors")), tm.open(nginx.url("model.safetensors"))


def as_text(doc, *prefixes):
    text = json.dumps(doc, sort_keys=True)
    for p in prefixes:
        text = text.replace(p, "")
    return text


def test_listing_stats_and_index_equal_the_local_checkpoint(served):
    root, nginx, _ = served
    local, remote = local_and_remote(served)
    assert remote.path == nginx.url("model.safetensors")
    assert remote.files == [nginx.url("model.safetensors")]
    assert as_text(remote.tensors, nginx.url()) == as_text(local.tensors, root + "/")
    assert as_text(remote.stats(), nginx.url()) == as_text(local.stats(), root + "/")
    assert as_text(remote.stats("embed.weight", backend="cpu"), nginx.url()) == as_text(local.stats("embed.weight", backend="cpu"), root + "/")
    doc = tm.open(nginx.url("model.safetensors")).index()
    assert doc["computed"] == 0 and doc["already_indexed"] == 3  # stats() above indexed every tensor


def test_read_render_and_tile_equal_the_local_checkpoint(served):
    root, nginx, tensors = served
    local, remote = local_and_remote(served)
    for name, want in tensors.items():
        got = remote.read(name)
        np.testing.assert_array_equal(got, want)
        assert got.flags.owndata or got.base is not None
    np.testing.assert_array_equal(remote.read("embed.weight", rows=(10, 20)), tensors["embed.weight"][10:20])
    # Read twice: the values stay after the stand-in's bytes are released.
    first = remote.read("embed.weight")
    remote.read("norm.weight")
    np.testing.assert_array_equal(first, tensors["embed.weight"])
    image, report = remote.render("embed.weight")
    local_image, local_report = local.render("embed.weight")
    np.testing.assert_array_equal(image, local_image)
    assert as_text(report, nginx.url()) == as_text(local_report, root + "/")
    assert as_text(remote.tile("embed.weight", 0, 0, 0), nginx.url()) == as_text(local.tile("embed.weight", 0, 0, 0), root + "/")


def test_diff_and_compare_of_urls_equal_the_local_run(served):
    root, nginx, _ = served
    for f in (tm.diff, tm.compare):
        local = f(os.path.join(root, "model.safetensors"), os.path.join(root, "tuned.safetensors"))
        remote = f(nginx.url("model.safetensors"), nginx.url("tuned.safetensors"))
        local.get("index", {}).pop("database", None), remote.get("index", {}).pop("database", None)
        text = lambda d, p: re.sub(r'"seconds": [0-9.e+-]+', '"seconds": 0', as_text(d, p))
        assert text(remote, nginx.url()) == text(local, root + "/"), f.__name__
    assert tm.diff(nginx.url("model.safetensors"), nginx.url("tuned.safetensors"))["pairs"][0]["difference"]["changed"] > 0


def test_diff_tile_of_urls_equals_the_local_run_and_numpy(served):
    root, nginx, tensors = served
    for level, x, y in ((0, 0, 0), (0, 1, 1), (1, 0, 0)):
        local, where = tm.diff_tile(os.path.join(root, "model.safetensors"), os.path.join(root, "tuned.safetensors"), "embed.weight",
                                    level=level, x=x, y=y)
        remote, remote_where = tm.diff_tile(nginx.url("model.safetensors"), nginx.url("tuned.safetensors"), "embed.weight",
                                            level=level, x=x, y=y)
        assert remote_where == where
        np.testing.assert_array_equal(remote, local)
    delta, where = tm.diff_tile(nginx.url("model.safetensors"), nginx.url("tuned.safetensors"), "embed.weight")
    want = np.float64(0.5) * (np.arange(300)[:, None] % 7 == 0) * np.ones((1, 260))
    rows, cols = slice(where["row_begin"], where["row_end"]), slice(where["col_begin"], where["col_end"])
    np.testing.assert_allclose(delta, want[rows, cols], atol=1e-6)
    assert np.count_nonzero(delta) > 0


def test_a_missing_remote_file_names_the_url(served):
    _, nginx, _ = served
    with pytest.raises(tm.Error) as e:
        tm.open(nginx.url("absent.safetensors"))
    assert nginx.url("absent.safetensors") in str(e.value)
