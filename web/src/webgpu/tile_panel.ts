// "Display on this page" (#gpu-display), under the heatmap: the raw tile statistics of one pyramid level
// (GET /api/tiles binary records, docs/api.md) turned into the heatmap style's cell values (mean, min,
// max, abs_max, std or envelope, as src/render/cell_image.cpp cell_values does), then coloured and
// histogrammed by TM_OP_DISPLAY_COLORIZE on the page's WebGPU adapter (colorize.ts) with the heatmap's
// colour scale. The server's render of the same level (GET /api/render…?level=L&format=json) is fetched
// too: its histogram is compared with the page's (data-match), and when no adapter exists its image is
// shown instead (the server path). data-path says which path ran: "webgpu" or "server".
import { getBlob, getJson, num, tensorPath, type Pyramid, type RenderJson } from "../api";
import { describeError, el } from "../dom";
import { fmtInt } from "../format";
import type { Resolved, Style } from "../limits";
import { adapterReport, gpuColorizer } from "./colorize";
import { displayColorize } from "./display";

const MAX_TILES = 1024; // records fetched per style at most: the finest level with at most this many tiles
const CONCURRENCY = 6;

interface TileRecord {
  count: number;
  nan: number;
  inf: number;
  min: number;
  max: number;
  absMax: number;
  sum: number;
  m2: number;
}

function parseRecord(buf: ArrayBuffer): TileRecord {
  const b = new DataView(buf);
  const u = (o: number): number => Number(b.getBigUint64(o, true));
  const f = (o: number): number => b.getFloat64(o, true);
  return { count: u(0), nan: u(8), inf: u(16), min: f(32), max: f(40), absMax: f(48), sum: f(56), m2: f(64) };
}

/** The cell values of src/render/cell_image.cpp (envelope: every min, then every max); null if unknown. */
function cellValues(tiles: TileRecord[], stat: string): Float64Array | null {
  const n = tiles.length;
  const v = new Float64Array(stat === "envelope" ? 2 * n : n);
  for (let i = 0; i < n; i++) {
    const t = tiles[i];
    const finite = t.count - t.nan - t.inf;
    const any = finite > 0;
    switch (stat) {
      case "mean": v[i] = any ? t.sum / finite : NaN; break;
      case "min": v[i] = any ? t.min : NaN; break;
      case "max": v[i] = any ? t.max : NaN; break;
      case "abs_max": v[i] = any ? t.absMax : NaN; break;
      case "std": v[i] = any ? Math.sqrt(t.m2 / finite) : NaN; break;
      case "envelope":
        v[i] = any ? t.min : NaN;
        v[n + i] = any ? t.max : NaN;
        break;
      default: return null;
    }
  }
  return v;
}

export class TileStatsPanel {
  readonly element: HTMLElement;
  private readonly text: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly image: HTMLImageElement;
  private seq = 0;
  private records = new Map<string, TileRecord[]>(); // per level|slice

  constructor(private readonly ckpt: string, private readonly name: string, private readonly pyramid: Pyramid) {
    this.text = el("p", { class: "gpu-display-text" }, "Waiting for the heatmap's colour scale…");
    this.canvas = el("canvas", { class: "gpu-display-canvas", width: "1", height: "1" });
    this.image = el("img", { class: "gpu-display-canvas", alt: "server render of the same cells" });
    this.canvas.hidden = true;
    this.image.hidden = true;
    this.element = el("div", { class: "gpu-display", id: "gpu-display", "data-state": "waiting" }, this.text, this.canvas, this.image);
  }

  /** The finest level with at most MAX_TILES tiles (the coarsest if none is that small). */
  private level(): number {
    const levels = this.pyramid.levels;
    for (let l = 0; l < levels.length; l++) if (levels[l].grid[0] * levels[l].grid[1] <= MAX_TILES) return l;
    return levels.length - 1;
  }

  private async fetchRecords(level: number, slice: number): Promise<TileRecord[]> {
    const key = `${level}|${slice}`;
    const have = this.records.get(key);
    if (have) return have;
    const [gx, gy] = this.pyramid.levels[level].grid;
    const out = new Array<TileRecord>(gx * gy);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < out.length) {
        const i = next++;
        const blob = await getBlob(tensorPath("tiles", this.ckpt, this.name), { level, x: i % gx, y: Math.floor(i / gx), slice, format: "binary" });
        out[i] = parseRecord(await blob.arrayBuffer());
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, out.length) }, worker));
    this.records.set(key, out);
    return out;
  }

  /** Recolours for a heatmap style (its resolved scale); the latest call wins. */
  async update(style: Style, resolved: Resolved): Promise<void> {
    const seq = ++this.seq;
    const d = this.element.dataset;
    d.state = "loading";
    this.text.textContent = "Colouring the raw tile statistics…";
    try {
      const level = this.level();
      const [gx, gy] = this.pyramid.levels[level].grid;
      const gpu = await gpuColorizer();
      const report = adapterReport();
      const renderPath = tensorPath("render", this.ckpt, this.name, ".png");
      const params = { ...resolved.params, level };
      const server = getJson<RenderJson>(renderPath, { ...params, format: "json" });
      server.catch(() => {}); // awaited below; a failure is reported there
      let summary: string;
      let match = false;
      if (gpu) {
        const tiles = await this.fetchRecords(level, style.slice);
        const values = cellValues(tiles, style.stat);
        if (!values) throw new Error(`statistic ${style.stat} cannot be read from tile records`);
        const lim = resolved.limits;
        const r = await displayColorize(values, { transform: style.transform, lo: lim ? lim[0] : null, hi: lim ? lim[1] : null, colormap: resolved.colormap }, "webgpu");
        const s = await server;
        if (seq !== this.seq) return;
        const h = s.histogram;
        const want = [...h.counts, h.nan, h.pos_inf, h.neg_inf];
        match = want.length === r.counts.length && want.every((c, i) => c === r.counts[i]) &&
          num(s.limits[0]) === r.lo && num(s.limits[1]) === r.hi;
        this.draw(r.rgba, gx, gy);
        summary =
          `${report?.label}: coloured and histogrammed ${fmtInt(values.length)} cell values (${style.stat} of ${fmtInt(gx * gy)} level-${level} tile records) in WGSL; ` +
          (match ? "its histogram equals the server's render of the same cells." : "its histogram DIFFERS from the server's render of the same cells.");
        d.path = "webgpu";
      } else {
        const [s, png] = await Promise.all([server, getBlob(renderPath, params)]);
        if (seq !== this.seq) return;
        match = true; // the server's own histogram
        const url = URL.createObjectURL(png);
        this.image.onload = () => URL.revokeObjectURL(url);
        this.image.src = url;
        this.image.hidden = false;
        this.canvas.hidden = true;
        const cells = s.histogram.counts.reduce((a, b) => a + b, 0) + s.histogram.nan + s.histogram.pos_inf + s.histogram.neg_inf;
        summary = `${report?.label ?? "webgpu: unavailable"}: level-${level} cells coloured by the server instead (${fmtInt(cells)} cell values).`;
        d.path = "server";
      }
      d.level = String(level);
      d.cells = String(gx * gy);
      d.match = String(match);
      d.adapter = report?.label ?? "";
      d.key = resolved.key;
      this.text.textContent = summary;
      d.state = "ready";
    } catch (e) {
      if (seq !== this.seq) return;
      d.state = "error";
      this.text.textContent = "Cannot colour the tile statistics here: " + describeError(e);
    }
  }

  /** The first gx × gy colours as an image, one cell per tile, scaled up. */
  private draw(rgba: Uint8Array, gx: number, gy: number): void {
    this.canvas.width = gx;
    this.canvas.height = gy;
    const ctx = this.canvas.getContext("2d");
    if (ctx) ctx.putImageData(new ImageData(new Uint8ClampedArray(rgba.slice(0, 4 * gx * gy)), gx, gy), 0, 0);
    const scale = Math.max(1, Math.floor(Math.min(512 / gx, 256 / gy)));
    this.canvas.style.width = `${gx * scale}px`;
    this.canvas.style.height = `${gy * scale}px`;
    this.canvas.style.imageRendering = "pixelated";
    this.canvas.hidden = false;
    this.image.hidden = true;
  }
}
