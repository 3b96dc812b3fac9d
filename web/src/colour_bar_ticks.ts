// Tick marks between the ends of a heatmap's colour bar: values in data units placed where the display kernels'
// transform puts them (src/display/transform.h: linear x; log log10(max(|x|, 1e-12)); signed-log
// sign(x)·log1p(|x|)), so a label sits at the colour of its value whatever the transform. Candidates are 1-2-5 steps
// of the data range and, under the logarithmic transforms, the powers of ten (and 0 for signed-log) inside it;
// ticks nearer than `minGap` (a fraction of the bar) to the ends or to a tick kept before are dropped.

export interface ColourBarTick {
  value: number; // data units
  position: number; // 0 at the low end of the bar, 1 at the high end
  label: string;
}

const LOG_FLOOR = 1e-12;

/** The display kernels' transform of a data value. */
export function transformValue(x: number, transform: string): number {
  if (transform === "log") return Math.log10(Math.max(Math.abs(x), LOG_FLOOR));
  if (transform === "signed-log") return Math.sign(x) * Math.log1p(Math.abs(x));
  return x;
}

/** 1-2-5 steps over [lo, hi]: about `count` values, each a multiple of the step. */
function linearCandidates(lo: number, hi: number, count: number): number[] {
  const raw = (hi - lo) / count;
  if (!(raw > 0) || !Number.isFinite(raw)) return [];
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
  const out: number[] = [];
  for (let k = Math.ceil(lo / step); k * step <= hi; k++) out.push(Number((k * step).toPrecision(12)));
  return out;
}

/** ±10^k (and 0) inside [lo, hi]. */
function decadeCandidates(lo: number, hi: number, withZero: boolean): number[] {
  const out: number[] = withZero && lo < 0 && hi > 0 ? [0] : [];
  const top = Math.max(Math.abs(lo), Math.abs(hi));
  if (!(top > 0)) return out;
  for (let k = Math.floor(Math.log10(top)); k >= Math.floor(Math.log10(top)) - 12; k--) {
    const d = 10 ** k;
    for (const v of [d, -d]) if (v >= lo && v <= hi) out.push(v);
  }
  return out;
}

function label(v: number): string {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(0).replace("e+", "e");
  return String(Number(v.toPrecision(4)));
}

/** The ticks between the ends of a colour bar drawn from `lo` to `hi` (data units) under `transform`. */
export function colourBarTicks(lo: number, hi: number, transform: string, minGap = 0.08, count = 5): ColourBarTick[] {
  const tlo = transformValue(lo, transform);
  const thi = transformValue(hi, transform);
  if (!(thi > tlo) || !Number.isFinite(tlo) || !Number.isFinite(thi)) return [];
  if (transform === "log" && lo < 0) return [];  // log10|x| is not monotonic across 0: no honest places for ticks
  const logarithmic = transform === "log" || transform === "signed-log";
  const candidates = logarithmic ? decadeCandidates(lo, hi, transform === "signed-log") : linearCandidates(lo, hi, count);
  if (logarithmic && candidates.length < 2) candidates.push(...linearCandidates(lo, hi, count));
  const ticks = candidates
    .map((value) => ({ value, position: (transformValue(value, transform) - tlo) / (thi - tlo), label: label(value) }))
    .filter((t) => t.position >= minGap && t.position <= 1 - minGap)
    .sort((a, b) => a.position - b.position);
  const kept: ColourBarTick[] = [];
  for (const t of ticks) if (!kept.length || t.position - kept[kept.length - 1].position >= minGap) kept.push(t);
  return kept;
}
