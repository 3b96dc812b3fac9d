"""Tensormorph from Python: open a checkpoint (safetensors, GGUF, torch.save), list its tensors, get exact
statistics as plain dicts (the documents `tensormorph stats --json` prints) and read tensors as numpy
arrays (zero-copy views of the memory map where numpy has the dtype); 4D-STEM acquisitions with tensormorph.stem
(open, inspect, calibration, load, products, ssb). See docs/python.md."""
import collections.abc

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
from . import results as _results
from .results import Result

__all__ = [
    "BadInput", "Checkpoint", "Error", "Incomplete", "InternalError", "InvalidArgument", "IoError", "Mapping",
    "PrecisionRefused", "Result", "Unavailable", "__version__", "backends", "compare", "diff", "diff_tile", "open", "stem",
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

# A Checkpoint is a read-only mapping of tensor names to arrays (len, iteration, `in`, ckpt[name], keys());
# notebooks show checkpoints, acquisitions and results as tables and thumbnails.
def _values(self):
    """A lazy iterator of self[name] for every name in file order (an unreadable tensor raises when reached)."""
    return (self[name] for name in self)


def _items(self):
    """A lazy iterator of (name, self[name]) in file order (an unreadable tensor raises when reached)."""
    return ((name, self[name]) for name in self)


Checkpoint.values = _values
Checkpoint.items = _items
collections.abc.Mapping.register(Checkpoint)
Checkpoint._repr_html_ = _results.checkpoint_html
_acquisition.Acquisition._repr_html_ = _results.acquisition_html


def __getattr__(name):
    """tm.dask without importing it first (it needs python3-dask): loaded on first use."""
    if name == "dask":
        import importlib
        return importlib.import_module(".dask", __name__)
    raise AttributeError("module 'tensormorph' has no attribute %r" % (name,))
