// The tensor page: facts, exact statistics and quantiles, the histogram (GET /api/tensors/{ckpt}/{name})
// and the heatmap of its statistics pyramid.
import { api, num, type DetailStats, type TensorDetail } from "./api";
import { el, showError } from "./dom";
import { fmt, fmtBytes, fmtInt, fmtShape } from "./format";
import { Heatmap } from "./heatmap";
import { histogramView } from "./histogram";

function table(rows: [string, string | Node][], id: string): HTMLTableElement {
  const t = el("table", { class: "facts", id });
  for (const [k, v] of rows) t.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
  return t;
}

function statsRows(s: DetailStats): [string, string][] {
  const rows: [string, string][] = [
    ["count", fmtInt(s.count)],
    ["finite", fmtInt(s.finite_count)],
    ["NaN", fmtInt(s.nan_count)],
    ["±Inf", fmtInt(s.inf_count)],
    ["zeros", fmtInt(s.zero_count)],
    ["min", fmt(s.min)],
    ["max", fmt(s.max)],
    ["abs max", fmt(s.abs_max)],
    ["mean", fmt(s.mean)],
    ["std", fmt(s.std)],
    ["sum", fmt(s.sum)],
  ];
  for (const q of s.quantiles?.values ?? []) rows.push([`p${q.p * 100}`, fmt(num(q.value))]);
  return rows;
}

function factsRows(t: TensorDetail): [string, string][] {
  const rows: [string, string][] = [
    ["checkpoint", t.checkpoint],
    ["dtype", t.dequantized_from ? `${t.dtype} (dequantized from ${t.dequantized_from})` : t.dtype],
    ["stored type", t.stored_type],
    ["shape", fmtShape(t.shape)],
    ["parameters", fmtInt(t.parameters)],
    ["bytes", `${fmtInt(t.bytes)} (${fmtBytes(t.bytes)})`],
  ];
  if (t.file) rows.push(["file", `${t.file} @ ${fmtInt(t.offset ?? 0)}`]);
  const q = t.quantization as { bits_per_weight?: number } | null;
  if (q && typeof q.bits_per_weight === "number") rows.push(["bits per weight", fmt(q.bits_per_weight)]);
  const p = t.pyramid;
  if (p)
    rows.push([
      "pyramid",
      `${p.levels.length} level${p.levels.length > 1 ? "s" : ""} of ${p.tile_size[0]} × ${p.tile_size[1]}-element tiles over a ` +
        `${fmtInt(p.view.rows)} × ${fmtInt(p.view.cols)} view` +
        (p.view.slices > 1 ? ` (${fmtInt(p.view.slices)} slices)` : ""),
    ]);
  return rows;
}

export async function renderTensorPage(root: HTMLElement, ckpt: string, name: string): Promise<void> {
  root.replaceChildren(el("p", { class: "status" }, `Loading ${name}…`));
  const t = await api.tensor(ckpt, name);
  const title = el("h2", { id: "tensor-name" }, t.name);
  const back = el("a", { href: "#/", class: "back" }, "← all tensors");
  const left = el("section", { class: "tensor-facts" }, el("h3", {}, "Tensor"), table(factsRows(t), "facts"));
  if (t.stats) {
    left.append(el("h3", {}, "Statistics"), table(statsRows(t.stats), "stats"));
  } else {
    left.append(el("p", { class: "notice" }, "No statistics: " + (t.unavailable ?? "this tensor cannot be read here.")));
  }
  const right = el("section", { class: "tensor-views" });
  if (t.stats?.histogram) right.append(el("h3", {}, "Histogram"), histogramView(t.stats.histogram));
  right.append(el("h3", {}, "Heatmap"));
  root.replaceChildren(back, title, el("div", { class: "tensor-layout" }, left, right));
  if (t.pyramid) {
    const heatmap = new Heatmap({ ckpt, name: t.name, pyramid: t.pyramid, onError: (e, c) => showError(e, c) });
    right.append(heatmap.element);
  } else {
    right.append(
      el("p", { class: "notice", id: "no-pyramid" }, "No statistics pyramid is stored for this tensor (quantized tensors, or an index built with --no-pyramid): the heatmap is unavailable."),
    );
  }
}
