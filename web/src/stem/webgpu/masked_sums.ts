// 4D-STEM kernels on the page's WebGPU adapter over a resident block of frames (WGSL in masked_sums.wgsl.ts and
// detector_bin.wgsl.ts): the block (block.ts) is uploaded once, in chunks of whole frames that each fit one
// storage binding (the adapter's maxStorageBufferBindingSize and maxBufferSize), so a block larger than one
// binding stays resident; then
// - each virtual detector is one dispatch per chunk, one thread per scan position, its sum exact as a u32 pair;
//   a detector covering more than half the frame is summed as total − complement, as the CLI does, so the
//   numbers equal `tensormorph stem mask`'s;
// - the centre-of-mass sums (S, Σ row·v, Σ col·v) likewise;
// - the mean and max patterns: one thread per detector pixel per chunk, the chunks' sums added exactly (BigInt)
//   and their maxima taken on the page;
// - detector binning makes a second resident block (chunk by chunk) on the same device.
import { describeAdapter } from "../../webgpu/colorize";
import { type StemBlock, WIDTH } from "./block";
import { DETECTOR_BIN_WGSL } from "./detector_bin.wgsl";
import { BlockRefused, blockRefusal, localLimit, pageBlockLimit } from "./ladder";
import { MASKED_SUMS_WGSL } from "./masked_sums.wgsl";

/* eslint-disable @typescript-eslint/no-explicit-any */
const BU = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };

/** A run of whole frames in one device buffer: scan positions [first, first + positions). */
interface Chunk {
  buffer: any;
  first: number;
  positions: number;
}

interface Pipelines {
  sums: any;
  com: any;
  pattern: any;
  bin: any;
}

/** The u64 in words i (lo) and i + 1 (hi) as the nearest double (one rounding, as static_cast<double> of a uint64). */
function pair(w: Uint32Array, i: number): number {
  return w[i] + w[i + 1] * 2 ** 32;
}

/** Frames per chunk so that a chunk fits `bindingBytes` and starts on a u32 word; 0 when one frame does not fit. */
export function framesPerChunk(frameBytes: number, bindingBytes: number): number {
  const fit = Math.floor(bindingBytes / frameBytes);
  return frameBytes % 4 === 0 ? fit : Math.floor(fit / 4) * 4;
}

/** The page's adapter and a device on it with the adapter's storage limits: one for the decoder and the kernels,
 *  so the decoded block stays on one device. */
export class PageDevice {
  private constructor(readonly adapter: any, readonly device: any, readonly name: string) {}

  /** Throws when the browser has no WebGPU or no adapter. */
  static async request(): Promise<PageDevice> {
    const gpu = (globalThis.navigator as any)?.gpu;
    if (!gpu) throw new Error("no WebGPU in this browser");
    const adapter = await gpu.requestAdapter();
    if (!adapter) throw new Error("requestAdapter() returned no adapter");
    const { name, software } = await describeAdapter(adapter);
    const device = await adapter.requestDevice({
      requiredLimits: {
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        maxBufferSize: adapter.limits.maxBufferSize,
      },
    });
    return new PageDevice(adapter, device, `${name}${software ? " (software adapter)" : ""}`);
  }
}

export class GpuMaskedSums {
  private total: number[] | null = null;
  private constructor(
    /** The device holding the block (the iDPC and FFT views run on it too: fourier_views.ts). */
    readonly device: any,
    private readonly pipelines: Pipelines,
    private readonly chunks: Chunk[],
    readonly block: StemBlock,
    readonly adapter: string,
  ) {}

  /** How many device buffers hold the block (1 when it fits one binding). */
  get chunkCount(): number {
    return this.chunks.length;
  }

  /** Uploads the block to the page's adapter (on `shared`'s device when given: the one the chunks were decoded on); the reason (no adapter, over the page's budget: the ladder) when it cannot.
   *  localStorage "tm.stem.maxBindingBytes" lowers the binding size (the e2e test makes chunks so). */
  static async open(block: StemBlock, shared?: PageDevice): Promise<GpuMaskedSums | BlockRefused> {
    const gpu = (globalThis.navigator as any)?.gpu;
    if (!gpu) return new BlockRefused("no WebGPU in this browser");
    const adapter = shared?.adapter ?? (await gpu.requestAdapter());
    if (!adapter) return new BlockRefused("requestAdapter() returned no adapter");
    const refusal = blockRefusal({ shape: block.shape, dtype: block.dtype, bytes: block.words.byteLength }, pageBlockLimit());
    if (refusal) return refusal;
    const binding = Math.min(Number(adapter.limits.maxStorageBufferBindingSize), Number(adapter.limits.maxBufferSize), localLimit("tm.stem.maxBindingBytes"));
    const [rows, cols, kr, kc] = block.shape;
    const frameBytes = kr * kc * WIDTH[block.dtype];
    const per = framesPerChunk(frameBytes, binding);
    if (per < 1) return new BlockRefused(`one ${kr}x${kc} ${block.dtype} frame (${frameBytes} bytes) is larger than a storage binding (${binding} bytes): a detector bin would fit`);
    const { name, software } = await describeAdapter(adapter);
    const device = shared?.device ?? (await adapter.requestDevice({
      requiredLimits: {
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        maxBufferSize: adapter.limits.maxBufferSize,
      },
    }));
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ code: MASKED_SUMS_WGSL });
    const binModule = device.createShaderModule({ code: DETECTOR_BIN_WGSL });
    const pipelines: Pipelines = {
      sums: device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } }),
      com: device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "com_main" } }),
      pattern: device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "pattern_main" } }),
      bin: device.createComputePipeline({ layout: "auto", compute: { module: binModule, entryPoint: "main" } }),
    };
    const err = await device.popErrorScope();
    if (err) return new BlockRefused(`WGSL pipeline: ${err.message}`);
    const chunks: Chunk[] = [];
    const positions = rows * cols;
    for (let first = 0; first < positions; first += per) {
      const count = Math.min(per, positions - first);
      const start = (first * frameBytes) / 4;  // a whole word: chunks start on word boundaries (framesPerChunk)
      const end = Math.min(block.words.length, Math.ceil(((first + count) * frameBytes) / 4));
      const words = block.words.subarray(start, end);
      const buffer = device.createBuffer({ size: Math.max(16, Math.ceil(words.byteLength / 4) * 4), usage: BU.STORAGE | BU.COPY_DST });
      device.queue.writeBuffer(buffer, 0, words.buffer, words.byteOffset, words.byteLength);
      chunks.push({ buffer, first, positions: count });
    }
    return new GpuMaskedSums(device, pipelines, chunks, block, `${name}${software ? " (software adapter)" : ""}`);
  }

  /** Runs `pipeline` once per chunk (bindings: the chunk's frames at 0, `extra` at their indices, the output at
   *  `outBinding`, the params at `outBinding + 1`), each writing `wordsOf(chunk)` u32 words; returns each chunk's words. */
  private async perChunk(pipeline: any, threadsOf: (c: Chunk) => number, wordsOf: (c: Chunk) => number, paramsOf: (c: Chunk) => Uint32Array,
    extra: [number, any][] = [], outBinding = 2): Promise<Uint32Array[]> {
    const d = this.device;
    const made: any[] = [];
    try {
      const total = this.chunks.reduce((n, c) => n + 4 * wordsOf(c), 0);
      const read = d.createBuffer({ size: Math.max(16, total), usage: BU.MAP_READ | BU.COPY_DST });
      made.push(read);
      const enc = d.createCommandEncoder();
      const offsets: number[] = [];
      let at = 0;
      for (const c of this.chunks) {
        const bytes = 4 * wordsOf(c);
        const out = d.createBuffer({ size: Math.max(16, bytes), usage: BU.STORAGE | BU.COPY_SRC });
        const params = d.createBuffer({ size: 32, usage: BU.UNIFORM | BU.COPY_DST });
        made.push(out, params);
        d.queue.writeBuffer(params, 0, paramsOf(c));
        const entries = [[0, c.buffer], ...extra, [outBinding, out], [outBinding + 1, params]] as [number, any][];
        const group = d.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: entries.map(([binding, buffer]) => ({ binding, resource: { buffer } })) });
        const pass = enc.beginComputePass();
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, group);
        const groups = Math.ceil(threadsOf(c) / 64);
        pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
        pass.end();
        enc.copyBufferToBuffer(out, 0, read, at, bytes);
        offsets.push(at);
        at += bytes;
      }
      d.queue.submit([enc.finish()]);
      await read.mapAsync(0x1, 0, Math.max(16, total));
      const all = new Uint32Array(read.getMappedRange(0, Math.max(16, total))).slice();
      read.unmap();
      return this.chunks.map((c, k) => all.subarray(offsets[k] / 4, offsets[k] / 4 + wordsOf(c)));
    } finally {
      for (const b of made) b.destroy();
    }
  }

  private params(c: Chunk, listLen: number, all: boolean): Uint32Array {
    const [, , kr, kc] = this.block.shape;
    return new Uint32Array([c.positions, 0, kr * kc, listLen, WIDTH[this.block.dtype], all ? 1 : 0, 0, 0]);
  }

  /** Per scan position, the sum over `pixels` (null: every pixel), exact while below 2^53. */
  async sums(pixels: Uint32Array | null): Promise<number[]> {
    const d = this.device;
    const list = pixels && pixels.length ? pixels : new Uint32Array(1);
    const listBuf = d.createBuffer({ size: Math.max(16, list.byteLength), usage: BU.STORAGE | BU.COPY_DST });
    try {
      d.queue.writeBuffer(listBuf, 0, list.buffer, list.byteOffset, list.byteLength);
      const parts = await this.perChunk(this.pipelines.sums, (c) => c.positions, (c) => 2 * c.positions,
        (c) => this.params(c, pixels ? pixels.length : 0, !pixels), [[1, listBuf]]);
      const out = new Array<number>(this.block.shape[0] * this.block.shape[1]);
      this.chunks.forEach((c, k) => {
        for (let p = 0; p < c.positions; p++) out[c.first + p] = pair(parts[k], 2 * p);
      });
      return out;
    } finally {
      listBuf.destroy();
    }
  }

  /** Per scan position, the centre-of-mass sums over every pixel: S = Σ v, R = Σ row·v, C = Σ col·v (each the
   *  u64 the CPU's stem.frame_sums gives, as the nearest double: the value the CPU's float64 division starts from). */
  async comSums(): Promise<{ s: Float64Array; r: Float64Array; c: Float64Array }> {
    const kc = this.block.shape[3];
    const positions = this.block.shape[0] * this.block.shape[1];
    const parts = await this.perChunk(this.pipelines.com, (c) => c.positions, (c) => 6 * c.positions, (c) => this.params(c, kc, true));
    const res = { s: new Float64Array(positions), r: new Float64Array(positions), c: new Float64Array(positions) };
    this.chunks.forEach((c, k) => {
      for (let p = 0; p < c.positions; p++) {
        res.s[c.first + p] = pair(parts[k], 6 * p);
        res.r[c.first + p] = pair(parts[k], 6 * p + 2);
        res.c[c.first + p] = pair(parts[k], 6 * p + 4);
      }
    });
    return res;
  }

  /** The mean pattern (Σ over positions / positions, float64 as the CPU divides) and the max pattern, per detector pixel. */
  async patterns(): Promise<{ mean: number[]; max: number[] }> {
    const pixels = this.block.shape[2] * this.block.shape[3];
    const positions = this.block.shape[0] * this.block.shape[1];
    const parts = await this.perChunk(this.pipelines.pattern, () => pixels, () => 3 * pixels, (c) => this.params(c, 0, true));
    const mean = new Array<number>(pixels);
    const max = new Array<number>(pixels).fill(0);
    for (let i = 0; i < pixels; i++) {
      let sum = 0n;
      for (const w of parts) {
        sum += BigInt(w[3 * i]) + (BigInt(w[3 * i + 1]) << 32n);
        max[i] = Math.max(max[i], w[3 * i + 2]);
      }
      mean[i] = Number(sum) / positions;  // Number(): the u64's nearest double
    }
    return { mean, max };
  }

  /** The block binned N × N on the adapter (detector_bin.wgsl.ts, the CLI's --detector-bin N), resident there as a new
   *  u32 block on this device, chunk by chunk (its values also read back, for the page's frame read-outs); the
   *  reason when the sums could overflow u32 (u32 frames, or N > 256). */
  async binned(n: number): Promise<GpuMaskedSums | string> {
    const [rows, cols, kr, kc] = this.block.shape;
    if (this.block.dtype === "u32" || n > 256) return `binning ${this.block.dtype} frames by ${n} on the page could overflow its u32 sums`;
    const [orows, ocols] = [Math.ceil(kr / n), Math.ceil(kc / n)];
    const per = orows * ocols;
    const parts = await this.perChunk(this.pipelines.bin, (c) => c.positions * per, (c) => c.positions * per,
      (c) => new Uint32Array([c.positions, kr, kc, n, orows, ocols, WIDTH[this.block.dtype], 0]), [], 1);
    const words = new Uint32Array(rows * cols * per);
    const chunks: Chunk[] = [];
    const d = this.device;
    this.chunks.forEach((c, k) => {
      words.set(parts[k], c.first * per);
      const buffer = d.createBuffer({ size: Math.max(16, parts[k].byteLength), usage: BU.STORAGE | BU.COPY_DST });
      d.queue.writeBuffer(buffer, 0, parts[k].buffer, parts[k].byteOffset, parts[k].byteLength);
      chunks.push({ buffer, first: c.first, positions: c.positions });
    });
    return new GpuMaskedSums(d, this.pipelines, chunks, { shape: [rows, cols, orows, ocols], dtype: "u32", words }, this.adapter);
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
