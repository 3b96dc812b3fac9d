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

/** Where a block's download stands, for the page's progress line: the band being fetched (1-based, of `bands`),
 *  whether the server is still decoding it or its bytes are arriving, and bytes received of the view's total (null
 *  until the first band's headers say it). */
export interface BlockProgress {
  phase: "decoding" | "receiving" | "done";
  band: number;
  bands: number;
  receivedBytes: number;
  totalBytes: number | null;
}

export interface BlockFetch {
  /** The view's scan rows (the block is fetched in bands of them; 0 when the scan shape is unknown: one request). */
  scanRows: number;
  /** The view's expected bytes per scan row (sizes the bands before the first answer; the answer's size rules). */
  rowBytes: number;
  onProgress?: (p: BlockProgress) => void;
  /** Aborts the download (the fetch rejects with the signal's reason). */
  signal?: AbortSignal;
  /** Asked once the first band's headers give the view's shape, dtype and padded bytes: false stops the download
   *  (fetchBlock then returns null), e.g. when the page cannot hold the block. */
  accept?: (view: { shape: StemBlock["shape"]; dtype: StemBlock["dtype"]; bytes: number }) => boolean;
}

/** About this many bytes per band, and at least this many bands (when the view has the rows): the progress line then
 *  moves several times even for a small block, and the server decodes one band while the previous one arrives. */
const BAND_BYTES = 32 * 2 ** 20;
const MIN_BANDS = 4;

/** Half-open row ranges splitting `rows` into `bands` nearly equal bands. */
export function bandRows(rows: number, bands: number): [number, number][] {
  const out: [number, number][] = [];
  for (let k = 0; k < bands; k++) out.push([Math.floor((k * rows) / bands), Math.floor(((k + 1) * rows) / bands)]);
  return out;
}

/** The block of acquisition `path` (/api/acquisitions/{id}) in a view (scan_region, detector_bin), fetched in bands
 *  of scan rows (GET …/block?rows=R0,R1) so that its progress can be shown and it can be cancelled; the bands are
 *  written into one buffer as they arrive. Throws with the server's reason, or when a band's shape or dtype
 *  disagrees with the first band's. */
export async function fetchBlock(path: string, params: Record<string, string>, how: BlockFetch): Promise<StemBlock | null> {
  const planned = how.scanRows > 0 ? Math.min(how.scanRows, Math.max(Math.min(MIN_BANDS, how.scanRows), Math.ceil((how.scanRows * how.rowBytes) / BAND_BYTES))) : 1;
  const bands = how.scanRows > 0 ? bandRows(how.scanRows, planned) : [null];
  let target: { bytes: Uint8Array; words: Uint32Array; rowBytes: number; shape: StemBlock["shape"]; dtype: StemBlock["dtype"]; total: number } | null = null;
  let received = 0;
  const report = (phase: BlockProgress["phase"], band: number) =>
    how.onProgress?.({ phase, band, bands: bands.length, receivedBytes: received, totalBytes: target ? target.total : null });
  // One band ahead: the server decodes band k + 1 while band k arrives. The look-ahead is stopped with the
  // download (Cancel, a refusal, an error); a look-ahead nobody awaits any more must not reject unhandled.
  const stop = new AbortController();
  const onAbort = () => stop.abort(how.signal?.reason);
  how.signal?.addEventListener("abort", onAbort);
  if (how.signal?.aborted) onAbort();
  const request = (rows: [number, number] | null) => {
    const p = fetch(apiUrl(`${path}/block`, rows ? { ...params, rows: rows.join(",") } : params), { signal: stop.signal });
    p.catch(() => {});
    return p;
  };
  let pending = request(bands[0]);
  try {
    for (const [k, rows] of bands.entries()) {
      report("decoding", k + 1);
      const res = await pending;
      if (k + 1 < bands.length) pending = request(bands[k + 1]);
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
      if (shape.length !== 4 || shape.some((n) => !Number.isInteger(n) || n < 0) || !(dtype in WIDTH)) throw new Error(`block: unexpected shape ${shape} or dtype ${dtype}`);
      const rowBytes = shape[1] * shape[2] * shape[3] * WIDTH[dtype];
      if (!target) {
        const viewRows = rows ? how.scanRows : shape[0];
        const total = viewRows * rowBytes;
        const said = Number(res.headers.get("X-Block-View-Bytes") ?? NaN);
        if (Number.isFinite(said) && said !== total) throw new Error(`block: the server says the view has ${said} bytes, its first band's rows make ${total}`);
        const view = { shape: [viewRows, shape[1], shape[2], shape[3]] as StemBlock["shape"], dtype, bytes: Math.ceil(total / 4) * 4 };
        if (how.accept && !how.accept(view)) {
          void res.body?.cancel();
          return null;
        }
        const words = new Uint32Array(view.bytes / 4);
        target = { bytes: new Uint8Array(words.buffer), words, rowBytes, shape: view.shape, dtype, total };
      } else if (dtype !== target.dtype || rowBytes !== target.rowBytes || shape[1] !== target.shape[1] || shape[2] !== target.shape[2]) {
        throw new Error(`block: band ${k + 1} is ${shape} ${dtype}, the first was ${target.shape} ${target.dtype}`);
      }
      const first = rows ? rows[0] : 0;
      const want = rows ? rows[1] - rows[0] : shape[0];
      if (shape[0] !== want) throw new Error(`block: band ${k + 1} has ${shape[0]} scan rows, ${want} were asked for`);
      // The band's bytes (without the padding to a u32 word) go to its rows' place in the view's buffer.
      let at = first * target.rowBytes;
      const end = at + want * target.rowBytes;
      const reader = res.body?.getReader();
      if (!reader) {
        const all = new Uint8Array(await res.arrayBuffer());
        target.bytes.set(all.subarray(0, end - at), at);
        received += end - at;
      } else {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          const take = Math.min(value.length, end - at);
          if (take > 0) target.bytes.set(take === value.length ? value : value.subarray(0, take), at);
          at += take;
          received += take;
          report("receiving", k + 1);
        }
        if (at !== end) throw new Error(`block: band ${k + 1} ended after ${at - first * target.rowBytes} of ${end - first * target.rowBytes} bytes`);
      }
    }
  } finally {
    how.signal?.removeEventListener("abort", onAbort);
    stop.abort();  // nothing is in flight after the last band; after a refusal or an error, the look-ahead stops
  }
  if (!target) throw new Error("block: no band was fetched");
  report("done", bands.length);
  return { shape: target.shape, dtype: target.dtype, words: target.words };
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
