// The hover read-out: the exact statistics of one pyramid tile (GET /api/tiles/…&format=json), fetched
// once per tile and shown with the cursor's element; the exact values are also in data-* attributes.
import { getJson, tensorPath, type TileJson } from "./api";
import { describeError, el } from "./dom";
import { fmt, fmtInt } from "./format";

export class TileReadout {
  readonly element: HTMLElement;
  private seq = 0;
  private cache = new Map<string, Promise<TileJson>>();

  constructor(
    private readonly ckpt: string,
    private readonly name: string,
    private readonly slices: number,
  ) {
    this.element = el("div", { class: "readout", id: "readout", "data-state": "idle" }, "Hover over the heatmap for the statistics of the tile under the cursor.");
  }

  reset(): void {
    this.cache.clear();
    delete this.element.dataset.key;
    this.element.dataset.state = "idle";
  }

  /** Shows tile (x, y) of `level` for the element at (row, col). */
  show(level: number, x: number, y: number, slice: number, row: number, col: number): void {
    const key = `${level}|${x}|${y}|${slice}`;
    const d = this.element.dataset;
    if (d.key === key && d.state !== "error") {
      const where = this.element.querySelector(".readout-where");
      if (where) where.textContent = `row ${fmtInt(row)}, column ${fmtInt(col)}`;
      return;
    }
    const seq = ++this.seq;
    d.key = key;
    d.state = "loading";
    let p = this.cache.get(key);
    if (!p) {
      p = getJson<TileJson>(tensorPath("tiles", this.ckpt, this.name), { level, x, y, slice, format: "json" });
      this.cache.set(key, p);
      p.catch(() => this.cache.delete(key));
    }
    p.then(
      (t) => {
        if (seq === this.seq) this.render(t, row, col);
      },
      (e) => {
        if (seq !== this.seq) return;
        d.state = "error";
        this.element.textContent = "Tile statistics unavailable: " + describeError(e);
      },
    );
  }

  private render(t: TileJson, row: number, col: number): void {
    const s = t.stats;
    const d = this.element.dataset;
    Object.assign(d, {
      level: String(t.level),
      x: String(t.tile[0]),
      y: String(t.tile[1]),
      slice: String(t.slice),
      count: String(s.count),
      min: String(s.min),
      max: String(s.max),
      mean: String(s.mean),
      std: String(s.std),
      state: "ready",
    });
    const item = (label: string, value: string, field: string): HTMLElement =>
      el("span", { class: "readout-item" }, el("b", {}, label + " "), el("span", { "data-field": field }, value));
    this.element.replaceChildren(
      el("div", { class: "readout-where" }, `row ${fmtInt(row)}, column ${fmtInt(col)}`),
      el(
        "div",
        { class: "readout-tile" },
        `level ${t.level} tile (${t.tile[0]}, ${t.tile[1]})${this.slices > 1 ? ` slice ${t.slice}` : ""}: ` +
          `rows ${fmtInt(t.rows[0])}–${fmtInt(t.rows[1])}, columns ${fmtInt(t.cols[0])}–${fmtInt(t.cols[1])}`,
      ),
      el(
        "div",
        { class: "readout-stats" },
        item("count", fmtInt(s.count), "count"),
        item("min", fmt(s.min), "min"),
        item("max", fmt(s.max), "max"),
        item("mean", fmt(s.mean), "mean"),
        item("std", fmt(s.std), "std"),
        s.nan_count || s.inf_count ? item("NaN / Inf", `${fmtInt(s.nan_count)} / ${fmtInt(s.inf_count)}`, "nonfinite") : "",
      ),
    );
  }
}
