// Overlays drawn on the heatmap's canvas after its tiles, in CSS pixels (the canvas' transform already
// scales by devicePixelRatio):
//   - tile boundaries of the level shown: the interior lines between its tiles (every spanR rows and spanC
//     columns of elements), only those on screen;
//   - block boundaries of a block-quantized tensor (blockCols elements per block along a row, from the
//     detail's `quantization`: 32 for Q4_0 / Q5_x / Q8_0 / IQ4_NL / MXFP4, 256 for k-quants and most IQ
//     types, a packed scheme's group_size / block_size), drawn only while blocks are ≥ 4 px apart;
//   - a legend in the bottom-left corner naming the tensor's file (shard) and what the lines are.
// drawColourBar draws the heatmap's colour bar from a colour table (as the server's bar: the map's last
// entry at the top, its first at the bottom).
// drawOverlay returns how many lines of each kind it drew (the heatmap exposes them as data attributes).
import type { Quantization } from "./api";

export interface OverlayView {
  ox: number; // element (column, row) at the canvas' top-left corner
  oy: number;
  sx: number; // CSS pixels per element (columns, rows)
  sy: number;
  w: number; // canvas size in CSS pixels
  h: number;
  rows: number; // the view's size in elements
  cols: number;
}

export interface OverlayRequest {
  tiles: boolean;
  blocks: boolean;
  spanR: number; // elements per tile side at the level shown
  spanC: number;
  level: number;
  blockCols: number; // elements per quantization block along a row; 0: none known
  legend: string; // e.g. the file name; "" for none
}

export interface OverlayCounts {
  tileLines: number;
  blockLines: number;
  legend: string; // the text drawn ("" when nothing was)
}

export const MIN_BLOCK_PX = 4;
const TILE_COLOUR = "rgba(255, 0, 255, 0.9)";
const BLOCK_COLOUR = "rgba(255, 255, 0, 0.65)";

/** Elements per quantization block along a row (the innermost dimension); 0 when unknown or dense. */
export function quantBlockCols(q: Quantization | null | undefined): number {
  if (!q) return 0;
  const packed = q.packed as Record<string, unknown> | undefined;
  for (const f of ["group_size", "block_size"]) {
    const v = packed?.[f];
    if (typeof v === "number" && v > 0) return v;
  }
  const t = q.stored_type.toUpperCase();
  if (/^(Q4_0|Q4_1|Q5_0|Q5_1|Q8_0|Q8_1|IQ4_NL|MXFP4)$/.test(t)) return 32;
  if (/^Q\d_K$|^Q8_K$|^IQ\d|^TQ\d/.test(t)) return 256;
  return 0;
}

/** Vertical lines every `step` columns (and horizontal every `stepR` rows, when > 0) that are on screen. */
function gridLines(ctx: CanvasRenderingContext2D, v: OverlayView, stepC: number, stepR: number): number {
  const top = Math.max(0, -v.oy * v.sy);
  const bottom = Math.min(v.h, (v.rows - v.oy) * v.sy);
  const left = Math.max(0, -v.ox * v.sx);
  const right = Math.min(v.w, (v.cols - v.ox) * v.sx);
  if (bottom <= top || right <= left) return 0;
  let n = 0;
  ctx.beginPath();
  if (stepC > 0)
    for (let c = Math.max(1, Math.ceil(v.ox / stepC)) * stepC; c < v.cols; c += stepC) {
      const x = (c - v.ox) * v.sx;
      if (x > v.w) break;
      if (x < 0) continue;
      const px = Math.round(x) + 0.5;
      ctx.moveTo(px, top);
      ctx.lineTo(px, bottom);
      n++;
    }
  if (stepR > 0)
    for (let r = Math.max(1, Math.ceil(v.oy / stepR)) * stepR; r < v.rows; r += stepR) {
      const y = (r - v.oy) * v.sy;
      if (y > v.h) break;
      if (y < 0) continue;
      const py = Math.round(y) + 0.5;
      ctx.moveTo(left, py);
      ctx.lineTo(right, py);
      n++;
    }
  ctx.stroke();
  return n;
}

export function drawOverlay(ctx: CanvasRenderingContext2D, v: OverlayView, o: OverlayRequest): OverlayCounts {
  const out: OverlayCounts = { tileLines: 0, blockLines: 0, legend: "" };
  ctx.save();
  ctx.lineWidth = 1;
  const blocksShown = o.blocks && o.blockCols > 0 && o.blockCols * v.sx >= MIN_BLOCK_PX;
  if (blocksShown) {
    ctx.strokeStyle = BLOCK_COLOUR;
    out.blockLines = gridLines(ctx, v, o.blockCols, 0);
  }
  if (o.tiles) {
    ctx.strokeStyle = TILE_COLOUR;
    out.tileLines = gridLines(ctx, v, o.spanC, o.spanR);
  }
  const parts: string[] = [];
  if (o.legend) parts.push(o.legend);
  if (o.tiles) parts.push(`tiles: level ${o.level}, ${o.spanR} × ${o.spanC} elements`);
  if (o.blocks && o.blockCols > 0) parts.push(`quant blocks: ${o.blockCols} columns${blocksShown ? "" : " (zoom in to see)"}`);
  if ((o.tiles || o.blocks) && parts.length) {
    out.legend = parts.join(" · ");
    ctx.font = "12px sans-serif";
    const tw = ctx.measureText(out.legend).width;
    ctx.fillStyle = "rgba(255, 255, 255, 0.85)";
    ctx.fillRect(4, v.h - 22, tw + 10, 18);
    ctx.fillStyle = "#222";
    ctx.textBaseline = "middle";
    ctx.fillText(out.legend, 9, v.h - 13);
  }
  ctx.restore();
  return out;
}

/** A vertical colour bar filling `canvas`: table (256 × RGBA) entry 255 at the top, entry 0 at the bottom. */
export function drawColourBar(canvas: HTMLCanvasElement, table: Uint8Array): void {
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  const w = canvas.width;
  const h = canvas.height;
  const img = new ImageData(w, h);
  for (let y = 0; y < h; y++) {
    const k = 255 - Math.min(255, Math.floor((y * 256) / h));
    for (let x = 0; x < w; x++) img.data.set(table.subarray(4 * k, 4 * k + 4), 4 * (y * w + x));
  }
  ctx.putImageData(img, 0, 0);
}
