// Line plots of values along one axis: a tensor's row or column (GET /api/profile/…), a 1-D tensor, a line across a
// virtual image. Each pixel column of the plot draws the min-max envelope of the values under it, so no spike is
// lost however many values share a pixel; NaN and ±Inf are marked in red along the bottom edge, never plotted as
// numbers. Axes, title and "save figure" come from figure.ts.
import { el } from "./dom";
import { type Figure, FigureFrame, type FigureTick, physicalTicks, saveFigureLinks } from "./figure";

export interface ProfileData {
  title: string;
  values: ArrayLike<number>;
  /** The x axis: its label and how many of its units the whole plot spans (values.length for indices). */
  xLabel: string;
  xExtent: number;
  yLabel: string;
  note?: string;
}

/** The finite range of the values (lo === hi for a constant profile; [0, 0] when none is finite). */
export function finiteRange(values: ArrayLike<number>): [number, number] {
  let lo = Infinity, hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v)) (lo = Math.min(lo, v)), (hi = Math.max(hi, v));
  }
  return lo <= hi ? [lo, hi] : [0, 0];
}

/** Draws the values onto the canvas (its pixel size) between y limits [lo, hi]; returns how many were non-finite. */
function drawValues(canvas: HTMLCanvasElement, values: ArrayLike<number>, lo: number, hi: number): number {
  const ctx = canvas.getContext("2d");
  if (!ctx) return 0;
  const w = canvas.width, h = canvas.height, n = values.length;
  ctx.fillStyle = "white";
  ctx.fillRect(0, 0, w, h);
  const y = (v: number) => (hi > lo ? (1 - (v - lo) / (hi - lo)) * (h - 8) + 4 : h / 2);
  let bad = 0;
  ctx.strokeStyle = "#1f5fa8";
  ctx.fillStyle = "#c0392b";
  ctx.lineWidth = 1;
  if (n <= w) {
    // Few values: a polyline through each value's centre, a dot on each, a red mark under each NaN / Inf.
    ctx.beginPath();
    let open = false;
    for (let i = 0; i < n; i++) {
      const v = values[i];
      const x = ((i + 0.5) * w) / n;
      if (!Number.isFinite(v)) {
        bad++;
        ctx.fillRect(x - 1, h - 4, 3, 4);
        open = false;
        continue;
      }
      if (open) ctx.lineTo(x, y(v));
      else ctx.moveTo(x, y(v));
      open = true;
    }
    ctx.stroke();
    if (n <= w / 4) for (let i = 0; i < n; i++) if (Number.isFinite(values[i])) ctx.fillRect(((i + 0.5) * w) / n - 1.5, y(values[i]) - 1.5, 3, 3);
    return bad;
  }
  // Many values: per pixel column the envelope of its values, joined to the next column's.
  let prev: [number, number] | null = null;
  for (let px = 0; px < w; px++) {
    const a = Math.floor((px * n) / w), b = Math.max(a + 1, Math.floor(((px + 1) * n) / w));
    let mn = Infinity, mx = -Infinity, nonfinite = 0;
    for (let i = a; i < b; i++) {
      const v = values[i];
      if (Number.isFinite(v)) (mn = Math.min(mn, v)), (mx = Math.max(mx, v));
      else nonfinite++;
    }
    bad += nonfinite;
    if (nonfinite) ctx.fillRect(px - 1, h - 4, 3, 4);
    if (mn > mx) {
      prev = null;
      continue;
    }
    const top = Math.min(y(mx), prev ? prev[1] : Infinity), bottom = Math.max(y(mn), prev ? prev[0] : -Infinity);
    ctx.beginPath();
    ctx.moveTo(px + 0.5, top);
    ctx.lineTo(px + 0.5, Math.max(bottom, top + 1));
    ctx.stroke();
    prev = [y(mx), y(mn)];
  }
  return bad;
}

/** A plot on the page (#`${id}`): the curve, its axes and "save figure"; data-count, data-nonfinite, data-range. */
export class ProfilePlot {
  readonly element: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  private readonly frame: FigureFrame;
  private readonly caption: HTMLElement;
  private figure: Figure | null = null;

  constructor(readonly id: string, private readonly cssW = 560, private readonly cssH = 180) {
    this.canvas = el("canvas", { id: `${id}-canvas`, class: "profile-canvas", width: String(cssW), height: String(cssH), style: `width: ${cssW}px; height: ${cssH}px` });
    this.frame = new FigureFrame(id);
    this.caption = el("p", { class: "status", id: `${id}-caption` });
    this.element = el("div", { class: "profile-plot", id, hidden: "" },
      el("div", { class: "figure-grid" }, this.frame.yAxis, this.canvas, this.frame.bar, el("span", {}), this.frame.xAxis),
      this.caption, saveFigureLinks(`${id}-save`, id, () => this.figure, "save profile"));
  }

  show(p: ProfileData): void {
    const [lo, hi] = finiteRange(p.values);
    const pad = hi > lo ? (hi - lo) * 0.02 : Math.abs(lo) * 0.05 || 1;
    const [ylo, yhi] = [lo - pad, hi + pad];
    const bad = drawValues(this.canvas, p.values, ylo, yhi);
    // The curve spans canvas rows [4, h − 4] (drawValues), high values at the top: each tick at its value's row.
    const h = this.canvas.height;
    const yTicks: FigureTick[] = physicalTicks(yhi - ylo, 4, -ylo).map((t) => ({ at: ((1 - t.at) * (h - 8) + 4) / h, label: t.label }));
    this.figure = { title: p.title, image: this.canvas, x: { label: p.xLabel, ticks: physicalTicks(p.xExtent, 6) }, y: { label: p.yLabel, ticks: yTicks }, note: p.note };
    this.frame.draw(this.figure, this.cssW, this.cssH);
    this.caption.textContent = `${p.title}: ${p.values.length} values, finite from ${lo} to ${hi}` +
      (bad ? `; ${bad} NaN or ±Inf, marked in red along the bottom` : "") +
      (p.values.length > this.canvas.width ? ` (each pixel column draws the min–max of the ${(p.values.length / this.canvas.width).toFixed(1)} values under it)` : "");
    Object.assign(this.element.dataset, { count: String(p.values.length), nonfinite: String(bad), range: `${lo},${hi}`, title: p.title });
    this.element.hidden = false;
  }
}
