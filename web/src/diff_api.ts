// The difference endpoints of the server (docs/api.md "Differences"): GET /api/diff/{a}/{b} (the document
// `tensormorph diff A B --json` prints) and GET /api/diff/{a}/{b}/tiles/{tensor} (difference-pyramid tiles), typed.
// Every pair's placement report (its difference tiles' op, diff.tile_stats, and the dequantization ops of both
// sides) is published like a render's
// (api.ts reportPlacement), so the Compute panel's "last run" shows where the difference's ops ran; the
// diffs opened in this page session are listed for its "Differences" section (diffRuns()).
import { getBinary, getJson, reportPlacement, type Num, type Placement } from "./api";

/** The statistics of a tile (or a whole pair) of the difference Δ = b − a (docs/diff.md). */
export interface DiffStats {
  count: number;
  changed: number;
  changed_fraction: Num;
  nonfinite: number;
  sum_delta: Num;
  sum_sq_delta: Num;
  mean_delta: Num;
  max_abs_delta: Num;
  min_delta: Num;
  max_delta: Num;
  rel_change: Num;
  cosine: Num;
  histogram?: { edges: Num[]; counts: number[] };
}

export interface DiffPair {
  name: string;
  name_b: string;
  type_a: string;
  type_b: string;
  shape: number[];
  layer: number | null;
  translated: boolean;
  rows: "stored" | "unpermuted";
  qk_permutation?: { verdict?: string; unchecked?: string };
  view: string;
  tile_rows: number;
  tile_cols: number;
  levels: number;
  difference: DiffStats;
  reused: boolean;
  seconds: number;
  placement: Placement[];
}

export interface DiffDocument {
  a: string;
  b: string;
  checkpoint_a: string;
  checkpoint_b: string;
  format_a: string;
  format_b: string;
  name_mapping: string;
  pairs: DiffPair[];
  ranking: {
    tensors: { name: string; layer: number | null; rel_change: Num; changed_fraction: Num }[];
    layers: { layer: number; rel_change: Num; changed_fraction: Num; tensors: number }[];
  };
  layer_strip: { layer: number; rel_change: Num }[];
  only_in_a: string[];
  only_in_b: string[];
  skipped: { name: string; reason: string }[];
}

/** One tile of a window: its place and statistics (no histogram). */
export interface DiffTile extends DiffStats {
  tx: number;
  ty: number;
  row_begin: number;
  row_end: number;
  col_begin: number;
  col_end: number;
}

export interface DiffTiles {
  name: string;
  name_b: string;
  level: number;
  slice: number;
  view: { slices: number; rows: number; cols: number; spec: string };
  tile_rows: number;
  tile_cols: number;
  levels: { rows: number; cols: number }[];
  grid: { rows: number; cols: number };
  window: [number, number, number, number];
  difference: DiffStats;
  placement: Placement[];
  reused: boolean;
  tiles: DiffTile[];
}

/** The most tiles one request answers (the server's kMaxDiffTilesPerRequest). */
export const MAX_TILES_PER_REQUEST = 4096;

export function diffPath(a: string, b: string, kind?: "tiles" | "values", tensor?: string): string {
  const base = `/api/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
  return kind && tensor !== undefined ? `${base}/${kind}/${encodeURIComponent(tensor)}` : base;
}

/** A diff opened in this page session, for the Compute panel. */
export interface DiffRun {
  a: string;
  b: string;
  pairs: number;
  placed: { name: string; placement: Placement[] }[]; // every pair's placed ops (difference tiles, dequantization)
  tileBackends: string[]; // where diff.tile_stats ran, each backend once
  dequantized: number; // pairs with a side dequantized by a placed op
  at: Date;
}
const runs = new Map<string, DiffRun>();

export function diffRuns(): DiffRun[] {
  return [...runs.values()];
}

const documents = new Map<string, Promise<DiffDocument>>();

/** The document of a and b (fetched once per page session; the server computes it on its first request). */
export function diffDocument(a: string, b: string): Promise<DiffDocument> {
  const key = `${a}|${b}`;
  let p = documents.get(key);
  if (!p) {
    p = getJson<DiffDocument>(diffPath(a, b), { top: 1000000 }).then((d) => {
      const placed = d.pairs.filter((x) => x.placement.length).map((x) => ({ name: x.name, placement: x.placement }));
      for (const x of placed) reportPlacement(diffPath(a, b, "tiles", x.name), x.placement);
      const tileBackends = [...new Set(placed.flatMap((x) => x.placement.filter((p) => p.op === "diff.tile_stats").map((p) => p.backend)))];
      const dequantized = placed.filter((x) => x.placement.some((p) => p.op !== "diff.tile_stats")).length;
      runs.set(key, { a, b, pairs: d.pairs.length, placed, tileBackends, dequantized, at: new Date() });
      return d;
    });
    documents.set(key, p);
    p.catch(() => documents.delete(key));
  }
  return p;
}

/** The tiles of a window [x0, x1) × [y0, y1) of `level` (at most MAX_TILES_PER_REQUEST). */
export function diffTiles(a: string, b: string, tensor: string, level: number, slice: number, window?: [number, number, number, number]): Promise<DiffTiles> {
  return getJson<DiffTiles>(diffPath(a, b, "tiles", tensor), { level, slice, ...(window ? { window: window.join(",") } : {}) });
}

/** One tile's Δ = b − a (GET …/values/…): row-major float64 over rows [r0, r1) × columns [c0, c1). */
export interface DiffValues {
  r0: number;
  r1: number;
  c0: number;
  c1: number;
  delta: Float64Array;
}

export async function diffValues(a: string, b: string, tensor: string, level: number, slice: number, x: number, y: number): Promise<DiffValues> {
  const { buffer, headers } = await getBinary(diffPath(a, b, "values", tensor), { level, slice, x, y });
  const pair = (h: string): [number, number] => {
    const v = (headers.get(h) ?? "").split(",").map(Number);
    if (v.length !== 2 || !v.every(Number.isSafeInteger)) throw new Error(`values of ${tensor}: bad ${h} header '${headers.get(h)}'`);
    return [v[0], v[1]];
  };
  const [r0, r1] = pair("X-Tensormorph-Tile-Rows");
  const [c0, c1] = pair("X-Tensormorph-Tile-Cols");
  const delta = new Float64Array(buffer);
  if (delta.length !== (r1 - r0) * (c1 - c0)) throw new Error(`values of ${tensor}: ${delta.length} values for ${r1 - r0} x ${c1 - c0}`);
  return { r0, r1, c0, c1, delta };
}
