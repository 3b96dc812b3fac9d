// The inventory's flat view (#inventory): every tensor as a sortable table row (data-name,
// data-checkpoint; data-dequantized-from for a quantized tensor), filtered by substring; a click opens the
// tensor page. At most MAX_ROWS rows are drawn; the status says when more match. A tensor holding NaN or ±Inf is
// flagged: its row has class "nonfinite" and data-nonfinite (the count), its NaN/Inf cell says how many of each.
import { num, type TensorRow } from "./api";
import { el } from "./dom";
import { fmt, fmtInt, fmtShape } from "./format";

export const MAX_ROWS = 2000;

type SortKey = "name" | "dtype" | "parameters" | "nonfinite" | "mean" | "std" | "min" | "max";

/** NaN plus ±Inf values of a tensor (0 without statistics). */
export function nonFinite(r: TensorRow): number {
  return r.stats ? r.stats.nan_count + r.stats.inf_count : 0;
}

const sort: { key: SortKey; desc: boolean } = { key: "name", desc: false };

/** The route of a tensor's page. */
export function tensorHash(row: { checkpoint: string; name: string }): string {
  return `#/tensor/${encodeURIComponent(row.checkpoint)}/${encodeURIComponent(row.name)}`;
}

function sortValue(r: TensorRow, k: SortKey): number | string {
  switch (k) {
    case "name":
      return r.name;
    case "dtype":
      return r.dtype;
    case "parameters":
      return r.parameters;
    case "nonfinite":
      return nonFinite(r);
    default: {
      const v = r.stats ? num(r.stats[k]) : NaN;
      return Number.isNaN(v) ? -Infinity : v;
    }
  }
}

function matches(rows: TensorRow[], query: string): TensorRow[] {
  const q = query.trim().toLowerCase();
  const out = q ? rows.filter((r) => r.name.toLowerCase().includes(q)) : rows.slice();
  const dir = sort.desc ? -1 : 1;
  out.sort((a, b) => {
    const x = sortValue(a, sort.key);
    const y = sortValue(b, sort.key);
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.checkpoint < b.checkpoint ? -1 : a.checkpoint > b.checkpoint ? 1 : a.name < b.name ? -1 : 1;
  });
  return out;
}

function rowElement(r: TensorRow, multi: boolean): HTMLTableRowElement {
  const s = r.stats;
  const dtype = el("td", {}, r.dequantized_from ? `${r.dtype} (${r.dequantized_from})` : r.dtype);
  const link = el("a", { href: tensorHash(r) }, r.name);
  const bad = nonFinite(r);
  const badCell = el("span", bad && s ? { title: `${fmtInt(s.nan_count)} NaN, ${fmtInt(s.inf_count)} ±Inf` } : {}, bad ? fmtInt(bad) : "");
  const cells: (Node | string)[] = [
    link,
    "",
    fmtShape(r.shape),
    fmtInt(r.parameters),
    badCell,
    s ? fmt(s.mean) : "",
    s ? fmt(s.std) : "",
    s ? fmt(s.min) : "",
    s ? fmt(s.max) : "",
  ];
  if (multi) cells.unshift(r.checkpoint);
  const tr = el("tr", { "data-name": r.name, "data-checkpoint": r.checkpoint });
  const dtypeAt = multi ? 2 : 1;
  cells.forEach((c, i) => tr.append(i === dtypeAt ? dtype : el("td", i >= (multi ? 4 : 3) ? { class: "num" } : {}, c)));
  if (r.dequantized_from) {
    tr.dataset.dequantizedFrom = r.dequantized_from;
    dtype.title = `stored as ${r.dequantized_from}, read as ${r.dtype}`;
  }
  if (!s && r.unavailable) tr.title = r.unavailable;
  if (bad) {
    tr.classList.add("nonfinite");
    tr.dataset.nonfinite = String(bad);
  }
  tr.addEventListener("click", (ev) => {
    if ((ev.target as HTMLElement).tagName !== "A") window.location.hash = tensorHash(r);
  });
  return tr;
}

/** The flat table of `rows`; draw(query) redraws it and returns the matches' count and parameters. */
export function listView(rows: TensorRow[]): { element: HTMLTableElement; draw: (query: string) => { matches: number; parameters: number; truncated: boolean } } {
  const table = el("table", { class: "inventory", id: "inventory" });
  const multi = new Set(rows.map((r) => r.checkpoint)).size > 1;
  const columns: [string, SortKey | null][] = [
    ["name", "name"],
    ["dtype", "dtype"],
    ["shape", null],
    ["parameters", "parameters"],
    ["NaN/Inf", "nonfinite"],
    ["mean", "mean"],
    ["std", "std"],
    ["min", "min"],
    ["max", "max"],
  ];
  if (multi) columns.unshift(["checkpoint", null]);
  let query = "";
  const draw = (q: string) => {
    query = q;
    const found = matches(rows, q);
    const head = el("tr");
    for (const [label, key] of columns) {
      const th = el("th", key ? { class: "sortable" } : {}, label + (key === sort.key ? (sort.desc ? " ▼" : " ▲") : ""));
      if (key)
        th.addEventListener("click", () => {
          sort.desc = sort.key === key ? !sort.desc : false;
          sort.key = key;
          draw(query);
        });
      head.append(th);
    }
    const body = el("tbody");
    for (const r of found.slice(0, MAX_ROWS)) body.append(rowElement(r, multi));
    if (!found.length)
      body.append(el("tr", {}, el("td", { colspan: String(columns.length), class: "empty" }, "No tensor matches.")));
    table.replaceChildren(el("thead", {}, head), body);
    return { matches: found.length, parameters: found.reduce((a, r) => a + r.parameters, 0), truncated: found.length > MAX_ROWS };
  };
  return { element: table, draw };
}
