"""Tensormorph from Python: open a checkpoint (safetensors, GGUF, torch.save), list its tensors, get exact
statistics as plain dicts (the documents `tensormorph stats --json` prints) and read tensors as numpy
arrays (zero-copy views of the memory map where numpy has the dtype); 4D-STEM acquisitions with tensormorph.stem
(inspect, load, ssb). See docs/python.md."""
from ._core import (
    BadInput,
    Checkpoint,
    Error,
    InternalError,
    InvalidArgument,
    IoError,
    Mapping,
    PrecisionRefused,
    Unavailable,
    __version__,
    backends,
    open,
    stem,
)

__all__ = [
    "BadInput", "Checkpoint", "Error", "InternalError", "InvalidArgument", "IoError", "Mapping",
    "PrecisionRefused", "Unavailable", "__version__", "backends", "open", "stem",
]
