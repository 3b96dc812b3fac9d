// The inventory page (#/, #/tree, #/list): the opened checkpoints and their files (GET /api/checkpoints,
// #checkpoints: a sharded checkpoint lists each shard), a search box, and every tensor of GET /api/tensors
// either as a tree of layers / blocks (inventory_tree.ts, the default) or as a flat sortable list
// (inventory_list.ts). The buttons #view-tree / #view-list switch (the route says which, so it can be
// linked). Both responses and the tree are fetched / built once and kept for later visits, except while a
// checkpoint is still being indexed: then #indexing (jobs.ts) shows its progress, and when every job has
// ended the page fetches the rows again (their statistics are there now) and redraws.
import { api, type CheckpointInfo, type TensorRow } from "./api";
import { el, showError } from "./dom";
import { fmtBytes, fmtInt } from "./format";
import { failedIndexingPanel, indexingPanel } from "./jobs";
import { listView, MAX_ROWS, nonFinite } from "./inventory_list";
import { MAX_LINES, treeView } from "./inventory_tree";
import { acquisitionList } from "./stem/acquisition_page";
import { buildTree, type Tree } from "./tree";

export type InventoryView = "tree" | "list";

interface State {
  rows: TensorRow[] | null;
  checkpoints: CheckpointInfo[] | null;
  tree: Tree | null;
  total: number;
  query: string;
  view: InventoryView;
}

const state: State = { rows: null, checkpoints: null, tree: null, total: 0, query: "", view: "tree" };

/** "demo (0)": a checkpoint's name and id. */
function checkpointLabel(c: CheckpointInfo | undefined, id: string): string {
  return c ? `${c.name} (${c.id})` : `checkpoint ${id}`;
}

/** #checkpoints: per checkpoint its format, tensors, parameters, bytes and files (data-file, in shard order). */
function checkpointsTable(list: CheckpointInfo[]): HTMLTableElement {
  const t = el("table", { class: "facts checkpoints", id: "checkpoints" });
  t.append(el("tr", {}, ...["checkpoint", "format", "tensors", "parameters", "bytes", "files"].map((h) => el("th", {}, h))));
  for (const c of list) {
    const files = el("td", { class: "files" });
    c.files.forEach((f, i) => {
      const shard = c.files.length > 1 ? `shard ${i + 1} of ${c.files.length}: ` : "";
      files.append(el("div", { class: "file", "data-file": f.name, "data-size": String(f.size) }, `${shard}${f.name} (${fmtBytes(f.size)})`));
    });
    t.append(
      el(
        "tr",
        { "data-checkpoint": c.id, "data-files": String(c.files.length) },
        el("td", { title: c.path }, checkpointLabel(c, c.id)),
        el("td", {}, c.format),
        el("td", { class: "num" }, fmtInt(c.tensor_count)),
        el("td", { class: "num" }, fmtInt(c.parameters)),
        el("td", { class: "num" }, fmtBytes(c.bytes)),
        files,
      ),
    );
  }
  return t;
}

export async function renderInventory(root: HTMLElement, choice?: InventoryView): Promise<void> {
  if (choice) state.view = choice;
  const status = el("p", { class: "status", id: "inventory-status" }, "Loading tensors…");
  const search = el("input", {
    type: "search",
    id: "search",
    placeholder: "Search tensors by name (substring)",
    autocomplete: "off",
    spellcheck: "false",
  });
  search.value = state.query;
  const toggle = el("span", { class: "view-toggle", role: "group", "aria-label": "view" });
  for (const [v, label] of [["tree", "Tree"], ["list", "List"]] as const) {
    const b = el("button", { type: "button", id: `view-${v}`, "aria-pressed": String(state.view === v) }, label);
    b.addEventListener("click", () => {
      window.location.hash = `#/${v}`;
    });
    toggle.append(b);
  }
  const checkpointsBox = el("div", { class: "checkpoints-box" });
  const holder = el("div", { class: "inventory-holder" });
  const acquisitions = el("div", {});
  root.replaceChildren(acquisitions, el("h2", {}, "Tensors"), checkpointsBox, el("div", { class: "toolbar" }, toggle, search, status), holder);
  // 4D-STEM acquisitions served beside the checkpoints (links to their pages); shown when the list arrives.
  acquisitionList().then((box) => acquisitions.replaceWith(box), (e) => showError(e, "cannot list the acquisitions"));

  if (!state.rows || !state.checkpoints) {
    const [list, cks] = await Promise.all([api.tensors(), api.checkpoints()]);
    state.rows = list.tensors;
    state.total = list.total;
    state.checkpoints = cks.checkpoints;
    const byId = new Map(cks.checkpoints.map((c) => [c.id, c]));
    state.tree = buildTree(list.tensors, (id) => checkpointLabel(byId.get(id), id));
  }
  const rows = state.rows;
  const tree = state.tree as Tree;
  checkpointsBox.append(checkpointsTable(state.checkpoints));
  // Indexing ended, or started again: fetch everything anew and redraw (if this page is still shown).
  const reload = (): void => {
    state.rows = state.checkpoints = state.tree = null;
    if (root.contains(holder)) void renderInventory(root);
  };
  const indexing = indexingPanel(state.checkpoints, reload);
  if (indexing) checkpointsBox.append(indexing);
  const failed = failedIndexingPanel(state.checkpoints, reload);
  if (failed) checkpointsBox.append(failed);

  const view = state.view === "tree" ? treeView(tree) : listView(rows);
  holder.append(view.element);
  const draw = (): void => {
    const r = view.draw(state.query);
    let text = `${fmtInt(r.matches)} of ${fmtInt(rows.length)} tensors · ${fmtInt(r.parameters)} parameters`;
    if (r.truncated) text += state.view === "tree" ? ` · showing the first ${fmtInt(MAX_LINES)} lines` : ` · showing the first ${fmtInt(MAX_ROWS)}`;
    if (state.total > rows.length) text += ` · the server lists ${fmtInt(state.total)}; only the first ${fmtInt(rows.length)} were fetched`;
    const damaged = rows.filter((row) => nonFinite(row) > 0).length;  // over every tensor, whatever the filter
    if (damaged) text += ` · ${fmtInt(damaged)} ${damaged === 1 ? "tensor holds" : "tensors hold"} NaN or Inf (the NaN/Inf column)`;
    status.textContent = text;
    status.dataset.matches = String(r.matches);
    status.dataset.nonfinite = String(damaged);
  };
  view.element.addEventListener("tree-toggle", draw);
  search.addEventListener("input", () => {
    state.query = search.value;
    draw();
  });
  draw();
  search.focus();
}
