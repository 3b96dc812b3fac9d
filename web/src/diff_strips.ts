// Diff mode's "Across layers" (diff_page.ts): the pairs of the same role as the pair shown, one row per layer in
// layer order (layer_groups.ts decides the role), each with
// - a strip of its Δ: max |Δ| per tile of its difference pyramid at the finest level with at most THUMB_TILES tiles
//   per side (GET /api/diff/{a}/{b}/tiles/{tensor}, slice 0), drawn one cell per tile on a canvas, every row under
//   ONE colour scale: viridis over 0 to the largest max |Δ| of the rows (exact, from the document);
// - bars of its relative change, changed fraction and max |Δ| (strips.ts' bars), scaled to the rows' largest.
// Contract: `section#diff-across-layers`; `tr.strip-row` per layer with data-layer, data-name, data-rel-change
// and data-state ("waiting" | "loaded" | "error"); the thumbnail `canvas.diff-strip-thumb` with data-level,
// data-grid ("rows,cols") and data-limits ("lo,hi", the same on every row); the current pair's row has class
// "current". Thumbnails load one at a time, in layer order (the server computes a pair on its first request).
import { num } from "./api";
import { diffHash } from "./diff_page";
import { diffTiles, type DiffDocument, type DiffPair } from "./diff_api";
import { describeError, el } from "./dom";
import { layerSiblings } from "./layer_groups";
import { bar } from "./strips";
import { displayColorize } from "./webgpu/display";

const THUMB_TILES = 48; // tiles per side at most in a thumbnail
const THUMB_PX = 72; // CSS pixels of a thumbnail's longer side

/** The finest level of `pair` whose grid is at most THUMB_TILES per side (levels halve the grid per step). The view
 *  of its shape (docs/lod.md): a matrix is itself, a vector one row, higher ranks slices of their last two axes. */
function thumbLevel(pair: DiffPair): number {
  const n = pair.shape.length;
  const rows = n >= 2 ? pair.shape[n - 2] : 1;
  const cols = n >= 1 ? pair.shape[n - 1] : 1;
  for (let l = 0; l < pair.levels; l++) {
    const gr = Math.ceil(rows / (pair.tile_rows * 2 ** l)), gc = Math.ceil(cols / (pair.tile_cols * 2 ** l));
    if (gr <= THUMB_TILES && gc <= THUMB_TILES) return l;
  }
  return pair.levels - 1;
}

async function drawThumb(a: string, b: string, pair: DiffPair, hi: number, canvas: HTMLCanvasElement): Promise<void> {
  const level = thumbLevel(pair);
  const t = await diffTiles(a, b, pair.name, level, 0);
  const { rows, cols } = t.grid;
  const values = Float64Array.from(t.tiles.map((x) => num(x.max_abs_delta)));
  const out = await displayColorize(values, { transform: "linear", lo: 0, hi, colormap: "viridis" });
  const scale = THUMB_PX / Math.max(rows, cols);
  canvas.style.width = `${Math.max(1, Math.round(cols * scale))}px`;
  canvas.style.height = `${Math.max(1, Math.round(rows * scale))}px`;
  canvas.width = cols;
  canvas.height = rows;
  const img = new ImageData(cols, rows);
  t.tiles.forEach((x, i) => img.data.set(out.rgba.subarray(4 * i, 4 * i + 4), 4 * (x.ty * cols + x.tx)));
  canvas.getContext("2d")?.putImageData(img, 0, 0);
  Object.assign(canvas.dataset, { level: String(level), grid: `${rows},${cols}`, limits: `${out.lo},${out.hi}` });
}

/** The "Across layers" section for the pair of A's tensor `name`; null when fewer than two layers have its role. */
export function acrossLayers(a: string, b: string, doc: DiffDocument, name: string): HTMLElement | null {
  const siblings = layerSiblings(name, doc.pairs.map((p) => p.name));
  if (siblings.length < 2) return null;
  const byName = new Map(doc.pairs.map((p) => [p.name, p]));
  const pairs = siblings.map((s) => byName.get(s.name) as DiffPair);
  const largest = (f: (p: DiffPair) => number): number => pairs.reduce((m, p) => (Number.isFinite(f(p)) ? Math.max(m, Math.abs(f(p))) : m), 0);
  const rel = (p: DiffPair): number => num(p.difference.rel_change);
  const frac = (p: DiffPair): number => num(p.difference.changed_fraction);
  const mx = (p: DiffPair): number => num(p.difference.max_abs_delta);
  const hi = largest(mx) > 0 ? largest(mx) : 1; // nothing changed anywhere: every cell is 0, the map's low end
  const t = el("table", { class: "strips-table", id: "diff-strips" });
  t.append(el("tr", {}, ...["layer", "max |Δ| per tile (one scale)", "relative change", "changed fraction", "max |Δ|"].map((h) => el("th", {}, h))));
  const jobs: (() => Promise<void>)[] = [];
  siblings.forEach((s, i) => {
    const p = pairs[i];
    const canvas = el("canvas", { class: "diff-strip-thumb" });
    canvas.style.imageRendering = "pixelated";
    const cell = el("td", { class: "strip-thumb-cell" }, canvas);
    const row = el(
      "tr",
      { class: "strip-row" + (s.name === name ? " current" : ""), "data-layer": String(s.layer), "data-name": s.name, "data-rel-change": String(p.difference.rel_change), "data-state": "waiting" },
      el("td", { class: "strip-layer" }, el("a", { href: diffHash(a, b, s.name) }, String(s.layer))),
      cell,
      bar(rel(p), largest(rel), false, "diff-rel"),
      bar(frac(p), 1, false, "diff-frac"),
      bar(mx(p), largest(mx), false, "diff-maxabs"),
    );
    t.append(row);
    jobs.push(async () => {
      try {
        await drawThumb(a, b, p, hi, canvas);
        row.dataset.state = "loaded";
      } catch (e) {
        row.dataset.state = "error";
        cell.replaceChildren(el("span", { class: "strip-error" }, describeError(e)));
      }
    });
  });
  const section = el("section", { class: "strips", id: "diff-across-layers" }, el("h3", {}, "Across layers (this difference)"),
    el("p", { class: "hint" }, `Max |Δ| per tile, viridis over 0 to ${hi} (the largest of these layers), and each pair's figures.`), t);
  void (async () => {
    for (const [i, job] of jobs.entries()) {
      if (i > 0 && !section.isConnected) return; // the page was left: ask the server for no more
      await job();
    }
  })();
  return section;
}
