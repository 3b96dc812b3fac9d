// The heatmap's axes: element indices of the tensor's 2-D view along the top (columns) and down the left (rows), for
// the part in view at the current pan and zoom. Labels are whole multiples of a 1-2-5 step chosen so that about
// `target` fit along each side; each stands at the left (top) edge of its element, (index - origin) × pixels per
// element from the canvas's edge. HTML beside the canvas, so no label covers a cell.
import { el } from "./dom";

/** A whole 1-2-5 step (at least 1) that gives about `target` labels over `span` elements. */
export function indexStep(span: number, target: number): number {
  const raw = Math.max(1, span / target);
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return Math.max(1, Math.round(m * p));
  return Math.max(1, Math.round(10 * p));
}

/** Index labels of [origin, origin + extentPx / pxPerElement) ∩ [0, count): {index, px} with px from the edge. */
export function axisLabels(origin: number, pxPerElement: number, extentPx: number, count: number, target: number): { index: number; px: number }[] {
  if (!(pxPerElement > 0) || !(extentPx > 0)) return [];
  const first = Math.max(0, origin);
  const last = Math.min(count, origin + extentPx / pxPerElement);
  if (!(last > first)) return [];
  const step = indexStep(last - first, target);
  const out: { index: number; px: number }[] = [];
  for (let k = Math.ceil(first / step) * step; k < last; k += step) out.push({ index: k, px: (k - origin) * pxPerElement });
  return out;
}

export class HeatmapAxes {
  readonly top = el("div", { class: "heatmap-axis heatmap-axis-x", id: "heatmap-axis-x" });
  readonly left = el("div", { class: "heatmap-axis heatmap-axis-y", id: "heatmap-axis-y" });
  private key = "";

  /** Redraws the labels when the view changed: origin (ox, oy) in elements, scale (sx, sy) in px per element. */
  update(ox: number, oy: number, sx: number, sy: number, w: number, h: number, rows: number, cols: number): void {
    const key = [ox, oy, sx, sy, w, h, rows, cols].join(",");
    if (key === this.key) return;
    this.key = key;
    const label = (index: number, style: string) => el("span", { class: "axis-label", style, "data-index": String(index) }, String(index));
    this.top.replaceChildren(...axisLabels(ox, sx, w, cols, Math.max(2, Math.floor(w / 90))).map((l) => label(l.index, `left: ${l.px.toFixed(2)}px`)));
    this.left.replaceChildren(...axisLabels(oy, sy, h, rows, Math.max(2, Math.floor(h / 60))).map((l) => label(l.index, `top: ${l.px.toFixed(2)}px`)));
  }
}
