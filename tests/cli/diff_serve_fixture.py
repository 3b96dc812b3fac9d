"""The changed-rows fixture of the server's and the viewer's diff tests (tests/cli/test_serve_diff.py,
tests/e2e/diff.test.mjs): two small float32 safetensors checkpoints written here with numpy, and numpy's figures
for every tile of their difference pyramids (diff_reference.figures; no tensormorph code is used).

A and B share a llama-style layout of two layers:
- model.layers.1.mlp.down_proj.weight [600, 300]: B = A with rows 300-303 + 0.5 and row 520 - 0.25 (the changed rows);
- model.layers.0.mlp.down_proj.weight [600, 300]: B = A with column 10 + 0.125;
- model.norm.weight [300]: unchanged;
- model.layers.0.self_attn.q_proj.weight: [8, 8] in A, [8, 4] in B (a shape mismatch, refused);
- only.in.a: in A only.
Level-0 tiles are 256 x 256 elements (docs/diff.md), so a [600, 300] view has 3 x 2 level-0 tiles.

Run as a script (`python3 diff_serve_fixture.py DIR`) it writes DIR/a.safetensors and DIR/b.safetensors and prints
{"a", "b", "changed_rows", "tiles": {CHANGED: {"0": [level-0 figures with hist, tx, ty, row/col ranges]}}, "samples": [{row, col, delta}]
(b - a of the changed-rows tensor at rows 296-307 and 516-524, columns 40, 150, 260)} as JSON."""
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diff_reference import bins_of, figures  # noqa: E402

CHANGED = "model.layers.1.mlp.down_proj.weight"
COLUMN = "model.layers.0.mlp.down_proj.weight"
NORM = "model.norm.weight"
MISMATCH = "model.layers.0.self_attn.q_proj.weight"
ONLY_A = "only.in.a"
CHANGED_ROWS = {300: 0.5, 301: 0.5, 302: 0.5, 303: 0.5, 520: -0.25}
TILE = 256


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, arr in tensors:
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make(folder):
    """Writes the fixture; returns (a path, b path, {name: (A values, B values)} of the compared pairs)."""
    rng = np.random.default_rng(50)
    l0 = rng.standard_normal((600, 300)).astype(np.float32)
    l1 = rng.standard_normal((600, 300)).astype(np.float32)
    norm = np.linspace(0.5, 1.5, 300, dtype=np.float32)
    q = rng.standard_normal((8, 8)).astype(np.float32)
    l0b = l0.copy()
    l0b[:, 10] += np.float32(0.125)
    l1b = l1.copy()
    for row, d in CHANGED_ROWS.items():
        l1b[row] += np.float32(d)
    a, b = os.path.join(folder, "a.safetensors"), os.path.join(folder, "b.safetensors")
    write_safetensors(a, [(COLUMN, l0), (CHANGED, l1), (NORM, norm), (MISMATCH, q), (ONLY_A, norm)])
    write_safetensors(b, [(COLUMN, l0b), (CHANGED, l1b), (NORM, norm), (MISMATCH, q[:, :4].copy())])
    return a, b, {COLUMN: (l0, l0b), CHANGED: (l1, l1b), NORM: (norm.reshape(1, -1), norm.reshape(1, -1))}


def level_tiles(va, vb, level, tile_rows=TILE, tile_cols=TILE, shared=None):
    """numpy's figures of every tile of `level` of a 2-D pair (row-major), with where each lies (and its histogram of Δ,
    "hist", over the pair's shared bins when `shared` is diff_reference.bins_of of the pair's Δ)."""
    span_r, span_c = tile_rows << level, tile_cols << level
    rows, cols = va.shape
    out = []
    for ty in range(math.ceil(rows / span_r)):
        for tx in range(math.ceil(cols / span_c)):
            r0, c0 = ty * span_r, tx * span_c
            r1, c1 = min(rows, r0 + span_r), min(cols, c0 + span_c)
            f = figures(va[r0:r1, c0:c1], vb[r0:r1, c0:c1], shared)
            f.update(tx=tx, ty=ty, row_begin=r0, row_end=r1, col_begin=c0, col_end=c1)
            out.append(f)
    return out


def json_safe(v):
    return v if not isinstance(v, float) or math.isfinite(v) else ("nan" if v != v else ("inf" if v > 0 else "-inf"))


if __name__ == "__main__":
    a, b, pairs = make(sys.argv[1])
    def shared(va, vb):
        d = (vb.astype(np.float64) - va.astype(np.float64)).ravel()
        return bins_of(d[np.isfinite(d)])
    va, vb = pairs[CHANGED]
    tiles = {CHANGED: {"0": [{k: json_safe(v) for k, v in t.items()}
                             for t in level_tiles(va.astype(np.float64), vb.astype(np.float64), 0, shared=shared(va, vb))]}}
    va, vb = (v.astype(np.float64) for v in pairs[CHANGED])
    samples = [{"row": r, "col": c, "delta": float(vb[r, c] - va[r, c])} for r in [*range(296, 308), *range(516, 525)] for c in (40, 150, 260)]
    print(json.dumps({"a": a, "b": b, "changed_rows": {str(k): v for k, v in CHANGED_ROWS.items()}, "tiles": tiles, "samples": samples}))
