// One heatmap image (the overview, or a level-L tile) as an ImageBitmap of its cell blocks, coloured on one
// of two paths:
//   - "server": GET /api/render/{ckpt}/{name}.png with the style's render parameters; the PNG's cell blocks
//     (scale_x × scale_y pixels each, src/render/cell_image.h) left of the colour bar are drawn;
//   - "webgpu": GET /api/cells/{ckpt}/{name} (the same level / x / y / slice / stat: the raw float64 cell
//     values the render would colour), coloured in WGSL on the page's adapter (webgpu/display.ts, byte-exact
//     with the server's display.colorize) under the same limits, transform and colour map; the bitmap has
//     one pixel per cell block (width = cells, or 2 × cells for the envelope: min | max per cell, as the
//     server draws it; NaN cells transparent), so it is drawn scaled exactly like the PNG's cells.
// The page's colouring is reported through api.ts reportPlacement as op display.colorize on backend
// "webgpu" (device: the adapter), under the render path, so the tensor page's placement box is truthful.
//
// Memory: cell values are kept in a small LRU (CellValuesCache, a byte budget) so that a change of colour
// map, transform or limits recolours without refetching; bitmaps are owned by the heatmap's tile cache.
import { getBinary, getBlob, reportPlacement, tensorPath, type Placement } from "./api";
import type { Resolved } from "./limits";
import { adapterReport } from "./webgpu/colorize";
import { displayColorize } from "./webgpu/display";

export const OVERVIEW = -1; // the level of the overview image (the whole slice, at most 1024 cells per side)
const BAR_WIDTH = 24; // right of a PNG's cells: an 8-pixel gap and a 16-pixel colour bar (src/render/cell_image.h)

/** The user's choice ("Colour on"): auto = the page's adapter when one exists, else the server. */
export type ColourChoice = "auto" | "page" | "server";
/** The path that coloured an image. */
export type ColourPath = "webgpu" | "server";

const CHOICE_KEY = "tm.heatmap.colourOn";

/** The saved choice: ?colour=auto|page|server in the page's query wins, then localStorage, else auto. */
export function savedColourChoice(): ColourChoice {
  const ok = (v: string | null): v is ColourChoice => v === "auto" || v === "page" || v === "server";
  const q = new URLSearchParams(window.location.search).get("colour");
  if (ok(q)) return q;
  try {
    const s = window.localStorage.getItem(CHOICE_KEY);
    if (ok(s)) return s;
  } catch {
    // storage refused (private mode): auto
  }
  return "auto";
}

export function saveColourChoice(c: ColourChoice): void {
  try {
    window.localStorage.setItem(CHOICE_KEY, c);
  } catch {
    // not remembered
  }
}

export interface TileImage {
  bitmap: ImageBitmap;
  path: ColourPath;
  level: number;
  cellArea: number; // elements per cell: coarse images are drawn first, finer ones over them
  r0: number; // first element row / column covered
  c0: number;
  rowsCovered: number; // elements the cell area spans (the last cell may run past the edge)
  colsCovered: number;
  srcW: number; // the bitmap's cell-block area, in bitmap pixels
  srcH: number;
}

/** What a heatmap image request needs: the tensor, the image, and the heatmap's geometry for the server PNG. */
export interface TileRequest {
  ckpt: string;
  name: string;
  level: number; // OVERVIEW for the overview
  x: number;
  y: number;
  r0: number; // element offsets of the image
  c0: number;
  spanR: number; // elements per image side (clipped to the view by the server)
  spanC: number;
  viewRows: number;
  viewCols: number;
  cellSize: [number, number]; // elements per cell (rows, columns)
}

/** The server's PNG of an image; its cell blocks are srcW × srcH pixels at its top-left. */
export async function loadServerTile(req: TileRequest, resolved: Resolved): Promise<TileImage> {
  const overview = req.level === OVERVIEW;
  const blob = await getBlob(
    tensorPath("render", req.ckpt, req.name, ".png"),
    overview ? resolved.params : { ...resolved.params, level: req.level, x: req.x, y: req.y },
  );
  const bitmap = await createImageBitmap(blob);
  const [cr, cc] = req.cellSize;
  const cellRows = Math.ceil((Math.min(req.viewRows, req.r0 + req.spanR) - req.r0) / cr);
  const cellCols = Math.ceil((Math.min(req.viewCols, req.c0 + req.spanC) - req.c0) / cc);
  const blocks = cellCols * (resolved.params.stat === "envelope" ? 2 : 1);
  const srcW = bitmap.width - BAR_WIDTH;
  const scaleX = srcW / blocks;
  const scaleY = Math.max(scaleX, Math.ceil(32 / cellRows));
  const srcH = Math.min(bitmap.height, cellRows * scaleY);
  if (!Number.isInteger(scaleX)) console.warn(`heatmap image ${req.level}/${req.x}/${req.y}: ${bitmap.width} px wide for ${blocks} cell blocks`);
  return {
    bitmap, path: "server", level: req.level, cellArea: cr * cc, r0: req.r0, c0: req.c0,
    rowsCovered: cellRows * cr, colsCovered: cellCols * cc, srcW, srcH,
  };
}

/** Raw cell values of one image (GET /api/cells) with the geometry its headers give. */
interface CellValues {
  values: Float64Array; // rows × cols (envelope: every min, then every max)
  rows: number;
  cols: number;
  cellSize: [number, number];
  r0: number;
  c0: number;
}

/** An LRU of cell values under a byte budget (default 64 MiB: 128 level tiles, 64 with the envelope). */
export class CellValuesCache {
  private readonly map = new Map<string, CellValues>();
  private bytes = 0;
  constructor(private readonly budget = 64 << 20) {}

  get(k: string): CellValues | undefined {
    const v = this.map.get(k);
    if (v) {
      this.map.delete(k); // most recent last
      this.map.set(k, v);
    }
    return v;
  }

  set(k: string, v: CellValues): void {
    const old = this.map.get(k);
    if (old) this.bytes -= old.values.byteLength;
    this.map.delete(k);
    this.map.set(k, v);
    this.bytes += v.values.byteLength;
    for (const [key, e] of this.map) {
      if (this.bytes <= this.budget || this.map.size <= 1) break;
      this.map.delete(key);
      this.bytes -= e.values.byteLength;
    }
  }

  get size(): number {
    return this.map.size;
  }
}

function pair(h: Headers, name: string): [number, number] {
  const v = (h.get(name) ?? "").split(",").map(Number);
  if (v.length !== 2 || !v.every(Number.isFinite)) throw new Error(`GET /api/cells: header ${name} is missing or malformed`);
  return [v[0], v[1]];
}

async function fetchCells(req: TileRequest, stat: string, slice: number, cache: CellValuesCache): Promise<CellValues> {
  const overview = req.level === OVERVIEW;
  const k = `${slice}|${stat}|${req.level}/${req.x}/${req.y}`;
  const have = cache.get(k);
  if (have) return have;
  const params = overview ? { stat, slice } : { stat, slice, level: req.level, x: req.x, y: req.y };
  const { buffer, headers } = await getBinary(tensorPath("cells", req.ckpt, req.name), params);
  const [rows, cols] = pair(headers, "X-Tensormorph-Cells");
  const want = rows * cols * (stat === "envelope" ? 2 : 1);
  if (buffer.byteLength !== 8 * want) throw new Error(`GET /api/cells: ${buffer.byteLength} bytes for ${rows} × ${cols} cells (${stat})`);
  const v: CellValues = {
    values: new Float64Array(buffer), rows, cols, cellSize: pair(headers, "X-Tensormorph-Cell-Size"),
    r0: pair(headers, "X-Tensormorph-Tile-Rows")[0], c0: pair(headers, "X-Tensormorph-Tile-Cols")[0],
  };
  cache.set(k, v);
  return v;
}

/** The cell blocks' RGBA as the server lays them out: one pixel per block; envelope min | max per cell. */
export function cellBlocks(rgba: Uint8Array, rows: number, cols: number, envelope: boolean): ImageData {
  const w = envelope ? 2 * cols : cols;
  const px = new Uint8ClampedArray(4 * w * rows);
  if (!envelope) px.set(rgba.subarray(0, 4 * rows * cols));
  else {
    const n = rows * cols;
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) {
        const i = r * cols + c;
        px.set(rgba.subarray(4 * i, 4 * i + 4), 4 * (r * w + 2 * c));
        px.set(rgba.subarray(4 * (n + i), 4 * (n + i) + 4), 4 * (r * w + 2 * c + 1));
      }
  }
  return new ImageData(px, w, Math.max(1, rows));
}

/** The image's cells coloured in WGSL on the page's adapter; reports the placement under the render path. */
export async function loadPageTile(req: TileRequest, resolved: Resolved, cache: CellValuesCache): Promise<TileImage> {
  const p = resolved.params;
  const stat = String(p.stat);
  const cells = await fetchCells(req, stat, Number(p.slice), cache);
  const lim = resolved.limits;
  const t0 = performance.now();
  const out = await displayColorize(
    cells.values,
    { transform: String(p.transform), lo: lim ? lim[0] : null, hi: lim ? lim[1] : null, colormap: resolved.colormap },
    "webgpu",
  );
  const seconds = (performance.now() - t0) / 1000;
  const image = cellBlocks(out.rgba, cells.rows, cells.cols, stat === "envelope");
  const bitmap = await createImageBitmap(image, { premultiplyAlpha: "none", colorSpaceConversion: "none" });
  const a = adapterReport();
  const placement: Placement = {
    op: "display.colorize",
    backend: "webgpu",
    device: a?.description || a?.name || "page adapter",
    device_kind: a?.software ? "software_adapter" : "gpu",
    software_adapter: Boolean(a?.software),
    reason: "page_adapter",
    precision: "exact",
    approx_step: null,
    consent: null,
    estimated_seconds: seconds, // measured on the page (dispatch and readback)
    bytes_transferred: 12 * cells.values.length, // float64 up, RGBA back
    throughput_calibrated: false,
    rejected: [],
  };
  reportPlacement(tensorPath("render", req.ckpt, req.name, ".png"), [placement]);
  const [cr, cc] = cells.cellSize;
  return {
    bitmap, path: "webgpu", level: req.level, cellArea: cr * cc, r0: cells.r0, c0: cells.c0,
    rowsCovered: cells.rows * cr, colsCovered: cells.cols * cc, srcW: image.width, srcH: cells.rows,
  };
}

/** A bitmap's pixels (RGBA bytes, row-major) read back through a canvas; for tests and the console. */
export function bitmapPixels(bitmap: ImageBitmap, w: number, h: number): Uint8Array {
  const c = new OffscreenCanvas(Math.max(1, w), Math.max(1, h));
  const ctx = c.getContext("2d");
  if (!ctx) throw new Error("no 2-D context");
  ctx.drawImage(bitmap, 0, 0, w, h, 0, 0, w, h);
  return new Uint8Array(ctx.getImageData(0, 0, Math.max(1, w), Math.max(1, h)).data.buffer);
}
