// The colour scale of a heatmap style: every tile of one style is drawn with the same limits and colour
// map, taken from the overview render's JSON (GET /api/render/…png?format=json): its drawn range ("full"), or
// "robust" limits (linear transform) so that a few outliers do not wash the map out, or "custom" limits the user
// typed, used exactly as given (the server validates them, e.g. > 0 under log). Robust limits come from the
// tensor's own quantiles when the index holds them (every element counted: p1 to p99 of the values; for abs_max
// cells 0 to the larger magnitude of p1 and p99), else from the 0.5-99.5 % range of the overview's cell values (a
// summary that can miss the elements' tails: the legend says which). Symmetric about 0 for a diverging map.
// "auto" is RdBu_r for a signed range, else viridis. `source` says which limits are in force, for the legend.
import { getJson, num, tensorPath, type RenderJson } from "./api";

export interface Style {
  stat: string;
  transform: string;
  colormap: string; // as selected ("auto" resolved per limits)
  limits: string; // "robust" (linear only; see above); "full": the drawn range; "custom"
  custom?: [number, number]; // with limits "custom": [lo, hi] in data units, lo < hi
  slice: number;
}

export interface Resolved {
  key: string; // style + limits: tiles of one key share one colour scale
  params: Record<string, string | number>; // the render parameters of every tile
  limits: [number, number] | null;
  colormap: string;
  overview: { cells: [number, number]; cellSize: [number, number] }; // the render without a level
  source: string; // which limits are in force and where they came from, e.g. "robust: the tensor's p1-p99 (exact)"
}

/** The tensor's quantiles as its detail gives them (GET /api/tensors/{ckpt}/{name}: stats.quantiles). */
export interface TensorQuantiles {
  exact: boolean;
  values: { p: number; value: number | string }[];
}

/** Robust limits for cells of `stat` from the tensor's p1 and p99, or null when the quantiles do not give them
 *  (absent, not finite, or a statistic whose cells are not element values: std and the like). */
function quantileLimits(stat: string, q: TensorQuantiles | undefined): [number, number] | null {
  const at = (p: number): number => {
    const v = q?.values.find((x) => Math.abs(x.p - p) < 1e-12)?.value;
    return v === undefined ? NaN : Number(v);
  };
  const [p1, p99] = [at(0.01), at(0.99)];
  if (!Number.isFinite(p1) || !Number.isFinite(p99) || !(p1 < p99)) return null;
  if (stat === "abs_max") return [0, Math.max(Math.abs(p1), Math.abs(p99))];
  if (stat === "mean" || stat === "min" || stat === "max" || stat === "envelope") return [p1, p99];
  return null;
}

const DIVERGING = new Set(["RdBu_r", "seismic", "coolwarm"]);

/** The values at fractions a and b of a 256-bin histogram over [lo, hi] (linear bins). */
function histogramRange(counts: number[], lo: number, hi: number, a: number, b: number): [number, number] {
  const total = counts.reduce((x, y) => x + y, 0);
  const at = (f: number): number => {
    let seen = 0;
    for (let i = 0; i < counts.length; i++) {
      if (seen + counts[i] >= f * total) {
        const within = counts[i] ? (f * total - seen) / counts[i] : 0;
        return lo + ((hi - lo) * (i + within)) / counts.length;
      }
      seen += counts[i];
    }
    return hi;
  };
  return total ? [at(a), at(b)] : [lo, hi];
}

export async function resolveScale(ckpt: string, name: string, s: Style, quantiles?: TensorQuantiles): Promise<Resolved> {
  const path = tensorPath("render", ckpt, name, ".png");
  const custom = s.limits === "custom" && s.custom ? s.custom : null;
  const query = { format: "json", stat: s.stat, transform: s.transform, slice: s.slice, ...(custom ? { limits: `${custom[0]},${custom[1]}` } : {}) };
  const info = await getJson<RenderJson>(path, query);
  let lo = num(info.limits[0]);
  let hi = num(info.limits[1]);
  let source = custom ? "custom limits" : "full: the drawn range";
  const fromQuantiles = s.limits === "robust" && s.transform === "linear" ? quantileLimits(s.stat, quantiles) : null;
  if (fromQuantiles && !custom) {
    [lo, hi] = fromQuantiles;
    source = `robust: the tensor's ${s.stat === "abs_max" ? "|p1|, |p99|" : "p1 to p99"} (${quantiles?.exact ? "exact, every element" : "estimated"})`;
  } else if (s.limits === "robust" && s.transform === "linear" && lo < hi) {
    // No quantiles: outliers would still wash the map out; take the 0.5-99.5 % range of the overview's cell
    // values, refined once through a second histogram over the first estimate.
    let [a, b] = histogramRange(info.histogram.counts, lo, hi, 0.005, 0.995);
    if (a < b) {
      const fine = await getJson<RenderJson>(path, { ...query, limits: `${a},${b}` });
      [a, b] = histogramRange(fine.histogram.counts, a, b, 0.005, 0.995);
    }
    if (a < b) [lo, hi] = [a, b];
    source = "robust: 0.5-99.5 % of the overview's cells (the tensor has no stored quantiles)";
  } else if (s.limits === "robust") {
    source = `full: the drawn range (robust limits apply to the linear transform only)`;
  }
  const signed = s.stat !== "abs_max" && s.stat !== "std" && s.transform !== "log";
  const colormap = s.colormap !== "auto" ? s.colormap : signed && lo < 0 && hi > 0 ? "RdBu_r" : "viridis";
  if (!custom && DIVERGING.has(colormap) && lo < 0 && hi > 0 && s.transform !== "log") {
    const m = Math.max(-lo, hi);
    lo = -m;
    hi = m;
  }
  const limits: [number, number] | null = Number.isFinite(lo) && Number.isFinite(hi) && lo < hi ? [lo, hi] : null;
  const params: Record<string, string | number> = { stat: s.stat, transform: s.transform, colormap, slice: s.slice };
  if (limits) params.limits = `${limits[0]},${limits[1]}`;
  const key = [s.stat, s.transform, colormap, s.slice, params.limits ?? "auto"].join("|");
  const overview = { cells: info.cells, cellSize: info.cell_size };
  return { key, params, limits, colormap, overview, source };
}
