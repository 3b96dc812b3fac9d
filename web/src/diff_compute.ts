// The Compute panel's "Differences" section (compute_panel.ts): the diffs opened in this page session
// (diff_api.ts diffRuns) and where their ops ran. The difference statistics themselves run on the server's CPU in
// src/diff (not placed ops); a pair's placed ops are the dequantization of its quantized or packed sides, also
// shown in the op matrix's "last run" column.
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
        { class: "diff-run", "data-a": r.a, "data-b": r.b, "data-placed": String(r.placed.length) },
        el("a", { href: diffHash(r.a, r.b) }, `checkpoint ${r.a} → ${r.b}`),
        `: ${r.pairs} pair(s); difference statistics on the server's CPU (src/diff, not a placed op); ` +
          (r.placed.length ? `${r.placed.length} pair(s) dequantized by placed ops:` : "dense dtypes only, no op placed."),
      ),
    );
    for (const p of r.placed) box.append(el("h4", {}, p.name), placementTable(p.placement, ""));
  }
  return [el("h3", {}, "Differences (diff mode)"), box];
}
