"""Checkpoint.read(name, rows=, cols=): the part of a tensor numpy slicing would give, read without the rest —
a strided zero-copy view for dense dtypes, only the selected rows widened (bf16) or decoded (Q8_0)."""
import numpy as np
import pytest

import tensormorph as tm
from conftest import bf16_bits
from safetensors_write import write_safetensors
from gguf_write import write_gguf

SELECTIONS = [
    (None, None),
    (slice(1, 4), None),
    (None, slice(2, 5)),
    ((1, 3), (0, 6)),
    (slice(None, None, 2), slice(1, None, 3)),
    (slice(-2, None), slice(-7, -1)),
    (slice(3, 3), None),          # empty
    (slice(2, 100), slice(4, 99)),  # clamped as numpy clamps
]


def numpy_part(a, rows, cols):
    def as_slice(s):
        return slice(*s) if isinstance(s, tuple) else (s if s is not None else slice(None))
    return a[..., as_slice(rows), as_slice(cols)]


@pytest.fixture
def region_file(tmp_path):
    rng = np.random.default_rng(261)
    f32 = rng.standard_normal((2, 5, 6)).astype(np.float32)
    bf16 = rng.standard_normal((5, 6)).astype(np.float32)
    bf16 = (bf16.view(np.uint32) & 0xFFFF0000).view(np.float32)  # values bf16 holds exactly
    path = str(tmp_path / "region.safetensors")
    write_safetensors(path, [("f32", f32), ("bf16", ("BF16", bf16_bits(bf16))), ("vec", np.arange(9, dtype=np.int16))])
    return path, f32, bf16


@pytest.mark.parametrize("rows,cols", SELECTIONS)
def test_dense_region_is_a_strided_view_of_the_mapping(region_file, rows, cols):
    path, f32, _ = region_file
    c = tm.open(path)
    part = c.read("f32", rows=rows, cols=cols)
    expected = numpy_part(f32, rows, cols)
    assert part.shape == expected.shape and part.dtype == np.float32
    np.testing.assert_array_equal(part, expected)
    assert isinstance(part.base, tm.Mapping) and not part.flags.writeable
    if part.size:
        assert np.shares_memory(part, c.read("f32"))


@pytest.mark.parametrize("rows,cols", SELECTIONS)
def test_bf16_region_widens_only_the_selection(region_file, rows, cols):
    path, _, bf16 = region_file
    c = tm.open(path)
    part = c.read("bf16", rows=rows, cols=cols)
    assert part.dtype == np.float32 and part.flags.owndata
    assert np.array_equal(part.view(np.uint32), numpy_part(bf16, rows, cols).view(np.uint32))
    raw = c.read("bf16", raw=True, rows=rows, cols=cols)
    assert raw.dtype == np.uint16 and isinstance(raw.base, tm.Mapping)
    assert np.array_equal(raw, numpy_part(bf16_bits(bf16), rows, cols))


@pytest.mark.parametrize("rows,cols", SELECTIONS + [(slice(5, 8), slice(30, 70)), (None, slice(31, 33))])
def test_q8_0_region_decodes_the_same_values(tmp_path, rows, cols):
    rng = np.random.default_rng(262)
    nrows, ncols = 8, 96
    scales = rng.uniform(0.01, 0.1, nrows * ncols // 32).astype(np.float16)
    codes = rng.integers(-127, 128, nrows * ncols, dtype=np.int8)
    blocks = b"".join(scales[i : i + 1].tobytes() + codes[32 * i : 32 * i + 32].tobytes() for i in range(len(scales)))
    path = str(tmp_path / "q.gguf")
    write_gguf(path, [("general.architecture", "STRING", "test")], [("q", "Q8_0", [ncols, nrows], blocks)])
    c = tm.open(path)
    whole = c.read("q")
    part = c.read("q", rows=rows, cols=cols)
    expected = numpy_part(whole, rows, cols)
    assert part.shape == expected.shape
    assert np.array_equal(part, expected)


def test_region_errors(region_file):
    path, _, _ = region_file
    c = tm.open(path)
    np.testing.assert_array_equal(c.read("vec", cols=(2, 5)), [2, 3, 4])
    with pytest.raises(tm.InvalidArgument, match="rows= needs a tensor of rank 2"):
        c.read("vec", rows=(0, 1))
    with pytest.raises(tm.InvalidArgument, match="step of 1 or more"):
        c.read("f32", rows=slice(None, None, -1))
    with pytest.raises(tm.InvalidArgument, match=r"cols= expects a slice"):
        c.read("f32", cols=3)
    with pytest.raises(ValueError):
        c.read("f32", rows=slice(0, 4, 0))
