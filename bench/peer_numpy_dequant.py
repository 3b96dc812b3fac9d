#!/usr/bin/python3
"""numpy peer of bench/dequant_bench: vectorised dequantization of ggml block formats, the way llama.cpp's
gguf-py (gguf/quants.py) does it, timed on the same tiled fixture bytes as the C++ bench.

  /usr/bin/python3 bench/peer_numpy_dequant.py [--fixtures DIR] [--size-mib 8] [--json OUT]

The style is gguf-py's: the raw tensor (rows x row bytes, uint8) is processed 16 rows at a time
(np.array_split + np.concatenate into one float32 output); each group is reshaped into blocks, split into
its fields with np.hsplit, fp16 scales are widened with .view(np.float16).astype(np.float32), packed bits
are unpacked by broadcasting right shifts against a small shift vector, lookup tables go through
np.take_along_axis, and the result is formed with float32 broadcasting. This file is written for this
project, not copied from gguf-py.

Before a type is timed, its implementation dequantizes the fixture tensor and must reproduce the reference
values (tiny-mixed.ref.f32, gguf-py's output) bit for bit; a type that does not is reported as WRONG and
not timed. A fixture type without a decoder here would be reported as "no numpy peer" (none is, today).

The lattice ("grid") formats IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S look their grid points
up in ggml's grids, which this peer does not carry: it unpacks them at start-up from the packed hex strings
of backends/cpu/dequant/ggml_iq_grids.cpp (the project's copy of gguf-py's `grid_hex`), with the level
tables and the grid bindings (points, width, levels) read from the same file. Each decoder forms every
value with the float32 operations of ggml's dequantize_row_* in ggml's order (the C++ decoders of
backends/cpu/dequant/ggml_iquants.cpp spell them out): (scale * grid value) * (+1 or -1) for IQ2/IQ3, with
the sign applied as a multiplication, and scale * (grid value + delta) for IQ1.

Data for timing: the fixture tensor's bytes repeated floor(size / n_bytes) times (at least once), i.e. a
prefix, in whole tensor copies, of the buffer dequant_bench builds from the same file (same rule).
"""
import argparse
import json
import os
import platform
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
QK_K = 256

# ---------------------------------------------------------------------------------------------------------
# helpers


def half(col):
    """(n, 2) uint8 little-endian fp16 fields -> (n, 1) float32 (exact)."""
    return col.view(np.float16).astype(np.float32)


def low_high(packed, width):
    """(n, k*width) bytes -> (n, k, 2, width): low nibbles, then high nibbles of each width-byte run."""
    n = packed.shape[0]
    return packed.reshape((n, -1, 1, width)) >> np.array([0, 4], dtype=np.uint8).reshape((1, 1, 2, 1))


def bits_of(packed, count, step):
    """(n, k) uint8 -> (n, k/width-groups...) the `count` fields of `step` bits of each byte, LSB first,
    laid out with the field index before the byte index (the ggml order for qh / hmask planes)."""
    n = packed.shape[0]
    shifts = np.arange(0, count * step, step, dtype=np.uint8).reshape((1, 1, count, 1))
    return packed.reshape((n, 1, 1, -1)) >> shifts


# ---------------------------------------------------------------------------------------------------------
# block decoders: (n_blocks, type_size) uint8 -> (n_blocks, block_size) float32


def q4_0(b):
    n = b.shape[0]
    d, qs = np.hsplit(b, [2])
    d = half(d)
    q = (low_high(qs, 16) & np.uint8(0x0F)).reshape((n, 32)).astype(np.int8) - np.int8(8)
    return d * q.astype(np.float32)


def q4_1(b):
    n = b.shape[0]
    d, m, qs = np.hsplit(b, [2, 4])
    d, m = half(d), half(m)
    q = (low_high(qs, 16) & np.uint8(0x0F)).reshape((n, 32)).astype(np.float32)
    return d * q + m


def _q5_quants(qh, qs):
    n = qs.shape[0]
    hi = qh.view(np.uint32).reshape((n, 1)) >> np.arange(32, dtype=np.uint32).reshape((1, 32))
    hi = (hi & np.uint32(1)).astype(np.uint8)
    lo = (low_high(qs, 16) & np.uint8(0x0F)).reshape((n, 32))
    return lo | (hi << np.uint8(4))


def q5_0(b):
    d, qh, qs = np.hsplit(b, [2, 6])
    d = half(d)
    q = _q5_quants(qh, qs).astype(np.int8) - np.int8(16)
    return d * q.astype(np.float32)


def q5_1(b):
    d, m, qh, qs = np.hsplit(b, [2, 4, 8])
    d, m = half(d), half(m)
    q = _q5_quants(qh, qs).astype(np.float32)
    return d * q + m


def q8_0(b):
    d, qs = np.hsplit(b, [2])
    return qs.view(np.int8).astype(np.float32) * half(d)


def q2_k(b):
    n = b.shape[0]
    scales, qs, d, dmin = np.hsplit(b, [QK_K // 16, QK_K // 16 + QK_K // 4, QK_K // 16 + QK_K // 4 + 2])
    d, dmin = half(d), half(dmin)
    dl = (d * (scales & np.uint8(0x0F)).astype(np.float32)).reshape((n, 16, 1))
    ml = (dmin * (scales >> np.uint8(4)).astype(np.float32)).reshape((n, 16, 1))
    # 2 x 32 bytes; each 32-byte run holds 4 planes of 2 bits (shift 0, 2, 4, 6) -> 128 values
    q = qs.reshape((n, 2, 1, 32)) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape((1, 1, 4, 1))
    q = (q & np.uint8(3)).reshape((n, 16, 16)).astype(np.float32)
    return (dl * q - ml).reshape((n, QK_K))


def q3_k(b):
    n = b.shape[0]
    hmask, qs, sc, d = np.hsplit(b, [32, 96, 108])
    d = half(d)
    # 16 six-bit scales: low nibbles from bytes 0-7 (low then high nibble), top two bits from bytes 8-11
    low = (sc[:, :8].reshape((n, 1, 8)) >> np.array([0, 4], dtype=np.uint8).reshape((1, 2, 1))).reshape((n, 16))
    top = (sc[:, 8:].reshape((n, 1, 4)) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape((1, 4, 1))).reshape((n, 16))
    s = ((low & np.uint8(0x0F)) | ((top & np.uint8(3)) << np.uint8(4))).astype(np.int8) - np.int8(32)
    dl = (d * s.astype(np.float32)).reshape((n, 16, 1))
    lo = qs.reshape((n, 2, 1, 32)) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape((1, 1, 4, 1))
    lo = (lo & np.uint8(3)).reshape((n, 16, 16))
    hi = hmask.reshape((n, 1, 1, 32)) >> np.arange(8, dtype=np.uint8).reshape((1, 1, 8, 1))
    hi = ((hi & np.uint8(1)) ^ np.uint8(1)).reshape((n, 16, 16))  # a clear bit subtracts 4
    q = (lo.astype(np.int8) - (hi << np.uint8(2)).astype(np.int8)).astype(np.float32)
    return (dl * q).reshape((n, QK_K))


def k_scale_min(sc):
    """Q4_K / Q5_K: 12 bytes -> 8 six-bit scales and 8 six-bit mins."""
    n = sc.shape[0]
    a, m, c = np.split(sc.reshape((n, 3, 4)), 3, axis=1)
    scale = np.concatenate([a & np.uint8(0x3F), (c & np.uint8(0x0F)) | ((a >> np.uint8(2)) & np.uint8(0x30))], axis=-1)
    mins = np.concatenate([m & np.uint8(0x3F), (c >> np.uint8(4)) | ((m >> np.uint8(2)) & np.uint8(0x30))], axis=-1)
    return scale.reshape((n, 8)), mins.reshape((n, 8))


def q4_k(b):
    n = b.shape[0]
    d, dmin, sc, qs = np.hsplit(b, [2, 4, 16])
    d, dmin = half(d), half(dmin)
    s, m = k_scale_min(sc)
    dl = (d * s.astype(np.float32)).reshape((n, 8, 1))
    ml = (dmin * m.astype(np.float32)).reshape((n, 8, 1))
    q = (low_high(qs, 32) & np.uint8(0x0F)).reshape((n, 8, 32)).astype(np.float32)
    return (dl * q - ml).reshape((n, QK_K))


def q5_k(b):
    n = b.shape[0]
    d, dmin, sc, qh, qs = np.hsplit(b, [2, 4, 16, 48])
    d, dmin = half(d), half(dmin)
    s, m = k_scale_min(sc)
    dl = (d * s.astype(np.float32)).reshape((n, 8, 1))
    ml = (dmin * m.astype(np.float32)).reshape((n, 8, 1))
    lo = (low_high(qs, 32) & np.uint8(0x0F)).reshape((n, 8, 32))
    hi = qh.reshape((n, 1, 1, 32)) >> np.arange(8, dtype=np.uint8).reshape((1, 1, 8, 1))
    hi = (hi & np.uint8(1)).reshape((n, 8, 32))
    q = (lo | (hi << np.uint8(4))).astype(np.float32)
    return (dl * q - ml).reshape((n, QK_K))


def q6_k(b):
    n = b.shape[0]
    ql, qh, sc, d = np.hsplit(b, [128, 192, 208])
    d = half(d)
    dl = (d * sc.view(np.int8).astype(np.float32)).reshape((n, 16, 1))
    lo = (low_high(ql, 64) & np.uint8(0x0F)).reshape((n, 2, 4, 32))
    hi = qh.reshape((n, 2, 1, 32)) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape((1, 1, 4, 1))
    hi = hi & np.uint8(3)
    q = (lo | (hi << np.uint8(4))).astype(np.int8) - np.int8(32)
    return (dl * q.reshape((n, 16, 16)).astype(np.float32)).reshape((n, QK_K))


IQ4NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int8)


def iq4_nl(b):
    n = b.shape[0]
    d, qs = np.hsplit(b, [2])
    d = half(d)
    idx = (low_high(qs, 16) & np.uint8(0x0F)).reshape((n, 32, 1))
    v = np.take_along_axis(IQ4NL_VALUES.reshape((1, 1, 16)), idx, axis=-1).reshape((n, 32))
    return d * v.astype(np.float32)


def iq4_xs(b):
    n = b.shape[0]
    d, sh, sl, qs = np.hsplit(b, [2, 4, 8])
    d = half(d)
    low = (sl.reshape((n, 4, 1)) >> np.array([0, 4], dtype=np.uint8).reshape((1, 1, 2))).reshape((n, 8)) & np.uint8(0x0F)
    top = sh.view(np.uint16).reshape((n, 1)) >> np.arange(0, 16, 2, dtype=np.uint16).reshape((1, 8))
    top = top.astype(np.uint8) & np.uint8(3)
    ls = (low | (top << np.uint8(4))).astype(np.int8) - np.int8(32)
    dl = (d * ls.astype(np.float32)).reshape((n, 8, 1))
    idx = (low_high(qs, 16) & np.uint8(0x0F)).reshape((n, 8, 32, 1))
    v = np.take_along_axis(IQ4NL_VALUES.reshape((1, 1, 1, 16)), idx, axis=-1).reshape((n, 8, 32))
    return (dl * v.astype(np.float32)).reshape((n, QK_K))


MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int8)


def mxfp4(b):
    n = b.shape[0]
    e, qs = np.hsplit(b, [1])
    # E8M0 scale, halved (the table holds doubled E2M1 values): 2^(e - 128), exact in float32
    d = np.ldexp(np.float32(1), e.astype(np.int32) - 128).astype(np.float32)
    idx = (low_high(qs, 16) & np.uint8(0x0F)).reshape((n, 32, 1))
    v = np.take_along_axis(MXFP4_VALUES.reshape((1, 1, 16)), idx, axis=-1).reshape((n, 32))
    return v.astype(np.float32) * d


def tq1_0(b):
    n = b.shape[0]
    qs, qh, d = np.hsplit(b, [48, 52])
    d = half(d)
    pow3 = np.array([1, 3, 9, 27, 81], dtype=np.uint8)
    # base-3 digits stored as fixed-point fractions: multiplying by 3^k (mod 256) brings digit k to the top
    a = (qs[:, :32].reshape((n, 1, 32)) * pow3.reshape((1, 5, 1))).reshape((n, 160))
    c = (qs[:, 32:].reshape((n, 1, 16)) * pow3.reshape((1, 5, 1))).reshape((n, 80))
    h = (qh.reshape((n, 1, 4)) * pow3[:4].reshape((1, 4, 1))).reshape((n, 16))
    t = np.concatenate([a, c, h], axis=-1)
    q = ((t.astype(np.uint16) * np.uint16(3)) >> np.uint16(8)).astype(np.int8) - np.int8(1)
    return d * q.astype(np.float32)


def tq2_0(b):
    n = b.shape[0]
    qs, d = np.hsplit(b, [64])
    d = half(d)
    q = qs.reshape((n, 2, 1, 32)) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape((1, 1, 4, 1))
    q = (q & np.uint8(3)).reshape((n, QK_K)).astype(np.int8) - np.int8(1)
    return d * q.astype(np.float32)


# ---------------------------------------------------------------------------------------------------------
# lattice ("grid") formats; the grids are unpacked from backends/cpu/dequant/ggml_iq_grids.cpp


def load_iq_grids(path):
    """ggml's lattice grids from the C++ source `path`: {C++ grid name (e.g. "kIq2xxsGrid"): (points, width)
    float32 array of level values}. Reads each `Grid<points, width> name = unpack_grid<...>(hex, levels)`
    binding, its concatenated hex string literals and its std::array of levels, and unpacks them as the C++
    unpacker does (2-bit slots for grids of at most 4 levels, else 4-bit, lowest bits first), with the same
    integrity checks (string length, every slot names a level); raises ValueError when one fails."""
    with open(path) as f:
        src = f.read()
    hexes = {name: "".join(re.findall(r'"([^"]*)"', body))
             for name, body in re.findall(r'constexpr char (\w+)\[\] =((?:\s*"[^"]*")+);', src)}
    levels = {name: np.array([int(v, 0) for v in body.split(",")], dtype=np.float32)
              for name, body in re.findall(r"constexpr std::array<u?int8_t, \d+> (\w+) = \{([^}]*)\};", src)}
    grids = {}
    for points, width, name, hex_name, levels_name in re.findall(
            r"Grid<(\d+), (\d+)(?:, \w+)?> (\w+) = unpack_grid<\d+, \d+>\((\w+), (\w+)\);", src):
        points, width, lv = int(points), int(width), levels[levels_name]
        slot_bits = 2 if lv.size <= 4 else 4
        packed = np.frombuffer(bytes.fromhex(hexes[hex_name]), dtype=np.uint8)
        shifts = np.arange(0, 8, slot_bits, dtype=np.uint8)
        index = ((packed.reshape((-1, 1)) >> shifts) & np.uint8((1 << slot_bits) - 1)).ravel()
        if index.size != points * width:
            raise ValueError(f"{path}: {hex_name} holds {index.size} slots, {name} needs {points} x {width}")
        if index.max() >= lv.size:
            raise ValueError(f"{path}: {hex_name} names level {index.max()}, {levels_name} has {lv.size}")
        grids[name] = lv[index].reshape((points, width))
    return grids


IQ_GRIDS = load_iq_grids(os.path.join(HERE, "..", "backends", "cpu", "dequant", "ggml_iq_grids.cpp"))

# ggml's ksigns_iq2xs, derived as make_iq2_signs does: a 7-bit sign code with its parity as bit 7, so that
# every group of 8 has an even number of negatives.
_SIGN_CODES = np.arange(128, dtype=np.uint8)
KSIGNS = _SIGN_CODES | ((np.unpackbits(_SIGN_CODES.reshape((128, 1)), axis=1).sum(axis=1, dtype=np.uint8)
                         & np.uint8(1)) << np.uint8(7))

IQ1_DELTA = np.float32(0.125)  # IQ1S_DELTA / IQ1M_DELTA


def grid_points(grid, index):
    """(n, k) integer indices into IQ_GRIDS[grid] -> (n, k, width) float32 grid points."""
    g = IQ_GRIDS[grid]
    return np.take_along_axis(g.reshape((1, *g.shape)), index.reshape((*index.shape, 1)), axis=1)


def sign_factors(signs):
    """(..., k) uint8 sign bytes -> (..., k, 8) float32: -1 where bit j of the byte is set, else +1."""
    bits = (signs.reshape((*signs.shape, 1)) >> np.arange(8, dtype=np.uint8)) & np.uint8(1)
    return np.where(bits == 0, np.float32(1), np.float32(-1))


def code_sign_factors(codes):
    """(..., k) 7-bit sign codes -> (..., k, 8) float32 factors of their ksigns bytes."""
    table = KSIGNS.reshape((1,) * (codes.ndim - 1) + (128,))
    return sign_factors(np.take_along_axis(table, codes, axis=-1))


def iq2_scale(d, s):
    """IQ2 sub-block scale d * (0.5 + s) * 0.25 in float32, left to right as ggml evaluates it."""
    return d * (np.float32(0.5) + s.astype(np.float32)) * np.float32(0.25)


def iq2_xs_scales(d, sc):
    """IQ2_XS / IQ2_S: (n, 1) d and (n, 8) scale bytes -> (n, 8, 2) scales (low nibble: points 0-1, high: 2-3)."""
    n = sc.shape[0]
    s = (sc.reshape((n, 8, 1)) >> np.array([0, 4], dtype=np.uint8)) & np.uint8(0x0F)
    return iq2_scale(d.reshape((n, 1, 1)), s)


def iq2_xxs(b):
    # fp16 d @0; 8 sub-blocks of 8 bytes @2: 4 grid indices, then a uint32 of four 7-bit sign codes + 4-bit scale
    n = b.shape[0]
    d, qs = np.hsplit(b, [2])
    d = half(d)
    sub = qs.reshape((n, 8, 8))
    word = sub[:, :, 4:].view(np.uint32)  # (n, 8, 1)
    db = iq2_scale(d.reshape((n, 1, 1)), word >> np.uint32(28)).reshape((n, 8, 1, 1))
    codes = (word >> np.array([0, 7, 14, 21], dtype=np.uint32)) & np.uint32(0x7F)
    grid = grid_points("kIq2xxsGrid", sub[:, :, :4].reshape((n, 32))).reshape((n, 8, 4, 8))
    return (db * grid * code_sign_factors(codes)).reshape((n, QK_K))


def iq2_xs(b):
    # fp16 d @0; 32 uint16 @2 (9-bit grid index, 7-bit sign code); scales[8] @66
    n = b.shape[0]
    d, qs, sc = np.hsplit(b, [2, 66])
    d = half(d)
    q = qs.view(np.uint16).reshape((n, 8, 2, 2))
    db = iq2_xs_scales(d, sc).reshape((n, 8, 2, 1, 1))
    grid = grid_points("kIq2xsGrid", (q & np.uint16(511)).reshape((n, 32))).reshape((n, 8, 2, 2, 8))
    return (db * grid * code_sign_factors(q >> np.uint16(9))).reshape((n, QK_K))


def iq2_s(b):
    # fp16 d @0; index low bytes[32] @2; sign bytes[32] @34; qh[8] @66 (2 high index bits per point); scales[8] @74
    n = b.shape[0]
    d, qs, signs, qh, sc = np.hsplit(b, [2, 34, 66, 74])
    d = half(d)
    high = (qh.reshape((n, 8, 1)).astype(np.uint16) << np.array([8, 6, 4, 2], dtype=np.uint16)) & np.uint16(0x300)
    index = qs.reshape((n, 8, 4)).astype(np.uint16) | high
    db = iq2_xs_scales(d, sc).reshape((n, 8, 2, 1, 1))
    grid = grid_points("kIq2sGrid", index.reshape((n, 32))).reshape((n, 8, 2, 2, 8))
    return (db * grid * sign_factors(signs.reshape((n, 8, 2, 2)))).reshape((n, QK_K))


def iq3_xxs(b):
    # fp16 d @0; grid indices[64] @2 (4-element points, two per group of 8); 8 uint32 @66 (as IQ2_XXS)
    n = b.shape[0]
    d, qs, words = np.hsplit(b, [2, 66])
    d = half(d)
    word = words.view(np.uint32).reshape((n, 8, 1))
    db = (d.reshape((n, 1, 1)) * (np.float32(0.5) + (word >> np.uint32(28)).astype(np.float32)) * np.float32(0.5))
    codes = (word >> np.array([0, 7, 14, 21], dtype=np.uint32)) & np.uint32(0x7F)
    grid = grid_points("kIq3xxsGrid", qs).reshape((n, 8, 4, 8))
    return (db.reshape((n, 8, 1, 1)) * grid * code_sign_factors(codes)).reshape((n, QK_K))


def iq3_s(b):
    # fp16 d @0; index low bytes[64] @2; qh[8] @66 (bit k: 9th index bit of point k); signs[32] @74; scales[4] @106
    n = b.shape[0]
    d, qs, qh, signs, sc = np.hsplit(b, [2, 66, 74, 106])
    d = half(d)
    high = (qh.reshape((n, 8, 1)) >> np.arange(8, dtype=np.uint8)) & np.uint8(1)
    index = qs.reshape((n, 8, 8)).astype(np.uint16) | (high.astype(np.uint16) << np.uint16(8))
    s = ((sc.reshape((n, 4, 1)) >> np.array([0, 4], dtype=np.uint8)) & np.uint8(0x0F)).reshape((n, 8))
    db = (d * (np.uint8(1) + np.uint8(2) * s).astype(np.float32)).reshape((n, 8, 1, 1))
    grid = grid_points("kIq3sGrid", index.reshape((n, 64))).reshape((n, 8, 4, 8))
    return (db * grid * sign_factors(signs.reshape((n, 8, 4)))).reshape((n, QK_K))


def iq1_s(b):
    # fp16 d @0; index low bytes[32] @2; 8 uint16 @34: 3 high index bits per point, 3-bit scale @12, delta sign @15
    n = b.shape[0]
    d, qs, qh = np.hsplit(b, [2, 34])
    d = half(d)
    qh = qh.view(np.uint16)
    dl = d * (np.uint16(2) * ((qh >> np.uint16(12)) & np.uint16(7)) + np.uint16(1)).astype(np.float32)
    delta = np.where(qh & np.uint16(0x8000), -IQ1_DELTA, IQ1_DELTA)
    high = (qh.reshape((n, 8, 1)) >> np.array([0, 3, 6, 9], dtype=np.uint16)) & np.uint16(7)
    index = qs.reshape((n, 8, 4)).astype(np.uint16) | (high << np.uint16(8))
    grid = grid_points("kIq1sGrid", index.reshape((n, 32))).reshape((n, 8, 4, 8))
    return (dl.reshape((n, 8, 1, 1)) * (grid + delta.reshape((n, 8, 1, 1)))).reshape((n, QK_K))


def iq1_m(b):
    # index low bytes[32] @0; qh[16] @32 (a nibble per point: 3 high index bits, delta sign); 4 uint16 @48:
    # twelve 3-bit scales (two per sub-block) in bits 0-11, the fp16 d spread over the top nibbles
    n = b.shape[0]
    qs, qh, sc = np.hsplit(b, [32, 48])
    sc = sc.view(np.uint16)
    d_bits = ((sc[:, 0:1] >> np.uint16(12)) | ((sc[:, 1:2] >> np.uint16(8)) & np.uint16(0x00F0))
              | ((sc[:, 2:3] >> np.uint16(4)) & np.uint16(0x0F00)) | (sc[:, 3:4] & np.uint16(0xF000)))
    d = d_bits.view(np.float16).astype(np.float32)
    s = (sc.reshape((n, 4, 1)) >> np.array([0, 3, 6, 9], dtype=np.uint16)) & np.uint16(7)
    dl = d.reshape((n, 1, 1)) * (np.uint16(2) * s + np.uint16(1)).astype(np.float32)
    nibble = ((qh.reshape((n, 16, 1)) >> np.array([0, 4], dtype=np.uint8)) & np.uint8(0x0F)).reshape((n, 8, 4))
    delta = np.where(nibble & np.uint8(8), -IQ1_DELTA, IQ1_DELTA)
    index = qs.reshape((n, 8, 4)).astype(np.uint16) | ((nibble & np.uint8(7)).astype(np.uint16) << np.uint16(8))
    grid = grid_points("kIq1sGrid", index.reshape((n, 32))).reshape((n, 8, 2, 2, 8))
    return (dl.reshape((n, 8, 2, 1, 1)) * (grid + delta.reshape((n, 8, 2, 2, 1)))).reshape((n, QK_K))


# ggml name -> (block elements, block bytes, decoder)
FORMATS = {
    "Q4_0": (32, 18, q4_0), "Q4_1": (32, 20, q4_1), "Q5_0": (32, 22, q5_0), "Q5_1": (32, 24, q5_1),
    "Q8_0": (32, 34, q8_0), "Q2_K": (256, 84, q2_k), "Q3_K": (256, 110, q3_k), "Q4_K": (256, 144, q4_k),
    "Q5_K": (256, 176, q5_k), "Q6_K": (256, 210, q6_k), "IQ4_NL": (32, 18, iq4_nl), "IQ4_XS": (256, 136, iq4_xs),
    "MXFP4": (32, 17, mxfp4), "TQ1_0": (256, 54, tq1_0), "TQ2_0": (256, 66, tq2_0),
    "IQ2_XXS": (256, 66, iq2_xxs), "IQ2_XS": (256, 74, iq2_xs), "IQ2_S": (256, 82, iq2_s),
    "IQ3_XXS": (256, 98, iq3_xxs), "IQ3_S": (256, 110, iq3_s), "IQ1_S": (256, 50, iq1_s), "IQ1_M": (256, 56, iq1_m),
}


# ---------------------------------------------------------------------------------------------------------
# the gguf-py driver: rows (uint8, rows x row bytes) -> float32 (rows x row elements), 16 rows at a time


def dequantize(raw_rows, fmt):
    block_elements, block_bytes, decode = FORMATS[fmt]
    rows = raw_rows.reshape((-1, raw_rows.shape[-1]))
    row_elements = rows.shape[1] // block_bytes * block_elements

    def one_group(group):
        blocks = group.reshape((-1, block_bytes))
        out = decode(blocks)
        assert out.dtype == np.float32 and out.shape[-1] == block_elements, (fmt, out.dtype, out.shape)
        return out.ravel()

    out = np.empty(rows.shape[0] * row_elements, dtype=np.float32)
    groups = (rows.shape[0] // 16) or 1
    np.concatenate([one_group(g) for g in np.array_split(rows, groups)], axis=0, out=out)
    return out.reshape((rows.shape[0], row_elements))


# ---------------------------------------------------------------------------------------------------------


def load_sources(fixtures):
    gdir = os.path.join(fixtures, "gguf")
    with open(os.path.join(gdir, "tiny-mixed.expected.json")) as f:
        expected = json.load(f)
    with open(os.path.join(gdir, "tiny-mixed.ref.json")) as f:
        ref_index = json.load(f)
    raw_file = np.memmap(os.path.join(gdir, "tiny-mixed.gguf"), dtype=np.uint8, mode="r")
    ref_file = np.memmap(os.path.join(gdir, "tiny-mixed.ref.f32"), dtype=np.uint8, mode="r")
    sources = {}
    for t in expected["tensors"]:
        if t["block_size"] <= 1 or t["ggml_type"] in sources:
            continue
        raw = np.array(raw_file[t["data_offset"]:t["data_offset"] + t["n_bytes"]])
        r = ref_index[t["name"]]
        ref = np.array(ref_file[r["offset"]:r["offset"] + 4 * r["count"]]).view(np.float32)
        sources[t["ggml_type"]] = {"tensor": t, "raw": raw, "ref": ref}
    return sources


def verify(fmt, src):
    t = src["tensor"]
    row_bytes = t["ne"][0] // t["block_size"] * t["type_size"]
    got = dequantize(src["raw"].reshape((-1, row_bytes)), fmt).ravel()
    ref = src["ref"]
    if got.shape != ref.shape:
        return False, f"shape {got.shape} != reference {ref.shape}"
    diff = np.count_nonzero(got.view(np.uint32) != ref.view(np.uint32))
    if diff:
        finite = np.isfinite(got) & np.isfinite(ref)
        worst = float(np.max(np.abs(got[finite].astype(np.float64) - ref[finite]))) if finite.any() else float("nan")
        return False, f"{diff} of {ref.size} values differ from the reference (max abs diff {worst:.3g})"
    return True, f"bit-identical to the reference on all {ref.size} values of {t['name']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default=os.environ.get("TM_FIXTURES", os.path.join(HERE, "..", "..", "shared", "fixtures")))
    ap.add_argument("--size-mib", type=float, default=8.0, help="input bytes per type, MiB (default 8)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per type; best kept (default 3)")
    ap.add_argument("--budget-s", type=float, default=6.0, help="stop repeating a type after this many seconds")
    ap.add_argument("--types", help="comma-separated subset of types")
    ap.add_argument("--verify-only", action="store_true")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    if not os.path.exists(os.path.join(args.fixtures, "gguf", "tiny-mixed.gguf")):
        print(f"SKIPPED: peer_numpy_dequant needs {args.fixtures}/gguf/tiny-mixed.gguf")
        return 0
    sources = load_sources(args.fixtures)
    wanted = args.types.split(",") if args.types else list(sources)
    size = int(args.size_mib * (1 << 20))
    results = []
    for fmt in wanted:
        src = sources[fmt]
        t = src["tensor"]
        rec = {"type": fmt, "tensor": t["name"], "block_elements": t["block_size"], "block_bytes": t["type_size"]}
        if fmt not in FORMATS:
            rec["status"] = "no numpy peer"
            rec["note"] = "no numpy decoder for this type"
            results.append(rec)
            print(f"{fmt:8s} no numpy peer", file=sys.stderr, flush=True)
            continue
        ok, note = verify(fmt, src)
        rec["verify"] = note
        if not ok:
            rec["status"] = "WRONG"
            results.append(rec)
            print(f"{fmt:8s} WRONG: {note}", file=sys.stderr, flush=True)
            continue
        if args.verify_only:
            rec["status"] = "verified"
            results.append(rec)
            print(f"{fmt:8s} {note}", file=sys.stderr, flush=True)
            continue
        copies = max(1, size // t["n_bytes"])
        row_bytes = t["ne"][0] // t["block_size"] * t["type_size"]
        data = np.tile(src["raw"], copies).reshape((-1, row_bytes))
        elements = copies * t["n_elements"]
        times = []
        spent = time.perf_counter()
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = dequantize(data, fmt)
            times.append(time.perf_counter() - t0)
            del out
            if time.perf_counter() - spent > args.budget_s:
                break
        best = min(times)
        rec.update(status="ok", copies=copies, input_bytes=int(data.nbytes), elements=int(elements), runs=len(times),
                   seconds_best=best, seconds_all=times, elements_per_second=elements / best,
                   input_bytes_per_second=data.nbytes / best)
        results.append(rec)
        print(f"{fmt:8s} {elements / best / 1e6:8.1f} M el/s  ({data.nbytes / 2**20:.1f} MiB input, best of {len(times)}); {note}",
              file=sys.stderr, flush=True)
    doc = {"numpy_version": np.__version__, "python": platform.python_version(), "size_mib": args.size_mib,
           "style": "gguf-py quants.py (16-row groups, hsplit fields, broadcast shifts, take_along_axis)",
           "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
