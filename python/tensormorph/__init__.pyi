# Type stubs of the tensormorph package (the extension module tensormorph._core re-exported).
from typing import Any, Optional, Sequence, Union

import numpy as np

__version__: str

Names = Union[None, str, Sequence[str]]

class Error(Exception):
    exit_code: int  # the CLI's exit code for the same failure

class InvalidArgument(Error): ...   # exit 2
class BadInput(Error): ...          # exit 3: truncated, corrupt or lying file
class Unavailable(Error): ...       # exit 4: no backend or kernel here serves it
class PrecisionRefused(Error): ...  # exit 5: only an approximation could, without consent
class IoError(Error): ...           # exit 6: the OS refused
class InternalError(Error): ...     # exit 70

class Mapping:
    """The mapped file a zero-copy array views (the array's .base)."""
    @property
    def path(self) -> str: ...
    @property
    def address(self) -> int: ...
    @property
    def size(self) -> int: ...

class Checkpoint:
    @property
    def path(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def files(self) -> list[str]: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def tensors(self) -> list[dict[str, Any]]: ...
    def stats(self, name: Names = None, *, backend: Optional[str] = None, prefer: Names = None,
              never: Names = None, allow_approx: Names = None) -> dict[str, Any]: ...
    def index(self, *, backend: Optional[str] = None, prefer: Names = None, never: Names = None,
              allow_approx: Names = None) -> dict[str, Any]: ...
    def read(self, name: str, *, raw: bool = False) -> np.ndarray: ...

def open(path: str) -> Checkpoint: ...
def backends(*, backend: Optional[str] = None, prefer: Names = None, never: Names = None,
             allow_approx: Names = None) -> list[dict[str, Any]]: ...
