// The histogram of Δ of a tile or a whole pair (docs/diff.md "Histogram of Δ": bins of whole binades, shared by
// the pair's pyramid, at most 32), as a table of its occupied bins: [lower edge, upper edge) and the count.
// data-total on the table is the sum of the counts (the finite pairs).
import { type Num } from "./api";
import { el } from "./dom";
import { fmt, fmtInt } from "./format";

export function deltaHistogram(h: { edges: Num[]; counts: number[] } | undefined, id: string): HTMLElement {
  const t = el("table", { class: "facts delta-histogram", id });
  if (!h || !h.counts.length) {
    t.append(el("tr", {}, el("td", {}, "no finite Δ")));
    t.dataset.total = "0";
    return t;
  }
  t.append(el("tr", {}, el("th", {}, "Δ from"), el("th", {}, "to"), el("th", {}, "count")));
  let total = 0;
  h.counts.forEach((c, i) => {
    total += c;
    if (c) t.append(el("tr", { "data-bin": String(i), "data-count": String(c) }, el("td", {}, fmt(h.edges[i])), el("td", {}, fmt(h.edges[i + 1])), el("td", {}, fmtInt(c))));
  });
  t.dataset.total = String(total);
  return t;
}
