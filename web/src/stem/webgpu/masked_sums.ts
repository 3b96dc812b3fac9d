// Virtual-detector sums of a resident block of 4D-STEM frames on the page's WebGPU adapter (masked_sums.wgsl.ts):
// the block (GET /api/acquisitions/{id}/block: every frame decoded and masked by the server, as the products
// see them) is uploaded once; each detector is then one dispatch, one thread per scan position, its sum exact as
// a u32 pair. The detector's pixels follow the server's annulus rule (annulusPixels: float32 distances, both
// ends inclusive, src/stem/virtual_detector.cpp), and a detector covering more than half the frame is summed as
// total − complement, as the CLI does, so the numbers equal `tensormorph stem mask`'s.
import { apiUrl } from "../../api";
import { describeAdapter } from "../../webgpu/colorize";
import { DETECTOR_BIN_WGSL } from "./detector_bin.wgsl";
import { MASKED_SUMS_WGSL } from "./masked_sums.wgsl";

/* eslint-disable @typescript-eslint/no-explicit-any */
const BU = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };

export interface StemBlock {
  shape: [number, number, number, number]; // scan rows, scan cols, detector rows, detector cols
  dtype: "u8" | "u16" | "u32";
  words: Uint32Array; // the values packed little-endian in u32 words
}

const WIDTH = { u8: 1, u16: 2, u32: 4 } as const;

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

/** A step of the memory ladder: a smaller view of the acquisition the page could hold instead (the CLI's
 *  --detector-bin N or --scan-region R0,R1,C0,C1), with its estimated block size. */
export interface LadderStep {
  label: string;
  id: string; // element id suffix: "bin-N" or "crop"
  view: { bin: number; region: [number, number, number, number] | null };
  bytes: number;
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/** The ladder for a block of `shape` that does not fit in `limit` bytes: the smallest detector bin (2, 4, 8 or 16)
 *  that fits, and the largest centred scan crop that fits (binned values are counted as u32, what the server
 *  widens u16 sums to). Empty steps are left out. */
export function ladderSteps(shape: StemBlock["shape"], dtype: StemBlock["dtype"], limit: number): LadderStep[] {
  const [rows, cols, kr, kc] = shape;
  const steps: LadderStep[] = [];
  for (const bin of [2, 4, 8, 16]) {
    const bytes = rows * cols * Math.ceil(kr / bin) * Math.ceil(kc / bin) * 4;
    if (bytes <= limit) {
      steps.push({ label: `a detector bin of ${bin} (${mib(bytes)})`, id: `bin-${bin}`, view: { bin, region: null }, bytes });
      break;
    }
  }
  const frame = kr * kc * WIDTH[dtype];
  const f = Math.sqrt(limit / (rows * cols * frame));
  let [cr, cc] = [Math.max(1, Math.floor(rows * f)), Math.max(1, Math.floor(cols * f))];
  while (cr * cc * frame > limit && (cr > 1 || cc > 1)) (cr > cc ? cr-- : cc--);
  if (cr * cc * frame <= limit) {
    const r0 = Math.floor((rows - cr) / 2);
    const c0 = Math.floor((cols - cc) / 2);
    steps.push({ label: `a scan crop of ${cr} × ${cc} positions (${mib(cr * cc * frame)})`, id: "crop", view: { bin: 1, region: [r0, r0 + cr, c0, c0 + cc] }, bytes: cr * cc * frame });
  }
  return steps;
}

/** A block the page's adapter cannot hold: why, and the ladder's steps that would fit. */
export class BlockRefused {
  constructor(readonly reason: string, readonly steps: LadderStep[] = []) {}
}

/** Why the page cannot hold this block on an adapter with these limits (and what would fit), or null when it can. */
export function blockRefusal(block: StemBlock, limits: { maxStorageBufferBindingSize: number; maxBufferSize: number }): BlockRefused | null {
  const bytes = block.words.byteLength;
  const limit = Math.min(Number(limits.maxStorageBufferBindingSize), Number(limits.maxBufferSize));
  if (bytes <= limit) return null;
  const steps = ladderSteps(block.shape, block.dtype, limit);
  return new BlockRefused(`the decoded block is ${mib(bytes)}, the adapter binds at most ${mib(limit)}; ` +
    (steps.length ? `what would fit: ${steps.map((s) => s.label).join(" or ")} — choose one, or the server computes the images` : "nothing smaller fits: the server computes the images"),
    steps);
}

/** The u64 in words i (lo) and i + 1 (hi) as the nearest double (one rounding, as static_cast<double> of a uint64). */
function pair(w: Uint32Array, i: number): number {
  return w[i] + w[i + 1] * 2 ** 32;
}

export class GpuMaskedSums {
  private total: number[] | null = null;
  private constructor(
    private readonly device: any,
    private readonly pipeline: any,
    private readonly comPipeline: any,
    private readonly patternPipeline: any,
    private readonly frames: any,
    readonly block: StemBlock,
    readonly adapter: string,
  ) {}

  /** Uploads the block to the page's adapter; the reason (no adapter, limits) when it cannot. */
  static async open(block: StemBlock): Promise<GpuMaskedSums | BlockRefused> {
    const gpu = (globalThis.navigator as any)?.gpu;
    if (!gpu) return new BlockRefused("no WebGPU in this browser");
    const adapter = await gpu.requestAdapter();
    if (!adapter) return new BlockRefused("requestAdapter() returned no adapter");
    // localStorage "tm.stem.maxBlockBytes" lowers the limit (to try the refusal on a large adapter, as the e2e test does).
    const cap = Number(globalThis.localStorage?.getItem("tm.stem.maxBlockBytes") ?? NaN);
    const limits = {
      maxStorageBufferBindingSize: Math.min(Number(adapter.limits.maxStorageBufferBindingSize), cap > 0 ? cap : Infinity),
      maxBufferSize: Number(adapter.limits.maxBufferSize),
    };
    const refusal = blockRefusal(block, limits);
    if (refusal) return refusal;
    const { name, software } = await describeAdapter(adapter);
    const device = await adapter.requestDevice({
      requiredLimits: {
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        maxBufferSize: adapter.limits.maxBufferSize,
      },
    });
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ code: MASKED_SUMS_WGSL });
    const pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
    const comPipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "com_main" } });
    const patternPipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "pattern_main" } });
    const err = await device.popErrorScope();
    if (err) return new BlockRefused(`WGSL pipeline: ${err.message}`);
    const frames = device.createBuffer({ size: Math.max(16, block.words.byteLength), usage: BU.STORAGE | BU.COPY_DST });
    device.queue.writeBuffer(frames, 0, block.words.buffer, block.words.byteOffset, block.words.byteLength);
    return new GpuMaskedSums(device, pipeline, comPipeline, patternPipeline, frames, block, `${name}${software ? " (software adapter)" : ""}`);
  }

  /** The block binned N × N on the adapter (detector_bin.wgsl.ts, the CLI's --detector-bin N), resident there as a new
   *  u32 block sharing this device (its values also read back, for the page's frame read-outs); the reason when the
   *  sums could overflow u32 (u32 frames, or N > 256). */
  async binned(n: number): Promise<GpuMaskedSums | string> {
    const [rows, cols, kr, kc] = this.block.shape;
    if (this.block.dtype === "u32" || n > 256) return `binning ${this.block.dtype} frames by ${n} on the page could overflow its u32 sums`;
    const [orows, ocols] = [Math.ceil(kr / n), Math.ceil(kc / n)];
    const count = rows * cols * orows * ocols;
    const d = this.device;
    const module = d.createShaderModule({ code: DETECTOR_BIN_WGSL });
    const pipeline = d.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
    const out = d.createBuffer({ size: Math.max(16, 4 * count), usage: BU.STORAGE | BU.COPY_SRC });
    const read = d.createBuffer({ size: Math.max(16, 4 * count), usage: BU.MAP_READ | BU.COPY_DST });
    const params = d.createBuffer({ size: 32, usage: BU.UNIFORM | BU.COPY_DST });
    try {
      d.queue.writeBuffer(params, 0, new Uint32Array([rows * cols, kr, kc, n, orows, ocols, WIDTH[this.block.dtype], 0]));
      const group = d.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [this.frames, out, params].map((buffer, binding) => ({ binding, resource: { buffer } })),
      });
      const enc = d.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      const groups = Math.ceil(count / 64);
      pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
      pass.end();
      enc.copyBufferToBuffer(out, 0, read, 0, 4 * count);
      d.queue.submit([enc.finish()]);
      await read.mapAsync(0x1, 0, 4 * count);
      const words = new Uint32Array(read.getMappedRange(0, 4 * count)).slice();
      read.unmap();
      const block: StemBlock = { shape: [rows, cols, orows, ocols], dtype: "u32", words };
      return new GpuMaskedSums(d, this.pipeline, this.comPipeline, this.patternPipeline, out, block, this.adapter);
    } catch (e) {
      out.destroy();
      throw e;
    } finally {
      read.destroy();
      params.destroy();
    }
  }

  /** Per scan position, the sum over `pixels` (null: every pixel), exact while below 2^53. */
  async sums(pixels: Uint32Array | null): Promise<number[]> {
    const [rows, cols, kr, kc] = this.block.shape;
    const positions = rows * cols;
    const d = this.device;
    const list = pixels && pixels.length ? pixels : new Uint32Array(1);
    const listBuf = d.createBuffer({ size: Math.max(16, list.byteLength), usage: BU.STORAGE | BU.COPY_DST });
    d.queue.writeBuffer(listBuf, 0, list.buffer, list.byteOffset, list.byteLength);
    const out = d.createBuffer({ size: Math.max(16, 8 * positions), usage: BU.STORAGE | BU.COPY_SRC });
    const read = d.createBuffer({ size: Math.max(16, 8 * positions), usage: BU.MAP_READ | BU.COPY_DST });
    const params = d.createBuffer({ size: 32, usage: BU.UNIFORM | BU.COPY_DST });
    try {
      d.queue.writeBuffer(params, 0, new Uint32Array([positions, 0, kr * kc, pixels ? pixels.length : 0, WIDTH[this.block.dtype], pixels ? 0 : 1, 0, 0]));
      const group = d.createBindGroup({
        layout: this.pipeline.getBindGroupLayout(0),
        entries: [this.frames, listBuf, out, params].map((buffer, binding) => ({ binding, resource: { buffer } })),
      });
      const enc = d.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(this.pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(Math.ceil(positions / 64));
      pass.end();
      enc.copyBufferToBuffer(out, 0, read, 0, 8 * positions);
      d.queue.submit([enc.finish()]);
      await read.mapAsync(0x1, 0, 8 * positions);
      const w = new Uint32Array(read.getMappedRange(0, 8 * positions));
      const sums = new Array<number>(positions);
      for (let p = 0; p < positions; p++) sums[p] = w[2 * p] + w[2 * p + 1] * 2 ** 32;
      read.unmap();
      return sums;
    } finally {
      for (const b of [listBuf, out, read, params]) b.destroy();
    }
  }

  /** Runs `pipeline` (an entry point reading frames and params, writing `words` u32 to sums) over `threads`. */
  private async run(pipeline: any, threads: number, words: number): Promise<Uint32Array> {
    const [rows, cols, kr, kc] = this.block.shape;
    const d = this.device;
    const bytes = 4 * words;
    const out = d.createBuffer({ size: Math.max(16, bytes), usage: BU.STORAGE | BU.COPY_SRC });
    const read = d.createBuffer({ size: Math.max(16, bytes), usage: BU.MAP_READ | BU.COPY_DST });
    const params = d.createBuffer({ size: 32, usage: BU.UNIFORM | BU.COPY_DST });
    try {
      d.queue.writeBuffer(params, 0, new Uint32Array([rows * cols, 0, kr * kc, kc, WIDTH[this.block.dtype], 1, 0, 0]));
      const group = d.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [[0, this.frames], [2, out], [3, params]].map(([binding, buffer]) => ({ binding, resource: { buffer } })),
      });
      const enc = d.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(Math.ceil(threads / 64));
      pass.end();
      enc.copyBufferToBuffer(out, 0, read, 0, bytes);
      d.queue.submit([enc.finish()]);
      await read.mapAsync(0x1, 0, bytes);
      const w = new Uint32Array(read.getMappedRange(0, bytes)).slice();
      read.unmap();
      return w;
    } finally {
      for (const b of [out, read, params]) b.destroy();
    }
  }

  /** Per scan position, the centre-of-mass sums over every pixel: S = Σ v, R = Σ row·v, C = Σ col·v (each the
   *  u64 the CPU's stem.frame_sums gives, as the nearest double: the value the CPU's float64 division starts from). */
  async comSums(): Promise<{ s: Float64Array; r: Float64Array; c: Float64Array }> {
    const positions = this.block.shape[0] * this.block.shape[1];
    const w = await this.run(this.comPipeline, positions, 6 * positions);
    const res = { s: new Float64Array(positions), r: new Float64Array(positions), c: new Float64Array(positions) };
    for (let p = 0; p < positions; p++) {
      res.s[p] = pair(w, 6 * p);
      res.r[p] = pair(w, 6 * p + 2);
      res.c[p] = pair(w, 6 * p + 4);
    }
    return res;
  }

  /** The mean pattern (Σ over positions / positions, float64 as the CPU divides) and the max pattern, per detector pixel. */
  async patterns(): Promise<{ mean: number[]; max: number[] }> {
    const pixels = this.block.shape[2] * this.block.shape[3];
    const positions = this.block.shape[0] * this.block.shape[1];
    const w = await this.run(this.patternPipeline, pixels, 3 * pixels);
    const mean = new Array<number>(pixels);
    const max = new Array<number>(pixels);
    for (let i = 0; i < pixels; i++) {
      mean[i] = pair(w, 3 * i) / positions;
      max[i] = w[3 * i + 2];
    }
    return { mean, max };
  }

  /** The virtual image of a detector: direct sums, or total − complement when it covers over half the frame. */
  async image(pixels: Uint32Array): Promise<{ values: number[]; evaluatedAs: string }> {
    const [, , kr, kc] = this.block.shape;
    const n = kr * kc;
    if (pixels.length <= n / 2) return { values: await this.sums(pixels), evaluatedAs: "direct" };
    const inside = new Uint8Array(n);
    for (const p of pixels) inside[p] = 1;
    const complement: number[] = [];
    for (let p = 0; p < n; p++) if (!inside[p]) complement.push(p);
    this.total ??= await this.sums(null);
    const rest = complement.length ? await this.sums(Uint32Array.from(complement)) : this.total.map(() => 0);
    return { values: this.total.map((t, i) => t - rest[i]), evaluatedAs: "total - complement" };
  }
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
