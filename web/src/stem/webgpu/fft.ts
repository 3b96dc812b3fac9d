// 2-D discrete Fourier transforms in float32 on the page's WebGPU adapter (WGSL in fft.wgsl.ts), for the iDPC and
// FFT views (fourier_views.ts). Every size is covered: a power of two by radix-2 Stockham passes, any other by
// Bluestein's chirp-z transform through a power-of-two convolution. The tables (twiddles, chirps, the chirp's
// spectrum) are computed here in float64 and uploaded as float32, once per size and direction.
// Contract: unnormalised, numpy's conventions (fft2 forward with exp(−2πi·jk/n), inverse with exp(+2πi·jk/n) and no
// 1/n); float32 throughout, so a result differs from the CPU's float64 FFTW by rounding (the views' tolerances are
// stated in fourier_views.ts and docs/viewer.md). A grid whose complex buffer, or Bluestein scratch, is larger than
// one storage binding is refused (FftRefused, with the sizes), and the caller asks the server.
// Batches: a grid may hold `batch` planes interleaved by row, plane p's (row i, col j) at (i·batch + p)·cols + j
// (the SSB preview's layout, ssb_preview.ts): the row lines are rows·batch contiguous lines of cols values, the
// column lines batch·cols lines of rows values each batch·cols apart, so every plane is transformed by the same
// passes. batch = 1 is the plain row-major grid.
import { FFT_WGSL } from "./fft.wgsl";
import { localLimit } from "./ladder";

/* eslint-disable @typescript-eslint/no-explicit-any */
const BU = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const COMPUTE = 0x4;

/** A transform the adapter cannot hold: why (the caller shows it and asks the server). */
export class FftRefused extends Error {}

export function isPowerOfTwo(n: number): boolean {
  return n >= 1 && (n & (n - 1)) === 0;
}

/** How a line of n values is transformed: "radix-2" (n a power of two, 1 included) or "bluestein" (convolution length m). */
export function fftPath(n: number): { path: "radix-2" | "bluestein"; m: number } {
  if (isPowerOfTwo(n)) return { path: "radix-2", m: n };
  let m = 1;
  while (m < 2 * n - 1) m *= 2;
  return { path: "bluestein", m };
}

/** exp(sign·2πi·k/n) for k < count, float64 (sign −1: the forward twiddles). */
function roots(n: number, count: number, sign: number): Float64Array {
  const out = new Float64Array(2 * count);
  for (let k = 0; k < count; k++) {
    const a = (sign * 2 * Math.PI * k) / n;
    out[2 * k] = Math.cos(a);
    out[2 * k + 1] = Math.sin(a);
  }
  return out;
}

/** In-place float64 radix-2 DFT (sign −1 forward) of interleaved complex values, n a power of two: the host's
 *  transform of Bluestein's chirp (a table, not a result). */
function fft64(x: Float64Array, sign: number): void {
  const n = x.length / 2;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [x[2 * i], x[2 * j]] = [x[2 * j], x[2 * i]];
      [x[2 * i + 1], x[2 * j + 1]] = [x[2 * j + 1], x[2 * i + 1]];
    }
  }
  const w = roots(n, n / 2, sign);
  for (let len = 2; len <= n; len *= 2) {
    const step = n / len;
    for (let s = 0; s < n; s += len)
      for (let k = 0; k < len / 2; k++) {
        const wr = w[2 * k * step], wi = w[2 * k * step + 1];
        const a = s + k, b = s + k + len / 2;
        const br = x[2 * b] * wr - x[2 * b + 1] * wi, bi = x[2 * b] * wi + x[2 * b + 1] * wr;
        x[2 * b] = x[2 * a] - br, x[2 * b + 1] = x[2 * a + 1] - bi;
        x[2 * a] += br, x[2 * a + 1] += bi;
      }
  }
}

/** The device buffers of one 2-D transform: the grid's values ping-pong between a and b; Bluestein lines use the
 *  contiguous scratch pair; `made` holds every buffer to destroy. */
export interface FftGrid {
  rows: number;
  cols: number;
  /** Planes interleaved by row (1: one plane). */
  batch: number;
  bytes: number;
  a: any;
  b: any;
  scratch: any[];
  made: any[];
}

/** A 1-D line plan's device tables: twiddles of its power-of-two length, and for Bluestein the chirp and B. */
interface LinePlan {
  n: number;
  m: number;
  twiddles: any;   // exp(−2πi·k/m), k < max(1, m/2)
  chirp?: any;     // w[j] = exp(sign·iπ·j²/n), j < n
  spectrum?: any;  // B = FFT_m(conj chirp, circular) / m
}

export class GpuFft {
  private readonly plans = new Map<string, LinePlan>();
  private readonly pipelines: Record<"stockham" | "pre" | "mul" | "post", any>;
  private readonly layout: any;

  constructor(private readonly device: any) {
    const storage = (type: string, binding: number) => ({ binding, visibility: COMPUTE, buffer: { type } });
    this.layout = device.createBindGroupLayout({
      entries: [storage("read-only-storage", 0), storage("storage", 1), storage("read-only-storage", 2), { binding: 3, visibility: COMPUTE, buffer: { type: "uniform" } }],
    });
    const module = device.createShaderModule({ code: FFT_WGSL });
    const layout = device.createPipelineLayout({ bindGroupLayouts: [this.layout] });
    const make = (entryPoint: string) => device.createComputePipeline({ layout, compute: { module, entryPoint } });
    this.pipelines = { stockham: make("stockham_pass"), pre: make("bluestein_pre"), mul: make("bluestein_mul"), post: make("bluestein_post") };
  }

  /** The largest storage binding of the device, in bytes (localStorage "tm.stem.maxFftBindingBytes" lowers it: the
   *  e2e test makes a transform refused so). */
  private get bindingBytes(): number {
    return Math.min(Number(this.device.limits.maxStorageBufferBindingSize), localLimit("tm.stem.maxFftBindingBytes"));
  }

  /** A buffer holding `values` (float64 values as float32; u32 words as they are). */
  private upload(values: Float64Array | Float32Array | Uint32Array, usage = BU.STORAGE | BU.COPY_DST): any {
    const data = values instanceof Float64Array ? Float32Array.from(values) : values;
    const buffer = this.device.createBuffer({ size: Math.max(16, data.byteLength), usage });
    this.device.queue.writeBuffer(buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    return buffer;
  }

  private plan(n: number, sign: number): LinePlan {
    const key = `${n}:${sign}`;
    const have = this.plans.get(key);
    if (have) return have;
    const { path, m } = fftPath(n);
    const plan: LinePlan = { n, m, twiddles: this.upload(roots(m, Math.max(1, m / 2), -1)) };
    if (path === "bluestein") {
      // j² mod 2n in exact integers, so the chirp's angle π·(j² mod 2n)/n stays below 2π, accurate to float64.
      const chirp = new Float64Array(2 * n);
      for (let j = 0; j < n; j++) {
        const a = (sign * Math.PI * Number((BigInt(j) * BigInt(j)) % BigInt(2 * n))) / n;
        chirp[2 * j] = Math.cos(a);
        chirp[2 * j + 1] = Math.sin(a);
      }
      const b = new Float64Array(2 * m);
      for (let j = 0; j < n; j++)
        for (const at of j === 0 ? [0] : [j, m - j]) {
          b[2 * at] = chirp[2 * j];
          b[2 * at + 1] = -chirp[2 * j + 1];
        }
      fft64(b, -1);
      for (let i = 0; i < b.length; i++) b[i] /= m;
      plan.chirp = this.upload(chirp);
      plan.spectrum = this.upload(b);
    }
    this.plans.set(key, plan);
    return plan;
  }

  /** Records one dispatch of `pipeline` over `threads` threads with (src, dst, table, params). */
  private dispatch(pass: any, made: any[], pipeline: any, threads: number, src: any, dst: any, table: any, params: number[]): void {
    const uniform = this.upload(Uint32Array.from([...params, 0, 0, 0, 0, 0, 0, 0, 0].slice(0, 8)), BU.UNIFORM | BU.COPY_DST);
    made.push(uniform);
    const entries = [src, dst, table, uniform].map((buffer, binding) => ({ binding, resource: { buffer } }));
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, this.device.createBindGroup({ layout: this.layout, entries }));
    const groups = Math.ceil(threads / 64);
    pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
  }

  /** Records the radix-2 passes of a power-of-two line length over (a, b) ping-pong; returns where the result is. */
  private radix2(pass: any, made: any[], plan: LinePlan, lines: number, lineStride: number, elemStride: number, conj: number, a: any, b: any): any {
    let [src, dst] = [a, b];
    for (let p = 1; p < plan.m; p *= 2) {
      this.dispatch(pass, made, this.pipelines.stockham, lines * (plan.m / 2), src, dst, plan.twiddles, [plan.m, p, lines, lineStride, elemStride, conj]);
      [src, dst] = [dst, src];
    }
    return src;
  }

  /**
   * Buffers for a rows × cols grid of complex values (interleaved float32: re, im, row-major), `values` uploaded into
   * `a` (`batch` planes interleaved by row: the header's layout); throws FftRefused when the grid or its Bluestein
   * scratch exceeds one storage binding. Free with release().
   */
  grid(values: Float32Array, rows: number, cols: number, batch = 1): FftGrid {
    if (values.length !== 2 * rows * cols * batch) throw new Error(`fft: ${values.length / 2} values for ${batch} planes of a ${rows} x ${cols} grid`);
    const bytes = rows * cols * batch * 8;
    const scratchBytes = Math.max(...[[cols, rows], [rows, cols]].map(([n, lines]) => (fftPath(n).path === "bluestein" ? lines * batch * fftPath(n).m * 8 : 0)));
    if (Math.max(bytes, scratchBytes) > this.bindingBytes)
      throw new FftRefused(`${batch > 1 ? `${batch} planes of ` : ""}a ${rows} x ${cols} float32 complex FFT need${batch > 1 ? "" : "s"} ${bytes} bytes${scratchBytes ? ` and ${scratchBytes} of Bluestein scratch` : ""}` +
        ` in one storage binding each, the adapter allows ${this.bindingBytes}`);
    const made: any[] = [];
    const make = (size: number, usage: number) => {
      const b = this.device.createBuffer({ size: Math.max(16, size), usage });
      made.push(b);
      return b;
    };
    const a = make(bytes, BU.STORAGE | BU.COPY_DST | BU.COPY_SRC);
    this.device.queue.writeBuffer(a, 0, values.buffer, values.byteOffset, values.byteLength);
    const b = make(bytes, BU.STORAGE | BU.COPY_SRC);
    const scratch = scratchBytes ? [make(scratchBytes, BU.STORAGE), make(scratchBytes, BU.STORAGE)] : [];
    return { rows, cols, batch, bytes, a, b, scratch, made };
  }

  /** Records into `pass` the 2-D transform (sign −1 forward, +1 inverse) of each of the grid's planes in `src` (its
   *  a or b); returns the buffer (a or b) that holds the result. */
  record(pass: any, g: FftGrid, src: any, sign: -1 | 1): any {
    let [cur, other] = src === g.a ? [g.a, g.b] : [g.b, g.a];
    const dims = [
      { n: g.cols, lines: g.rows * g.batch, lineStride: g.cols, elemStride: 1 },            // along each row
      { n: g.rows, lines: g.cols * g.batch, lineStride: 1, elemStride: g.cols * g.batch },  // along each column
    ];
    for (const dim of dims) {
      if (dim.n === 1) continue;
      const plan = this.plan(dim.n, sign);
      if (!plan.chirp) {
        const out = this.radix2(pass, g.made, plan, dim.lines, dim.lineStride, dim.elemStride, sign === 1 ? 1 : 0, cur, other);
        if (out !== cur) [cur, other] = [other, cur];
      } else {
        const m = plan.m;
        const params = [plan.n, m, dim.lines, dim.lineStride, dim.elemStride, 0];
        const [s0, s1] = g.scratch;
        this.dispatch(pass, g.made, this.pipelines.pre, dim.lines * m, cur, s0, plan.chirp, params);
        let s = this.radix2(pass, g.made, plan, dim.lines, m, 1, 0, s0, s1);
        // bluestein_mul reads no src: the table stands in for it (a buffer may not be read-only and writable at once).
        this.dispatch(pass, g.made, this.pipelines.mul, dim.lines * m, plan.spectrum, s, plan.spectrum, params);
        s = this.radix2(pass, g.made, plan, dim.lines, m, 1, 1, s, s === s0 ? s1 : s0);
        this.dispatch(pass, g.made, this.pipelines.post, dim.lines * plan.n, s, cur, plan.chirp, params);
      }
    }
    return cur;
  }

  /** Submits `enc` with a copy of the grid's buffer `buf` and resolves to its values (interleaved float32). */
  async readBack(enc: any, g: FftGrid, buf: any): Promise<Float32Array> {
    const read = this.device.createBuffer({ size: Math.max(16, g.bytes), usage: BU.MAP_READ | BU.COPY_DST });
    g.made.push(read);
    enc.copyBufferToBuffer(buf, 0, read, 0, g.bytes);
    this.device.queue.submit([enc.finish()]);
    await read.mapAsync(0x1, 0, Math.max(16, g.bytes));
    const out = new Float32Array(read.getMappedRange(0, g.bytes).slice(0));
    read.unmap();
    return out;
  }

  /** Takes `buf` (the grid's a or b) out of the grid's buffers, so that release() leaves it alive: the result stays
   *  resident and the caller destroys it. */
  keep(g: FftGrid, buf: any): any {
    const at = g.made.indexOf(buf);
    if (at >= 0) g.made.splice(at, 1);
    return buf;
  }

  /** Destroys the grid's buffers (and the per-dispatch uniforms recorded for it). */
  release(g: FftGrid): void {
    for (const b of g.made) b.destroy();
    g.made.length = 0;
  }

  /** The 2-D transform (sign −1 forward, +1 inverse) of a rows × cols grid (interleaved float32), read back. */
  async transform2d(values: Float32Array, rows: number, cols: number, sign: -1 | 1): Promise<Float32Array> {
    const g = this.grid(values, rows, cols);
    try {
      const enc = this.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      const out = this.record(pass, g, g.a, sign);
      pass.end();
      return await this.readBack(enc, g, out);
    } finally {
      this.release(g);
    }
  }
}
