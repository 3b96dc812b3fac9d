"""tm.stem.open(path): a 4D-STEM acquisition as an object — its inspect document (layout, readiness,
detector, metadata), its calibration with sources, and every product and SSB bound to it. Each method is the
module function of the same name with this acquisition's path (and scan shape, when given at open)."""
from . import _core

_stem = _core.stem

PRODUCTS = ("bf", "abf", "adf", "haadf", "df", "mask", "com", "dpc", "idpc", "fft", "mean-dp")


class Acquisition:
    """An acquisition opened for reading. `info` is tm.stem.inspect's document from the last open or
    refresh(); an acquisition still being written shows more frames after refresh()."""

    def __init__(self, path, scan_shape=None):
        self.path = path
        self._scan_shape = None if scan_shape is None else tuple(scan_shape)
        self.info = _stem.inspect(path, scan_shape=self._scan_shape)

    def refresh(self):
        """Inspects the files again (readiness of an acquisition being written); returns self."""
        self.info = _stem.inspect(self.path, scan_shape=self._scan_shape)
        return self

    @property
    def master(self):
        return self.info["master"]

    @property
    def readiness(self):
        """{status, frames_present, frames_expected, data_files, problems}."""
        return self.info["readiness"]

    @property
    def metadata(self):
        """The master file's scalar metadata by HDF5 path: {"value", "units"} each."""
        return self.info["metadata"]

    @property
    def scan_shape(self):
        """(rows, cols), or None when neither the file nor open(scan_shape=) gives it."""
        shape = self.info.get("scan_shape")
        return None if shape is None else tuple(shape)

    @property
    def detector_shape(self):
        return tuple(self.info["detector_shape"])

    @property
    def dtype(self):
        return self.info["dtype"]

    def _with_scan_shape(self, options):
        if self._scan_shape is not None:
            options.setdefault("scan_shape", self._scan_shape)
        return options

    def calibration(self, **options):
        """tm.stem.calibration(path, **options): every value with its unit and source, and the disk."""
        return _stem.calibration(self.path, **self._with_scan_shape(options))

    def prepare(self, **options):
        """tm.stem.prepare(path, **options): the prepared products stored in the cache; the report."""
        return _stem.prepare(self.path, **self._with_scan_shape(options))

    def load(self, **options):
        """tm.stem.load(path, **options): (frames, provenance)."""
        return _stem.load(self.path, **self._with_scan_shape(options))

    def product(self, kind, **options):
        """tm.stem.product(path, kind, **options): (values, report). A keyword the operation does not declare
        (tm.stem.parameters("stem.product")) raises InvalidArgument naming it."""
        _stem.check_keywords("stem.product", list(options))
        return _stem.product(self.path, kind, **self._with_scan_shape(options))

    def ssb(self, **options):
        """tm.stem.ssb(path, **options): (phase, report) with the aberrations given (a preview)."""
        _stem.check_keywords("stem.ssb", list(options))
        return _stem.ssb(self.path, **options)

    def ssb_fit(self, **options):
        """tm.stem.ssb(path, fit=True, **options): the fitted aberrations' (phase, report)."""
        _stem.check_keywords("stem.ssb", list(options))
        return _stem.ssb(self.path, fit=True, **options)

    def drop_resident(self):
        """Drops this acquisition's resident copy (kept after its first product, docs/stem.md "Resident
        acquisitions"); the next product decodes the files again. Returns how many copies were dropped."""
        return _stem.drop_resident(self.path)

    def __repr__(self):
        r = self.readiness
        shape = self.scan_shape
        scan = "%d x %d" % shape if shape else "unknown scan shape"
        return "<tensormorph.stem.Acquisition '%s', %s, detector %d x %d %s, %s %s/%s frames>" % (
            self.path, scan, *self.detector_shape, self.dtype, r["status"], r["frames_present"], r["frames_expected"])


def _bound_product(kind):
    def compute(self, **options):
        return self.product(kind, **options)

    compute.__name__ = compute.__qualname__ = kind.replace("-", "_")
    compute.__doc__ = "self.product(%r, **options): (values, report)." % (kind,)
    return compute


for _kind in PRODUCTS:
    setattr(Acquisition, _kind.replace("-", "_"), _bound_product(_kind))
del _kind


def open(path, scan_shape=None):  # noqa: A001 (tm.stem.open, as tm.open)
    """Opens an acquisition: a master file, a data file or a folder with one master. Decodes nothing."""
    return Acquisition(path, scan_shape)
