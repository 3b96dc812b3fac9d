// The host side of TM_OP_DISPLAY_COLORIZE (include/tensormorph/op_contracts.h) in the page: a port of
// src/display/transform.{h,cpp} (Normalizer, auto_limits, validate_limits) and src/display/thresholds.cpp
// (color_thresholds: 255 data-space thresholds found by bisection over float64 ordinals), so that the
// WebGPU kernel (colorize.wgsl.ts) needs float64 comparisons only. Keep it in step with those files; the
// e2e test (tests/e2e/webgpu.test.mjs) checks the whole path against the display goldens.
//
// All arithmetic is float64 (JS numbers). Math.log10 / Math.log1p stand for the C library's log10 / log1p;
// the goldens cover the log and signed-log transforms, so a disagreement that changes a colour shows there.

export type Transform = "linear" | "log" | "signed-log";
export const KEY_VALUE = 0;
export const KEY_MAGNITUDE = 1;
export const DEFAULT_LOG_FLOOR = 1e-12;

const MAX = Number.MAX_VALUE;

/** t(x) of transform.h: linear x; log log10(max(|x|, floor)); signed-log sign(x) * log1p(|x|). */
export function applyTransform(x: number, t: Transform, logFloor: number): number {
  if (t === "log") return Math.log10(Math.max(Math.abs(x), logFloor));
  if (t === "signed-log") {
    const m = Math.log1p(Math.abs(x));
    return x < 0 || Object.is(x, -0) ? -m : m; // copysign
  }
  return x;
}

export function parseTransform(name: string): Transform {
  if (name === "linear" || name === "log" || name === "signed-log") return name;
  throw new Error(`unknown display transform '${name}' (known: linear, log, signed-log)`);
}

/** validate_limits: throws unless lo, hi and the floor are valid. */
export function validateLimits(lo: number, hi: number, t: Transform, logFloor: number): void {
  if (!Number.isFinite(logFloor) || !(logFloor > 0)) throw new Error(`display log floor must be finite and > 0, got ${logFloor}`);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) throw new Error(`display limits must be finite, got lo ${lo}, hi ${hi}`);
  if (lo > hi) throw new Error(`display limits reversed: lo ${lo} > hi ${hi}`);
  if (applyTransform(lo, t, logFloor) > applyTransform(hi, t, logFloor)) throw new Error(`display limits reversed under ${t}`);
}

/** auto_limits: the finite min and max (of |x| under log); centred for a diverging map (not under log). */
export function autoLimits(values: ArrayLike<number>, t: Transform, diverging: boolean): [number, number] {
  const byMagnitude = t === "log";
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const x = byMagnitude ? Math.abs(values[i]) : values[i];
    if (!Number.isFinite(x)) continue;
    // std::min / std::max: keep the first of equal values (matters for -0 / +0 only)
    if (x < lo) lo = x;
    if (hi < x) hi = x;
  }
  if (lo > hi) return [0, 0];
  if (diverging && !byMagnitude && lo < 0 && hi > 0) {
    const m = Math.max(-lo, hi);
    return [-m, m];
  }
  return [lo, hi];
}

/** The Normalizer of transform.h: n in [0, 1] of x, NaN for NaN. */
export class Normalizer {
  private readonly scale: number = 1;
  private readonly tlo: number;
  private readonly range: number;
  private readonly collapsed: boolean;
  constructor(lo: number, hi: number, readonly transform: Transform, readonly logFloor: number) {
    validateLimits(lo, hi, transform, logFloor);
    const tl = applyTransform(lo, transform, logFloor);
    const th = applyTransform(hi, transform, logFloor);
    this.collapsed = th === tl;
    if (!Number.isFinite(th - tl)) this.scale = 0.5;
    this.tlo = tl * this.scale;
    this.range = th * this.scale - this.tlo;
  }
  n(x: number): number {
    if (x !== x) return x;
    if (x === Infinity) return 1;
    if (x === -Infinity) return this.transform === "log" ? 1 : 0;
    if (this.collapsed) return 0.5;
    const n = (applyTransform(x, this.transform, this.logFloor) * this.scale - this.tlo) / this.range;
    return n < 0 ? 0 : n > 1 ? 1 : n;
  }
  /** reference_color_index: 0..255, or 256 for NaN. */
  index(x: number): number {
    const n = this.n(x);
    if (n !== n) return 256;
    const q = Math.min(n * 256, 255);
    return Math.trunc(q);
  }
}

const f64 = new Float64Array(1);
const u64 = new BigUint64Array(f64.buffer);
const SIGN = 1n << 63n;
const MAG = SIGN - 1n;

/** The position of a double among the ordered float64 bit patterns (-0 and +0 both 0). */
export function ordinal(d: number): bigint {
  f64[0] = d;
  const b = u64[0];
  const mag = b & MAG;
  return b & SIGN ? -mag : mag;
}

export function fromOrdinal(o: bigint): number {
  u64[0] = o >= 0n ? o : SIGN | -o;
  return f64[0];
}

export interface ColorThresholds {
  keyMode: number; // KEY_VALUE or KEY_MAGNITUDE
  t: Float64Array; // 255, non-decreasing, may hold ±Inf, never NaN
}

/** color_thresholds of thresholds.cpp: thresholds[k - 1] = the smallest key whose reference index is >= k. */
export function colorThresholds(lo: number, hi: number, t: Transform, logFloor: number): ColorThresholds {
  const nz = new Normalizer(lo, hi, t, logFloor);
  const keyMode = t === "log" ? KEY_MAGNITUDE : KEY_VALUE;
  const out = new Float64Array(255);
  const lowest = keyMode === KEY_MAGNITUDE ? 0 : -MAX;
  const kLowest = nz.index(lowest);
  const kHighest = nz.index(MAX);
  const top = ordinal(MAX);
  let below = ordinal(lowest);
  for (let k = 1; k <= 255; k++) {
    if (kLowest >= k) {
      out[k - 1] = -Infinity;
      continue;
    }
    if (kHighest < k) {
      out[k - 1] = Infinity;
      continue;
    }
    let a = below;
    let b = top;
    while (b - a > 1n) {
      const mid = a + (b - a) / 2n;
      if (nz.index(fromOrdinal(mid)) >= k) b = mid;
      else a = mid;
    }
    out[k - 1] = fromOrdinal(b);
    below = a;
  }
  return { keyMode, t: out };
}

/**
 * The colour index by thresholds on the CPU (thresholds.cpp color_index_by_thresholds): 256 for NaN, key
 * +Inf -> 255, key -Inf -> 0, else the number of thresholds <= key. The page's fallback when no WebGPU
 * adapter exists, and the reference the kernel is held to.
 */
export function colorIndexByThresholds(th: ColorThresholds, x: number): number {
  if (x !== x) return 256;
  const key = th.keyMode === KEY_MAGNITUDE ? Math.abs(x) : x;
  if (key === Infinity) return 255;
  if (key === -Infinity) return 0;
  let pos = 0;
  for (let step = 128; step > 0; step >>= 1) pos += th.t[pos + step - 1] <= key ? step : 0;
  return pos;
}
