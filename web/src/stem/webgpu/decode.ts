// The page's decode of stored chunks (GET /api/acquisitions/{id}/chunks?start=&count=: bitshuffle+LZ4 or raw, one
// chunk per frame, as the Dectris data files hold them) on its WebGPU adapter (bitshuffle_lz4.wgsl.ts), into the
// block the page keeps (block.ts: frames back to back, little-endian, in u32 words), masked as the server's
// …/block is (the sentinel value and the file's bad pixels zeroed): the same bytes, with a fraction of them over the
// wire. The frames are fetched in windows of whole frames, the next window's request in flight while one decodes.
//
// A window whose manifest or chunks are inconsistent (an offset or length past the data, a header that disagrees
// with the manifest, an LZ4 block that reads or writes outside itself) is refused: ChunkRefused naming the frame
// and its data file, never partly decoded data. A window the server does not serve as chunks (another codec:
// HTTP 409) is ChunkRefused with `fallback` set: the page then fetches the decoded block instead.
import { apiUrl } from "../../api";
import { BITSHUFFLE_LZ4_WGSL } from "./bitshuffle_lz4.wgsl";
import { type StemBlock, WIDTH } from "./block";
import { localLimit } from "./ladder";
import { PageDevice } from "./masked_sums";

/* eslint-disable @typescript-eslint/no-explicit-any */
const BU = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };

export interface StoredChunk {
  frame: number;
  offset: number; // bytes into the window's data (after the manifest), a multiple of 4
  bytes: number;
  filter: "bitshuffle_lz4" | "none";
  block_bytes: number;
  file: number; // index into ChunkManifest.files
}

export interface ChunkManifest {
  start: number;
  count: number;
  frames_total: number;
  dtype: StemBlock["dtype"];
  element_size: number;
  frame_shape: [number, number];
  frame_bytes: number;
  sentinel: number;
  bad_pixels: number[];
  files: string[];
  data_bytes: number;
  chunks: StoredChunk[];
}

/** Why chunks were not decoded: `frame` names the damaged frame (null when none is to blame); `fallback` when the
 *  server does not serve these frames as chunks (the decoded block is the way). */
export class ChunkRefused extends Error {
  constructor(message: string, readonly frame: number | null, readonly fallback = false) {
    super(message);
  }
}

/** What the status codes of bitshuffle_lz4.wgsl.ts mean. */
const ERRORS: Record<number, string> = {
  1: "stored uncompressed but not one frame's bytes",
  2: "chunk shorter than its 12-byte header",
  3: "header (byte 0) gives another size than the frame's bytes",
  4: "header (byte 8) gives another block size than the data file's manifest",
  5: "an LZ4 block's size prefix is truncated",
  6: "an LZ4 block's length runs past the chunk's end",
  7: "the bytes after the LZ4 blocks are not the raw tail",
  8: "LZ4 literals run past the block's end",
  9: "an LZ4 match offset points before the block's start (or is 0)",
  10: "LZ4 output runs past the block's bytes",
  11: "an LZ4 block ends inside a sequence (or is empty)",
  12: "an LZ4 block decodes to fewer bytes than it must",
  13: "an LZ4 match reaches the block's last 5 bytes (the format's end rule)",
};

/** The window of frames [start, start + count): its manifest, its chunks' data, and the bytes the answer carried. */
export async function fetchChunkWindow(path: string, start: number, count: number, signal?: AbortSignal): Promise<{ manifest: ChunkManifest; data: Uint8Array; wireBytes: number }> {
  const res = await fetch(apiUrl(`${path}/chunks`, { start: String(start), count: String(count) }), { signal });
  if (!res.ok) {
    let why = `${res.status}`;
    try {
      why = (await res.json()).error ?? why;
    } catch {
      /* not JSON */
    }
    throw new ChunkRefused(`chunks: ${why}`, null, res.status === 409);
  }
  const body = await res.arrayBuffer();
  const m = Number(res.headers.get("X-Chunks-Manifest-Bytes") ?? NaN);
  if (!Number.isInteger(m) || m <= 0 || m > body.byteLength || m % 4) throw new Error(`chunks: X-Chunks-Manifest-Bytes ${m} does not fit the ${body.byteLength}-byte answer`);
  const manifest = JSON.parse(new TextDecoder().decode(new Uint8Array(body, 0, m))) as ChunkManifest;
  return { manifest, data: new Uint8Array(body, m), wireBytes: body.byteLength };
}

/** How error messages name a frame: "<data file>, frame <n>", as the server's do. */
export function frameName(w: ChunkManifest, c: StoredChunk): string {
  return `${w.files[c.file] ?? "?"}, frame ${c.frame}`;
}

/** Checks a window's manifest against what was asked and the data received; the LZ4 blocks per chunk (from the
 *  frame's elements and the chunk's block size). Throws ChunkRefused naming the first bad frame. */
export function checkWindow(w: ChunkManifest, data: Uint8Array, start: number, count: number, dtype: StemBlock["dtype"], frameBytes: number): number[] {
  if (w.start !== start || w.count !== count || w.chunks.length !== count) throw new ChunkRefused(`chunks: asked for frames ${start}+${count}, the answer has ${w.start}+${w.count} (${w.chunks.length} chunks)`, null);
  if (w.dtype !== dtype || w.frame_bytes !== frameBytes || w.element_size !== WIDTH[dtype])
    throw new ChunkRefused(`chunks: ${w.dtype} frames of ${w.frame_bytes} bytes, the acquisition's are ${dtype} of ${frameBytes}`, null);
  if (w.data_bytes !== data.length) throw new ChunkRefused(`chunks: the manifest gives ${w.data_bytes} data bytes, ${data.length} arrived`, null);
  const es = w.element_size;
  const elements = frameBytes / es;
  const whole = elements - (elements % 8);
  return w.chunks.map((c, i) => {
    const bad = (why: string) => new ChunkRefused(`${frameName(w, c)}: ${why}`, c.frame);
    if (c.frame !== start + i) throw bad(`chunk ${i} of the window is frame ${c.frame}, expected ${start + i}`);
    if (c.offset % 4 || c.offset + c.bytes > data.length) throw bad(`chunk at byte ${c.offset} (${c.bytes} bytes) lies outside the window's ${data.length} data bytes`);
    if (c.filter === "none") return 0;
    if (c.filter !== "bitshuffle_lz4") throw bad(`filter ${c.filter} is not one the page decodes`);
    if (!(c.block_bytes > 0) || c.block_bytes % (8 * es) || c.block_bytes > 0x7e000000)
      throw bad(`header (byte 8) block size ${c.block_bytes} bytes is not a positive multiple of 8 ${es}-byte elements`);
    return Math.ceil(whole / (c.block_bytes / es));
  });
}

/** The decoder's pipelines on one device. */
export class ChunkDecoder {
  private constructor(
    readonly device: any,
    private readonly layout: any,
    private readonly pipelines: { scan: any; lz4: any; unshuffle: any },
  ) {}

  static async create(device: any): Promise<ChunkDecoder> {
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ code: BITSHUFFLE_LZ4_WGSL });
    const S = 0x4; // GPUShaderStage.COMPUTE
    const storage = (binding: number, type: string) => ({ binding, visibility: S, buffer: { type } });
    const layout = device.createBindGroupLayout({
      entries: [storage(0, "read-only-storage"), storage(1, "read-only-storage"), storage(2, "storage"), storage(3, "storage"),
        storage(4, "storage"), storage(5, "storage"), { binding: 6, visibility: S, buffer: { type: "uniform" } }, storage(7, "read-only-storage")],
    });
    const pl = device.createPipelineLayout({ bindGroupLayouts: [layout] });
    const make = (entryPoint: string) => device.createComputePipeline({ layout: pl, compute: { module, entryPoint } });
    const pipelines = { scan: make("scan_main"), lz4: make("lz4_main"), unshuffle: make("unshuffle_main") };
    const err = await device.popErrorScope();
    if (err) throw new Error(`decode WGSL pipeline: ${err.message}`);
    return new ChunkDecoder(device, layout, pipelines);
  }

  /** Decodes one window (checked by checkWindow, `blocks` its LZ4 blocks per chunk) on the adapter; returns its
   *  frames' bytes (count × frame_bytes), masked when `mask`. Throws ChunkRefused naming the first bad frame. */
  async decode(w: ChunkManifest, data: Uint8Array, blocks: number[], mask: boolean): Promise<Uint8Array> {
    const d = this.device;
    const count = w.count;
    const frameBytes = w.frame_bytes;
    const stride = Math.ceil(frameBytes / 4) * 4;
    const totalBytes = count * frameBytes;
    const outWords = Math.ceil(totalBytes / 4);
    const nBlocks = blocks.reduce((a, b) => a + b, 0);
    const info = new Uint32Array(Math.max(8, count * 8));
    const table = new Uint32Array(Math.max(8, nBlocks * 8));
    let base = 0;
    w.chunks.forEach((c, i) => {
      info.set([c.offset, c.bytes, c.filter === "none" ? 0 : 1, c.block_bytes, base, blocks[i], 0, 0], i * 8);
      for (let k = 0; k < blocks[i]; k++) table[(base + k) * 8 + 4] = i; // the chunk of each block, whatever the scan finds
      base += blocks[i];
    });
    const [kr, kc] = w.frame_shape;
    const bad = new Uint32Array(Math.max(4, Math.ceil((kr * kc) / 32)));
    for (const p of w.bad_pixels) if (p < kr * kc) bad[p >>> 5] |= 1 << (p & 31);
    const buffer = (bytes: number, usage: number) => d.createBuffer({ size: Math.max(16, Math.ceil(bytes / 4) * 4), usage });
    const upload = (arr: ArrayBufferView, usage: number) => {
      const b = buffer(arr.byteLength, usage | BU.COPY_DST);
      const aligned = arr.byteLength % 4 ? (() => {
        const c = new Uint8Array(Math.ceil(arr.byteLength / 4) * 4);
        c.set(new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength));
        return c;
      })() : arr;
      if (aligned.byteLength) d.queue.writeBuffer(b, 0, aligned.buffer, aligned.byteOffset, aligned.byteLength);
      return b;
    };
    const groups = (n: number) => {
      const total = Math.max(1, Math.ceil(n / 64));
      const x = Math.min(total, 65535);
      return { x, y: Math.ceil(total / x), rowThreads: x * 64 };
    };
    const srcBuf = upload(data, BU.STORAGE);
    const infoBuf = upload(info, BU.STORAGE);
    const tableBuf = upload(table, BU.STORAGE);
    const scratchBuf = buffer(count * stride, BU.STORAGE);
    const statusBuf = upload(new Uint32Array(Math.max(4, count)), BU.STORAGE | BU.COPY_SRC);
    const outBuf = buffer(outWords * 4, BU.STORAGE | BU.COPY_SRC);
    const badBuf = upload(bad, BU.STORAGE);
    const passes: [any, number][] = [[this.pipelines.scan, count], [this.pipelines.lz4, nBlocks], [this.pipelines.unshuffle, outWords]];
    const enc = d.createCommandEncoder();
    const owned = [srcBuf, infoBuf, tableBuf, scratchBuf, statusBuf, outBuf, badBuf];
    for (const [pipeline, n] of passes) {
      const g = groups(n);
      const params = upload(new Uint32Array([count, nBlocks, frameBytes, stride, w.element_size, frameBytes / w.element_size, outWords, w.sentinel >>> 0, g.rowThreads, mask ? 1 : 0, 0, 0]), BU.UNIFORM);
      owned.push(params);
      const bind = d.createBindGroup({
        layout: this.layout,
        entries: [srcBuf, infoBuf, tableBuf, scratchBuf, statusBuf, outBuf, params, badBuf].map((b, binding) => ({ binding, resource: { buffer: b } })),
      });
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bind);
      pass.dispatchWorkgroups(g.x, g.y);
      pass.end();
    }
    const statusRead = buffer(Math.max(4, count) * 4, BU.MAP_READ | BU.COPY_DST);
    const outRead = buffer(outWords * 4, BU.MAP_READ | BU.COPY_DST);
    enc.copyBufferToBuffer(statusBuf, 0, statusRead, 0, Math.max(16, Math.max(4, count) * 4));
    enc.copyBufferToBuffer(outBuf, 0, outRead, 0, Math.max(16, outWords * 4));
    owned.push(statusRead, outRead);
    d.queue.submit([enc.finish()]);
    try {
      await statusRead.mapAsync(1);
      const status = new Uint32Array(statusRead.getMappedRange().slice(0));
      statusRead.unmap();
      for (let i = 0; i < count; i++)
        if (status[i]) throw new ChunkRefused(`${frameName(w, w.chunks[i])}: damaged chunk (${ERRORS[status[i]] ?? `error ${status[i]}`}), decoded on the page's adapter`, w.chunks[i].frame);
      await outRead.mapAsync(1);
      const out = new Uint8Array(outRead.getMappedRange().slice(0, totalBytes));
      outRead.unmap();
      return out;
    } finally {
      for (const b of owned) b.destroy();
    }
  }
}

/** Where a decode on the page stands, for the progress line. */
export interface DecodeProgress {
  window: number;
  windows: number;
  wireBytes: number;
  decodedBytes: number;
  totalBytes: number;
}

/** What the page reports about the path that ran. */
export interface DecodeReport {
  path: "chunks";
  wireBytes: number;
  decodedBytes: number;
  chunks: number;
  windows: number;
  /** Milliseconds waiting for the windows' answers, and decoding them on the adapter (submit to read back). */
  fetchMs: number;
  decodeMs: number;
  totalMs: number;
}

/** About this many decoded bytes per window (whole frames, a multiple of 4 frames so windows start on u32 words);
 *  localStorage "tm.stem.decodeWindowBytes" lowers it (the e2e test makes many windows so). */
const WINDOW_BYTES = 16 * 2 ** 20;

export function windowFrames(frameBytes: number, frames: number): number {
  const bytes = Math.min(WINDOW_BYTES, localLimit("tm.stem.decodeWindowBytes"));
  const n = Math.max(4, Math.floor(bytes / frameBytes / 4) * 4);
  return Math.min(n, frames, 65536);
}

/** Where a window's chunks come from besides the server: the page's local files (stem/local/local_acquisition.ts)
 *  give the same manifest and data as GET …/chunks would; `wireBytes` is then the bytes read from the files. */
export type ChunkSource = (start: number, count: number, signal?: AbortSignal) => Promise<{ manifest: ChunkManifest; data: Uint8Array; wireBytes: number }>;

/** The whole acquisition's block (frames_total = scan rows × cols, detector kr × kc, `dtype`) decoded on `device`
 *  from its stored chunks (`path`: the server's acquisition, or a ChunkSource). `accept` is asked first with the block's size (false: null is returned, nothing
 *  fetched). Throws ChunkRefused (a damaged frame; or `fallback`: not served as chunks). */
export async function decodeBlockOnPage(path: string | ChunkSource, device: any, shape: StemBlock["shape"], dtype: StemBlock["dtype"], how: {
  accept?: (view: { shape: StemBlock["shape"]; dtype: StemBlock["dtype"]; bytes: number }) => boolean;
  onProgress?: (p: DecodeProgress) => void;
  signal?: AbortSignal;
  mask?: boolean;
}): Promise<{ block: StemBlock; report: DecodeReport } | null> {
  const t0 = performance.now();
  const frames = shape[0] * shape[1];
  const frameBytes = shape[2] * shape[3] * WIDTH[dtype];
  const total = frames * frameBytes;
  const padded = Math.ceil(total / 4) * 4;
  if (how.accept && !how.accept({ shape, dtype, bytes: padded })) return null;
  const decoder = await ChunkDecoder.create(device);
  const words = new Uint32Array(padded / 4);
  const bytes = new Uint8Array(words.buffer);
  const per = windowFrames(frameBytes, frames);
  const starts: number[] = [];
  for (let s = 0; s < frames; s += per) starts.push(s);
  const report: DecodeReport = { path: "chunks", wireBytes: 0, decodedBytes: 0, chunks: 0, windows: starts.length, fetchMs: 0, decodeMs: 0, totalMs: 0 };
  const request = (s: number) => {
    const n = Math.min(per, frames - s);
    const p = typeof path === "string" ? fetchChunkWindow(path, s, n, how.signal) : path(s, n, how.signal);
    p.catch(() => {});
    return p;
  };
  let pending = starts.length ? request(starts[0]) : null;
  for (const [k, s] of starts.entries()) {
    const count = Math.min(per, frames - s);
    const tf = performance.now();
    const got = await pending!;
    report.fetchMs += performance.now() - tf;
    pending = k + 1 < starts.length ? request(starts[k + 1]) : null;
    const blocks = checkWindow(got.manifest, got.data, s, count, dtype, frameBytes);
    const td = performance.now();
    const out = await decoder.decode(got.manifest, got.data, blocks, how.mask ?? true);
    report.decodeMs += performance.now() - td;
    bytes.set(out, s * frameBytes);
    report.wireBytes += got.wireBytes;
    report.decodedBytes += out.length;
    report.chunks += count;
    how.onProgress?.({ window: k + 1, windows: starts.length, wireBytes: report.wireBytes, decodedBytes: report.decodedBytes, totalBytes: total });
  }
  report.totalMs = performance.now() - t0;
  return { block: { shape, dtype, words }, report };
}

/** What window.tmStemDecodeCheck answers: the whole acquisition decoded on a fresh device (its words and report),
 *  or the refusal (its message and the frame it names). */
export type DecodeCheck = { ok: true; words: number; block: StemBlock; report: DecodeReport } | { ok: false; message: string; frame: number | null };

/** Puts window.tmStemDecodeCheck(path, shape, dtype): the page's decode of an acquisition without the page around it
 *  (the page needs the server's calibration first, which a damaged file refuses; the e2e test checks the decoder's
 *  refusal of such a file through this). Nothing is kept. */
export function exposeDecodeCheck(): void {
  (globalThis as any).tmStemDecodeCheck = async (path: string, shape: StemBlock["shape"], dtype: StemBlock["dtype"]): Promise<DecodeCheck> => {
    const dev = await PageDevice.request();
    try {
      const got = await decodeBlockOnPage(path, dev.device, shape, dtype, {});
      return got ? { ok: true, words: got.block.words.length, block: got.block, report: got.report } : { ok: false, message: "not accepted", frame: null };
    } catch (e) {
      return { ok: false, message: e instanceof Error ? e.message : String(e), frame: e instanceof ChunkRefused ? e.frame : null };
    } finally {
      dev.device.destroy();
    }
  };
}
