// A picture with its numbers, as the page shows it and as "save figure" writes it: an image (a canvas, drawn as
// its pixels, never smoothed) with a title, axes along the bottom and the left (ticks in the figure's units: element
// indices, nm, mrad), and a colour bar with tick labels. The same geometry gives a PNG (one canvas) and an SVG
// (text and lines as vectors; the image and the colour bar embedded as PNG, so every value keeps its colour).
import { el } from "./dom";

export interface FigureTick {
  /** Where along the axis: 0 at the image's left (top) edge, 1 at its right (bottom) edge; for a colour bar 0 at
   *  the low end (the bar's bottom), 1 at the high end. */
  at: number;
  label: string;
}

export interface FigureAxis {
  label: string;
  ticks: FigureTick[];
}

export interface FigureColourBar {
  /** 256 RGBA entries, low to high (a colour map table). */
  table: Uint8Array;
  ticks: FigureTick[];
  /** What the colours measure, with units and transform ("counts, log1p"). */
  label: string;
}

export interface Figure {
  title: string;
  image: HTMLCanvasElement;
  x?: FigureAxis;
  y?: FigureAxis;
  colourBar?: FigureColourBar;
  /** A line under the figure (provenance: where it was computed, the limits in force). */
  note?: string;
}

const FONT = "12px sans-serif";
const SMALL = "11px sans-serif";
const TICK = 4;
/** How far an on-page axis canvas reaches past the image's ends (app.css pulls it back by as much). */
const PAD = 12;

/** Where each part of a figure goes (CSS pixels = SVG user units). */
function layout(f: Figure) {
  const w = f.image.width;
  const h = f.image.height;
  const left = f.y ? 64 : 12;
  const top = 28;
  const bottom = f.x ? 40 : 12;
  const bar = f.colourBar ? { x: left + w + 18, y: top, w: 14, h } : null;
  const right = bar ? bar.x + bar.w + 70 : left + w + 12;
  const noteH = f.note ? 18 : 0;
  return { w, h, left, top, bar, width: right, height: top + h + bottom + noteH, noteY: top + h + bottom + 12 };
}

/** A 1 × 256 canvas of a colour bar's table, high end at the top. */
function barImage(table: Uint8Array): HTMLCanvasElement {
  const c = document.createElement("canvas");
  c.width = 1;
  c.height = 256;
  const ctx = c.getContext("2d");
  if (ctx) {
    const img = ctx.createImageData(1, 256);
    for (let k = 0; k < 256; k++) img.data.set(table.subarray(4 * k, 4 * k + 4), 4 * (255 - k));
    ctx.putImageData(img, 0, 0);
  }
  return c;
}

type Ctx = CanvasRenderingContext2D;

function line(ctx: Ctx, x0: number, y0: number, x1: number, y1: number): void {
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  ctx.stroke();
}

/** An x axis under an image spanning [x, x + w) whose bottom edge is at y: ticks, labels, the axis label. */
function drawXAxis(ctx: Ctx, a: FigureAxis, x: number, y: number, w: number): void {
  ctx.strokeStyle = "#333";
  ctx.fillStyle = "#111";
  ctx.font = SMALL;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (const t of a.ticks) {
    const px = Math.round(x + t.at * w) + 0.5;
    line(ctx, px, y, px, y + TICK);
    ctx.fillText(t.label, px, y + TICK + 2);
  }
  ctx.font = FONT;
  ctx.fillText(a.label, x + w / 2, y + 20);
}

/** A y axis left of an image spanning [y, y + h) whose left edge is at x; the axis label rotated at labelX. */
function drawYAxis(ctx: Ctx, a: FigureAxis, x: number, y: number, h: number, labelX: number): void {
  ctx.strokeStyle = "#333";
  ctx.fillStyle = "#111";
  ctx.font = SMALL;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const t of a.ticks) {
    const py = Math.round(y + t.at * h) + 0.5;
    line(ctx, x - TICK, py, x, py);
    ctx.fillText(t.label, x - TICK - 2, py);
  }
  ctx.save();
  ctx.translate(labelX, y + h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.font = FONT;
  ctx.fillText(a.label, 0, 0);
  ctx.restore();
}

/** A colour bar at (x, y, w, h), high end at the top, with its ticks to the right and its label above. */
function drawBar(ctx: Ctx, bar: FigureColourBar, x: number, y: number, w: number, h: number): void {
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(barImage(bar.table), x, y, w, h);
  ctx.strokeStyle = "#333";
  ctx.strokeRect(x - 0.5, y - 0.5, w + 1, h + 1);
  ctx.fillStyle = "#111";
  ctx.font = SMALL;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  for (const t of bar.ticks) {
    const py = Math.round(y + (1 - t.at) * h) + 0.5;
    line(ctx, x + w, py, x + w + TICK, py);
    ctx.fillText(t.label, x + w + TICK + 2, py);
  }
  ctx.textBaseline = "alphabetic";
  ctx.fillText(bar.label, Math.max(0, x - 4), y - 6);
}

/** Sizes `canvas` to cssW × cssH CSS pixels at the device's pixel ratio and returns its context, cleared, in CSS units. */
function sized(canvas: HTMLCanvasElement, cssW: number, cssH: number): Ctx | null {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(cssW * dpr);
  canvas.height = Math.round(cssH * dpr);
  canvas.style.width = `${cssW}px`;
  canvas.style.height = `${cssH}px`;
  const ctx = canvas.getContext("2d");
  if (!ctx) return null;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, cssW, cssH);
  return ctx;
}

/** The on-page parts of a figure beside its image (which stays its own canvas, with its overlays and events): the
 *  axes under and left of it and the colour bar right of it, each a canvas drawn by the code that draws the saved
 *  figure; data-ticks on each lists its labels ("|"-separated) for tests and screen readers' titles. */
export class FigureFrame {
  readonly xAxis = el("canvas", { class: "figure-x-axis" });
  readonly yAxis = el("canvas", { class: "figure-y-axis" });
  readonly bar = el("canvas", { class: "figure-bar" });

  constructor(readonly id: string) {
    this.xAxis.id = `${id}-x-axis`;
    this.yAxis.id = `${id}-y-axis`;
    this.bar.id = `${id}-colour-bar`;
  }

  /** Draws the parts of `f` for an image shown at cssW × cssH CSS pixels. */
  draw(f: Figure, cssW: number, cssH: number): void {
    const parts: [HTMLCanvasElement, FigureAxis | FigureColourBar | undefined][] = [[this.xAxis, f.x], [this.yAxis, f.y], [this.bar, f.colourBar]];
    for (const [c, part] of parts) {
      c.hidden = !part;
      c.dataset.ticks = part ? part.ticks.map((t) => t.label).join("|") : "";
      c.title = part ? `${part.label}: ${part.ticks.map((t) => t.label).join(", ")}` : "";
    }
    // Each axis canvas reaches PAD pixels past the image's ends (CSS pulls it back) so the end labels are whole.
    let ctx = f.x ? sized(this.xAxis, cssW + 2 * PAD, 36) : null;
    if (ctx && f.x) drawXAxis(ctx, f.x, PAD, 0, cssW);
    ctx = f.y ? sized(this.yAxis, 52, cssH + 2 * PAD) : null;
    if (ctx && f.y) drawYAxis(ctx, f.y, 52, PAD, cssH, 9);
    ctx = f.colourBar ? sized(this.bar, 104, cssH + 16 + PAD) : null;
    if (ctx && f.colourBar) drawBar(ctx, f.colourBar, 8, 16, 14, cssH);
  }
}

/** The figure as one canvas, `scale` device pixels per CSS pixel (the PNG "save figure" writes). */
export function figureCanvas(f: Figure, scale = 2): HTMLCanvasElement {
  const L = layout(f);
  const c = document.createElement("canvas");
  c.width = Math.round(L.width * scale);
  c.height = Math.round(L.height * scale);
  const ctx = c.getContext("2d");
  if (!ctx) return c;
  ctx.scale(scale, scale);
  ctx.fillStyle = "white";
  ctx.fillRect(0, 0, L.width, L.height);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(f.image, L.left, L.top, L.w, L.h);
  ctx.strokeStyle = "#333";
  ctx.lineWidth = 1;
  ctx.strokeRect(L.left - 0.5, L.top - 0.5, L.w + 1, L.h + 1);
  ctx.fillStyle = "#111";
  ctx.font = "bold 13px sans-serif";
  ctx.textAlign = "left";
  ctx.textBaseline = "alphabetic";
  ctx.fillText(f.title, L.left, 18);
  if (f.x) drawXAxis(ctx, f.x, L.left, L.top + L.h, L.w);
  if (f.y) drawYAxis(ctx, f.y, L.left, L.top, L.h, 12);
  if (f.colourBar && L.bar) drawBar(ctx, f.colourBar, L.bar.x, L.bar.y, L.bar.w, L.bar.h);
  if (f.note) {
    ctx.font = SMALL;
    ctx.textAlign = "left";
    ctx.textBaseline = "alphabetic";
    ctx.fillStyle = "#555";
    ctx.fillText(f.note, L.left, L.noteY);
  }
  return c;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** The figure as an SVG document (the same geometry as figureCanvas, at scale 1). */
export function figureSvg(f: Figure): string {
  const L = layout(f);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${L.width}" height="${L.height}" viewBox="0 0 ${L.width} ${L.height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<title>${esc(f.title)}</title>`,
    `<text x="${L.left}" y="18" font-size="13" font-weight="bold" fill="#111">${esc(f.title)}</text>`,
    `<image x="${L.left}" y="${L.top}" width="${L.w}" height="${L.h}" preserveAspectRatio="none" style="image-rendering:pixelated" href="${f.image.toDataURL("image/png")}"/>`,
    `<rect x="${L.left - 0.5}" y="${L.top - 0.5}" width="${L.w + 1}" height="${L.h + 1}" fill="none" stroke="#333"/>`,
  ];
  const tick = (x0: number, y0: number, x1: number, y1: number) => `<line x1="${x0}" y1="${y0}" x2="${x1}" y2="${y1}" stroke="#333"/>`;
  if (f.x) {
    for (const t of f.x.ticks) {
      const x = +(L.left + t.at * L.w).toFixed(2);
      out.push(tick(x, L.top + L.h, x, L.top + L.h + TICK),
        `<text x="${x}" y="${L.top + L.h + TICK + 12}" font-size="11" text-anchor="middle" class="tick-x">${esc(t.label)}</text>`);
    }
    out.push(`<text x="${L.left + L.w / 2}" y="${L.top + L.h + 34}" font-size="12" text-anchor="middle" class="axis-x">${esc(f.x.label)}</text>`);
  }
  if (f.y) {
    for (const t of f.y.ticks) {
      const y = +(L.top + t.at * L.h).toFixed(2);
      out.push(tick(L.left - TICK, y, L.left, y),
        `<text x="${L.left - TICK - 2}" y="${y + 4}" font-size="11" text-anchor="end" class="tick-y">${esc(t.label)}</text>`);
    }
    out.push(`<text transform="translate(16 ${L.top + L.h / 2}) rotate(-90)" font-size="12" text-anchor="middle" class="axis-y">${esc(f.y.label)}</text>`);
  }
  if (f.colourBar && L.bar) {
    const b = L.bar;
    out.push(`<image x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" preserveAspectRatio="none" style="image-rendering:pixelated" href="${barImage(f.colourBar.table).toDataURL("image/png")}"/>`,
      `<rect x="${b.x - 0.5}" y="${b.y - 0.5}" width="${b.w + 1}" height="${b.h + 1}" fill="none" stroke="#333"/>`);
    for (const t of f.colourBar.ticks) {
      const y = +(b.y + (1 - t.at) * b.h).toFixed(2);
      out.push(tick(b.x + b.w, y, b.x + b.w + TICK, y), `<text x="${b.x + b.w + TICK + 2}" y="${y + 4}" font-size="11" class="tick-bar">${esc(t.label)}</text>`);
    }
    out.push(`<text x="${b.x - 4}" y="${L.top - 6}" font-size="11" class="bar-label">${esc(f.colourBar.label)}</text>`);
  }
  if (f.note) out.push(`<text x="${L.left}" y="${L.noteY}" font-size="11" fill="#555" class="note">${esc(f.note)}</text>`);
  out.push("</svg>");
  return out.join("\n");
}

/** "save figure: PNG · SVG" links (ids `${id}-png`, `${id}-svg`; `label` names what is saved) writing `${name}.png`
 *  / `.svg` of the figure `get()` returns at the moment of the click (null: nothing drawn yet, the links do nothing). */
export function saveFigureLinks(id: string, name: string, get: () => Figure | null, label = "save figure"): HTMLElement {
  const png = document.createElement("a");
  const svg = document.createElement("a");
  png.id = `${id}-png`;
  svg.id = `${id}-svg`;
  png.textContent = "PNG";
  svg.textContent = "SVG";
  png.download = `${name}.png`;
  svg.download = `${name}.svg`;
  png.href = svg.href = "#";
  const refresh = () => {
    const f = get();
    if (!f) return;
    png.href = figureCanvas(f).toDataURL("image/png");
    svg.href = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(figureSvg(f))}`;
  };
  for (const a of [png, svg]) {
    a.addEventListener("pointerdown", refresh);
    a.addEventListener("click", (ev) => {
      refresh();
      if (a.getAttribute("href") === "#") ev.preventDefault();
    });
  }
  const box = document.createElement("span");
  box.className = "save-figure";
  box.id = id;
  box.append(`${label}: `, png, " · ", svg);
  return box;
}

/** Ticks of a physical axis from 0 to `extent` units across the image, 1-2-5 multiples, about `target` of them;
 *  `offset` shifts the zero (a detector angle counted from the disk's centre). */
export function physicalTicks(extent: number, target: number, offset = 0): FigureTick[] {
  if (!(extent > 0) || !Number.isFinite(extent)) return [];
  const raw = extent / target;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
  const out: FigureTick[] = [];
  const lo = -offset;
  for (let k = Math.ceil(lo / step); k * step <= lo + extent + 1e-9 * step; k++) {
    const v = Number((k * step).toPrecision(10));
    out.push({ at: (v - lo) / extent, label: String(Number(v.toPrecision(4))) });
  }
  return out;
}
