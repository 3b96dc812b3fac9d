"""Named results and notebook views.

Result: every computing call (tm.stem products, load, ssb; Checkpoint.render; tm.diff_tile) returns
Result(values, report), a tuple subclass: `values, report = acq.bf()` works as before, and `r.values`,
`r.report` name the parts. In a notebook (Jupyter calls _repr_html_) a Result shows a thumbnail of its values
and its report's headline; Checkpoint and Acquisition show a summary table.

The thumbnail is a PNG written here with zlib (no imaging library needed): 2-D values are scaled between
their finite minimum and maximum (grey), an RGBA uint8 image is shown as is, and the two components of a
[2, R, C] vector field (CoM, DPC) give two images side by side.
"""
import base64
import collections
import html
import struct
import zlib

_THUMBNAIL_MAX = 256  # pixels on the longer side; larger values are subsampled (every k-th row and column)


class Result(collections.namedtuple("Result", ["values", "report"])):
    """(values, report) with names. values: numpy array; report: the --json document of the call."""
    __slots__ = ()

    def __repr__(self):
        shape = getattr(self.values, "shape", None)
        dtype = getattr(self.values, "dtype", None)
        keys = ", ".join(list(self.report)[:6]) if isinstance(self.report, dict) else type(self.report).__name__
        return "Result(values=<array %s %s>, report={%s%s})" % (
            "x".join(str(n) for n in shape) if shape is not None else "?", dtype,
            keys, ", …" if isinstance(self.report, dict) and len(self.report) > 6 else "")

    def _repr_html_(self):
        rows = [("values", "%s %s" % (_shape_text(self.values), getattr(self.values, "dtype", "")))]
        if isinstance(self.report, dict):
            for key in ("product", "kind", "unit", "seconds", "aberrations", "scan_shape", "placement"):
                if key in self.report:
                    rows.append((key, _short(self.report[key])))
        images = "".join(_img_tag(png) for png in _thumbnails(self.values))
        return "<div>%s%s</div>" % (images, _table(rows))


def _shape_text(values):
    shape = getattr(values, "shape", None)
    return "[" + ", ".join(str(n) for n in shape) + "]" if shape is not None else "?"


def _short(value, limit=160):
    if isinstance(value, list) and value and isinstance(value[0], dict) and "op" in value[0]:
        text = "; ".join("%s on %s" % (p.get("op"), p.get("backend", p.get("chosen", "?"))) for p in value[:4])
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _table(rows):
    body = "".join("<tr><th style='text-align:left'>%s</th><td style='text-align:left'>%s</td></tr>" %
                   (html.escape(str(k)), html.escape(str(v))) for k, v in rows)
    return "<table>%s</table>" % body


def _img_tag(png):
    return "<img style='image-rendering:pixelated;margin:2px' src='data:image/png;base64,%s'/>" % (
        base64.b64encode(png).decode("ascii"))


def _png(width, height, colour_type, rows):
    """A PNG of 8-bit samples: colour_type 0 (grey, one byte a pixel) or 6 (RGBA); rows: bytes per row."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def _thumbnails(values):
    """PNG bytes for each image a value array holds (empty when it is not image-like)."""
    import numpy as np
    a = np.asarray(values)
    if a.ndim == 3 and a.shape[2] == 4 and a.dtype == np.uint8:
        step = max(1, -(-max(a.shape[:2]) // _THUMBNAIL_MAX))
        a = np.ascontiguousarray(a[::step, ::step])
        return [_png(a.shape[1], a.shape[0], 6, (a[r].tobytes() for r in range(a.shape[0])))]
    if a.ndim == 3 and a.shape[0] == 2:  # a vector field [2, R, C] (CoM, DPC): its two components
        return _thumbnails(a[0]) + _thumbnails(a[1])
    if a.ndim != 2 or a.size == 0 or a.dtype.kind not in "biuf":
        return []
    step = max(1, -(-max(a.shape) // _THUMBNAIL_MAX))
    a = a[::step, ::step].astype(np.float64)
    finite = np.isfinite(a)
    if not finite.any():
        return []
    lo, hi = a[finite].min(), a[finite].max()
    grey = np.zeros(a.shape, np.uint8)
    if hi > lo:
        grey[finite] = np.round((a[finite] - lo) / (hi - lo) * 255).astype(np.uint8)
    return [_png(grey.shape[1], grey.shape[0], 0, (grey[r].tobytes() for r in range(grey.shape[0])))]


def checkpoint_html(ckpt, limit=12):
    """A Checkpoint's summary: format, path, files, tensor count and bytes, the first `limit` tensors."""
    tensors = ckpt.tensors
    total = sum(t.get("bytes", 0) for t in tensors)
    head = _table([("checkpoint", ckpt.path), ("format", ckpt.format), ("files", len(ckpt.files)),
                   ("tensors", len(tensors)), ("bytes", "{:,}".format(total))])
    rows = "".join("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
        html.escape(t["name"]), html.escape(str(t.get("dtype") or t.get("stored_type"))),
        html.escape("[" + ", ".join(str(n) for n in t.get("shape", [])) + "]"),
        "" if t.get("readable", True) else html.escape("unavailable: " + str(t.get("unavailable", ""))))
        for t in tensors[:limit])
    more = "<p>… and %d more</p>" % (len(tensors) - limit) if len(tensors) > limit else ""
    return ("<div>%s<table><tr><th>name</th><th>dtype</th><th>shape</th><th></th></tr>%s</table>%s</div>" %
            (head, rows, more))


def acquisition_html(acq):
    """An Acquisition's summary: path, format, scan and detector, dtype, readiness (no product is computed)."""
    r = acq.readiness
    shape = acq.scan_shape
    return _table([("acquisition", acq.path), ("format", acq.info.get("format", "")),
                   ("scan", "%d x %d" % shape if shape else "unknown"),
                   ("detector", "%d x %d" % acq.detector_shape), ("dtype", acq.dtype),
                   ("readiness", "%s, %s of %s frames" % (r["status"], r["frames_present"], r["frames_expected"]))])
