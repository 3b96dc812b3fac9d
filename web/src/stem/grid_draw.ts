// Drawing scan-grid and detector-grid arrays on the acquisition page: values → transform (linear, or log1p of the
// non-negative part) → limits (the full range, the 0.5–99.5 % range, or two numbers the user typed, in the
// transformed units) → a 256-entry matplotlib colour map (the tables the display kernels use), one canvas block
// per value; a scale bar; and a colour-wheel rendering of a vector field (hue = direction, lightness = length).
import { colormapTable } from "../webgpu/colormap_tables";

export type Transform = "linear" | "log";
export type LimitsChoice = "full" | "robust" | [number, number];

export interface GridDisplay {
  transform: Transform;
  colormap: string;
  limits: LimitsChoice;
}

export const DEFAULT_DISPLAY: GridDisplay = { transform: "linear", colormap: "gray", limits: "full" };

function transformed(values: ArrayLike<number>, t: Transform): Float64Array {
  const out = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = t === "log" ? Math.log1p(Math.max(0, values[i])) : values[i];
  return out;
}

/** The [lo, hi] a display choice gives for (transformed) values: their range, their 0.5–99.5 % quantiles, or as given. */
export function displayLimits(t: Float64Array, limits: LimitsChoice): [number, number] {
  if (Array.isArray(limits)) return limits;
  const finite = Array.from(t).filter(Number.isFinite);
  if (!finite.length) return [0, 0];
  if (limits === "full") {
    // A loop, not Math.min(...finite): spreading a large scan (512² values) overflows the call stack.
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of finite) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    return [lo, hi];
  }
  finite.sort((a, b) => a - b);
  const at = (f: number) => finite[Math.min(finite.length - 1, Math.max(0, Math.round(f * (finite.length - 1))))];
  return [at(0.005), at(0.995)];
}

/** Draws rows × cols values onto the canvas; returns the limits used (transformed units). */
export function drawGrid(canvas: HTMLCanvasElement, values: ArrayLike<number>, rows: number, cols: number, d: GridDisplay): [number, number] {
  const t = transformed(values, d.transform);
  const [lo, hi] = displayLimits(t, d.limits);
  const table = colormapTable(d.colormap);
  const rgba = new Uint8ClampedArray(new ArrayBuffer(rows * cols * 4));
  for (let i = 0; i < t.length; i++) {
    const k = hi > lo && Number.isFinite(t[i]) ? Math.min(255, Math.max(0, Math.round(((t[i] - lo) / (hi - lo)) * 255))) : 0;
    rgba.set(table.subarray(4 * k, 4 * k + 4), 4 * i);
  }
  blit(canvas, rgba, rows, cols);
  return [lo, hi];
}

/** A vector field (u along rows, v along columns) as a colour wheel: hue = direction, brightness = length / max length. */
export function drawColourWheel(canvas: HTMLCanvasElement, u: ArrayLike<number>, v: ArrayLike<number>, rows: number, cols: number): number {
  let max = 0;
  for (let i = 0; i < u.length; i++) max = Math.max(max, Math.hypot(u[i], v[i]));
  const rgba = new Uint8ClampedArray(new ArrayBuffer(rows * cols * 4));
  for (let i = 0; i < u.length; i++) rgba.set([...directionColour(u[i], v[i], max), 255], 4 * i);
  blit(canvas, rgba, rows, cols);
  return max;
}

/** The colour wheel's colour of a vector (u along +row, v along +column): hue = direction (0 = +column, a quarter
 *  turn = +row), brightness = length / max. */
export function directionColour(u: number, v: number, max: number): [number, number, number] {
  const h = ((Math.atan2(u, v) / (2 * Math.PI)) + 1) % 1;
  return hsv(h, 1, max > 0 ? Math.min(1, Math.hypot(u, v) / max) : 0);
}

/** The colour wheel's legend: a disk whose every pixel has the colour of the vector from the centre to it (radius =
 *  the longest vector), with "+col" on the right and "+row" below, as the field's axes run. */
export function drawHueLegend(canvas: HTMLCanvasElement): void {
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  const n = canvas.width;
  const margin = 14, radius = (n - 2 * margin) / 2, centre = n / 2;
  const img = ctx.createImageData(n, n);
  for (let y = 0; y < n; y++)
    for (let x = 0; x < n; x++) {
      const du = y + 0.5 - centre, dv = x + 0.5 - centre;
      if (Math.hypot(du, dv) > radius) continue;  // transparent outside the disk
      img.data.set([...directionColour(du, dv, radius), 255], 4 * (y * n + x));
    }
  ctx.putImageData(img, 0, 0);
  ctx.font = "10px sans-serif";
  ctx.fillStyle = "black";
  ctx.textAlign = "right";
  ctx.fillText("+col", n - 1, centre - radius * 0.15);
  ctx.textAlign = "center";
  ctx.fillText("+row", centre + radius * 0.45, n - 2);
}

function hsv(h: number, s: number, v: number): [number, number, number] {
  const f = (n: number) => {
    const k = (n + h * 6) % 6;
    return Math.round(255 * (v - v * s * Math.max(0, Math.min(k, 4 - k, 1))));
  };
  return [f(5), f(3), f(1)];
}

function blit(canvas: HTMLCanvasElement, rgba: Uint8ClampedArray<ArrayBuffer>, rows: number, cols: number): void {
  const off = new OffscreenCanvas(cols, rows);
  const ctx = off.getContext("2d");
  const out = canvas.getContext("2d");
  if (!ctx || !out) return;
  ctx.putImageData(new ImageData(rgba, cols, rows), 0, 0);
  out.imageSmoothingEnabled = false;
  out.clearRect(0, 0, canvas.width, canvas.height);
  out.drawImage(off, 0, 0, canvas.width, canvas.height);
}

/** A "nice" length (1, 2 or 5 × 10^k) near a quarter of `span`. */
export function niceLength(span: number): number {
  const target = span / 4;
  const p = 10 ** Math.floor(Math.log10(target));
  for (const m of [5, 2, 1]) if (m * p <= target) return m * p;
  return p;
}

/** A scale bar at the bottom left: `unitsPerCanvasPx` units per canvas pixel; returns the bar's label. */
export function drawScaleBar(canvas: HTMLCanvasElement, unitsPerCanvasPx: number, unit: string): string {
  const ctx = canvas.getContext("2d");
  if (!ctx || !(unitsPerCanvasPx > 0)) return "";
  const length = niceLength(canvas.width * unitsPerCanvasPx);
  const px = length / unitsPerCanvasPx;
  const label = `${Number(length.toPrecision(3))} ${unit}`;
  const x = 10;
  const y = canvas.height - 12;
  ctx.fillStyle = "black";
  ctx.fillRect(x - 1, y - 1, px + 2, 6);
  ctx.fillStyle = "white";
  ctx.fillRect(x, y, px, 4);
  ctx.font = "12px sans-serif";
  ctx.lineWidth = 3;
  ctx.strokeStyle = "black";
  ctx.strokeText(label, x, y - 5);
  ctx.fillText(label, x, y - 5);
  return label;
}
