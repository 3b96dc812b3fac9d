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

Region = Optional[tuple[int, int, int, int]]
Pair = Optional[tuple[int, int]]

class _Stem:
    """tensormorph.stem: 4D-STEM acquisitions (Dectris HDF5)."""
    @staticmethod
    def inspect(path: str, *, scan_shape: Pair = None) -> dict[str, Any]: ...
    @staticmethod
    def load(path: str, *, scan_shape: Pair = None, scan_region: Region = None, detector_region: Region = None,
             scan_bin: Pair = None, detector_bin: Pair = None, dtype: str = "auto", threads: Optional[int] = None,
             memory_budget: Optional[str | int] = None) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def product(path: str, kind: str, *, of: Optional[str] = None, max_pattern: bool = False,
                inner: Optional[float] = None, outer: Optional[float] = None, inner_mrad: Optional[float] = None,
                outer_mrad: Optional[float] = None, mask: Optional[str] = None,
                center: Optional[tuple[float, float]] = None, radius: Optional[float] = None,
                rotation_deg: Optional[float] = None, transpose: bool = False, scan_shape: Pair = None,
                scan_region: Region = None, detector_region: Region = None, scan_bin: Pair = None,
                detector_bin: Pair = None, threads: Optional[int] = None, memory_budget: Optional[str | int] = None,
                backend: Optional[str] = None, prefer: Names = None, never: Names = None,
                allow_approx: Names = None) -> tuple[np.ndarray, dict[str, Any]]: ...
    # The products by name: product(path, "bf", **options), …
    @staticmethod
    def bf(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def abf(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def adf(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def haadf(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def df(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def mask(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def com(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def dpc(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def idpc(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def fft(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def mean_dp(path: str, **options: Any) -> tuple[np.ndarray, dict[str, Any]]: ...
    @staticmethod
    def ssb(path: str, *, C10: float = 0.0, C12: float = 0.0, phi12: float = 0.0, fit: bool = False,
            scan_rotation_deg: Optional[float] = None, search: str = "estimate", trials: int = 200,
            estimate_trials: int = 40, seed: int = 0, fit_crop: int = 64,
            center: Optional[tuple[float, float]] = None, radius: Optional[float] = None, scan_region: Region = None,
            scan_bin: Pair = None, detector_bin: Pair = None, threads: Optional[int] = None,
            memory_budget: Optional[str | int] = None, backend: Optional[str] = None, prefer: Names = None,
            never: Names = None, allow_approx: Names = None) -> tuple[np.ndarray, dict[str, Any]]: ...

stem: _Stem
