// The one colour scale shared by every thumbnail of a comparison strip (strips.ts), computed from the
// whole-tensor statistics of the layers' GET /api/tensors rows only (no render is asked for its range),
// so every layer is drawn with the same `limits=LO,HI` and colour map and the thumbnails are comparable.
//
// Per drawn statistic (the cell statistic of the overview render), with M = max over layers of abs_max,
// lo = min over layers of min, hi = max over layers of max; non-finite statistics and rows without
// statistics are ignored:
//   mean     "full":   both signs (lo < 0 < hi) → [−M, M] (symmetric, for a diverging map), else [lo, hi];
//                      a cell mean lies within its tensor's [min, max], so no cell is clipped.
//            "robust": mean ± 3 std of every layer (max |mean| + 3 std, symmetric when signed), clipped to
//                      "full": a single outlier (e.g. one 41.5 in a layer of ±0.1 values) would otherwise
//                      wash every thumbnail out; cells beyond are drawn at the ends of the scale.
//   abs_max  "full": [0, M];  "robust": [0, min(M, max(|mean| + 3 std))].
//   std      "full": [0, M] (a cell's population std is at most half its range, so at most M);
//            "robust": [0, min(M, 3 · max std)].
// A degenerate range (lo = hi) is widened by |lo| (or 1) on each side ([0, 1] for abs_max and std at 0). The colour map is RdBu_r for a
// range of both signs, else viridis.
import { num, type Stats } from "./api";

export type StripStat = "mean" | "std" | "abs_max";
export type StripLimitsMode = "robust" | "full";

export interface StripScale {
  limits: [number, number];
  colormap: string;
}

const K = 3; // standard deviations kept by "robust"

/** The shared scale for these rows' statistics, or null when no row has a finite statistic. */
export function stripScale(stats: (Stats | null)[], stat: StripStat, mode: StripLimitsMode): StripScale | null {
  let lo = Infinity, hi = -Infinity, absMax = 0, meanLo = Infinity, meanHi = -Infinity, spread = 0, stdMax = 0;
  let seen = false;
  for (const s of stats) {
    if (!s) continue;
    const [mn, mx, am, mean, std] = [num(s.min), num(s.max), num(s.abs_max), num(s.mean), num(s.std)];
    if (Number.isFinite(mn) && Number.isFinite(mx)) {
      lo = Math.min(lo, mn);
      hi = Math.max(hi, mx);
      seen = true;
    }
    if (Number.isFinite(am)) absMax = Math.max(absMax, am);
    if (Number.isFinite(mean) && Number.isFinite(std)) {
      meanLo = Math.min(meanLo, mean - K * std);
      meanHi = Math.max(meanHi, mean + K * std);
      spread = Math.max(spread, Math.abs(mean) + K * std);
      stdMax = Math.max(stdMax, std);
    }
  }
  if (!seen) return null;
  let limits: [number, number];
  if (stat === "mean") {
    const signed = lo < 0 && hi > 0;
    if (mode === "full" || !Number.isFinite(meanLo)) limits = signed ? [-absMax, absMax] : [lo, hi];
    else if (signed) {
      const m = Math.min(absMax, spread);
      limits = [-m, m];
    } else limits = [Math.max(lo, meanLo), Math.min(hi, meanHi)];
  } else if (stat === "abs_max") {
    limits = [0, mode === "full" || !spread ? absMax : Math.min(absMax, spread)];
  } else {
    limits = [0, mode === "full" || !stdMax ? absMax : Math.min(absMax, K * stdMax)];
  }
  if (!(limits[0] < limits[1])) {
    const d = Math.abs(limits[0]) || 1;
    limits = stat !== "mean" && limits[0] === 0 ? [0, 1] : [limits[0] - d, limits[1] + d];
  }
  const colormap = limits[0] < 0 && limits[1] > 0 ? "RdBu_r" : "viridis";
  return { limits, colormap };
}
