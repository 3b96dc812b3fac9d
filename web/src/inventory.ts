// The inventory: every tensor of the opened checkpoints (GET /api/tensors) as a sortable table with a
// search box that filters by substring; a click opens the tensor page.
import { api, num, type TensorRow } from "./api";
import { el } from "./dom";
import { fmt, fmtInt, fmtShape } from "./format";

const MAX_ROWS = 2000; // rows drawn at once; the count says when more match

type SortKey = "name" | "dtype" | "parameters" | "mean" | "std" | "min" | "max";

interface State {
  rows: TensorRow[] | null;
  total: number;
  query: string;
  sort: SortKey;
  desc: boolean;
}

const state: State = { rows: null, total: 0, query: "", sort: "name", desc: false };

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
    default: {
      const v = r.stats ? num(r.stats[k]) : NaN;
      return Number.isNaN(v) ? -Infinity : v;
    }
  }
}

function matches(rows: TensorRow[], query: string): TensorRow[] {
  const q = query.trim().toLowerCase();
  const out = q ? rows.filter((r) => r.name.toLowerCase().includes(q)) : rows.slice();
  const dir = state.desc ? -1 : 1;
  out.sort((a, b) => {
    const x = sortValue(a, state.sort);
    const y = sortValue(b, state.sort);
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.checkpoint < b.checkpoint ? -1 : a.checkpoint > b.checkpoint ? 1 : a.name < b.name ? -1 : 1;
  });
  return out;
}

function rowElement(r: TensorRow, multi: boolean): HTMLTableRowElement {
  const s = r.stats;
  const dtype = r.dequantized_from ? `${r.dtype} (${r.dequantized_from})` : r.dtype;
  const link = el("a", { href: tensorHash(r) }, r.name);
  const cells: (Node | string)[] = [
    link,
    dtype,
    fmtShape(r.shape),
    fmtInt(r.parameters),
    s ? fmt(s.mean) : "",
    s ? fmt(s.std) : "",
    s ? fmt(s.min) : "",
    s ? fmt(s.max) : "",
  ];
  if (multi) cells.unshift(r.checkpoint);
  const tr = el("tr", { "data-name": r.name, "data-checkpoint": r.checkpoint });
  cells.forEach((c, i) => tr.append(el("td", i >= (multi ? 4 : 3) ? { class: "num" } : {}, c)));
  if (!s && r.unavailable) tr.title = r.unavailable;
  tr.addEventListener("click", (ev) => {
    if ((ev.target as HTMLElement).tagName !== "A") window.location.hash = tensorHash(r);
  });
  return tr;
}

export async function renderInventory(root: HTMLElement): Promise<void> {
  const status = el("p", { class: "status", id: "inventory-status" }, "Loading tensors…");
  const search = el("input", {
    type: "search",
    id: "search",
    placeholder: "Search tensors by name (substring)",
    autocomplete: "off",
    spellcheck: "false",
  });
  search.value = state.query;
  const table = el("table", { class: "inventory", id: "inventory" });
  root.replaceChildren(el("h2", {}, "Tensors"), el("div", { class: "toolbar" }, search, status), table);

  if (!state.rows) {
    const list = await api.tensors();
    state.rows = list.tensors;
    state.total = list.total;
  }
  const rows = state.rows;
  const multi = new Set(rows.map((r) => r.checkpoint)).size > 1;
  const columns: [string, SortKey | null][] = [
    ["name", "name"],
    ["dtype", "dtype"],
    ["shape", null],
    ["parameters", "parameters"],
    ["mean", "mean"],
    ["std", "std"],
    ["min", "min"],
    ["max", "max"],
  ];
  if (multi) columns.unshift(["checkpoint", null]);

  const draw = (): void => {
    const found = matches(rows, state.query);
    const head = el("tr");
    for (const [label, key] of columns) {
      const th = el("th", key ? { class: "sortable" } : {}, label + (key === state.sort ? (state.desc ? " ▼" : " ▲") : ""));
      if (key)
        th.addEventListener("click", () => {
          state.desc = state.sort === key ? !state.desc : false;
          state.sort = key;
          draw();
        });
      head.append(th);
    }
    const body = el("tbody");
    for (const r of found.slice(0, MAX_ROWS)) body.append(rowElement(r, multi));
    if (!found.length)
      body.append(el("tr", {}, el("td", { colspan: String(columns.length), class: "empty" }, "No tensor matches.")));
    table.replaceChildren(el("thead", {}, head), body);
    const params = found.reduce((a, r) => a + r.parameters, 0);
    let text = `${fmtInt(found.length)} of ${fmtInt(rows.length)} tensors · ${fmtInt(params)} parameters`;
    if (found.length > MAX_ROWS) text += ` · showing the first ${fmtInt(MAX_ROWS)}`;
    if (state.total > rows.length) text += ` · the server lists ${fmtInt(state.total)}; only the first ${fmtInt(rows.length)} were fetched`;
    status.textContent = text;
  };
  search.addEventListener("input", () => {
    state.query = search.value;
    draw();
  });
  draw();
  search.focus();
}
