"""numpy's statement of `tensormorph diff`'s figures (docs/diff.md), used by test_diff.py: the statistics of one
tile of element pairs and the histogram buckets of Δ. Written for these tests; no tensormorph code is used."""
import math

import numpy as np


def bucket(d):
    """The histogram bucket of a finite Δ: its sign and binade (docs/diff.md)."""
    m = abs(d)
    if m < 2.0 ** -63:
        return 127 if d < 0 else 128
    k = min(math.frexp(m)[1] - 1, 63)
    return 63 - k if d < 0 else 192 + k


def bins_of(deltas):
    """(lo, span, bins) of the shared bins over every finite Δ of a pair, or None when there is none."""
    bs = [bucket(float(d)) for d in deltas]
    if not bs:
        return None
    lo, hi = min(bs), max(bs)
    span = hi - lo + 1
    return lo, span, min(32, span)


def histogram(deltas, shared):
    lo, span, bins = shared
    counts = [0] * bins
    for d in deltas:
        counts[(bucket(float(d)) - lo) * bins // span] += 1
    return counts


def figures(a, b, shared=None):
    """The difference statistics of element pairs a, b (any shape, float64 after exact widening)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    fin = np.isfinite(a) & np.isfinite(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    fa, fb = a[fin], b[fin]
    d = fb - fa
    ssd, saa, sbb, sab = (math.fsum(x) for x in (d * d, fa * fa, fb * fb, fa * fb))
    out = {"count": int(a.size), "changed": int((~same).sum()), "nonfinite": int((~fin).sum()),
           "sum_delta": math.fsum(d), "sum_sq_delta": ssd,
           "max_abs_delta": float(np.abs(d).max()) if d.size else 0.0,
           "min_delta": float(d.min()) if d.size else "inf", "max_delta": float(d.max()) if d.size else "-inf",
           "rel_change": 0.0 if ssd == 0 else (math.sqrt(ssd / saa) if saa > 0 else "nan"),
           "cosine": sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else "nan"}
    if shared is not None:
        out["hist"] = histogram(d, shared)
    return out


def bf16_to_f32(bits):
    """bf16 bit patterns (uint16) as the float32 values they are: exactly the upper half of a float32."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 rounded to the nearest bf16 (ties to even), as bit patterns."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def llama_cpp_permute(w, n_head):
    """What llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute) does to a Q or K projection's rows."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
