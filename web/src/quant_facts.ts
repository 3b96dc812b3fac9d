// The quantization facts of a tensor page (#quantization): the detail's `quantization` object (docs/api.md)
// as a readable table. Every field of the API is one row (data-field: its key, `packed.KEY` inside
// `packed`; data-value: the API's value as text, arrays joined by ","), known fields first with a label
// and any other field after them under its own key, so nothing the server sends is hidden. A packed
// tensor's parts are a table of their own (#quantization-parts: role, name, dtype, shape, file, offset, bytes).
import type { PackedPart, Quantization } from "./api";
import { el } from "./dom";
import { fmt, fmtBytes, fmtInt, fmtShape } from "./format";

const LABELS: Record<string, string> = {
  stored_type: "stored type",
  bits_per_weight: "bits per weight",
  ggml_type: "ggml type id",
  "packed.scheme": "packed scheme",
  "packed.kernel_scheme": "kernel scheme",
  "packed.bits": "bits per code",
  "packed.rows": "rows",
  "packed.cols": "columns",
  "packed.block": "block (rows × columns)",
  "packed.block_size": "block size",
  "packed.group_size": "group size",
  "packed.groups": "groups",
  "packed.zero_offset": "zero offset",
  "packed.scale_layout": "scale layout",
  "packed.code_dtype": "code dtype",
  "packed.nested_block_size": "nested block size",
  "packed.nested_offset": "nested offset",
};
const ORDER = ["stored_type", "bits_per_weight", "ggml_type", "packed.scheme", "packed.kernel_scheme", "packed.bits", "packed.rows", "packed.cols"];

/** The API's value as the data-value attribute holds it. */
export function valueText(v: unknown): string {
  if (Array.isArray(v)) return v.map(valueText).join(",");
  if (v !== null && typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function shown(key: string, v: unknown): string {
  if (key === "bits_per_weight" && typeof v === "number") return fmt(v);
  if (key === "packed.block" && Array.isArray(v)) return v.join(" × ");
  if (typeof v === "number") return Number.isInteger(v) ? fmtInt(v) : fmt(v);
  return valueText(v);
}

function partsTable(parts: PackedPart[]): HTMLTableElement {
  const t = el("table", { class: "facts quant-parts", id: "quantization-parts" });
  t.append(el("tr", {}, ...["role", "name", "dtype", "shape", "file", "offset", "bytes"].map((h) => el("th", {}, h))));
  for (const p of parts)
    t.append(
      el(
        "tr",
        { "data-role": p.role, "data-file": p.file },
        el("td", {}, p.role),
        el("td", {}, p.name),
        el("td", {}, p.dtype),
        el("td", {}, fmtShape(p.shape)),
        el("td", {}, p.file),
        el("td", { class: "num" }, fmtInt(p.offset)),
        el("td", { class: "num" }, `${fmtInt(p.bytes)} (${fmtBytes(p.bytes)})`),
      ),
    );
  return t;
}

/** The section's elements: a heading, the facts table and, for a packed tensor, its parts; none when dense. */
export function quantizationView(q: Quantization | null): HTMLElement[] {
  if (!q) return [];
  const fields: [string, unknown][] = [];
  for (const [k, v] of Object.entries(q)) if (k !== "packed") fields.push([k, v]);
  const packed = q.packed;
  if (packed) for (const [k, v] of Object.entries(packed)) if (k !== "parts") fields.push([`packed.${k}`, v]);
  const rank = (k: string): number => (ORDER.includes(k) ? ORDER.indexOf(k) : ORDER.length);
  fields.sort((a, b) => rank(a[0]) - rank(b[0]));
  const t = el("table", { class: "facts", id: "quantization" });
  for (const [k, v] of fields) {
    let text = shown(k, v);
    if (k === "ggml_type") text += ` (${q.stored_type})`;
    t.append(el("tr", { "data-field": k, "data-value": valueText(v) }, el("th", {}, LABELS[k] ?? k), el("td", {}, text)));
  }
  const out: HTMLElement[] = [el("h3", {}, "Quantization"), t];
  if (packed?.parts?.length) out.push(el("h4", {}, `Stored in ${packed.parts.length} part${packed.parts.length > 1 ? "s" : ""}`), partsTable(packed.parts));
  return out;
}
