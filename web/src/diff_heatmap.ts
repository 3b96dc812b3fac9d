// The heatmap of a difference pyramid (diff mode): one cell per tile of the chosen level, coloured by one of
// the tile's difference statistics (GET /api/diff/{a}/{b}/tiles/{tensor}, diff_api.ts):
//   abs_delta         max |Δ| of the tile                     (0 to the pair's max |Δ|)
//   delta             mean Δ of the tile, signed              (diverging map, symmetric limits)
//   extreme_delta     the tile's Δ of largest magnitude, signed: max Δ when |max Δ| >= |min Δ|, else min Δ
//   rel_change        √(Σ Δ² / Σ a²) of the tile
//   changed_fraction  changed / count                          (0 to 1)
// Colours come from the display machinery the tensor heatmap uses on the page (webgpu/display.ts: the same
// transforms, colour maps, limit rules and thresholds as the server, on the page's WebGPU adapter or its CPU
// port). Limits "full" are exact and the same at every zoom where the pair's summary gives them (abs_delta,
// extreme_delta: the pair's extremes; changed_fraction: 0 to 1), else the range of the tiles loaded at this level
// (said in data-limits-source); "custom" are used as typed.
//
// Zoom and pan as the tensor heatmap (wheel about the cursor, drag, +/−/fit); the level is the finest whose tiles
// are at least MIN_TILE_PX CSS pixels both ways with at most MAX_TILES_PER_REQUEST visible (or a level chosen
// by hand). Zoomed in to at least ELEMENT_PX CSS pixels per element with at most MAX_ELEMENT_TILES level-0 tiles in
// view (level "auto"), the elements themselves are drawn for |Δ| (|Δ| of each element) and the signed quantities (Δ
// of each element: an element is a one-element tile), from GET …/values/… (data-mode "elements"), with the limits
// of the pair's extremes. Hovering shows the statistics of the tile under the cursor in #diff-readout, exact values in its
// data-* attributes. window.tmDiffHeatmap exposes the drawn tiles (value and colour) for tests/e2e/diff.test.mjs.
import { getJson, num, type Num } from "./api";
import { deltaHistogram } from "./diff_histogram";
import { diffPath, diffTiles, diffValues, MAX_TILES_PER_REQUEST, type DiffStats, type DiffTile, type DiffTiles, type DiffValues } from "./diff_api";
import { describeError, el } from "./dom";
import { fmt, fmtInt } from "./format";
import { drawColourBar } from "./overlay";
import { colormapTable, DIVERGING_MAPS } from "./webgpu/colormap_tables";
import { autoLimits, parseTransform } from "./webgpu/thresholds";
import { displayColorize } from "./webgpu/display";

export interface Quantity {
  id: string;
  label: string;
  signed: boolean;
  value: (t: DiffStats) => number;
}

function extreme(t: DiffStats): number {
  const lo = num(t.min_delta), hi = num(t.max_delta);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return NaN;
  return Math.abs(hi) >= Math.abs(lo) ? hi : lo;
}

export const QUANTITIES: Quantity[] = [
  { id: "abs_delta", label: "|Δ| (max per tile)", signed: false, value: (t) => num(t.max_abs_delta) },
  { id: "delta", label: "Δ (mean per tile)", signed: true, value: (t) => num(t.mean_delta) },
  { id: "extreme_delta", label: "Δ (largest |Δ| per tile, signed)", signed: true, value: extreme },
  { id: "rel_change", label: "relative change", signed: false, value: (t) => num(t.rel_change) },
  { id: "changed_fraction", label: "changed fraction", signed: false, value: (t) => num(t.changed_fraction) },
];
const TRANSFORMS = ["linear", "log", "signed-log"];
const COLORMAPS = ["auto", "viridis", "RdBu_r", "gray", "plasma", "inferno", "magma", "cividis", "turbo", "seismic", "coolwarm"];
const MIN_TILE_PX = 4;
const ELEMENT_PX = 1.5;
const MAX_ELEMENT_TILES = 6;
const ELEMENT_QUANTITIES = new Set(["abs_delta", "delta", "extreme_delta"]);

export interface DiffHeatmapOptions {
  a: string;
  b: string;
  name: string;
  first: DiffTiles; // a first answer (any level): the layout and the pair's summary
  onError: (e: unknown, context: string) => void;
}

interface Drawn {
  level: number;
  tx: number;
  ty: number;
  value: number;
  rgba: number[];
  row_begin: number;
  row_end: number;
  col_begin: number;
  col_end: number;
}

declare global {
  interface Window {
    tmDiffHeatmap?: unknown;
  }
}

export class DiffHeatmap {
  readonly element: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  private readonly readout: HTMLElement;
  private readonly status: HTMLElement;
  private readonly legend: HTMLCanvasElement;
  private readonly legendLo = el("div", { class: "legend-label" });
  private readonly legendHi = el("div", { class: "legend-label" });
  private readonly rows: number;
  private readonly cols: number;
  private readonly opts: DiffHeatmapOptions;
  private quantity: Quantity = QUANTITIES[0];
  private transform = "linear";
  private colormap = "auto";
  private custom: [number, number] | null = null;
  private levelChoice: "auto" | number = "auto";
  private slice = 0;
  private level = 0;
  private sx = 1;
  private sy = 1;
  private ox = 0;
  private oy = 0;
  private fitted = false;
  private drag: { x: number; y: number; ox: number; oy: number } | null = null;
  private readonly tiles = new Map<string, DiffTile>(); // `${slice}/${level}/${ty}/${tx}`
  private readonly requested = new Set<string>(); // windows asked for
  private drawn: Drawn[] = [];
  private readonly values = new Map<string, DiffValues>(); // level-0 tiles' Δ, by key()
  private readonly valuesRequested = new Set<string>();
  private readonly coloured = new Map<string, { canvas: HTMLCanvasElement; rgba: Uint8Array }>(); // by style + key()
  private elementTiles: { key: string; v: DiffValues; rgba: Uint8Array }[] = [];
  private elementMode = false;
  private readonly histograms = new Map<string, Promise<DiffStats>>(); // hovered tiles with their histogram, by key()
  private hoverSeq = 0;
  private drawSeq = 0;
  private scheduled = false;

  constructor(opts: DiffHeatmapOptions) {
    this.opts = opts;
    this.rows = opts.first.view.rows;
    this.cols = opts.first.view.cols;
    for (const t of opts.first.tiles) this.tiles.set(this.key(opts.first.slice, opts.first.level, t.ty, t.tx), t);
    this.canvas = el("canvas", { class: "heatmap", id: "diff-heatmap", tabindex: "0", "data-state": "loading" });
    this.legend = el("canvas", { class: "legend", width: "16", height: "256" });
    this.readout = el("div", { class: "readout", id: "diff-readout", "data-state": "idle" }, "Hover over the heatmap for the difference statistics of the tile under the cursor.");
    this.status = el("div", { class: "heatmap-status", id: "diff-heatmap-status" });
    this.element = el(
      "div",
      { class: "heatmap-panel" },
      this.controls(),
      el("div", { class: "heatmap-row" }, el("div", { class: "heatmap-frame" }, this.canvas), el("div", { class: "legend-box" }, this.legendHi, this.legend, this.legendLo)),
      this.status,
      this.readout,
    );
    this.bindPointer();
    new ResizeObserver(() => this.resize()).observe(this.canvas);
    window.tmDiffHeatmap = {
      drawn: (): Drawn[] => this.drawn.map((d) => ({ ...d })),
      level: (): number => this.level,
      /** In element mode: the Δ and the colour drawn for element (row, col), or null when it is not drawn. */
      element: (row: number, col: number): { delta: number; rgba: number[] } | null => {
        for (const e of this.elementTiles)
          if (row >= e.v.r0 && row < e.v.r1 && col >= e.v.c0 && col < e.v.c1) {
            const i = (row - e.v.r0) * (e.v.c1 - e.v.c0) + (col - e.v.c0);
            return { delta: e.v.delta[i], rgba: Array.from(e.rgba.subarray(4 * i, 4 * i + 4)) };
          }
        return null;
      },
      setView: (level: number | "auto"): void => {
        this.levelChoice = level;
        this.schedule();
      },
    };
  }

  private key(slice: number, level: number, ty: number, tx: number): string {
    return `${slice}/${level}/${ty}/${tx}`;
  }

  // ---- controls

  private controls(): HTMLElement {
    const select = (id: string, label: string, values: [string, string][], value: string, on: (v: string) => void): HTMLElement => {
      const s = el("select", { id });
      for (const [v, text] of values) s.append(el("option", { value: v }, text));
      s.value = value;
      s.addEventListener("change", () => on(s.value));
      return el("label", {}, label + " ", s);
    };
    const levels = this.opts.first.levels.length;
    const lo = el("input", { type: "number", id: "diff-limit-lo", step: "any", size: "10" });
    const hi = el("input", { type: "number", id: "diff-limit-hi", step: "any", size: "10" });
    const why = el("span", { class: "hint", id: "diff-limit-why" });
    const apply = el("button", { type: "button", id: "diff-limit-apply" }, "apply");
    const customBox = el("span", { class: "custom-limits", hidden: "" }, " low ", lo, " high ", hi, " ", apply, why);
    apply.addEventListener("click", () => {
      const l = Number(lo.value), h = Number(hi.value);
      const ok = lo.value !== "" && hi.value !== "" && Number.isFinite(l) && Number.isFinite(h) && l < h;
      why.textContent = ok ? "" : " low must be a number below high";
      if (ok) (this.custom = [l, h]), this.schedule();
    });
    const items: HTMLElement[] = [
      select("diff-quantity", "show", QUANTITIES.map((q) => [q.id, q.label]), this.quantity.id, (v) => {
        this.quantity = QUANTITIES.find((q) => q.id === v) ?? QUANTITIES[0];
        this.schedule();
      }),
      select("diff-transform", "transform", TRANSFORMS.map((t) => [t, t]), this.transform, (v) => ((this.transform = v), this.schedule())),
      select("diff-colormap", "colour map", COLORMAPS.map((c) => [c, c]), this.colormap, (v) => ((this.colormap = v), this.schedule())),
      select("diff-limits", "limits", [["full", "full"], ["custom", "custom"]], "full", (v) => {
        customBox.hidden = v !== "custom";
        if (v === "full") (this.custom = null), this.schedule();
      }),
      customBox,
      select("diff-level", "level", [["auto", "auto (zoom)"], ...Array.from({ length: levels }, (_, i): [string, string] => [String(i), String(i)])], "auto", (v) => {
        this.levelChoice = v === "auto" ? "auto" : Number(v);
        this.schedule();
      }),
    ];
    const slices = this.opts.first.view.slices;
    if (slices > 1) {
      const input = el("input", { type: "number", id: "diff-slice", min: "0", max: String(slices - 1), value: "0", step: "1" });
      input.addEventListener("change", () => {
        this.slice = Math.max(0, Math.min(slices - 1, Math.round(Number(input.value) || 0)));
        input.value = String(this.slice);
        this.schedule();
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
    return el("div", { class: "heatmap-controls" }, ...items);
  }

  // ---- geometry (element coordinates, as heatmap.ts)

  private span(level: number): [number, number] {
    return [this.opts.first.tile_rows * 2 ** level, this.opts.first.tile_cols * 2 ** level];
  }

  private visible(level: number): [number, number, number, number] {
    const g = this.opts.first.levels[level];
    const [sr, sc] = this.span(level);
    const c0 = Math.max(0, this.ox), c1 = Math.min(this.cols, this.ox + this.canvas.clientWidth / this.sx);
    const r0 = Math.max(0, this.oy), r1 = Math.min(this.rows, this.oy + this.canvas.clientHeight / this.sy);
    if (c1 <= c0 || r1 <= r0) return [0, 0, 0, 0];
    return [Math.floor(c0 / sc), Math.min(g.cols, Math.ceil(c1 / sc)), Math.floor(r0 / sr), Math.min(g.rows, Math.ceil(r1 / sr))];
  }

  private chooseLevel(): number {
    const top = this.opts.first.levels.length - 1;
    if (this.levelChoice !== "auto") return Math.min(top, this.levelChoice);
    const count = (l: number): number => {
      const [x0, x1, y0, y1] = this.visible(l);
      return (x1 - x0) * (y1 - y0);
    };
    let level = 0;
    const big = (l: number): boolean => {
      const [sr, sc] = this.span(l);
      return (Math.min(sr, this.rows) * this.sy >= MIN_TILE_PX || this.rows * this.sy < MIN_TILE_PX) && (Math.min(sc, this.cols) * this.sx >= MIN_TILE_PX || this.cols * this.sx < MIN_TILE_PX);
    };
    while (level < top && (!big(level) || count(level) > MAX_TILES_PER_REQUEST)) level++;
    return level;
  }

  fit(): void {
    const w = this.canvas.clientWidth, h = this.canvas.clientHeight;
    if (!w || !h) return;
    let sx = (w * 0.96) / this.cols, sy = (h * 0.96) / this.rows;
    const s = Math.min(sx, sy);
    if (Math.max(sx, sy) / s <= 4) sx = sy = s;
    else if (sx > sy) sx = Math.min(sx, sy * 64);
    else sy = Math.min(sy, sx * 64);
    [this.sx, this.sy] = [sx, sy];
    this.ox = -(w / sx - this.cols) / 2;
    this.oy = -(h / sy - this.rows) / 2;
    this.fitted = true;
    this.schedule();
  }

  private zoomAt(px: number, py: number, factor: number): void {
    const minScale = Math.min(this.canvas.clientWidth / this.cols, this.canvas.clientHeight / this.rows) / 8;
    const f = Math.max(minScale / Math.min(this.sx, this.sy), Math.min(factor, 256 / Math.max(this.sx, this.sy)));
    const ex = this.ox + px / this.sx, ey = this.oy + py / this.sy;
    this.sx *= f;
    this.sy *= f;
    this.ox = ex - px / this.sx;
    this.oy = ey - py / this.sy;
    this.schedule();
  }

  private resize(): void {
    const dpr = window.devicePixelRatio || 1;
    const w = this.canvas.clientWidth, h = this.canvas.clientHeight;
    if (!w || !h) return;
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    if (!this.fitted) this.fit();
    else this.schedule();
  }

  private bindPointer(): void {
    const c = this.canvas;
    c.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const r = c.getBoundingClientRect();
      this.zoomAt(ev.clientX - r.left, ev.clientY - r.top, Math.exp(-ev.deltaY * 0.0015));
    }, { passive: false });
    c.addEventListener("pointerdown", (ev) => {
      if (ev.button === 0) this.drag = { x: ev.clientX, y: ev.clientY, ox: this.ox, oy: this.oy };
    });
    c.addEventListener("pointermove", (ev) => {
      const r = c.getBoundingClientRect();
      if (this.drag) {
        this.ox = this.drag.ox - (ev.clientX - this.drag.x) / this.sx;
        this.oy = this.drag.oy - (ev.clientY - this.drag.y) / this.sy;
        this.schedule();
      }
      this.hover(ev.clientX - r.left, ev.clientY - r.top);
    });
    const end = (): void => void (this.drag = null);
    c.addEventListener("pointerup", end);
    c.addEventListener("pointercancel", end);
    c.addEventListener("dblclick", (ev) => {
      const r = c.getBoundingClientRect();
      this.zoomAt(ev.clientX - r.left, ev.clientY - r.top, ev.shiftKey ? 0.5 : 2);
    });
  }

  // ---- hover: the statistics of the tile under the cursor

  private hover(px: number, py: number): void {
    const col = Math.floor(this.ox + px / this.sx), row = Math.floor(this.oy + py / this.sy);
    if (col < 0 || row < 0 || col >= this.cols || row >= this.rows) return;
    const [sr, sc] = this.span(this.level);
    const ty = Math.floor(row / sr), tx = Math.floor(col / sc);
    const t = this.tiles.get(this.key(this.slice, this.level, ty, tx));
    const d = this.readout.dataset;
    if (!t) {
      d.state = "loading";
      this.readout.textContent = `level ${this.level} tile (${tx}, ${ty}): loading…`;
      return;
    }
    const raw = (v: Num | number): string => String(v);
    Object.assign(d, {
      state: "ready", level: String(this.level), slice: String(this.slice), tx: String(tx), ty: String(ty), row: String(row), col: String(col),
      count: raw(t.count), changed: raw(t.changed), changedFraction: raw(t.changed_fraction), nonfinite: raw(t.nonfinite),
      sumDelta: raw(t.sum_delta), sumSqDelta: raw(t.sum_sq_delta), meanDelta: raw(t.mean_delta), maxAbsDelta: raw(t.max_abs_delta),
      minDelta: raw(t.min_delta), maxDelta: raw(t.max_delta), relChange: raw(t.rel_change), cosine: raw(t.cosine),
    });
    const rows: [string, string][] = [
      ["elements", `rows ${fmtInt(t.row_begin)}–${fmtInt(t.row_end - 1)}, columns ${fmtInt(t.col_begin)}–${fmtInt(t.col_end - 1)} (${fmtInt(t.count)})`],
      ["changed", `${fmtInt(t.changed)} (${fmt(num(t.changed_fraction) * 100)} %)`],
      ["max |Δ|", fmt(t.max_abs_delta)],
      ["Δ range", `${fmt(t.min_delta)} to ${fmt(t.max_delta)}`],
      ["mean Δ", fmt(t.mean_delta)],
      ["Σ Δ / Σ Δ²", `${fmt(t.sum_delta)} / ${fmt(t.sum_sq_delta)}`],
      ["relative change", fmt(t.rel_change)],
      ["cosine", fmt(t.cosine)],
    ];
    if (t.nonfinite) rows.push(["non-finite pairs", fmtInt(t.nonfinite)]);
    const v = this.level === 0 ? this.values.get(this.key(this.slice, 0, ty, tx)) : undefined;
    if (v) {
      const delta = v.delta[(row - v.r0) * (v.c1 - v.c0) + (col - v.c0)];
      d.delta = String(delta);
      rows.unshift([`Δ at (${fmtInt(row)}, ${fmtInt(col)})`, fmt(delta)]);
    } else delete d.delta;
    const table = el("table", { class: "facts" });
    for (const [k, v] of rows) table.append(el("tr", { "data-field": k }, el("th", {}, k), el("td", {}, v)));
    const where = `level ${this.level} tile (${tx}, ${ty}) under row ${fmtInt(row)}, column ${fmtInt(col)}`;
    const key = this.key(this.slice, this.level, ty, tx);
    if (d.key === key && this.readout.querySelector(".delta-histogram")) {
      // the same tile: keep its histogram, update the place and the element's Δ
      this.readout.replaceChildren(el("p", { class: "readout-where" }, where), table, ...[...this.readout.querySelectorAll(".hist-title, .delta-histogram")]);
      return;
    }
    d.key = key;
    this.readout.replaceChildren(el("p", { class: "readout-where" }, where), table);
    // The tile's histogram of Δ (GET …/tiles/…?x=&y=, once per tile).
    let p = this.histograms.get(key);
    if (!p) {
      p = getJson<DiffStats>(diffPath(this.opts.a, this.opts.b, "tiles", this.opts.name), { level: this.level, slice: this.slice, x: tx, y: ty });
      this.histograms.set(key, p);
      p.catch(() => this.histograms.delete(key));
    }
    const seq = ++this.hoverSeq;
    p.then(
      (full) => {
        if (seq === this.hoverSeq && d.key === key) this.readout.append(el("p", { class: "hist-title" }, "histogram of Δ in this tile"), deltaHistogram(full.histogram, "diff-readout-histogram"));
      },
      (e) => this.opts.onError(e, `diff tile ${key}`),
    );
  }

  // ---- drawing

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      void this.draw();
    });
  }

  /** The limits in force and where they come from; null lo/hi: automatic over the drawn values. */
  private limits(loaded: number[]): { lo: number | null; hi: number | null; source: string } {
    if (this.custom) return { lo: this.custom[0], hi: this.custom[1], source: "custom limits" };
    const s = this.opts.first.difference;
    const t = parseTransform(this.transform);
    if (t === "log") return { lo: null, hi: null, source: "full: the drawn tiles' range of |value| (log)" };
    if (this.quantity.id === "abs_delta") return { lo: 0, hi: num(s.max_abs_delta), source: "full: 0 to the pair's max |Δ| (exact)" };
    if (this.quantity.id === "extreme_delta" || (this.elementMode && this.quantity.id === "delta")) return { lo: num(s.min_delta), hi: num(s.max_delta), source: "full: the pair's min Δ to max Δ (exact)" };
    if (this.quantity.id === "changed_fraction") return { lo: 0, hi: 1, source: "full: 0 to 1" };
    const [lo, hi] = autoLimits(loaded, t, false);
    return { lo, hi, source: `full: the range of the ${loaded.length} tile(s) loaded at level ${this.level}` };
  }

  private async draw(): Promise<void> {
    const seq = ++this.drawSeq;
    const ctx = this.canvas.getContext("2d");
    const w = this.canvas.clientWidth, h = this.canvas.clientHeight;
    if (!ctx || !w || !h) return;
    if (!this.fitted) this.fit();
    this.level = this.chooseLevel();
    const [x0, x1, y0, y1] = this.visible(this.level);
    this.elementMode = this.levelChoice === "auto" && this.level === 0 && this.sx >= ELEMENT_PX && this.sy >= ELEMENT_PX &&
      ELEMENT_QUANTITIES.has(this.quantity.id) && (x1 - x0) * (y1 - y0) <= MAX_ELEMENT_TILES;
    const want: DiffTile[] = [];
    let missing = false;
    for (let ty = y0; ty < y1; ty++)
      for (let tx = x0; tx < x1; tx++) {
        const t = this.tiles.get(this.key(this.slice, this.level, ty, tx));
        if (t) want.push(t);
        else missing = true;
      }
    const d = this.canvas.dataset;
    if (missing) {
      d.state = "loading";
      void this.fetch(this.level, [x0, x1, y0, y1]);
    }
    const loaded = [...this.tiles.entries()].filter(([k]) => k.startsWith(`${this.slice}/${this.level}/`)).map(([, t]) => this.quantity.value(t));
    const lim = this.limits(loaded);
    let colormap = this.colormap === "auto" ? (this.quantity.signed && this.transform !== "log" ? "RdBu_r" : "viridis") : this.colormap;
    let { lo, hi } = lim;
    if (lo !== null && hi !== null && !this.custom && DIVERGING_MAPS.has(colormap) && lo < 0 && hi > 0) {
      const m = Math.max(-lo, hi);
      [lo, hi] = [-m, m];
    }
    if (lo !== null && hi !== null && !(lo < hi)) [lo, hi] = [null, null]; // nothing changed: one colour
    const values = Float64Array.from(want.map((t) => this.quantity.value(t)));
    let colours;
    try {
      colours = await displayColorize(values, { transform: this.transform, lo, hi, colormap });
    } catch (e) {
      if (seq !== this.drawSeq) return;
      d.state = "error";
      this.status.textContent = "Cannot draw: " + describeError(e);
      this.opts.onError(e, "diff heatmap");
      return;
    }
    if (seq !== this.drawSeq) return; // a newer draw started meanwhile
    const dpr = this.canvas.width / w;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, w, h);
    const X = (c: number): number => (c - this.ox) * this.sx;
    const Y = (r: number): number => (r - this.oy) * this.sy;
    ctx.fillStyle = "#d8d8d8";
    ctx.fillRect(X(0), Y(0), this.cols * this.sx, this.rows * this.sy);
    this.drawn = want.map((t, i) => {
      const rgba = Array.from(colours.rgba.subarray(4 * i, 4 * i + 4));
      ctx.fillStyle = `rgba(${rgba[0]},${rgba[1]},${rgba[2]},${rgba[3] / 255})`;
      ctx.fillRect(X(t.col_begin), Y(t.row_begin), (t.col_end - t.col_begin) * this.sx, (t.row_end - t.row_begin) * this.sy);
      return { level: this.level, tx: t.tx, ty: t.ty, value: values[i], rgba, row_begin: t.row_begin, row_end: t.row_end, col_begin: t.col_begin, col_end: t.col_end };
    });
    const elementsMissing = this.elementMode ? await this.drawElements(ctx, want, { transform: this.transform, lo: colours.lo, hi: colours.hi, colormap }, X, Y) : false;
    if (seq !== this.drawSeq) return;
    if (!this.elementMode) this.elementTiles = [];
    drawColourBar(this.legend, colormapTable(colormap));
    this.legendLo.textContent = fmt(colours.lo);
    this.legendHi.textContent = fmt(colours.hi);
    const [sr, sc] = this.span(this.level);
    Object.assign(d, {
      state: missing || elementsMissing ? "loading" : "ready", mode: this.elementMode ? "elements" : "tiles", level: String(this.level), quantity: this.quantity.id, colormap, transform: this.transform,
      limits: `${colours.lo},${colours.hi}`, limitsSource: lo === null ? "full: the drawn tiles' range" : lim.source, tiles: String(want.length),
      colourPath: colours.path, ox: String(this.ox), oy: String(this.oy), sx: String(this.sx), sy: String(this.sy),
    });
    this.status.textContent =
      (this.elementMode ? `elements (Δ of each) over level 0 · ` : `level ${this.level} of ${this.opts.first.levels.length - 1} · a cell is a ${fmtInt(sr)} × ${fmtInt(sc)}-element tile · `) +
      `${want.length} tile(s) drawn${missing ? ", loading more" : ""} · ${this.quantity.label} · ${colormap} [${fmt(colours.lo)}, ${fmt(colours.hi)}] ` +
      `(${d.limitsSource}) · coloured ${colours.path === "webgpu" ? "on this page's WebGPU adapter" : "on this page's CPU"}`;
  }

  /** Element mode: each visible level-0 tile's Δ (|Δ| for abs_delta) coloured under the same scale, over its tile's
   *  colour; returns whether some tile's values are still loading. */
  private async drawElements(ctx: CanvasRenderingContext2D, tiles: DiffTile[], req: { transform: string; lo: number; hi: number; colormap: string },
                             X: (c: number) => number, Y: (r: number) => number): Promise<boolean> {
    const abs = this.quantity.id === "abs_delta";
    const style = [this.quantity.id, req.transform, req.colormap, req.lo, req.hi].join("|");
    let missing = false;
    const shown: { key: string; v: DiffValues; rgba: Uint8Array }[] = [];
    for (const t of tiles) {
      const key = this.key(this.slice, 0, t.ty, t.tx);
      const v = this.values.get(key);
      if (!v) {
        missing = true;
        void this.fetchValues(t.tx, t.ty);
        continue;
      }
      let c = this.coloured.get(style + "#" + key);
      if (!c) {
        const vals = abs ? v.delta.map(Math.abs) : v.delta;
        const out = await displayColorize(vals, req);
        const w = v.c1 - v.c0, h = v.r1 - v.r0;
        const canvas = document.createElement("canvas");
        canvas.width = w;
        canvas.height = h;
        canvas.getContext("2d")?.putImageData(new ImageData(new Uint8ClampedArray(out.rgba), w, h), 0, 0);
        c = { canvas, rgba: out.rgba };
        if (this.coloured.size > 64) this.coloured.clear();
        this.coloured.set(style + "#" + key, c);
      }
      ctx.drawImage(c.canvas, X(v.c0), Y(v.r0), (v.c1 - v.c0) * this.sx, (v.r1 - v.r0) * this.sy);
      shown.push({ key, v, rgba: c.rgba });
    }
    this.elementTiles = shown;
    return missing;
  }

  private async fetchValues(tx: number, ty: number): Promise<void> {
    const key = this.key(this.slice, 0, ty, tx);
    if (this.valuesRequested.has(key)) return;
    this.valuesRequested.add(key);
    try {
      this.values.set(key, await diffValues(this.opts.a, this.opts.b, this.opts.name, 0, this.slice, tx, ty));
      this.schedule();
    } catch (e) {
      this.canvas.dataset.state = "error"; // not asked again (see fetch)
      this.opts.onError(e, `diff values of tile (${tx}, ${ty})`);
    }
  }

  private async fetch(level: number, win: [number, number, number, number]): Promise<void> {
    const key = `${this.slice}/${level}/${win.join(",")}`;
    if (this.requested.has(key)) return;
    this.requested.add(key);
    try {
      const r = await diffTiles(this.opts.a, this.opts.b, this.opts.name, level, this.slice, win);
      for (const t of r.tiles) this.tiles.set(this.key(r.slice, r.level, t.ty, t.tx), t);
      this.schedule();
    } catch (e) {
      // the window stays in `requested`: not asked again (a redraw would repeat the error); the banner says why
      this.canvas.dataset.state = "error";
      this.opts.onError(e, `diff tiles of level ${level}`);
    }
  }
}
