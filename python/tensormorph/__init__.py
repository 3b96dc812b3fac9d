"""Tensormorph from Python: open a checkpoint (safetensors, GGUF, torch.save), list its tensors, get exact
statistics as plain dicts (the documents `tensormorph stats --json` prints) and read tensors as numpy
arrays (zero-copy views of the memory map where numpy has the dtype); 4D-STEM acquisitions with tensormorph.stem
(open, inspect, calibration, load, products, ssb). See docs/python.md."""
from ._core import (
    BadInput,
    Checkpoint,
    Error,
    Incomplete,
    InternalError,
    InvalidArgument,
    IoError,
    Mapping,
    PrecisionRefused,
    Unavailable,
    __version__,
    backends,
    compare,
    diff,
    diff_tile,
    open,
    stem,
)
from . import acquisition as _acquisition

__all__ = [
    "BadInput", "Checkpoint", "Error", "Incomplete", "InternalError", "InvalidArgument", "IoError", "Mapping",
    "PrecisionRefused", "Unavailable", "__version__", "backends", "compare", "diff", "diff_tile", "open", "stem",
]


def _product(kind):
    def compute(path, **options):
        return stem.product(path, kind, **options)

    compute.__name__ = compute.__qualname__ = kind.replace("-", "_")
    compute.__doc__ = ("tensormorph.stem.product(path, %r, **options): (values, report) as `tensormorph stem %s PATH --json` "
                       "computes them; options as product()'s." % (kind, kind))
    return compute


# tm.stem.bf(path), …, tm.stem.mean_dp(path): the products by name; tm.stem.open(path) and its Acquisition.
for _kind in _acquisition.PRODUCTS:
    setattr(stem, _kind.replace("-", "_"), _product(_kind))
del _kind
stem.open = _acquisition.open
stem.Acquisition = _acquisition.Acquisition


def __getattr__(name):
    """tm.dask without importing it first (it needs python3-dask): loaded on first use."""
    if name == "dask":
        import importlib
        return importlib.import_module(".dask", __name__)
    raise AttributeError("module 'tensormorph' has no attribute %r" % (name,))
