// The inventory's tree model, built once per GET /api/tensors response (no DOM here).
//
// Contract:
// - one root per checkpoint (kind "checkpoint"), in id order; below it the tensor names split on '.': a segment that
//   is a number is a **block** (labelled with its parent segment, `layers.0`), other segments are groups;
//   every tensor is exactly one leaf (a name that is also a prefix of others, `a.b` beside `a.b.c`, is a
//   leaf beside the group `b`);
// - a group with a single child is merged with it (`self_attn` + `q_proj` + `weight` is one node
//   `self_attn.q_proj.weight`), so chains do not cost a click each; blocks and roots are never merged;
// - every node's tensors, parameters, bytes and dtypes are the sums over the leaves under it;
// - children are sorted by label, numbers by value (`layers.2` before `layers.10`).
// Building is O(tensors × depth); matching a query is O(tensors) plus O(matches × depth).
import type { TensorRow } from "./api";

export type NodeKind = "checkpoint" | "group" | "block" | "leaf";

export interface TreeNode {
  /** Unique in the tree: the checkpoint id, then the name prefix the node covers (a leaf: its full name). */
  id: string;
  label: string;
  kind: NodeKind;
  checkpoint: string;
  parent: TreeNode | null;
  children: TreeNode[];
  /** The tensor of a leaf. */
  row: TensorRow | null;
  tensors: number;
  parameters: number;
  bytes: number;
  /** Tensors per dtype label (dtypeLabel) under the node. */
  dtypes: Map<string, number>;
}

export interface Tree {
  roots: TreeNode[];
  /** Every leaf, in row order, with its lower-cased name for matching. */
  leaves: { node: TreeNode; lname: string }[];
}

/** A tensor's type as the inventory names it: the stored quantized type when dequantized, else the dtype. */
export function dtypeLabel(r: TensorRow): string {
  return r.dequantized_from ?? r.dtype;
}

const isDigit = (c: number): boolean => c >= 48 && c <= 57;

/** Natural order: runs of digits compare by value (`layers.2` < `layers.10`), other characters by code. */
export function naturalCompare(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(j);
    if (isDigit(ca) && isDigit(cb)) {
      let ie = i;
      let je = j;
      while (ie < a.length && isDigit(a.charCodeAt(ie))) ie++;
      while (je < b.length && isDigit(b.charCodeAt(je))) je++;
      while (i < ie - 1 && a.charCodeAt(i) === 48) i++; // leading zeros
      while (j < je - 1 && b.charCodeAt(j) === 48) j++;
      if (ie - i !== je - j) return ie - i - (je - j);
      for (; i < ie; i++, j++) if (a.charCodeAt(i) !== b.charCodeAt(j)) return a.charCodeAt(i) - b.charCodeAt(j);
    } else {
      if (ca !== cb) return ca - cb;
      i++;
      j++;
    }
  }
  return a.length - i - (b.length - j);
}

function node(id: string, label: string, kind: NodeKind, checkpoint: string, parent: TreeNode | null): TreeNode {
  return { id, label, kind, checkpoint, parent, children: [], row: null, tensors: 0, parameters: 0, bytes: 0, dtypes: new Map() };
}

/** Builds the tree of `rows`; `checkpointLabel` names a checkpoint's root (its id when not given). */
export function buildTree(rows: TensorRow[], checkpointLabel: (id: string) => string = (id) => id): Tree {
  const roots = new Map<string, TreeNode>();
  // Groups and blocks by segment while building (leaves are not looked up: a name is listed once).
  const groups = new Map<TreeNode, Map<string, TreeNode>>();
  const leaves: Tree["leaves"] = [];
  for (const r of rows) {
    let cur = roots.get(r.checkpoint);
    if (!cur) roots.set(r.checkpoint, (cur = node(r.checkpoint + ":", checkpointLabel(r.checkpoint), "checkpoint", r.checkpoint, null)));
    const name = r.name;
    let start = 0;
    let prev = "";
    for (let dot = name.indexOf("."); dot >= 0; dot = name.indexOf(".", start)) {
      const seg = name.slice(start, dot);
      let m = groups.get(cur);
      if (!m) groups.set(cur, (m = new Map()));
      let c = m.get(seg);
      if (!c) {
        const block = start > 0 && /^\d+$/.test(seg);
        c = node(`${r.checkpoint}:${name.slice(0, dot)}`, block ? `${prev}.${seg}` : seg, block ? "block" : "group", r.checkpoint, cur);
        m.set(seg, c);
        cur.children.push(c);
      }
      cur = c;
      prev = seg;
      start = dot + 1;
    }
    const leaf = node(`${r.checkpoint}:${name}\u0000`, name.slice(start), "leaf", r.checkpoint, cur);
    leaf.row = r;
    cur.children.push(leaf);
    leaves.push({ node: leaf, lname: name.toLowerCase() });
    leaf.tensors = 1;
    leaf.parameters = r.parameters;
    leaf.bytes = r.bytes;
    leaf.dtypes.set(dtypeLabel(r), 1);
  }
  const finish = (n: TreeNode): void => {
    for (let i = 0; i < n.children.length; i++) {
      let c = n.children[i];
      while (c.kind === "group" && c.children.length === 1) {
        const only = c.children[0];
        const seg = only.kind === "block" ? only.label.slice(only.label.lastIndexOf(".") + 1) : only.label;
        only.label = `${c.label}.${seg}`;
        only.parent = n;
        c = only;
      }
      n.children[i] = c;
      finish(c);
      // The sums, bottom-up (a merged chain has the sums of its last node).
      n.tensors += c.tensors;
      n.parameters += c.parameters;
      n.bytes += c.bytes;
      for (const [d, k] of c.dtypes) n.dtypes.set(d, (n.dtypes.get(d) ?? 0) + k);
    }
    n.children.sort((a, b) => naturalCompare(a.label, b.label));
  };
  const out = [...roots.values()].sort((a, b) => naturalCompare(a.checkpoint, b.checkpoint));
  out.forEach(finish);
  return { roots: out, leaves };
}

/** Per node, how many tensors under it match `query` (case-insensitive substring of the full name) and their parameters; null for an empty query. */
export function matchTree(tree: Tree, query: string): Map<TreeNode, { tensors: number; parameters: number }> | null {
  const q = query.trim().toLowerCase();
  if (!q) return null;
  const m = new Map<TreeNode, { tensors: number; parameters: number }>();
  for (const { node: leaf, lname } of tree.leaves) {
    if (!lname.includes(q)) continue;
    const p = leaf.row?.parameters ?? 0;
    for (let n: TreeNode | null = leaf; n; n = n.parent) {
      const e = m.get(n);
      if (e) {
        e.tensors++;
        e.parameters += p;
      } else m.set(n, { tensors: 1, parameters: p });
    }
  }
  return m;
}

/** "bf16 ×9, Q4_K ×2": the dtypes under a node, most tensors first. */
export function dtypesText(dtypes: Map<string, number>, max = 4): string {
  const list = [...dtypes].sort((a, b) => b[1] - a[1] || naturalCompare(a[0], b[0]));
  const shown = list.slice(0, max).map(([d, n]) => (dtypes.size === 1 ? d : `${d} ×${n}`));
  return shown.join(", ") + (list.length > max ? `, +${list.length - max} more` : "");
}
