// The server's JSON API (docs/api.md): URLs (with the page's ?token= passed on), typed fetches, and
// errors that carry the server's message.

/** A number as the API writes it: non-finite values are the strings "nan", "inf", "-inf". */
export type Num = number | "nan" | "inf" | "-inf";

export function num(v: Num | null | undefined): number {
  if (typeof v === "number") return v;
  if (v === "inf") return Infinity;
  if (v === "-inf") return -Infinity;
  return NaN;
}

export interface Stats {
  count: number;
  finite_count: number;
  nan_count: number;
  inf_count: number;
  zero_count: number;
  min: Num;
  max: Num;
  abs_max: Num;
  sum: Num;
  mean: Num;
  std: Num;
}

export interface TensorRow {
  checkpoint: string;
  name: string;
  stored_type: string;
  dtype: string;
  shape: number[];
  parameters: number;
  bytes: number;
  dequantized_from?: string;
  stats: Stats | null;
  unavailable?: string;
}

export interface TensorList {
  total: number;
  tensors: TensorRow[];
}

export interface PyramidLevel {
  level: number;
  grid: [number, number]; // [columns, rows] of tiles
  tile_elements: [number, number];
}

export interface Pyramid {
  view: { spec: string; slices: number; rows: number; cols: number };
  tile_size: [number, number]; // [rows, cols] of elements per level-0 tile
  levels: PyramidLevel[];
  histogram_edges: Num[];
  histogram_bins: number;
}

export interface DetailStats extends Stats {
  histogram?: { edges: Num[]; counts: number[]; below: number; above: number };
  quantiles?: { method: string; exact: boolean; values: { p: number; value: Num; sample_size: number }[] };
}

export interface TensorDetail extends TensorRow {
  file?: string;
  offset?: number;
  stats: DetailStats | null;
  quantization: Record<string, unknown> | null;
  pyramid: Pyramid | null;
}

export interface TileJson {
  level: number;
  tile: [number, number];
  slice: number;
  rows: [number, number];
  cols: [number, number];
  stats: Stats;
}

export interface RenderJson {
  limits: [Num, Num];
  colormap: string;
  level: number | null;
  cells: [number, number]; // rows, columns of cells drawn
  cell_size: [number, number]; // elements per cell (rows, columns); edge cells may hold fewer
  /** 256 bins of the drawn values over the limits (linear: equal widths; out-of-range values in the end bins). */
  histogram: { counts: number[]; nan: number; pos_inf: number; neg_inf: number };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly url: string,
  ) {
    super(message);
  }
}

const token = new URLSearchParams(window.location.search).get("token");

export type Params = Record<string, string | number | undefined | null>;

/** A same-origin URL for an API path; parameters are form-encoded, the page's token added. */
export function apiUrl(path: string, params: Params = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  if (token) q.set("token", token);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** The API path of a tensor: /api/{kind}/{ckpt}/{name}{suffix}, the name one encoded segment. */
export function tensorPath(kind: "tensors" | "tiles" | "render", ckpt: string, name: string, suffix = ""): string {
  return `/api/${kind}/${encodeURIComponent(ckpt)}/${encodeURIComponent(name)}${suffix}`;
}

async function request(url: string, signal?: AbortSignal): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, { cache: "no-store", signal });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(0, `cannot reach the server (${(e as Error).message})`, url);
  }
  if (!res.ok) {
    let message = `${res.status} ${res.statusText}`;
    try {
      const body = (await res.json()) as { error?: unknown };
      if (typeof body.error === "string") message = `${res.status}: ${body.error}`;
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(res.status, message, url);
  }
  return res;
}

export async function getJson<T>(path: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  const url = apiUrl(path, params);
  const res = await request(url, signal);
  try {
    return (await res.json()) as T;
  } catch (e) {
    throw new ApiError(res.status, `bad JSON from ${path}: ${(e as Error).message}`, url);
  }
}

export async function getBlob(path: string, params: Params = {}, signal?: AbortSignal): Promise<Blob> {
  return (await request(apiUrl(path, params), signal)).blob();
}

export const api = {
  health: () => getJson<{ name: string; version: string; status: string }>("/api/health"),
  tensors: () => getJson<TensorList>("/api/tensors", { limit: 100000 }),
  tensor: (ckpt: string, name: string) => getJson<TensorDetail>(tensorPath("tensors", ckpt, name)),
  tile: (ckpt: string, name: string, level: number, x: number, y: number, slice: number) =>
    getJson<TileJson>(tensorPath("tiles", ckpt, name), { level, x, y, slice, format: "json" }),
};
