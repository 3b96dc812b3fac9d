// The Compute panel's "Differences" section (compute_panel.ts): the diffs opened in this page session
// (diff_api.ts diffRuns) and where their ops ran: each pair's difference tiles are the placed op diff.tile_stats, and
// its quantized or packed sides are dequantized by placed ops; all are also shown in the op matrix's "last run"
// column.
import { diffRuns } from "./diff_api";
import { diffHash } from "./diff_page";
import { el } from "./dom";
import { placementTable } from "./placement";

export function diffSection(): HTMLElement[] {
  const runs = diffRuns();
  if (!runs.length) return [];
  const box = el("div", { id: "compute-diffs", class: "compute-diffs" });
  for (const r of runs) {
    box.append(
      el(
        "p",
        {
          class: "diff-run",
          "data-a": r.a,
          "data-b": r.b,
          "data-placed": String(r.placed.length),
          "data-dequantized": String(r.dequantized),
          "data-tile-backends": r.tileBackends.join(","),
        },
        el("a", { href: diffHash(r.a, r.b) }, `checkpoint ${r.a} → ${r.b}`),
        `: ${r.pairs} pair(s); difference tiles by the placed op diff.tile_stats on ${r.tileBackends.join(", ") || "no backend"}; ` +
          (r.dequantized ? `${r.dequantized} pair(s) with a side dequantized by placed ops.` : "dense dtypes only, nothing dequantized.") +
          " Each pair's placements:",
      ),
    );
    for (const p of r.placed) box.append(el("h4", {}, p.name), placementTable(p.placement, ""));
  }
  return [el("h3", {}, "Differences (diff mode)"), box];
}
