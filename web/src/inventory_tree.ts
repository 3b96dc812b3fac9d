// The inventory's tree view (#inventory-tree): the tree of tree.ts drawn as an indented table, expanded
// nodes only. Each node row says its tensors, parameters, bytes and dtypes (also in data-tensors,
// data-parameters, data-bytes, data-dtypes "dtype:count,…", data-prefix: the name prefix it covers,
// "" for a checkpoint; data-checkpoint); a leaf row is one tensor (data-name,
// data-checkpoint) and opens its page. A click on a node row expands / collapses it. Under a search, only
// nodes holding matches are drawn, and every one of them is expanded unless the user collapsed it
// (data-matches: the matching tensors under the node).
import { el } from "./dom";
import { tensorHash } from "./inventory_list";
import { fmtBytes, fmtInt, fmtShape } from "./format";
import { dtypeLabel, dtypesText, matchTree, type Tree, type TreeNode } from "./tree";

/** Lines drawn at once; the status says when more would be. */
export const MAX_LINES = 2000;

/** Expansion state, kept across renders of the inventory (the tree's node ids are stable). */
const expanded = new Set<string>();
const collapsedInSearch = new Set<string>();
let defaultsFor: Tree | null = null;
let lastQuery = "";

export interface TreeDrawResult {
  matches: number;
  parameters: number;
  lines: number;
  truncated: boolean;
}

function defaultExpansion(tree: Tree): void {
  if (defaultsFor === tree) return;
  defaultsFor = tree;
  // Roots, and a root's only child, are open at first.
  for (const r of tree.roots) {
    expanded.add(r.id);
    if (r.children.length === 1) expanded.add(r.children[0].id);
  }
}

function nodeRow(n: TreeNode, depth: number, open: boolean, matches: number | null): HTMLTableRowElement {
  const leaf = n.kind === "leaf";
  const prefix = leaf && n.row ? n.row.name : n.id.slice(n.id.indexOf(":") + 1);
  const tr = el("tr", { class: `tree-${n.kind}`, "data-id": n.id, "data-kind": n.kind, "data-depth": String(depth), "data-prefix": prefix, "data-checkpoint": n.checkpoint });
  const name = el("td", { class: "tree-name" });
  name.style.paddingLeft = `${0.6 + depth * 1.2}em`;
  if (leaf && n.row) {
    const r = n.row;
    tr.dataset.name = r.name;
    name.append(el("span", { class: "tree-toggle" }), el("a", { href: tensorHash(r), title: r.name }, n.label));
    const dt = el("td", {}, dtypeLabel(r));
    if (r.dequantized_from) {
      tr.dataset.dequantizedFrom = r.dequantized_from;
      dt.title = `stored as ${r.dequantized_from}, read as ${r.dtype}`;
      dt.textContent = `${r.dtype} (${r.dequantized_from})`;
    }
    tr.append(name, el("td", { class: "num" }), el("td", { class: "num" }, fmtInt(r.parameters)), el("td", { class: "num" }, fmtBytes(r.bytes)), dt, el("td", {}, fmtShape(r.shape)));
  } else {
    tr.dataset.expanded = String(open);
    const toggle = el("button", { type: "button", class: "tree-toggle", "aria-expanded": String(open), title: open ? "collapse" : "expand" }, open ? "▾" : "▸");
    name.append(toggle, el("span", { class: "tree-label" }, n.label));
    if (n.kind === "block") name.append(" ", el("span", { class: "badge" }, "block"));
    else if (n.kind === "group" && n.children.length && n.children.every((c) => c.kind === "block"))
      name.append(" ", el("span", { class: "badge" }, `${n.children.length} blocks`));
    const count = matches === null ? fmtInt(n.tensors) : `${fmtInt(matches)} of ${fmtInt(n.tensors)}`;
    tr.append(name, el("td", { class: "num" }, count), el("td", { class: "num" }, fmtInt(n.parameters)), el("td", { class: "num" }, fmtBytes(n.bytes)), el("td", { class: "dtypes", title: dtypesText(n.dtypes, Infinity) }, dtypesText(n.dtypes)), el("td"));
  }
  tr.dataset.tensors = String(n.tensors);
  tr.dataset.parameters = String(n.parameters);
  tr.dataset.bytes = String(n.bytes);
  tr.dataset.dtypes = [...n.dtypes].map(([d, c]) => `${d}:${c}`).join(",");
  if (matches !== null) tr.dataset.matches = String(matches);
  if (!leaf) tr.title = `${prefix || n.label}: ${fmtInt(n.tensors)} tensors, ${fmtInt(n.bytes)} bytes`;
  return tr;
}

/** The tree view of `tree`; draw(query) redraws it (cheap: only open nodes are visited). */
export function treeView(tree: Tree): { element: HTMLTableElement; draw: (query: string) => TreeDrawResult } {
  defaultExpansion(tree);
  const table = el("table", { class: "inventory tree", id: "inventory-tree" });
  const byId = new Map<string, TreeNode>();
  let query = lastQuery;

  const draw = (q: string): TreeDrawResult => {
    if (q.trim() !== lastQuery.trim()) collapsedInSearch.clear();
    query = lastQuery = q;
    const m = matchTree(tree, q);
    const body = el("tbody");
    let lines = 0;
    let truncated = false;
    const visit = (n: TreeNode, depth: number): void => {
      if (truncated) return;
      const hits = m ? (m.get(n)?.tensors ?? 0) : null;
      if (hits === 0) return;
      if (lines >= MAX_LINES) {
        truncated = true;
        return;
      }
      const open = n.kind !== "leaf" && (m ? !collapsedInSearch.has(n.id) : expanded.has(n.id));
      byId.set(n.id, n);
      body.append(nodeRow(n, depth, open, hits));
      lines++;
      if (open) for (const c of n.children) visit(c, depth + 1);
    };
    byId.clear();
    for (const r of tree.roots) visit(r, 0);
    if (!lines) body.append(el("tr", {}, el("td", { colspan: "6", class: "empty" }, "No tensor matches.")));
    const head = el("tr");
    for (const h of ["name", "tensors", "parameters", "bytes", "dtypes", "shape"]) head.append(el("th", {}, h));
    table.replaceChildren(el("thead", {}, head), body);
    let matches = 0;
    let parameters = 0;
    for (const r of tree.roots) {
      matches += m ? (m.get(r)?.tensors ?? 0) : r.tensors;
      parameters += m ? (m.get(r)?.parameters ?? 0) : r.parameters;
    }
    return { matches, parameters, lines, truncated };
  };

  table.addEventListener("click", (ev) => {
    const target = ev.target as HTMLElement;
    const tr = target.closest("tr");
    const n = tr?.dataset.id ? byId.get(tr.dataset.id) : undefined;
    if (!n) return;
    if (n.kind === "leaf") {
      if (target.tagName !== "A" && n.row) window.location.hash = tensorHash(n.row);
      return;
    }
    // In a search the set holds the collapsed nodes; otherwise the expanded ones.
    const set = query.trim() ? collapsedInSearch : expanded;
    if (set.has(n.id)) set.delete(n.id);
    else set.add(n.id);
    table.dispatchEvent(new CustomEvent("tree-toggle", { bubbles: true }));
  });
  return { element: table, draw };
}
