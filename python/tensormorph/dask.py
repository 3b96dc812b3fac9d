"""tensormorph.dask: Tensormorph's decoding and exact products mapped over Dask chunks, so that a
`distributed.Client` runs them on a cluster's workers. Needs Debian's python3-dask (and python3-distributed for a
cluster). Every worker opens the files itself: on a cluster, paths must name the same files on every node.

- stem_array(path): a lazy dask array [scan rows, scan cols, det rows, det cols] of an acquisition, chunked in
  bands of scan rows; each chunk is decoded by tensormorph.stem.load in the worker.
- virtual_image(path, kind, ...): a virtual image (bf, abf, adf, haadf, df or mask) computed band by band by
  tensormorph.stem.product in the workers and concatenated: uint64 sums per scan position, so the result is the
  same bytes as tensormorph.stem.product(path, kind, ...) in one process. The detector depends on the bright-field
  disk, which each band would otherwise detect from its own frames: give center= and radius= (for example
  tensormorph.stem.bf(path)[1]["disk"], or the disk of `stem prepare`), or the call raises InvalidArgument.
- checkpoint_stats(path): exact statistics of every tensor, one task per tensor (computed on the CPU backend in the
  worker), merged in file order into the document tensormorph.open(path).stats(backend="cpu") returns.
"""
import dask
import dask.array as da

from . import InvalidArgument
from . import open as _open
from . import stem as _stem

BAND_BYTES = 64 << 20  # the default chunk size of stem_array and virtual_image, decoded bytes per band


def _bands(rows, rows_per_band):
    return [(r0, min(rows, r0 + rows_per_band)) for r0 in range(0, rows, rows_per_band)]


def _rows_per_band(cols, frame_bytes, band_bytes):
    return max(1, band_bytes // max(1, cols * frame_bytes))


def _load_band(path, r0, r1, cols, scan_shape, dtype):
    frames, _ = _stem.load(path, scan_region=(r0, r1, 0, cols), scan_shape=scan_shape, dtype=dtype)
    return frames


def stem_array(path, *, scan_shape=None, dtype="auto", rows_per_chunk=None, band_bytes=BAND_BYTES):
    """A lazy dask array of the acquisition's frames, [rows, cols, det rows, det cols], chunked in bands of
    `rows_per_chunk` scan rows (default: about `band_bytes` decoded bytes per band). Bad pixels are zeroed, as
    tensormorph.stem.load zeroes them."""
    doc = _stem.inspect(path, scan_shape=scan_shape)
    if doc["scan_shape"] is None:
        raise InvalidArgument("%s: %s" % (path, doc.get("scan_shape_problem", "unknown scan shape")))
    rows, cols = doc["scan_shape"]
    probe, _ = _stem.load(path, scan_region=(0, 1, 0, 1), scan_shape=scan_shape, dtype=dtype)  # the output dtype
    det_rows, det_cols = probe.shape[2:]
    step = rows_per_chunk or _rows_per_band(cols, det_rows * det_cols * probe.dtype.itemsize, band_bytes)
    shape = tuple(scan_shape) if scan_shape else None
    blocks = [da.from_delayed(dask.delayed(_load_band)(path, r0, r1, cols, shape, dtype), shape=(r1 - r0, cols, det_rows, det_cols),
                              dtype=probe.dtype) for r0, r1 in _bands(rows, step)]
    return da.concatenate(blocks, axis=0)


def _product_band(path, kind, r0, r1, cols, options):
    values, _ = _stem.product(path, kind, scan_region=(r0, r1, 0, cols), **options)
    return values


def virtual_image(path, kind="bf", *, center=None, radius=None, rows_per_chunk=None, band_bytes=BAND_BYTES, **options):
    """The virtual image `kind` (bf, abf, adf, haadf, df or mask; mask takes inner/outer, inner_mrad/outer_mrad or
    mask=FILE as tensormorph.stem.product does) as a lazy dask array [rows, cols], one task per band of scan rows:
    uint64 sums of integer counts, float64 sums of float frames (EMPAD), as tensormorph.stem.product returns them.
    center=(row, col) and radius (detector pixels) fix the bright-field disk for every band."""
    if kind not in ("bf", "abf", "adf", "haadf", "df", "mask"):
        raise InvalidArgument("kind: expected bf, abf, adf, haadf, df or mask, have %r" % (kind,))
    if center is None or radius is None:
        raise InvalidArgument("virtual_image: give center=(row, col) and radius= (e.g. tensormorph.stem.bf(path)[1]['disk']): "
                              "each band would otherwise detect its own disk")
    if any(k in options for k in ("scan_region", "scan_bin")):
        raise InvalidArgument("virtual_image: scan_region and scan_bin are set per band")
    doc = _stem.inspect(path, scan_shape=options.get("scan_shape"))
    rows, cols = doc["scan_shape"]
    det_rows, det_cols = doc["detector_shape"]
    options = dict(options, center=tuple(center), radius=float(radius))
    floats = doc["dtype"] in ("f32", "f64")  # the frames' stored type decides the sums' (docs/stem.md, Products)
    pixel_bytes = {"u8": 1, "u16": 2, "u32": 4, "f32": 4, "f64": 8}.get(doc["dtype"], 4)
    step = rows_per_chunk or _rows_per_band(cols, det_rows * det_cols * pixel_bytes, band_bytes)
    blocks = [da.from_delayed(dask.delayed(_product_band)(path, kind, r0, r1, cols, options), shape=(r1 - r0, cols),
                              dtype="float64" if floats else "uint64") for r0, r1 in _bands(rows, step)]
    return da.concatenate(blocks, axis=0)


def _tensor_stats(path, name):
    return _open(path).stats(name, backend="cpu")["tensors"][0]


def checkpoint_stats(path, *, scheduler=None):
    """Every tensor's exact statistics, one Dask task per tensor, merged in file order into the document
    tensormorph.open(path).stats(backend="cpu") returns for a checkpoint whose tensors are all readable (tensors
    nothing here decodes are left out). Runs on the current scheduler (a distributed.Client when
    one is active) unless `scheduler` names another."""
    ckpt = _open(path)
    names = [t["name"] for t in ckpt.tensors if t["readable"]]
    tasks = [dask.delayed(_tensor_stats)(path, n) for n in names]
    tensors = list(dask.compute(*tasks, scheduler=scheduler)) if tasks else []
    return {"file": path, "format": ckpt.format, "tensors": tensors}


__all__ = ["stem_array", "virtual_image", "checkpoint_stats", "BAND_BYTES"]
