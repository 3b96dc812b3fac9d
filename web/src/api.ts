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

/** A checkpoint as GET /api/checkpoints lists it (extra fields are ignored here). */
export interface CheckpointInfo {
  id: string;
  name: string;
  path: string;
  format: string;
  /** Its files, by name only, in shard order. */
  files: { name: string; size: number }[];
  tensor_count: number;
  parameters: number;
  bytes: number;
  /** Its index: "indexing" until its job (index.job) is done, then "ready"; "failed" with error. */
  index?: { persisted: boolean; state?: "indexing" | "ready" | "failed"; job?: string; error?: string; needs_consent?: boolean };
}

/** A long-running job of the server (GET /api/jobs; docs/api.md "Jobs"). */
export interface Job {
  id: string;
  kind: string;
  checkpoint: string;
  state: "running" | "done" | "failed" | "cancelled";
  version: number;
  bytes_done: number;
  bytes_total: number;
  tensors_done: number;
  tensors_total: number;
  seconds: number;
  bytes_per_s: number;
  error: string | null;
  report: Record<string, number> | null;
}

/** One part of a packed (safetensors) quantized tensor; `file` is the file's name. */
export interface PackedPart {
  role: string;
  name: string;
  dtype: string;
  shape: number[];
  file: string;
  offset: number;
  bytes: number;
}

/**
 * The `quantization` of a tensor detail (null when dense): stored_type, bits_per_weight, and ggml_type
 * (GGUF) or packed {scheme, kernel_scheme, bits, rows, cols, parts, and the scheme's geometry fields}.
 */
export interface Quantization {
  stored_type: string;
  bits_per_weight: number;
  ggml_type?: number;
  packed?: { scheme: string; parts: PackedPart[]; [field: string]: unknown };
  [field: string]: unknown;
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
  /** Where each statistic was computed when the index was built. */
  placement?: Placement[];
  offset?: number;
  stats: DetailStats | null;
  quantization: Quantization | null;
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

/** One rejected candidate of a placement: a backend (and device) the planner did not use, and why. */
export interface RejectedCandidate {
  backend: string;
  device: string;
  reason: string; // e.g. "costlier", "not_preferred", "missing_kernel", "below_open_threshold", "unavailable:no_driver", "never"
  detail: string;
}

/** Where one op ran (docs/backends.md "placement report"): one entry per op of a request. */
export interface Placement {
  op: string;
  backend: string;
  device: string;
  device_kind: string;
  software_adapter: boolean;
  /** resident_data, cheapest, sole_supporter, user_pinned, user_preferred, fallback_missing_kernel, … */
  reason: string;
  precision: string;
  approx_step: string | null;
  consent: string | null;
  /** A number, or "inf"/"nan" when the planner's estimate is not finite (the one JSON number rule). */
  estimated_seconds: Num;
  bytes_transferred: number;
  throughput_calibrated: boolean;
  rejected: RejectedCandidate[];
  /** A split op (docs/backends.md "Split placement"): each backend's share, planned and measured. */
  split?: SplitShare[];
  /** Why the planner split: "estimated 0.41 s split over 2 backends vs 0.66 s on cpu alone". */
  split_why?: string;
}

/** One backend's part of a split op. */
export interface SplitShare {
  backend: string;
  device: string;
  device_kind: string;
  software_adapter: boolean;
  /** The fraction of the op's bytes the planner gave it. */
  fraction: Num;
  estimated_seconds: Num;
  throughput_calibrated: boolean;
  bytes_transferred: number;
  /** What the run measured: the op's units (canonical blocks), input bytes and seconds of its calls. */
  units: number;
  bytes: number;
  seconds: Num;
  failed: string | null;
  handed_to: string | null;
}

/** A device of a backend, as GET /api/compute lists it (extra fields are ignored here). */
export interface ComputeDevice {
  index: number;
  name: string;
  id: string;
  kind: string; // cpu, gpu, integrated_gpu, software_adapter
  software_adapter: boolean;
  memory_bytes: number;
}

/** A kernel of a backend, as `tensormorph backends --json` lists it (extra fields are ignored here). */
export interface ComputeKernel {
  op: string;
  /** What it takes: input dtypes, or for format ops the stored formats / variants (e.g. Q4_0, quadratic). */
  dtypes: string[];
  precision: string;
  max_elements: number; // 0: no limit
  required_features: string[];
  approx_step: string | null;
  approx_description?: string;
}

export interface ComputeBackend {
  name: string;
  description: string;
  available: boolean;
  reason: string | null; // why it is unavailable (null when available)
  detail: string;
  devices: ComputeDevice[];
  kernels: ComputeKernel[];
  /** One line per op (the precision of its first kernel). */
  ops: { op: string; precision: string }[];
  /** Capability -> level in tests/parity/backend_matrix.json ("compiled": tested on the host only). */
  parity_levels?: Record<string, string>;
}

/** A kernel self-test verdict: a plugin kernel compared with the CPU on a known-answer case. */
export interface SelfTestVerdict {
  backend: string;
  device: string;
  driver_version: string;
  op: string;
  input: string;
  status: "passed" | "failed" | "not_tested";
  detail: string;
  seconds: number;
}

/** The planner's decision for one op under the effective constraints, for a representative request. */
export interface PlacementPreview {
  op: string;
  request: { bytes: number; on_host: boolean; dtype?: string; format?: string };
  /** null when no backend may serve it; `error` then holds the planner's message. */
  placement: Placement | null;
  error?: string;
  /** Only an approximation could serve it: the steps consent would allow, in ladder order. */
  needs_consent?: boolean;
  ladder?: LadderStep[];
}

/** One rung of the fallback ladder (what --allow-approx STEP, or the session's consent, would allow). */
export interface LadderStep {
  step: string;
  backend: string;
  precision: string;
  description: string;
}

export interface ComputeConstraints {
  prefer: string[];
  never: string[];
}

/** GET /api/compute, also the answer of PUT /api/compute. */
export interface ComputeDoc {
  mode: string; // "auto" (no constraint applied) or "constrained"
  backends: ComputeBackend[];
  not_installed: { name: string; kind: string; description: string }[];
  plugin_load_failures: { path: string; reason: string; detail: string }[];
  constraints: ComputeConstraints; // what the settings file holds
  effective: ComputeConstraints; // what the planner applies now
  placement_preview: PlacementPreview[];
  /** Kernel self-tests run so far in this server (the previews run those of the kernels they pick). */
  self_tests?: SelfTestVerdict[];
  /** Approximations consented to for this server session (never saved), and every step kernels here declare. */
  consent?: { allow_approx: string[]; scope: string; known_steps: string[] };
  settings_file: string;
  /** 4D-STEM acquisitions the server keeps resident (decoded once, compact, exact; docs/stem.md). */
  resident?: ResidentStoreDoc;
}

export interface ResidentCopyDoc {
  acquisition: string;
  scan_shape: [number, number];
  where: string; // the memory that holds it: "host"
  bytes: number;
  positions: number;
  nonzeros: number;
  bytes_per_frame: number;
  dense_bytes_per_frame: number;
  built_at: string;
  build_seconds: number;
  uses: number;
  order: string; // "radial" (centred annuli are two running totals) or "pixel"
  /** Images of the copy kept in device memory (uploaded once for stem.compact_sums on that device). */
  device_copies?: DeviceCopyDoc[];
}

export interface DeviceCopyDoc {
  location: string; // "backend/device id"
  device: string;
  bytes: number;
  positions: number;
  built_at: string;
  build_seconds: number;
}

export interface ResidentStoreDoc {
  budget: number;
  resident_bytes: number;
  copies: ResidentCopyDoc[];
  evictions: { acquisition: string; bytes: number; evicted_at: string; reason: string }[];
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
export function tensorPath(kind: "tensors" | "tiles" | "cells" | "render" | "outliers" | "profile", ckpt: string, name: string, suffix = ""): string {
  return `/api/${kind}/${encodeURIComponent(ckpt)}/${encodeURIComponent(name)}${suffix}`;
}

/** A placement report seen on a response: the API path it came from and its per-op entries. */
export interface PlacementEvent {
  path: string;
  placement: Placement[];
}

const placementListeners = new Set<(ev: PlacementEvent) => void>();

/**
 * Calls `listener` with every placement report the app receives from now on: the X-Tensormorph-Placement
 * header of a render PNG, or the `placement` field of a render's JSON. Returns the unsubscribe function.
 */
export function onPlacement(listener: (ev: PlacementEvent) => void): () => void {
  placementListeners.add(listener);
  return () => placementListeners.delete(listener);
}

/**
 * Publishes a placement report of work the page itself did (e.g. the heatmap colouring cells on the page's
 * WebGPU adapter) as if `path` had reported it, so every listener (the tensor page's "placement of the last
 * render", the Compute panel's "last run") shows where that work actually ran.
 */
export function reportPlacement(path: string, placement: Placement[]): void {
  publishPlacement(path, placement);
}

function publishPlacement(url: string, placement: unknown): void {
  if (!Array.isArray(placement) || !placement.length) return;
  const ev: PlacementEvent = { path: url.split("?")[0], placement: placement as Placement[] };
  for (const l of [...placementListeners]) l(ev);
}

async function request(url: string, signal?: AbortSignal, init: RequestInit = {}): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, { cache: "no-store", signal, ...init });
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
  const header = res.headers.get("X-Tensormorph-Placement");
  if (header) {
    try {
      publishPlacement(url, JSON.parse(header));
    } catch {
      console.warn(`unreadable X-Tensormorph-Placement header from ${url}`);
    }
  }
  return res;
}

export async function getJson<T>(path: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  const url = apiUrl(path, params);
  const res = await request(url, signal);
  let body: unknown;
  try {
    body = await res.json();
  } catch (e) {
    throw new ApiError(res.status, `bad JSON from ${path}: ${(e as Error).message}`, url);
  }
  if (path.startsWith("/api/render/") && body && typeof body === "object")
    publishPlacement(url, (body as { placement?: unknown }).placement);
  return body as T;
}

/** PUT a JSON body; the answer is JSON. A 4xx/5xx throws an ApiError carrying the server's message. */
export async function putJson<T>(path: string, body: unknown): Promise<T> {
  return sendJson<T>("PUT", path, body);
}

/** PUT or POST a JSON body; the answer is JSON. A 4xx/5xx throws an ApiError carrying the server's message. */
export async function sendJson<T>(method: "PUT" | "POST", path: string, body: unknown): Promise<T> {
  const url = apiUrl(path);
  const res = await request(url, undefined, {
    method,
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  try {
    return (await res.json()) as T;
  } catch (e) {
    throw new ApiError(res.status, `bad JSON from ${path}: ${(e as Error).message}`, url);
  }
}

export async function getBlob(path: string, params: Params = {}, signal?: AbortSignal): Promise<Blob> {
  return (await request(apiUrl(path, params), signal)).blob();
}

/** A binary body and the response's headers (GET /api/cells: float64 values and their geometry). */
export async function getBinary(path: string, params: Params = {}, signal?: AbortSignal): Promise<{ buffer: ArrayBuffer; headers: Headers }> {
  const res = await request(apiUrl(path, params), signal);
  return { buffer: await res.arrayBuffer(), headers: res.headers };
}

export const api = {
  health: () => getJson<{ name: string; version: string; status: string }>("/api/health"),
  tensors: () => getJson<TensorList>("/api/tensors", { limit: 100000 }),
  checkpoints: () => getJson<{ checkpoints: CheckpointInfo[] }>("/api/checkpoints"),
  tensor: (ckpt: string, name: string) => getJson<TensorDetail>(tensorPath("tensors", ckpt, name)),
  tile: (ckpt: string, name: string, level: number, x: number, y: number, slice: number) =>
    getJson<TileJson>(tensorPath("tiles", ckpt, name), { level, x, y, slice, format: "json" }),
  compute: () => getJson<ComputeDoc>("/api/compute"),
  jobs: () => getJson<{ jobs: Job[] }>("/api/jobs"),
  /** Saves constraints: a field left out keeps its saved value, an empty list removes that setting. */
  putCompute: (body: Partial<ComputeConstraints> & { allow_approx?: string[] }) => putJson<ComputeDoc>("/api/compute", body),
  /** Tells the server which WebGPU adapter this page got (or why none): PUT /api/compute/webgpu. */
  putWebgpuAdapter: (report: {
    available: boolean; name: string; vendor: string; architecture: string; device: string; description: string;
    fallback: boolean; software: boolean; reason: string;
  }) => putJson<{ last_reported_adapter: unknown }>("/api/compute/webgpu", report),
  /** Indexes a checkpoint again (POST /api/jobs); resolves to the new job. */
  startIndexing: (checkpoint: string) => sendJson<Job>("POST", "/api/jobs", { kind: "index", checkpoint }),
};
