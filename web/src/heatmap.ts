// A zoomable, pannable heatmap of one tensor on a <canvas>, streamed as tiles of its statistics pyramid: a
// level-L tile covers tile_size · 2^L elements per side, drawn as up to 256 cells per side, so the level is
// chosen from the zoom as the finest whose cells are each at least one device pixel (no outlier shrunk away). Each tile is coloured on one of two paths
// (heatmap_tiles.ts): on the page's WebGPU adapter from the raw cell values (GET /api/cells/…) when one
// exists, else by the server (GET /api/render/….png?level=L&x=X&y=Y); "Colour on: auto | page | server"
// chooses (remembered in localStorage, ?colour= overrides). The canvas carries data-colour-path ("webgpu" /
// "server") and data-adapter. Overlays (overlay.ts: tile grid, quantization blocks, file legend) are drawn
// after the tiles. Wheel zooms about the cursor, drag pans, hovering shows the exact statistics of the
// level-L tile under the cursor (GET /api/tiles/…&format=json). window.tmHeatmap exposes the drawn tiles'
// pixels and the draw times for tests (tests/e2e/heatmap.test.mjs).
import { api, type Pyramid, type Quantization } from "./api";
import { colourBarTicks } from "./colour_bar_ticks";
import { el, describeError } from "./dom";
import { fmt } from "./format";
import { ColourPathControl } from "./colour_path";
import type { Figure, FigureTick } from "./figure";
import { axisLabels, HeatmapAxes } from "./heatmap_axes";
import { bitmapPixels, CellValuesCache, loadPageTile, loadServerTile, OVERVIEW, type TileImage } from "./heatmap_tiles";
import { resolveScale, type Resolved, type Style, type TensorQuantiles } from "./limits";
import { drawColourBar, drawOverlay, quantBlockCols } from "./overlay";
import { TileReadout } from "./readout";
import { colormapTable } from "./webgpu/colormap_tables";

const STATS = ["mean", "min", "max", "abs_max", "std", "envelope"];
const TRANSFORMS = ["linear", "log", "signed-log"];
const LIMITS = ["robust", "full", "custom"];
const COLORMAPS = ["auto", "viridis", "RdBu_r", "gray", "plasma", "inferno", "magma", "cividis", "turbo", "seismic", "coolwarm", "twilight"];
const CELLS_PER_TILE = 256;
const MAX_TILES = 30; // visible tiles per view; coarser levels are used beyond this
const CONCURRENCY = 3;
const CACHE_LIMIT = 400;
const DRAW_TIMES = 600; // draw durations kept for window.tmHeatmap.drawTimes()

export interface HeatmapOptions {
  ckpt: string;
  name: string;
  pyramid: Pyramid;
  onError: (e: unknown, context: string) => void;
  /** Called with each style's resolved colour scale (the tile-statistics panel, webgpu/tile_panel.ts). */
  onScale?: (style: Style, resolved: Resolved) => void;
  /** The tensor's file (shard) and quantization for the overlay; fetched from the detail when absent. */
  file?: string;
  quantization?: Quantization | null;
  /** The tensor's quantiles (its detail's stats.quantiles): robust limits come from them (limits.ts). */
  quantiles?: TensorQuantiles;
}

declare global {
  interface Window {
    tmHeatmap?: unknown;
  }
}

export class Heatmap {
  readonly element: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  private readonly legend: HTMLCanvasElement;
  private readonly legendLo: HTMLElement;
  private readonly legendHi: HTMLElement;
  /** Tick labels between the ends (colour_bar_ticks.ts), each at its value's place on the bar. */
  private readonly legendTicks: HTMLElement;
  /** Element indices along the top and the left of the view (heatmap_axes.ts). */
  private readonly axes = new HeatmapAxes();
  private readonly readout: TileReadout;
  private readonly status: HTMLElement;
  private readonly opts: HeatmapOptions;
  private readonly rows: number;
  private readonly cols: number;
  private readonly tileRows: number;
  private readonly tileCols: number;
  private readonly nLevels: number;

  private style: Style = { stat: "mean", transform: "linear", colormap: "auto", limits: "robust", slice: 0 };
  private resolved: Resolved | null = null;
  private resolving = 0;
  private resolvingStyle: Style | null = null;
  private reportedKey = "";
  private sx = 1; // CSS pixels per element, along columns and rows
  private sy = 1;
  private ox = 0; // the element coordinate (column, row) at the canvas' top-left corner
  private oy = 0;
  private level = 0;
  private fitted = false;
  private cache = new Map<string, TileImage>();
  private failed = new Set<string>();
  private wanted = new Set<string>();
  private queue: string[] = [];
  private inflight = 0;
  private drawScheduled = false;
  private drag: { x: number; y: number; ox: number; oy: number; moved: boolean } | null = null;
  private legendKey = "";
  private readonly colour: ColourPathControl;
  private readonly cells = new CellValuesCache();
  private overlayTiles = false;
  private overlayBlocks = false;
  private overlayLegend = "";
  private blockCols = 0;
  private readonly drawTimes: number[] = [];

  constructor(opts: HeatmapOptions) {
    this.opts = opts;
    const p = opts.pyramid;
    this.rows = p.view.rows;
    this.cols = p.view.cols;
    [this.tileRows, this.tileCols] = p.tile_size;
    this.nLevels = p.levels.length;

    this.canvas = el("canvas", { class: "heatmap", id: "heatmap", tabindex: "0", "data-state": "loading" });
    this.legend = el("canvas", { class: "legend", width: "16", height: "256" });
    this.legendHi = el("div", { class: "legend-label" });
    this.legendLo = el("div", { class: "legend-label" });
    this.legendTicks = el("div", { class: "legend-ticks", id: "heatmap-legend-ticks" });
    this.readout = new TileReadout(opts.ckpt, opts.name, p.view.slices);
    this.status = el("div", { class: "heatmap-status", id: "heatmap-status" });
    this.colour = new ColourPathControl(this.canvas, () => {
      this.queue = []; // images of the other path are not wanted any more
      this.scheduleDraw();
    });
    const legendBox = el("div", { class: "legend-box" }, this.legendHi, el("div", { class: "legend-bar" }, this.legend, this.legendTicks), this.legendLo);
    this.element = el(
      "div",
      { class: "heatmap-panel" },
      this.controls(),
      el("div", { class: "heatmap-row" },
        el("div", { class: "heatmap-axes" }, el("div", { class: "heatmap-axis-corner" }), this.axes.top, this.axes.left,
          el("div", { class: "heatmap-frame" }, this.canvas)),
        legendBox),
      this.status,
      this.readout.element,
    );
    this.bindPointer();
    new ResizeObserver(() => this.resize()).observe(this.canvas);
    void this.overlayFacts();
    this.exposeProbe();
  }

  // ---- overlays (overlay.ts)

  private async overlayFacts(): Promise<void> {
    let file = this.opts.file;
    let q = this.opts.quantization;
    if (file === undefined || q === undefined) {
      try {
        const t = await api.tensor(this.opts.ckpt, this.opts.name);
        file ??= t.file;
        q ??= t.quantization;
      } catch {
        // no legend then
      }
    }
    this.overlayLegend = file ? `file ${file}` : "";
    this.blockCols = quantBlockCols(q);
    const box = this.element.querySelector<HTMLInputElement>("#overlay-blocks");
    if (box) box.disabled = this.blockCols === 0;
    this.scheduleDraw();
  }

  /** window.tmHeatmap: the drawn images' pixels and geometry, and recent draw durations (ms). */
  private exposeProbe(): void {
    window.tmHeatmap = {
      tiles: () =>
        [...this.cache.entries()].map(([k, t]) => ({ key: k, path: t.path, level: t.level, r0: t.r0, c0: t.c0, srcW: t.srcW, srcH: t.srcH })),
      pixels: (key: string): number[] | null => {
        const t = this.cache.get(key);
        return t ? Array.from(bitmapPixels(t.bitmap, t.srcW, t.srcH)) : null;
      },
      drawTimes: (): number[] => [...this.drawTimes],
      valuesCached: (): number => this.cells.size,
    };
  }

  // ---- controls

  private controls(): HTMLElement {
    const select = (id: string, label: string, values: string[], value: string, on: (v: string) => void): HTMLElement => {
      const s = el("select", { id });
      for (const v of values) s.append(el("option", { value: v }, v));
      s.value = value;
      s.addEventListener("change", () => on(s.value));
      return el("label", {}, label + " ", s);
    };
    const items: HTMLElement[] = [
      select("stat", "statistic", STATS, this.style.stat, (v) => this.setStyle({ stat: v })),
      select("transform", "transform", TRANSFORMS, this.style.transform, (v) => this.setStyle({ transform: v })),
      select("colormap", "colour map", COLORMAPS, this.style.colormap, (v) => this.setStyle({ colormap: v })),
      select("limits", "limits", LIMITS, this.style.limits, (v) => {
        if (v !== "custom") return this.setStyle({ limits: v });
        const [lo, hi] = this.resolved?.limits ?? [0, 1];
        this.customLo.value = String(lo);
        this.customHi.value = String(hi);
        this.customBox.hidden = false;
      }),
      this.customLimits(),
    ];
    const slices = this.opts.pyramid.view.slices;
    if (slices > 1) {
      const input = el("input", { type: "number", id: "slice", min: "0", max: String(slices - 1), value: "0", step: "1" });
      input.addEventListener("change", () => {
        const s = Math.max(0, Math.min(slices - 1, Math.round(Number(input.value) || 0)));
        input.value = String(s);
        this.setStyle({ slice: s });
      });
      items.push(el("label", {}, `slice (of ${slices}) `, input));
    }
    const button = (label: string, title: string, on: () => void): HTMLButtonElement => {
      const b = el("button", { type: "button", title }, label);
      b.addEventListener("click", on);
      return b;
    };
    items.push(
      button("−", "zoom out", () => this.zoomAt(this.canvas.clientWidth / 2, this.canvas.clientHeight / 2, 0.5)),
      button("+", "zoom in", () => this.zoomAt(this.canvas.clientWidth / 2, this.canvas.clientHeight / 2, 2)),
      button("fit", "fit the tensor to the view", () => this.fit()),
    );
    const check = (id: string, label: string, onChange: (v: boolean) => void): HTMLElement => {
      const b = el("input", { type: "checkbox", id });
      b.addEventListener("change", () => onChange(b.checked));
      return el("label", {}, b, " " + label);
    };
    items.push(
      ...this.colour.elements,
      check("overlay-tiles", "tile grid", (v) => ((this.overlayTiles = v), this.scheduleDraw())),
      check("overlay-blocks", "quant blocks", (v) => ((this.overlayBlocks = v), this.scheduleDraw())),
    );
    return el("div", { class: "heatmap-controls" }, ...items);
  }

  // "custom" limits: two numbers in data units, applied together (lo < hi, both finite).
  private readonly customLo = el("input", { type: "number", id: "limit-lo", step: "any", size: "10" });
  private readonly customHi = el("input", { type: "number", id: "limit-hi", step: "any", size: "10" });
  private readonly customBox = el("span", { class: "custom-limits", id: "custom-limits", hidden: "" });

  private customLimits(): HTMLElement {
    const apply = el("button", { type: "button", id: "limit-apply" }, "apply");
    const why = el("span", { class: "hint", id: "limit-why" });
    apply.addEventListener("click", () => {
      const lo = Number(this.customLo.value), hi = Number(this.customHi.value);
      const ok = this.customLo.value !== "" && this.customHi.value !== "" && Number.isFinite(lo) && Number.isFinite(hi) && lo < hi;
      why.textContent = ok ? "" : " low must be a number below high";
      if (ok) this.setStyle({ limits: "custom", custom: [lo, hi] });
    });
    this.customBox.append(" low ", this.customLo, " high ", this.customHi, " ", apply, why);
    return this.customBox;
  }

  private setStyle(change: Partial<Style>): void {
    if (change.limits && change.limits !== "custom") this.customBox.hidden = true;
    this.style = { ...this.style, ...change };
    this.resolved = null;
    this.queue = [];
    if (change.slice !== undefined) this.readout.reset(); // tile statistics depend on the slice only
    this.scheduleDraw();
  }

  // ---- colour scale: one for every tile of a style (limits.ts)

  private async resolve(): Promise<void> {
    const seq = ++this.resolving;
    try {
      const resolved = await resolveScale(this.opts.ckpt, this.opts.name, this.style, this.opts.quantiles);
      if (seq !== this.resolving) return;
      this.resolved = resolved;
      this.legendLo.textContent = resolved.limits ? fmt(resolved.limits[0]) : "";
      this.legendHi.textContent = resolved.limits ? fmt(resolved.limits[1]) : "";
      const ticks = resolved.limits ? colourBarTicks(resolved.limits[0], resolved.limits[1], this.style.transform) : [];
      this.legendTicks.replaceChildren(...ticks.map((t) =>
        el("div", { class: "legend-tick", style: `top: ${((1 - t.position) * 100).toFixed(3)}%`, "data-value": String(t.value), "data-position": String(t.position) }, t.label)));
      this.legend.title = resolved.source;  // which limits are in force (also in the status line)
      this.canvas.dataset.limitsSource = resolved.source;
      this.scheduleDraw();
      this.opts.onScale?.(this.style, resolved);
    } catch (e) {
      if (seq !== this.resolving) return;
      this.canvas.dataset.state = "error";
      this.status.textContent = "Cannot draw: " + describeError(e);
      this.opts.onError(e, "heatmap");
    }
  }

  // ---- geometry

  private cellSize(level: number): [number, number] {
    return [
      Math.max(1, Math.floor((this.tileRows * 2 ** level) / CELLS_PER_TILE)),
      Math.max(1, Math.floor((this.tileCols * 2 ** level) / CELLS_PER_TILE)),
    ];
  }

  private span(level: number): [number, number] {
    return [this.tileRows * 2 ** level, this.tileCols * 2 ** level];
  }

  private visibleTiles(level: number): { x0: number; x1: number; y0: number; y1: number } {
    const [gc, gr] = this.opts.pyramid.levels[level].grid;
    const [spanR, spanC] = this.span(level);
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    const c0 = Math.max(0, this.ox);
    const c1 = Math.min(this.cols, this.ox + w / this.sx);
    const r0 = Math.max(0, this.oy);
    const r1 = Math.min(this.rows, this.oy + h / this.sy);
    if (c1 <= c0 || r1 <= r0) return { x0: 0, x1: -1, y0: 0, y1: -1 };
    return {
      x0: Math.min(gc - 1, Math.floor(c0 / spanC)),
      x1: Math.min(gc - 1, Math.floor((c1 - 1e-9) / spanC)),
      y0: Math.min(gr - 1, Math.floor(r0 / spanR)),
      y1: Math.min(gr - 1, Math.floor((r1 - 1e-9) / spanR)),
    };
  }

  /** The finest level whose cells are each at least one device pixel (both ways, or as coarse as the pyramid
   *  goes), made coarser while too many tiles are visible. A cell narrower than a device pixel would be dropped
   *  when the browser shrinks the image; a coarser cell's statistic covers every element under it (max and
   *  abs_max keep an outlier, the envelope keeps min and max), so no outlier is lost at any zoom. */
  private chooseLevel(): number {
    const dpr = this.canvas.clientWidth ? this.canvas.width / this.canvas.clientWidth : 1;
    const covers = (l: number): boolean => {
      const [cr, cc] = this.cellSize(l);
      return cr * this.sy * dpr >= 1 - 1e-9 && cc * this.sx * dpr >= 1 - 1e-9;
    };
    let level = 0;
    while (level < this.nLevels - 1 && !covers(level)) level++;
    while (level < this.nLevels - 1) {
      const v = this.visibleTiles(level);
      if ((v.x1 - v.x0 + 1) * (v.y1 - v.y0 + 1) <= MAX_TILES) break;
      level++;
    }
    return level;
  }

  fit(): void {
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    if (!w || !h) return;
    let sx = (w * 0.96) / this.cols;
    let sy = (h * 0.96) / this.rows;
    // Keep square elements unless that would leave the tensor a thin line (a 1-row view, an embedding).
    const s = Math.min(sx, sy);
    if (Math.max(sx, sy) / s <= 4) sx = sy = s;
    else if (sx > sy) sx = Math.min(sx, sy * 64);
    else sy = Math.min(sy, sx * 64);
    this.sx = sx;
    this.sy = sy;
    this.ox = -(w / sx - this.cols) / 2;
    this.oy = -(h / sy - this.rows) / 2;
    this.fitted = true;
    this.scheduleDraw();
  }

  /** The slice of the view shown. */
  slice(): number {
    return this.style.slice;
  }

  /** The view as a figure with its numbers (figure.ts: "save figure"): the canvas as drawn, index axes of the part
   *  in view, the colour bar with the limits in force and its ticks; null until a colour scale is resolved. */
  figure(): Figure | null {
    const r = this.resolved;
    if (!r || !r.limits) return null;
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    const axis = (origin: number, per: number, extent: number, count: number, target: number): FigureTick[] =>
      axisLabels(origin, per, extent, count, target).map((l) => ({ at: l.px / extent, label: String(l.index) }));
    const [lo, hi] = r.limits;
    const inner = colourBarTicks(lo, hi, this.style.transform).map((t): FigureTick => ({ at: t.position, label: t.label }));
    const slice = this.opts.pyramid.view.slices > 1 ? `, slice ${this.style.slice}` : "";
    return {
      title: `${this.opts.name}${slice}: ${this.style.stat} per cell, ${this.style.transform}`,
      image: this.canvas,
      x: { label: "column", ticks: axis(this.ox, this.sx, w, this.cols, Math.max(2, Math.floor(w / 90))) },
      y: { label: "row", ticks: axis(this.oy, this.sy, h, this.rows, Math.max(2, Math.floor(h / 60))) },
      colourBar: { table: colormapTable(r.colormap), ticks: [{ at: 0, label: fmt(lo) }, ...inner, { at: 1, label: fmt(hi) }], label: `${this.style.stat} (${r.colormap})` },
      note: `${this.status.textContent ?? ""}; limits: ${r.source}`,
    };
  }

  /** Centres the view on element (row, col) of `slice`, zoomed in to at least 16 CSS pixels per element (an
   *  outlier list's jump): the element is then one cell of level 0, drawn from its own value. */
  centreOn(row: number, col: number, slice = 0): void {
    if (slice !== this.style.slice) {
      const input = this.element.querySelector<HTMLInputElement>("#slice");
      if (input) input.value = String(slice);
      this.setStyle({ slice });
    }
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    const s = Math.max(16, this.sx, this.sy);
    this.sx = this.sy = s;
    this.ox = col + 0.5 - w / 2 / s;
    this.oy = row + 0.5 - h / 2 / s;
    this.fitted = true;
    this.canvas.dataset.centred = `${row},${col},${slice}`;
    this.scheduleDraw();
  }

  private zoomAt(px: number, py: number, factor: number): void {
    // Zoom out to 1/8 of the fitted view at most, and never so far that the pyramid's coarsest cells would be
    // under a device pixel (the view could then drop an outlier: chooseLevel).
    const minScale = Math.min(this.canvas.clientWidth / this.cols, this.canvas.clientHeight / this.rows) / 8;
    const dpr = this.canvas.clientWidth ? this.canvas.width / this.canvas.clientWidth : 1;
    const [topR, topC] = this.cellSize(this.nLevels - 1);
    const coarsest = Math.max(topR > 1 && this.rows > 1 ? 1 / (topR * dpr * this.sy) : 0, topC > 1 && this.cols > 1 ? 1 / (topC * dpr * this.sx) : 0);
    const f = Math.max(minScale / Math.min(this.sx, this.sy), coarsest, Math.min(factor, 256 / Math.max(this.sx, this.sy)));
    const ex = this.ox + px / this.sx;
    const ey = this.oy + py / this.sy;
    this.sx *= f;
    this.sy *= f;
    this.ox = ex - px / this.sx;
    this.oy = ey - py / this.sy;
    this.scheduleDraw();
  }

  private resize(): void {
    const dpr = window.devicePixelRatio || 1;
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    if (!w || !h) return;
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    if (!this.fitted) this.fit();
    else this.scheduleDraw();
  }

  // ---- pointer

  private bindPointer(): void {
    const c = this.canvas;
    c.addEventListener(
      "wheel",
      (ev) => {
        ev.preventDefault();
        const r = c.getBoundingClientRect();
        const dy = ev.deltaMode === 1 ? ev.deltaY * 16 : ev.deltaMode === 2 ? ev.deltaY * 400 : ev.deltaY;
        this.zoomAt(ev.clientX - r.left, ev.clientY - r.top, Math.exp(-dy * 0.0015));
      },
      { passive: false },
    );
    c.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      try {
        c.setPointerCapture(ev.pointerId);
      } catch {
        // a synthetic pointer (tests) cannot be captured: drag without capture
      }
      this.drag = { x: ev.clientX, y: ev.clientY, ox: this.ox, oy: this.oy, moved: false };
      c.classList.add("dragging");
    });
    c.addEventListener("pointermove", (ev) => {
      const r = c.getBoundingClientRect();
      if (this.drag) {
        const dx = ev.clientX - this.drag.x;
        const dy = ev.clientY - this.drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 2) this.drag.moved = true;
        this.ox = this.drag.ox - dx / this.sx;
        this.oy = this.drag.oy - dy / this.sy;
        this.scheduleDraw();
      }
      this.hover(ev.clientX - r.left, ev.clientY - r.top);
    });
    const end = (ev: PointerEvent): void => {
      if (this.drag && c.hasPointerCapture(ev.pointerId)) c.releasePointerCapture(ev.pointerId);
      this.drag = null;
      c.classList.remove("dragging");
    };
    c.addEventListener("pointerup", end);
    c.addEventListener("pointercancel", end);
    c.addEventListener("dblclick", (ev) => {
      const r = c.getBoundingClientRect();
      this.zoomAt(ev.clientX - r.left, ev.clientY - r.top, ev.shiftKey ? 0.5 : 2);
    });
    c.addEventListener("keydown", (ev) => {
      const w = c.clientWidth;
      const h = c.clientHeight;
      const step = 0.1;
      if (ev.key === "+" || ev.key === "=") this.zoomAt(w / 2, h / 2, 1.25);
      else if (ev.key === "-") this.zoomAt(w / 2, h / 2, 0.8);
      else if (ev.key === "ArrowLeft") this.ox -= (w * step) / this.sx;
      else if (ev.key === "ArrowRight") this.ox += (w * step) / this.sx;
      else if (ev.key === "ArrowUp") this.oy -= (h * step) / this.sy;
      else if (ev.key === "ArrowDown") this.oy += (h * step) / this.sy;
      else if (ev.key === "0") this.fit();
      else return;
      ev.preventDefault();
      this.scheduleDraw();
    });
  }

  // ---- hover read-out: the exact statistics of the level-L tile under the cursor (readout.ts)

  private hover(px: number, py: number): void {
    const col = Math.floor(this.ox + px / this.sx);
    const row = Math.floor(this.oy + py / this.sy);
    if (col < 0 || row < 0 || col >= this.cols || row >= this.rows) return;
    const [spanR, spanC] = this.span(this.level);
    this.readout.show(this.level, Math.floor(col / spanC), Math.floor(row / spanR), this.style.slice, row, col);
  }

  // ---- tiles

  private tileKey(styleKey: string, level: number, x: number, y: number): string {
    return `${styleKey}#${level}/${x}/${y}`;
  }

  private scheduleDraw(): void {
    if (this.canvas.dataset.state !== "error") this.canvas.dataset.state = "loading"; // until drawn
    if (this.drawScheduled) return;
    this.drawScheduled = true;
    requestAnimationFrame(() => {
      this.drawScheduled = false;
      this.draw();
    });
  }

  private draw(): void {
    const t0 = performance.now();
    this.drawTiles();
    this.drawTimes.push(performance.now() - t0);
    if (this.drawTimes.length > DRAW_TIMES) this.drawTimes.splice(0, this.drawTimes.length - DRAW_TIMES);
  }

  private drawTiles(): void {
    const ctx = this.canvas.getContext("2d");
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    if (!ctx || !w || !h) return;
    if (!this.fitted) this.fit();
    const dpr = this.canvas.width / w;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, w, h);
    const tx = (c: number): number => (c - this.ox) * this.sx;
    const ty = (r: number): number => (r - this.oy) * this.sy;
    // The tensor's extent.
    ctx.fillStyle = "#d8d8d8";
    ctx.fillRect(tx(0), ty(0), this.cols * this.sx, this.rows * this.sy);

    this.axes.update(this.ox, this.oy, this.sx, this.sy, w, h, this.rows, this.cols);
    this.level = this.chooseLevel();
    const d = this.canvas.dataset;
    Object.assign(d, {
      level: String(this.level),
      ox: String(this.ox),
      oy: String(this.oy),
      sx: String(this.sx),
      sy: String(this.sy),
    });
    if (!this.resolved) {
      d.state = "loading";
      this.status.textContent = "Loading colour limits…";
      if (this.resolvingStyle !== this.style) {
        this.resolvingStyle = this.style;
        void this.resolve();
      }
      return;
    }
    const path = this.colour.path;
    if (!path) {
      d.state = "loading";
      this.status.textContent = "Looking for a WebGPU adapter…";
      return;
    }
    const key = `${path}|${this.resolved.key}`;

    // Wanted: the overview (an immediate backdrop; enough alone when its cells are as fine as this
    // level's, e.g. a small or 1-D tensor), then this level's visible tiles, centre first.
    const wanted: [number, number, number][] = [[OVERVIEW, 0, 0]];
    const add = (level: number): void => {
      const v = this.visibleTiles(level);
      const cx = (v.x0 + v.x1) / 2;
      const cy = (v.y0 + v.y1) / 2;
      const list: [number, number, number][] = [];
      for (let y = v.y0; y <= v.y1; y++) for (let x = v.x0; x <= v.x1; x++) list.push([level, x, y]);
      list.sort((a, b) => Math.hypot(a[1] - cx, a[2] - cy) - Math.hypot(b[1] - cx, b[2] - cy));
      wanted.push(...list);
    };
    const top = this.nLevels - 1;
    const [ovR, ovC] = this.resolved.overview.cellSize;
    const [lvR, lvC] = this.cellSize(this.level);
    // The overview alone when its cells are as fine as this level's and still at least a device pixel each.
    const overviewOnly = ovR <= lvR && ovC <= lvC && ovR * this.sy * dpr >= 1 - 1e-9 && ovC * this.sx * dpr >= 1 - 1e-9;
    if (!overviewOnly) add(this.level);
    this.wanted = new Set(wanted.map(([l, x, y]) => this.tileKey(key, l, x, y)));

    this.updateLegend(this.resolved.key, this.resolved.colormap);

    // Draw what is cached, coarse levels first so finer tiles cover them, but no level finer than this one (its
    // cells would be under a device pixel and the browser would drop some: a cached tile of a closer zoom). The
    // overview is the backdrop, drawn first, unless it alone is this view.
    ctx.save();
    ctx.beginPath();
    ctx.rect(tx(0), ty(0), this.cols * this.sx, this.rows * this.sy);
    ctx.clip();
    const prefix = key + "#";
    const order = (t: TileImage): number => (t.level === OVERVIEW ? (overviewOnly ? Infinity : -Infinity) : -t.cellArea);
    const cached = [...this.cache.entries()].filter(([k, t]) => k.startsWith(prefix) && (t.level === OVERVIEW || t.level >= this.level));
    cached.sort((a, b) => order(a[1]) - order(b[1]));
    for (const [, t] of cached) {
      const x = tx(t.c0);
      const y = ty(t.r0);
      const tw = t.colsCovered * this.sx;
      const th = t.rowsCovered * this.sy;
      if (x > w || y > h || x + tw < 0 || y + th < 0) continue;
      ctx.drawImage(t.bitmap, 0, 0, t.srcW, t.srcH, x, y, tw, th);
    }
    ctx.restore();
    this.drawOverlays(ctx, w, h);

    let missing = 0;
    let failed = 0;
    let current = 0;
    for (const [l, x, y] of wanted) {
      const k = this.tileKey(key, l, x, y);
      const counted = l === this.level || (overviewOnly && l === OVERVIEW);
      if (counted) current++;
      if (this.cache.has(k)) continue;
      if (this.failed.has(k)) {
        failed++;
        continue;
      }
      if (counted) missing++;
      if (!this.queue.includes(k)) this.queue.push(k);
    }
    this.queue = this.queue.filter((k) => this.wanted.has(k));
    this.pump();
    const [cr, cc] = overviewOnly ? [ovR, ovC] : [lvR, lvC];
    const lim = this.resolved.limits;
    this.status.textContent =
      `level ${this.level} of ${top} · a cell is ${cr} × ${cc} element${cr * cc > 1 ? "s" : ""} · ` +
      (overviewOnly ? `overview image${current - missing - failed ? "" : " loading"}` : `${current - missing - failed}/${current} tiles`) +
      (failed ? ` (${failed} failed)` : "") +
      ` · ${this.resolved.colormap}` +
      (lim ? ` [${fmt(lim[0])}, ${fmt(lim[1])}] (${this.resolved.source})` : "") +
      ` · ${fmt(this.sx)} px per element` +
      ` · ${path === "webgpu" ? "coloured on this page" : "server PNGs"}`;
    d.source = overviewOnly ? "overview" : "tiles";
    d.cellRows = String(cr);
    d.cellCols = String(cc);
    d.loaded = String(current - missing - failed);
    d.tiles = String(current);
    d.state = failed ? "error" : missing ? "loading" : "ready";
  }

  private pump(): void {
    while (this.inflight < CONCURRENCY && this.queue.length) {
      const k = this.queue.shift()!;
      if (!this.wanted.has(k) || this.cache.has(k)) continue;
      this.inflight++;
      void this.load(k).finally(() => {
        this.inflight--;
        this.pump();
        this.scheduleDraw();
      });
    }
  }

  private async load(k: string): Promise<void> {
    const resolved = this.resolved;
    const path = this.colour.path;
    if (!resolved || !path) return;
    const where = k.slice(k.indexOf("#") + 1);
    const [level, x, y] = where.split("/").map(Number);
    const overview = level === OVERVIEW;
    const [spanR, spanC] = overview ? [this.rows, this.cols] : this.span(level);
    const req = {
      ckpt: this.opts.ckpt, name: this.opts.name, level, x, y,
      r0: overview ? 0 : y * spanR, c0: overview ? 0 : x * spanC, spanR, spanC,
      viewRows: this.rows, viewCols: this.cols,
      cellSize: overview ? resolved.overview.cellSize : this.cellSize(level),
    };
    try {
      const tile = path === "webgpu" ? await loadPageTile(req, resolved, this.cells) : await loadServerTile(req, resolved);
      if (this.colour.path !== path) {
        tile.bitmap.close(); // the path changed meanwhile
        return;
      }
      this.cache.set(k, tile);
      this.evict();
    } catch (e) {
      if (path === "webgpu" && this.colour.pageFailed(e)) return;
      this.failed.add(k);
      if (this.reportedKey !== resolved.key) {
        this.reportedKey = resolved.key; // one message per colour scale, not one per tile
        this.opts.onError(e, overview ? "heatmap overview" : `heatmap tile ${where} (level/x/y)`);
      }
    }
  }

  /** The colour bar: the map's last entry at the top, its first at the bottom (as the server's bar). */
  private updateLegend(key: string, colormap: string): void {
    if (this.legendKey === key) return;
    this.legendKey = key;
    drawColourBar(this.legend, colormapTable(colormap));
  }

  private drawOverlays(ctx: CanvasRenderingContext2D, w: number, h: number): void {
    const [spanR, spanC] = this.span(this.level);
    const n = drawOverlay(
      ctx,
      { ox: this.ox, oy: this.oy, sx: this.sx, sy: this.sy, w, h, rows: this.rows, cols: this.cols },
      { tiles: this.overlayTiles, blocks: this.overlayBlocks, spanR, spanC, level: this.level, blockCols: this.blockCols, legend: this.overlayLegend },
    );
    const d = this.canvas.dataset;
    d.overlayTileLines = String(n.tileLines);
    d.overlayBlockLines = String(n.blockLines);
    d.overlayLegend = n.legend;
  }

  private evict(): void {
    if (this.cache.size <= CACHE_LIMIT) return;
    for (const [k, t] of this.cache) {
      if (this.cache.size <= CACHE_LIMIT * 0.8) break;
      if (this.wanted.has(k)) continue;
      t.bitmap.close();
      this.cache.delete(k);
    }
  }
}
