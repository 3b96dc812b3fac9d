// Diff mode: what changed from checkpoint A to checkpoint B (docs/viewer.md "Diff mode").
//   #/diff/{a}/{b}           every compared pair ranked by relative change, the per-layer strip, what was not
//                            compared (skipped, with the reason) or not matched, and where the ops ran;
//   #/diff/{a}/{b}/{tensor}  one pair: its facts, the heatmap of its difference pyramid (diff_heatmap.ts), the same
//                            role in every layer (diff_strips.ts), and the placement of its ops.
// B is chosen for A with the "compare with" select (here and on a tensor page). Data: GET /api/diff/{a}/{b} (the
// document `tensormorph diff A B --json` prints) and GET /api/diff/{a}/{b}/tiles/{tensor} (diff_api.ts).
import { api, num, type CheckpointInfo } from "./api";
import { diffDocument, diffTiles, type DiffDocument, type DiffPair } from "./diff_api";
import { DiffHeatmap } from "./diff_heatmap";
import { acrossLayers } from "./diff_strips";
import { deltaHistogram } from "./diff_histogram";
import { el, showError } from "./dom";
import { fmt, fmtInt, fmtShape } from "./format";
import { placementTable } from "./placement";
import { bar } from "./strips";

export function diffHash(a: string, b: string, tensor?: string): string {
  const base = `#/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
  return tensor === undefined ? base : `${base}/${encodeURIComponent(tensor)}`;
}

function ckName(cks: CheckpointInfo[], id: string): string {
  const c = cks.find((x) => x.id === id);
  return c ? `${c.name} (${id})` : id;
}

/** The "compare with" select: every served checkpoint as B for A (itself included); choosing one opens diff mode. */
export function compareWith(cks: CheckpointInfo[], a: string, current: string | null, tensor?: string): HTMLElement {
  const s = el("select", { id: "diff-b" });
  if (current === null) s.append(el("option", { value: "" }, "—"));
  for (const c of cks) s.append(el("option", { value: c.id }, `${c.name} (${c.id})` + (c.id === a ? " — itself" : "")));
  s.value = current ?? "";
  s.addEventListener("change", () => {
    if (s.value) window.location.hash = diffHash(a, s.value, tensor);
  });
  return el("label", { class: "compare-with" }, "compare with (B) ", s);
}

function placementSection(pairs: DiffPair[]): HTMLElement {
  const placed = pairs.filter((p) => p.placement.length);
  const box = el("div", { class: "diff-placement", id: "diff-placement", "data-placed": String(placed.length) });
  box.append(
    el(
      "p",
      { class: "hint" },
      "The difference statistics (Δ, its sums and histogram per tile) run on the server's CPU inside src/diff: they are " +
        "not placed ops. Quantized and packed tensors are dequantized by placed ops, listed here and in the ",
      el("a", { href: "#/compute" }, "Compute panel"),
      placed.length ? "." : "; these pairs have dense dtypes only, so no op was placed.",
    ),
  );
  for (const p of placed) box.append(el("h4", {}, p.name), placementTable(p.placement, ""));
  return box;
}

function rankingTable(a: string, b: string, doc: DiffDocument): HTMLTableElement {
  const t = el("table", { class: "facts diff-ranking", id: "diff-ranking" });
  t.append(el("tr", {}, ...["tensor", "shape", "A", "B", "changed", "max |Δ|", "relative change", "cosine", "rows"].map((h) => el("th", {}, h))));
  const pairs = [...doc.pairs].sort((x, y) => {
    const rx = num(x.difference.rel_change), ry = num(y.difference.rel_change);
    if (Number.isNaN(rx) !== Number.isNaN(ry)) return Number.isNaN(rx) ? 1 : -1;
    return ry - rx;
  });
  for (const p of pairs) {
    const d = p.difference;
    t.append(
      el(
        "tr",
        { class: "diff-pair", "data-name": p.name, "data-rel-change": String(d.rel_change), "data-changed": String(d.changed) },
        el("td", {}, el("a", { href: diffHash(a, b, p.name) }, p.name), p.translated ? ` (B: ${p.name_b})` : ""),
        el("td", {}, fmtShape(p.shape)),
        el("td", {}, p.type_a),
        el("td", {}, p.type_b),
        el("td", {}, `${fmtInt(d.changed)} (${fmt(num(d.changed_fraction) * 100)} %)`),
        el("td", {}, fmt(d.max_abs_delta)),
        el("td", {}, fmt(d.rel_change)),
        el("td", {}, fmt(d.cosine)),
        el("td", {}, p.qk_permutation?.verdict ?? p.rows),
      ),
    );
  }
  return t;
}

function layerStrip(doc: DiffDocument): HTMLElement {
  const t = el("table", { class: "strips-table", id: "diff-layer-strip" });
  const scale = doc.layer_strip.reduce((m, l) => (Number.isFinite(num(l.rel_change)) ? Math.max(m, num(l.rel_change)) : m), 0);
  t.append(el("tr", {}, el("th", {}, "layer"), el("th", {}, "relative change (√ of Σ Σ Δ² / Σ Σ a² over its tensors)")));
  for (const l of doc.layer_strip)
    t.append(el("tr", { class: "strip-row", "data-layer": String(l.layer), "data-rel-change": String(l.rel_change) }, el("td", { class: "strip-layer" }, String(l.layer)), bar(num(l.rel_change), scale, false, "diff-layer-bar")));
  return t;
}

function listSection(title: string, id: string, items: (string | Node)[]): HTMLElement[] {
  if (!items.length) return [];
  return [el("h3", {}, title), el("ul", { id }, ...items.map((i) => el("li", {}, i)))];
}

async function renderPair(root: HTMLElement, a: string, b: string, tensor: string, doc: DiffDocument, cks: CheckpointInfo[]): Promise<void> {
  const head = [
    el("a", { href: diffHash(a, b), class: "back" }, "← every difference"),
    el("h2", { id: "tensor-name" }, tensor),
    el("p", {}, `Δ = B − A: B is ${ckName(cks, b)}, A is ${ckName(cks, a)}. `, compareWith(cks, a, b, tensor)),
  ];
  const pair = doc.pairs.find((p) => p.name === tensor);
  if (!pair) {
    const skip = doc.skipped.find((s) => s.name === tensor);
    const why = skip ? `not compared: ${skip.reason}` : doc.only_in_a.includes(tensor) ? `it has no counterpart in ${ckName(cks, b)}` : `${ckName(cks, a)} has no such tensor`;
    root.replaceChildren(...head, el("p", { class: "notice", id: "diff-refused" }, `No difference map for ${tensor}: ${why}.`));
    return;
  }
  const d = pair.difference;
  const facts: [string, string][] = [
    ["A", `${pair.type_a} ${fmtShape(pair.shape)}`],
    ["B", `${pair.name_b} (${pair.type_b})${pair.translated ? ", matched by the GGUF ↔ Hugging Face names" : ""}`],
    ["rows", pair.qk_permutation?.verdict ? `${pair.rows} (Q/K permutation: ${pair.qk_permutation.verdict})` : pair.rows],
    ["changed", `${fmtInt(d.changed)} of ${fmtInt(d.count)} (${fmt(num(d.changed_fraction) * 100)} %)`],
    ["max |Δ|", fmt(d.max_abs_delta)],
    ["Δ range", `${fmt(d.min_delta)} to ${fmt(d.max_delta)}`],
    ["relative change", fmt(d.rel_change)],
    ["cosine", fmt(d.cosine)],
    ["pyramid", `${pair.levels} level(s) of ${pair.tile_rows} × ${pair.tile_cols}-element tiles`],
  ];
  const table = el("table", { class: "facts", id: "diff-facts" });
  for (const [k, v] of facts) table.append(el("tr", { "data-field": k }, el("th", {}, k), el("td", {}, v)));
  const right = el("section", { class: "tensor-views" }, el("h3", {}, "Where it changed"), el("p", { class: "status" }, "Loading the difference pyramid…"));
  const left = el("section", { class: "tensor-facts" }, el("h3", {}, "Difference"), table, el("h3", {}, "Histogram of Δ"), deltaHistogram(d.histogram, "diff-histogram"),
    el("h3", {}, "Where its ops ran"), placementSection([pair]));
  root.replaceChildren(...head, el("div", { class: "tensor-layout" }, left, right));
  const strips = acrossLayers(a, b, doc, tensor);
  if (strips) root.append(strips);
  const first = await diffTiles(a, b, tensor, pair.levels - 1, 0);
  const heatmap = new DiffHeatmap({ a, b, name: tensor, first, onError: (e, c) => showError(e, c) });
  right.replaceChildren(el("h3", {}, "Where it changed"), heatmap.element);
}

function renderList(root: HTMLElement, a: string, b: string, doc: DiffDocument, cks: CheckpointInfo[]): void {
  root.replaceChildren(
    el("a", { href: "#/", class: "back" }, "← all tensors"),
    el("h2", { id: "diff-title" }, `What changed from ${ckName(cks, a)} to ${ckName(cks, b)}`),
    el("p", {}, `Names matched by ${doc.name_mapping}; ${doc.pairs.length} pair(s) compared. `, compareWith(cks, a, b)),
    el("h3", {}, "Tensors by relative change"),
    rankingTable(a, b, doc),
    ...(doc.layer_strip.length ? [el("h3", {}, "Layers by relative change"), layerStrip(doc)] : []),
    ...listSection("Not compared", "diff-skipped", doc.skipped.map((s) => `${s.name}: ${s.reason}`)),
    ...listSection(`Only in A (${ckName(cks, a)})`, "diff-only-a", doc.only_in_a),
    ...listSection(`Only in B (${ckName(cks, b)})`, "diff-only-b", doc.only_in_b),
    el("h3", {}, "Where the ops ran"),
    placementSection(doc.pairs),
  );
}

export async function renderDiffPage(root: HTMLElement, a: string, b: string, tensor?: string): Promise<void> {
  root.replaceChildren(el("p", { class: "status" }, "Computing the difference (the first request reads both checkpoints)…"));
  const [doc, cks] = await Promise.all([diffDocument(a, b), api.checkpoints()]);
  if (tensor === undefined) renderList(root, a, b, doc, cks.checkpoints);
  else await renderPair(root, a, b, tensor, doc, cks.checkpoints);
}
