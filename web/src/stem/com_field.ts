// The centre-of-mass field and DPC on the page, from the exact CoM sums the adapter computed
// (webgpu/masked_sums.ts comSums), with the CPU's formulas and operation order (src/stem/products/dpc.cpp, docs/stem.md
// "Products"): μ = R / S and C / S per position in float64 (S = 0 gives 0), each minus its mean over the scan;
// DPC rotates (u, v) by θ after an optional transpose; ⟨curl²⟩ and ⟨div²⟩ by central differences over interior
// positions; the rotation found analytically as the minimum of ⟨curl²⟩(θ) over θ ∈ [0, π) and both transposes.

export interface Field {
  rows: number;
  cols: number;
  u: Float64Array; // along detector rows, detector pixels
  v: Float64Array; // along detector columns
}

function subtractMean(x: Float64Array): void {
  let s = 0;
  for (const a of x) s += a;
  const mean = x.length ? s / x.length : 0;
  for (let i = 0; i < x.length; i++) x[i] -= mean;
}

export function centerOfMass(sums: { s: Float64Array; r: Float64Array; c: Float64Array }, rows: number, cols: number): Field {
  const n = rows * cols;
  const u = new Float64Array(n);
  const v = new Float64Array(n);
  for (let p = 0; p < n; p++) {
    u[p] = sums.s[p] ? sums.r[p] / sums.s[p] : 0;
    v[p] = sums.s[p] ? sums.c[p] / sums.s[p] : 0;
  }
  subtractMean(u);
  subtractMean(v);
  return { rows, cols, u, v };
}

export function rotateField(f: Field, angle: number, transpose: boolean): Field {
  const c = Math.cos(angle);
  const s = Math.sin(angle);
  const u = new Float64Array(f.u.length);
  const v = new Float64Array(f.v.length);
  for (let i = 0; i < f.u.length; i++) {
    const a = transpose ? f.v[i] : f.u[i];
    const b = transpose ? f.u[i] : f.v[i];
    u[i] = a * c - b * s;
    v[i] = a * s + b * c;
  }
  return { rows: f.rows, cols: f.cols, u, v };
}

/** ⟨K²⟩, ⟨D²⟩, ⟨KD⟩ (K = curl, D = divergence) over interior positions; null below 3 × 3 positions. */
export function curlMoments(f: Field): { kk: number; dd: number; kd: number } | null {
  if (f.rows < 3 || f.cols < 3) return null;
  const C = f.cols;
  let kk = 0;
  let dd = 0;
  let kd = 0;
  for (let r = 1; r + 1 < f.rows; r++)
    for (let c = 1; c + 1 < f.cols; c++) {
      const dudr = (f.u[(r + 1) * C + c] - f.u[(r - 1) * C + c]) / 2;
      const dudc = (f.u[r * C + c + 1] - f.u[r * C + c - 1]) / 2;
      const dvdr = (f.v[(r + 1) * C + c] - f.v[(r - 1) * C + c]) / 2;
      const dvdc = (f.v[r * C + c + 1] - f.v[r * C + c - 1]) / 2;
      const k = dvdr - dudc;
      const d = dudr + dvdc;
      kk += k * k;
      dd += d * d;
      kd += k * d;
    }
  const n = (f.rows - 2) * (f.cols - 2);
  return { kk: kk / n, dd: dd / n, kd: kd / n };
}

/** The angle in [0, π) and the transpose that minimise ⟨curl²⟩ (ties: no transpose), as find_dpc_rotation does. */
export function findRotation(f: Field): { angle: number; transpose: boolean; curl2: number } | null {
  let best: { angle: number; transpose: boolean; curl2: number } | null = null;
  for (const transpose of [false, true]) {
    const m = curlMoments(transpose ? { ...f, u: f.v, v: f.u } : f);
    if (!m) return null;
    const a = (m.kk - m.dd) / 2;
    const b = m.kd;
    let angle = (Math.atan2(b, a) + Math.PI) / 2;
    if (angle >= Math.PI) angle -= Math.PI;
    const curl2 = Math.max(0, (m.kk + m.dd) / 2 - Math.hypot(a, b));
    if (!best || curl2 < best.curl2) best = { angle, transpose, curl2 };
  }
  if (best) best.curl2 = curlMoments(rotateField(f, best.angle, best.transpose))?.kk ?? best.curl2;  // of the rotated field
  return best;
}

/** The i-th component as a flat [2, R, C] array (u then v), the layout of the CLI's com/dpc .npy. */
export function stacked(f: Field): number[] {
  return [...f.u, ...f.v];
}
