// A decoded block of 4D-STEM frames as the page holds it (GET /api/acquisitions/{id}/block: every frame of a view,
// decoded and masked by the server as the products see them, packed little-endian in u32 words), and the pixel
// lists of the page's detectors, selected exactly as the server selects them (src/stem/products/virtual_detector.cpp).
import { apiUrl } from "../../api";

export interface StemBlock {
  shape: [number, number, number, number]; // scan rows, scan cols, detector rows, detector cols
  dtype: "u8" | "u16" | "u32";
  words: Uint32Array; // the values packed little-endian in u32 words
}

/** Bytes per value of each block dtype. */
export const WIDTH = { u8: 1, u16: 2, u32: 4 } as const;

/** The block of acquisition `path` (/api/acquisitions/{id}) in a view (scan_region, detector_bin), or throws with the server's reason. */
export async function fetchBlock(path: string, params: Record<string, string> = {}): Promise<StemBlock> {
  const res = await fetch(apiUrl(`${path}/block`, params));
  if (!res.ok) {
    let why = `${res.status}`;
    try {
      why = (await res.json()).error ?? why;
    } catch {
      /* not JSON */
    }
    throw new Error(`block: ${why}`);
  }
  const shape = (res.headers.get("X-Block-Shape") ?? "").split(",").map(Number) as StemBlock["shape"];
  const dtype = res.headers.get("X-Block-Dtype") as StemBlock["dtype"];
  if (shape.length !== 4 || !(dtype in WIDTH)) throw new Error(`block: unexpected shape ${shape} or dtype ${dtype}`);
  return { shape, dtype, words: new Uint32Array(await res.arrayBuffer()) };
}

/** The pixels (row-major indices) of an annulus, exactly as the server's annulus_pixels selects them. */
export function annulusPixels(rows: number, cols: number, centerRow: number, centerCol: number, inner: number, outer: number): Uint32Array {
  const f = Math.fround;
  const cr = f(centerRow);
  const cc = f(centerCol);
  const lo = f(inner);
  const hi = Number.isFinite(outer) ? f(outer) : Infinity;
  const out: number[] = [];
  for (let k = 0; k < rows; k++)
    for (let l = 0; l < cols; l++) {
      const dr = f(k - cr);
      const dc = f(l - cc);
      const d = f(Math.sqrt(f(f(dr * dr) + f(dc * dc))));
      if (d >= lo && d <= hi) out.push(k * cols + l);
    }
  return Uint32Array.from(out);
}

/** The frame at scan position (row, col) of a resident block, read on the page (no request). */
export function blockFrame(block: StemBlock, row: number, col: number): number[] {
  const [, cols, kr, kc] = block.shape;
  const n = kr * kc;
  const first = (row * cols + col) * n;
  const out = new Array<number>(n);
  const w = block.words;
  for (let i = 0; i < n; i++) {
    const e = first + i;
    if (block.dtype === "u32") out[i] = w[e];
    else if (block.dtype === "u16") out[i] = (w[e >>> 1] >>> ((e & 1) * 16)) & 0xffff;
    else out[i] = (w[e >>> 2] >>> ((e & 3) * 8)) & 0xff;
  }
  return out;
}

/** The pixels (row-major) of the half-open rectangle [r0, r1) × [c0, c1), clipped to the detector. */
export function rectanglePixels(rows: number, cols: number, r0: number, c0: number, r1: number, c1: number): Uint32Array {
  const out: number[] = [];
  for (let k = Math.max(0, r0); k < Math.min(rows, r1); k++)
    for (let l = Math.max(0, c0); l < Math.min(cols, c1); l++) out.push(k * cols + l);
  return Uint32Array.from(out);
}
