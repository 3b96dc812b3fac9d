// The tensor page's "Outliers" list (#outliers): the largest-magnitude elements and the NaN / Inf positions the
// server finds from the pyramid (GET /api/outliers/{ckpt}/{name}, docs/api.md), each a button that centres the
// heatmap on its element, so an outlier is one click away however far the view is zoomed out.
import { getJson, tensorPath } from "./api";
import { el } from "./dom";
import { fmt, fmtInt } from "./format";

interface Outlier {
  kind: "abs_max" | "nan" | "inf";
  slice: number;
  row: number;
  col: number;
  cell: [number, number];
  value: number | string;
}

interface OutliersDoc {
  tiles_ranked: number;
  nan: number;
  inf: number;
  nonfinite_listed_most: number;
  outliers: Outlier[];
}

/** What one entry says: the value and the element (or the span of elements of a wide tile's cell). */
function entryText(o: Outlier, slices: boolean): string {
  const value = typeof o.value === "number" ? fmt(o.value) : o.value;
  const span = (at: number, n: number) => (n > 1 ? `${fmtInt(at)}–${fmtInt(at + n - 1)}` : fmtInt(at));
  return `${value} at row ${span(o.row, o.cell[0])}, column ${span(o.col, o.cell[1])}${slices ? ` of slice ${o.slice}` : ""}`;
}

/** The list for tensor `name`; `jump(row, col, slice)` centres the view on an element. */
export function outliersList(ckpt: string, name: string, slices: number, jump: (row: number, col: number, slice: number) => void): HTMLElement {
  const box = el("div", { class: "outliers", id: "outliers", "data-state": "loading" }, el("p", { class: "hint" }, "Finding the outliers from the pyramid…"));
  void (async () => {
    try {
      const doc = await getJson<OutliersDoc>(tensorPath("outliers", ckpt, name));
      const list = el("ol", {});
      for (const o of doc.outliers) {
        const b = el("button", { type: "button", class: "outlier", "data-kind": o.kind, "data-row": String(o.row), "data-col": String(o.col), "data-slice": String(o.slice) },
          `${o.kind === "abs_max" ? "|x| large" : o.kind === "nan" ? "NaN" : "Inf"}: ${entryText(o, slices > 1)}`);
        b.addEventListener("click", () => jump(o.row + Math.floor(o.cell[0] / 2), o.col + Math.floor(o.cell[1] / 2), o.slice));
        list.append(el("li", {}, b));
      }
      const damaged = doc.nan + doc.inf;
      const more = (n: number, what: string) => (n > doc.nonfinite_listed_most ? ` (the first ${doc.nonfinite_listed_most} of ${fmtInt(n)} ${what} listed)` : "");
      box.replaceChildren(
        el("p", { class: "hint" }, `The largest |value| of each of the ${Math.min(doc.tiles_ranked, doc.outliers.filter((o) => o.kind === "abs_max").length)} tiles of largest abs max (of ${fmtInt(doc.tiles_ranked)} tiles), ` +
          (damaged ? `and ${fmtInt(doc.nan)} NaN and ${fmtInt(doc.inf)} ±Inf${more(doc.nan, "NaN")}${more(doc.inf, "Inf")}` : "no NaN or Inf") + ". Click one to centre the heatmap on it."),
        list,
      );
      box.dataset.state = "ready";
      box.dataset.count = String(doc.outliers.length);
    } catch (e) {
      box.replaceChildren(el("p", { class: "notice" }, `No outlier list: ${e instanceof Error ? e.message : String(e)}`));
      box.dataset.state = "error";
    }
  })();
  return box;
}
