// The tensor page: facts (with the file / shard holding the tensor, from the detail's `file` and `offset`
// and GET /api/checkpoints' `files`; every facts row has data-field), the quantization facts
// (quant_facts.ts), exact statistics and quantiles, the histogram (GET /api/tensors/{ckpt}/{name}),
// the heatmap of its statistics pyramid with its outliers list (outliers_list.ts), and the placement reports: where the last render's ops ran (the
// server's X-Tensormorph-Placement header / render JSON `placement`) and where the index computed the
// statistics (the detail's `placement`); below them, when the name has a layer number, the same tensor in
// every layer (strips.ts).
import { compareWith } from "./diff_page";
import { api, num, onPlacement, tensorPath, type CheckpointInfo, type DetailStats, type Placement, type TensorDetail } from "./api";
import { el, showError } from "./dom";
import { saveFigureLinks } from "./figure";
import { fmt, fmtBytes, fmtInt, fmtShape } from "./format";
import { Heatmap } from "./heatmap";
import { histogramView } from "./histogram";
import { outliersList } from "./outliers_list";
import { isFallback, placementTable, reasonText } from "./placement";
import { quantizationView } from "./quant_facts";
import { layerStrips } from "./strips";
import { tensorProfile } from "./tensor_profile";
import { TileStatsPanel } from "./webgpu/tile_panel";

/**
 * The placement of the latest render of this tensor, updated as renders arrive (#render-placement; its
 * data-renders counts the reports seen, data-backends lists the backends that ran them). Shows only what
 * the server reported; until a render reports, it says so.
 */
function renderPlacementView(ckpt: string, name: string): HTMLElement {
  const box = el("div", { class: "render-placement", id: "render-placement", "data-renders": "0" });
  box.append(el("p", { class: "hint" }, "No render has reported its placement yet."));
  const path = tensorPath("render", ckpt, name, ".png");
  const tally = new Map<string, number>();
  let renders = 0;
  const unsubscribe = onPlacement((ev) => {
    if (!box.isConnected) return unsubscribe(); // the page was left (renders answer after it is drawn)
    if (ev.path !== path) return;
    renders++;
    for (const p of ev.placement) tally.set(p.backend, (tally.get(p.backend) ?? 0) + 1);
    const fallbacks = ev.placement.filter(isFallback);
    const summary = el(
      "p",
      { class: "placement-summary" },
      `${renders} render${renders > 1 ? "s" : ""} reported so far; ops ran on ` +
        [...tally].map(([b, n]) => `${b} (${n})`).join(", ") +
        ". The last one:",
    );
    box.replaceChildren(summary, placementTable(ev.placement, "render-placement-table"));
    if (fallbacks.length)
      box.append(
        el("p", { class: "notice fallback-note" }, "Fell back: " + fallbacks.map((p) => `${p.op} ran on ${p.backend} (${reasonText(p.reason)})`).join("; ")),
      );
    box.dataset.renders = String(renders);
    box.dataset.backends = [...tally.keys()].join(",");
    box.dataset.fallback = String(fallbacks.length > 0);
  });
  return box;
}

function indexPlacementView(placement: Placement[] | undefined): HTMLElement[] {
  if (!placement?.length) return [];
  const d = el("details", { class: "index-placement" }, el("summary", {}, "Where the index computed these statistics"));
  d.append(placementTable(placement, "index-placement-table"));
  return [d];
}

function table(rows: [string, string | Node][], id: string): HTMLTableElement {
  const t = el("table", { class: "facts", id });
  for (const [k, v] of rows) t.append(el("tr", { "data-field": k }, el("th", {}, k), el("td", {}, v)));
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

/** "shard 2 of 2 (10.5 MiB)" when the checkpoint has several files and lists this one. */
function shardText(file: string, ck: CheckpointInfo | undefined): string {
  const files = ck?.files ?? [];
  const i = files.findIndex((f) => f.name === file);
  if (i < 0) return "";
  return files.length > 1 ? `shard ${i + 1} of ${files.length} (${fmtBytes(files[i].size)})` : `the checkpoint's only file (${fmtBytes(files[i].size)})`;
}

function factsRows(t: TensorDetail, ck: CheckpointInfo | undefined): [string, string][] {
  const rows: [string, string][] = [
    ["checkpoint", ck ? `${ck.name} (${t.checkpoint})` : t.checkpoint],
    ["dtype", t.dequantized_from ? `${t.dtype} (dequantized from ${t.dequantized_from})` : t.dtype],
    ["stored type", t.stored_type],
    ["shape", fmtShape(t.shape)],
    ["parameters", fmtInt(t.parameters)],
    ["bytes", `${fmtInt(t.bytes)} (${fmtBytes(t.bytes)})`],
  ];
  if (t.file) {
    rows.push(["file", t.file]);
    const shard = shardText(t.file, ck);
    if (shard) rows.push(["shard", shard]);
    if (t.offset !== undefined) rows.push(["offset", `${fmtInt(t.offset)} bytes into the file`]);
  }
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
  const [t, cks] = await Promise.all([api.tensor(ckpt, name), api.checkpoints()]);
  const ck = cks.checkpoints.find((c) => c.id === ckpt);
  const title = el("h2", { id: "tensor-name" }, t.name);
  const back = el("a", { href: "#/", class: "back" }, "← all tensors");
  // Diff mode: this tensor against its counterpart in another served checkpoint (diff_page.ts).
  const compare = cks.checkpoints.length > 1 ? [el("p", { class: "compare" }, compareWith(cks.checkpoints, ckpt, null, t.name))] : [];
  const left = el("section", { class: "tensor-facts" }, el("h3", {}, "Tensor"), table(factsRows(t, ck), "facts"), ...quantizationView(t.quantization));
  if (t.stats) {
    left.append(el("h3", {}, "Statistics"), table(statsRows(t.stats), "stats"), ...indexPlacementView(t.placement));
  } else {
    left.append(el("p", { class: "notice" }, "No statistics: " + (t.unavailable ?? "this tensor cannot be read here.")));
  }
  const right = el("section", { class: "tensor-views" });
  if (t.stats?.histogram) right.append(el("h3", {}, "Histogram"), histogramView(t.stats.histogram));
  right.append(el("h3", {}, "Heatmap"));
  root.replaceChildren(back, title, ...compare, el("div", { class: "tensor-layout" }, left, right));
  const strips = layerStrips(ckpt, t.name); // "Across layers": the same role in every layer (strips.ts)
  if (strips) root.append(strips);
  if (t.pyramid) {
    const tilePanel = new TileStatsPanel(ckpt, t.name, t.pyramid);
    const heatmap = new Heatmap({
      ckpt,
      name: t.name,
      pyramid: t.pyramid,
      file: t.file,
      quantization: t.quantization ?? null,
      quantiles: t.stats?.quantiles,
      onError: (e, c) => showError(e, c),
      onScale: (style, resolved) => void tilePanel.update(style, resolved),
    });
    right.append(
      heatmap.element,
      saveFigureLinks("heatmap-save", t.name.replace(/[^\w.-]+/g, "_"), () => heatmap.figure()),
      el("h3", {}, t.pyramid.view.rows === 1 ? "Values" : "Profile"),
      tensorProfile(ckpt, t.name, t.pyramid, () => heatmap.slice()),
      el("h3", {}, "Outliers"),
      outliersList(ckpt, t.name, t.pyramid.view.slices, (row, col, slice) => heatmap.centreOn(row, col, slice)),
      el("h3", {}, "Placement of the last render ", el("a", { href: "#/compute", class: "small" }, "(compute panel)")),
      renderPlacementView(ckpt, t.name),
      el("h3", {}, "Display on this page (WebGPU, else the server)"),
      tilePanel.element,
    );
  } else {
    right.append(
      el("p", { class: "notice", id: "no-pyramid" }, "No statistics pyramid is stored for this tensor (an index built with --no-pyramid, or a tensor nothing here reads): the heatmap is unavailable."),
    );
  }
}
