// Which tensors play "the same role" in different layers (pure functions, no DOM, no fetches).
//
// A name's layer is its FIRST segment made only of decimal digits, segments being split at "." and "/"
// (`model.layers.3.mlp.down_proj.weight` → 3, `blk.12.attn_q.weight` → 12). Two names have the same role
// when they are equal except for that one segment: everything before it (prefix) and after it (suffix)
// is identical, so `model.layers.3.experts.7.w1` and `model.layers.4.experts.7.w1` match while
// `…experts.6.w1` does not (later numeric segments, e.g. an expert, stay fixed). A name without a
// numeric segment has no layer.

/** A name cut around its layer segment: name === prefix + digits + suffix, with layer = Number(digits). */
export interface LayerSplit {
  prefix: string; // up to and including the separator before the layer segment ("" when it comes first)
  layer: number;
  digits: string; // the segment as written (e.g. "03")
  suffix: string; // from the separator after the layer segment to the end ("" when it comes last)
}

/** The layer segment of a name, or null when no segment is all digits. */
export function splitLayer(name: string): LayerSplit | null {
  let start = 0;
  for (let i = 0; i <= name.length; i++) {
    if (i < name.length && name[i] !== "." && name[i] !== "/") continue;
    const seg = name.slice(start, i);
    if (/^[0-9]+$/.test(seg)) {
      const layer = Number(seg);
      if (Number.isSafeInteger(layer)) return { prefix: name.slice(0, start), layer, digits: seg, suffix: name.slice(i) };
    }
    start = i + 1;
  }
  return null;
}

/** One member of a role: its layer number and full name. */
export interface LayerMember {
  layer: number;
  name: string;
}

/**
 * The names among `names` with the same role as `name` (itself included when listed), sorted by layer,
 * then by name (two spellings of one number, e.g. "3" and "03", both stay). Empty when `name` has no layer.
 */
export function layerSiblings(name: string, names: Iterable<string>): LayerMember[] {
  const me = splitLayer(name);
  if (!me) return [];
  const out: LayerMember[] = [];
  for (const n of names) {
    const s = splitLayer(n);
    if (s && s.prefix === me.prefix && s.suffix === me.suffix) out.push({ layer: s.layer, name: n });
  }
  return out.sort((a, b) => a.layer - b.layer || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * A substring every sibling of `name` contains, for GET /api/tensors?q= (case-sensitive substring): the
 * longer of the prefix and the suffix around the layer segment, or null when the name has no layer or
 * both are empty (then every name must be fetched and filtered).
 */
export function siblingQuery(name: string): string | null {
  const s = splitLayer(name);
  if (!s) return null;
  const q = s.suffix.length >= s.prefix.length ? s.suffix : s.prefix;
  return q || null;
}
