"""Checkpoint.tensors and Checkpoint.read: zero-copy views where numpy has the dtype, exact widening of
bf16/f8, decoded quantized tensors, read-only arrays that keep their mapping alive."""
import gc
import os

import numpy as np
import pytest

import tensormorph as tm
from gguf_write import write_gguf


def test_open_lists_tensors(small):
    path, tensors, _ = small
    c = tm.open(path)
    assert c.format == "safetensors" and c.path == path
    assert c.files == [os.path.realpath(path)] or c.files == [path]
    listed = {t["name"]: t for t in c.tensors}
    assert list(listed) == [*tensors, "bf16", "e4m3", "e5m2", "e8m0"]
    for name, arr in tensors.items():
        t = listed[name]
        assert t["shape"] == list(arr.shape) and t["elements"] == arr.size and t["bytes"] == arr.nbytes
        assert t["readable"] is True and "unavailable" not in t and t["file"] == c.files[0]
    assert listed["f32"]["dtype"] == "f32" and listed["f32"]["stored_type"] == "F32"
    assert listed["bf16"]["dtype"] == "bf16" and listed["bf16"]["stored_type"] == "BF16"
    assert listed["e8m0"]["readable"] is False and listed["e8m0"]["dtype"] is None and listed["e8m0"]["unavailable"]
    assert "small.safetensors" in repr(c)


def test_tensors_match_cli_ls(small, cli):
    path, _, _ = small
    ls = cli.json("ls", path)["tensors"]
    mine = tm.open(path).tensors
    for m, l in zip(mine, ls):
        for key in ("name", "stored_type", "shape", "elements", "bytes", "file", "offset", "readable"):
            assert m[key] == l[key], key
        assert m.get("unavailable") == l.get("unavailable")


@pytest.mark.parametrize("name", ["f32", "f64", "f16", "i32", "u8", "flag"])
def test_dense_reads_are_zero_copy_views(small, name):
    path, tensors, _ = small
    c = tm.open(path)
    a = c.read(name)
    np.testing.assert_array_equal(a, tensors[name])
    assert a.dtype == tensors[name].dtype and a.shape == tensors[name].shape
    # The base chain ends at the mapping, and the data pointer lies inside it, at the tensor's offset.
    base = a.base
    assert isinstance(base, tm.Mapping) and base.path == c.files[0]
    entry = next(t for t in c.tensors if t["name"] == name)
    assert a.ctypes.data == base.address + entry["offset"]  # offset: within the file
    assert base.size == os.path.getsize(path)
    # Two reads view the same bytes; neither may write them.
    assert np.shares_memory(a, c.read(name))
    assert not a.flags.writeable and not a.flags.owndata
    with pytest.raises(ValueError):
        a[...] = 0
    with pytest.raises(ValueError):
        a.setflags(write=True)


def test_array_outlives_its_checkpoint(small):
    path, tensors, _ = small
    c = tm.open(path)
    a = c.read("f32")
    del c
    gc.collect()
    np.testing.assert_array_equal(a, tensors["f32"])


def test_a_file_cut_after_open_is_refused_before_a_view_could_fault(tmp_path, small):
    """The probe's SIGBUS: a view of a file truncated after tm.open faulted when numpy touched it. read() now checks
    the size first (a file cut after that check still faults: docs/python.md)."""
    path, tensors, _ = small
    copy = tmp_path / "cut.safetensors"
    copy.write_bytes(open(path, "rb").read())
    c = tm.open(str(copy))
    np.testing.assert_array_equal(c.read("f32"), tensors["f32"])
    with open(copy, "r+b") as f:
        f.truncate(os.path.getsize(copy) // 2)
    with pytest.raises(tm.BadInput, match="the file shrank"):
        c.read("f32")


def test_bf16_widened_exactly_and_raw_is_zero_copy(small):
    path, _, values = small
    c = tm.open(path)
    a = c.read("bf16")
    assert a.dtype == np.float32 and a.shape == values.shape
    assert np.array_equal(a.view(np.uint32), values.view(np.uint32))  # bit for bit, -0.0 included
    assert a.flags.owndata or a.base is None or not isinstance(a.base, tm.Mapping)
    raw = c.read("bf16", raw=True)
    assert raw.dtype == np.uint16 and isinstance(raw.base, tm.Mapping) and not raw.flags.writeable
    assert np.array_equal((raw.astype(np.uint32) << 16).view(np.float32), a)


def test_f8_widened(small):
    c = tm.open(small[0])
    e4 = c.read("e4m3")
    assert e4.dtype == np.float32
    np.testing.assert_array_equal(e4[[0, 1, 2, 4]], [1.0, 2.0, -1.0, 0.0])
    assert np.isnan(e4[3])
    np.testing.assert_array_equal(c.read("e5m2"), [1.0, 2.0, -1.0, np.inf])
    raw = c.read("e5m2", raw=True)
    assert raw.dtype == np.uint8 and list(raw) == [0x3C, 0x40, 0xBC, 0x7C] and isinstance(raw.base, tm.Mapping)


def test_unreadable_tensor_and_unknown_name(small):
    c = tm.open(small[0])
    with pytest.raises(tm.Unavailable) as e:
        c.read("e8m0")
    assert "e8m0" in str(e.value) and e.value.exit_code == 4
    with pytest.raises(tm.InvalidArgument, match="no tensor named 'nope'"):
        c.read("nope")
    with pytest.raises(tm.InvalidArgument, match="raw=True"):
        write = c.read("e8m0", raw=True)
        del write


def test_q8_0_decoded_to_float32(tmp_path):
    rng = np.random.default_rng(8)
    rows, cols = 3, 64
    scales = rng.uniform(0.01, 0.1, rows * cols // 32).astype(np.float16)
    codes = rng.integers(-127, 128, rows * cols, dtype=np.int8)
    blocks = b"".join(scales[i : i + 1].tobytes() + codes[32 * i : 32 * i + 32].tobytes() for i in range(len(scales)))
    path = str(tmp_path / "q.gguf")
    write_gguf(path, [("general.architecture", "STRING", "test")], [("q", "Q8_0", [cols, rows], blocks)])
    c = tm.open(path)
    assert c.format == "gguf"
    t = c.tensors[0]
    assert t["stored_type"] == "Q8_0" and t["dtype"] is None and t["readable"] is True
    a = c.read("q")
    expected = (np.repeat(scales.astype(np.float32), 32) * codes.astype(np.float32)).reshape(rows, cols)
    assert a.dtype == np.float32 and a.shape == (rows, cols)
    assert np.array_equal(a, expected)
    with pytest.raises(tm.InvalidArgument):
        c.read("q", raw=True)
    # The decoding is placed like any op: the same values wherever it runs, a refusal naming the backend.
    assert np.array_equal(c.read("q", backend="cpu"), expected)
    with pytest.raises(tm.Unavailable, match="backend 'metal' is not installed"):
        c.read("q", backend="metal")
    with pytest.raises(tm.InvalidArgument, match="unknown backend 'nope' \\(known: cpu, "):
        c.read("q", backend="nope")
