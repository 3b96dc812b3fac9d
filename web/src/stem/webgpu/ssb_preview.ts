// The SSB preview on the page's WebGPU adapter, in float32, with the CPU's formulas (src/stem/ssb/ssb.h and
// backends/cpu/ssb_overlap_kernel.cpp, quadratic aberrations C10, C12, φ12; docs/stem.md "Single-sideband"):
// - prepare (once per acquisition): the bright-field pixels b (ssb_bright_field_pixels: float32 distance to the
//   disk centre ≤ radius, minus the excluded pixels), their intensities I[R, k_b] read from the block the page
//   already holds (block.ts; float32 as the CPU converts them), the mean Ī_b over the scan in float64 and
//   subtracted, then G_b = FFT2 over the scan on the adapter (fft.ts, all B planes in one batched transform),
//   kept resident (B × Rr × Rc complex64: the full plane, not the CPU's Hermitian half).
// - per scan rotation (once, and again only when it changes): which overlap region each (ν, b) lies in, from the
//   CPU's float64 aperture tests |k_b ∓ ν|² ≤ (α/λ)², ν = R(θ)·ν_s, 2 bits each (ssb_preview.wgsl.ts).
// - per redraw (a slider move): the host's float64 tables of e^{iχ(ν)}, the double-overlap weight and the
//   per-pixel separable factors (B·(Rr + Rc) + Rr·Rc sincos), then on the adapter Σ_b of the corrected spectra
//   (ssb_sum), one inverse FFT2 of Rr × Rc and the phase arg O in float64 on the page. mean_b IFFT2(C_b) =
//   IFFT2(Σ_b C_b)/B (the IFFT is linear), so one inverse transform replaces the CPU's B.
// Tolerance: SSB_PREVIEW_TOLERANCE, max |page − CPU| of the phase in radians (absolute), checked by
// tests/e2e/stem_ssb.test.mjs against `tensormorph stem ssb --C10 --C12 --phi12 --scan-rotation-deg -o x.npy`.
// Not covered (the caller asks the server, saying why): higher-order aberrations (the panel has none), the loss
// (only the phase is drawn), the fit, a G larger than one storage binding, and a page without the acquisition's
// whole block.
// Where: web/src/stem/webgpu/ beside the FFT (fft.ts) and the block (block.ts) it reuses, with the page's other STEM
// WGSL, rather than a new ssb/webgpu folder: one folder holds the page's 4D-STEM device code.
import { annulusPixels, type StemBlock } from "./block";
import { FftRefused, GpuFft } from "./fft";
import { localLimit } from "./ladder";
import { SSB_PREVIEW_WGSL } from "./ssb_preview.wgsl";

/* eslint-disable @typescript-eslint/no-explicit-any */
const BU = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };

/** max |page − CPU| of the phase, radians (absolute), at most. */
export const SSB_PREVIEW_TOLERANCE = 1e-5;

/** Why the adapter cannot run this preview (the caller shows it and asks the server). */
export class SsbPreviewRefused extends Error {}

/** What the CPU's `stem ssb` resolved (its JSON report: calibration, disk, bright_field_pixels), in its units. */
export interface SsbPreviewCalibration {
  wavelengthA: number;         // relativistic λ, Å (calibration.wavelength_A)
  semiangleMrad: number;       // α (calibration.semiangle)
  scanStepA: number;           // Å per scan position (calibration.scan_step)
  mradPerPx: number;           // detector angle per pixel (calibration.detector_angle_per_pixel)
  diskRow: number;             // bright-field disk, detector pixels (disk.row, disk.col, disk.radius)
  diskCol: number;
  diskRadius: number;
  brightFieldPixels: number;   // B as the server counted it (bright_field_pixels): checks the excluded pixels
}

export interface SsbAberrations {
  c10: number;    // Å
  c12: number;    // Å
  phi12: number;  // degrees, from +column towards +row
}

/** numpy's fftfreq(n)[i] (support/fftfreq.h). */
function fftfreq(i: number, n: number): number {
  return (i < Math.floor((n + 1) / 2) ? i : i - n) / n;
}

/** The value of element e of a block (u8/u16/u32 packed little-endian in u32 words). */
function valueAt(block: StemBlock, e: number): number {
  const w = block.words;
  if (block.dtype === "u32") return w[e];
  if (block.dtype === "u16") return (w[e >>> 1] >>> ((e & 1) * 16)) & 0xffff;
  return (w[e >>> 2] >>> ((e & 3) * 8)) & 0xff;
}

export class GpuSsbPreview {
  private regionsFor: number | null = null;  // the scan rotation (degrees) the regions buffer was made for
  private regions: any = null;
  private readonly pipeline: any;
  private readonly fft: GpuFft;

  private constructor(
    private readonly device: any,
    private readonly g: any,               // G: B planes of rows × cols complex64, [i][b][j]
    readonly rows: number,
    readonly cols: number,
    readonly pixels: Uint32Array,          // the bright-field pixels, row-major detector indices
    private readonly detCols: number,
    private readonly means: Float64Array,  // Ī_b
    private readonly cal: SsbPreviewCalibration,
    /** Bright-field pixels left out as the file's bad pixels (zero in every frame, as the server counts them). */
    readonly excluded: number,
    /** Milliseconds the preparation took (extraction, upload, the batched forward FFT). */
    readonly prepareMs: number,
    fft: GpuFft,
  ) {
    this.fft = fft;
    const module = device.createShaderModule({ code: SSB_PREVIEW_WGSL });
    this.pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "ssb_sum" } });
  }

  /** Bytes G holds on the adapter. */
  get residentBytes(): number {
    return this.pixels.length * this.rows * this.cols * 8;
  }

  /** G from `block` (the whole acquisition, as the server's SSB reads it) on `device`. Throws SsbPreviewRefused
   *  when G does not fit one storage binding (localStorage "tm.stem.maxSsbBindingBytes" lowers it: the e2e test
   *  makes the fallback so) or the bright-field pixels cannot be matched to the server's count. */
  static async prepare(device: any, block: StemBlock, cal: SsbPreviewCalibration): Promise<GpuSsbPreview> {
    const t0 = performance.now();
    const [rows, cols, kr, kc] = block.shape;
    if (rows < 2 || cols < 2) throw new SsbPreviewRefused(`the scan is ${rows} x ${cols}: SSB needs at least 2 x 2`);
    const disk = annulusPixels(kr, kc, cal.diskRow, cal.diskCol, 0, cal.diskRadius);
    const n = rows * cols;
    const frame = kr * kc;
    // The file's bad pixels are zeroed in the block; the server leaves them out of the bright field. They are the
    // disk's pixels that are zero at every position, when that makes the server's count (else refused).
    const zero = Array.from(disk).filter((pix) => {
      for (let p = 0; p < n; p++) if (valueAt(block, p * frame + pix) !== 0) return false;
      return true;
    });
    let pixels = disk;
    if (cal.brightFieldPixels === disk.length - zero.length && zero.length) pixels = disk.filter((pix) => !zero.includes(pix));
    else if (cal.brightFieldPixels !== disk.length)
      throw new SsbPreviewRefused(`the server counts ${cal.brightFieldPixels} bright-field pixels, the page finds ${disk.length} in the disk (${zero.length} of them zero everywhere): the excluded pixels are not known here`);
    const B = pixels.length;
    if (!B) throw new SsbPreviewRefused("no bright-field pixel");
    const binding = Math.min(Number(device.limits.maxStorageBufferBindingSize), localLimit("tm.stem.maxSsbBindingBytes"));
    const gBytes = B * n * 8;
    if (gBytes > binding)
      throw new SsbPreviewRefused(`the ${B} bright-field pixels' spectra over the ${rows} x ${cols} scan need ${gBytes} bytes in one storage binding, the adapter allows ${binding}`);
    // x_b(R) as float32 (the CPU's static_cast<float>), Ī_b in float64 over the scan in row-major order, then
    // x − Ī_b rounded to float32, into the batched layout [i][b][j] (real parts; imaginary 0).
    const values = new Float32Array(2 * B * n);
    const means = new Float64Array(B);
    const x = new Float32Array(n);
    for (let b = 0; b < B; b++) {
      let sum = 0;
      for (let p = 0; p < n; p++) {
        x[p] = valueAt(block, p * frame + pixels[b]);
        sum += x[p];  // the stored float32, as the CPU sums it
      }
      const mean = sum / n;
      means[b] = mean;
      for (let i = 0; i < rows; i++)
        for (let j = 0; j < cols; j++) values[2 * ((i * B + b) * cols + j)] = x[i * cols + j] - mean;
    }
    const fft = new GpuFft(device);
    let grid;
    try {
      grid = fft.grid(values, rows, cols, B);
    } catch (e) {
      if (e instanceof FftRefused) throw new SsbPreviewRefused(e.message);
      throw e;
    }
    try {
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      const out = fft.record(pass, grid, grid.a, -1);
      pass.end();
      device.queue.submit([enc.finish()]);
      await device.queue.onSubmittedWorkDone();
      const g = fft.keep(grid, out);
      return new GpuSsbPreview(device, g, rows, cols, pixels, kc, means, cal, disk.length - B, performance.now() - t0, fft);
    } finally {
      fft.release(grid);
    }
  }

  /** λ, the detector frequency per pixel dk (1/Å) and the aperture (α/λ)², as SsbProblem computes them. */
  private get optics(): { lambda: number; dk: number; kmax2: number } {
    const lambda = this.cal.wavelengthA;
    const kmax = (this.cal.semiangleMrad * 1e-3) / lambda;
    return { lambda, dk: (this.cal.mradPerPx * 1e-3) / lambda, kmax2: kmax * kmax };
  }

  /** k_b (row, col) in 1/Å, the detector frame. */
  private pixelK(b: number, dk: number): [number, number] {
    const pix = this.pixels[b];
    return [(Math.floor(pix / this.detCols) - this.cal.diskRow) * dk, ((pix % this.detCols) - this.cal.diskCol) * dk];
  }

  /** ν = R(θ)·ν_s per scan bin (row, col), 1/Å (ssb.h). */
  private nu(rotationDeg: number): { vr: Float64Array; vc: Float64Array; fr: Float64Array; fc: Float64Array; ct: number; st: number } {
    const { rows: R, cols: C } = this;
    const step = this.cal.scanStepA;
    const th = (rotationDeg * Math.PI) / 180;
    const ct = Math.cos(th), st = Math.sin(th);
    const fr = Float64Array.from({ length: R }, (_, i) => fftfreq(i, R) / step);
    const fc = Float64Array.from({ length: C }, (_, j) => fftfreq(j, C) / step);
    const vr = new Float64Array(R * C), vc = new Float64Array(R * C);
    for (let i = 0; i < R; i++)
      for (let j = 0; j < C; j++) (vr[i * C + j] = ct * fr[i] - st * fc[j]), (vc[i * C + j] = st * fr[i] + ct * fc[j]);
    return { vr, vc, fr, fc, ct, st };
  }

  /** The overlap regions of every (ν, b) at this rotation (the CPU's float64 tests), 2 bits each, uploaded. */
  private regionsAt(rotationDeg: number, vr: Float64Array, vc: Float64Array): any {
    if (this.regions && this.regionsFor === rotationDeg) return this.regions;
    this.regions?.destroy();
    const B = this.pixels.length, N = this.rows * this.cols;
    const { dk, kmax2 } = this.optics;
    const words = new Uint32Array(Math.ceil((N * B) / 16));
    for (let b = 0; b < B; b++) {
      const [kr, kc] = this.pixelK(b, dk);
      if (!(kr * kr + kc * kc <= kmax2)) continue;  // A(k_b) = 0: the pixel adds only its DC term
      for (let q = 0; q < N; q++) {
        const mr = kr - vr[q], mc = kc - vc[q], pr = kr + vr[q], pc = kc + vc[q];
        const region = (mr * mr + mc * mc <= kmax2 ? 1 : 0) | (pr * pr + pc * pc <= kmax2 ? 2 : 0);
        const k = q * B + b;
        words[k >>> 4] |= region << ((k & 15) * 2);
      }
    }
    this.regions = this.upload(words);
    this.regionsFor = rotationDeg;
    return this.regions;
  }

  private upload(data: Float32Array | Uint32Array, usage = BU.STORAGE | BU.COPY_DST): any {
    const buffer = this.device.createBuffer({ size: Math.max(16, Math.ceil(data.byteLength / 4) * 4), usage });
    this.device.queue.writeBuffer(buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    return buffer;
  }

  /** The phase arg O (rows × cols, row-major, radians) for these aberrations and scan rotation (degrees). */
  async phase(ab: SsbAberrations, rotationDeg: number): Promise<Float64Array> {
    if (![ab.c10, ab.c12, ab.phi12, rotationDeg].every(Number.isFinite)) throw new Error("SSB: aberrations and the scan rotation must be finite");
    const { rows: R, cols: C } = this;
    const B = this.pixels.length, N = R * C;
    const { lambda, dk } = this.optics;
    // χ's quadratic form (ssb.cpp evaluate): χ(k) = m_rr·k_r² + 2·m_rc·k_r·k_c + m_cc·k_c².
    const p12 = (ab.phi12 * Math.PI) / 180;
    const mrr = Math.PI * lambda * (ab.c10 - ab.c12 * Math.cos(2 * p12));
    const mcc = Math.PI * lambda * (ab.c10 + ab.c12 * Math.cos(2 * p12));
    const mrc = Math.PI * lambda * ab.c12 * Math.sin(2 * p12);
    const { vr, vc, fr, fc, ct, st } = this.nu(rotationDeg);
    const regions = this.regionsAt(rotationDeg, vr, vc);
    // Per ν: w₋ = e^{iχ}, w₊ = −e^{−iχ}, w± = i·2 sin χ / max(|2 sin χ|, 1e-8).
    const weights = new Float32Array(6 * N);
    for (let q = 0; q < N; q++) {
      const chi = mrr * vr[q] * vr[q] + 2 * mrc * vr[q] * vc[q] + mcc * vc[q] * vc[q];
      const c = Math.cos(chi), s = Math.sin(chi), twoSin = 2 * s;
      weights.set([c, s, -c, s, 0, twoSin / Math.max(Math.abs(twoSin), 1e-8)], 6 * q);
    }
    // Per pixel: conj e^{i·2Bχ(k_b, ν)} = row factor(i) · column factor(j).
    const rowF = new Float32Array(2 * B * R), colF = new Float32Array(2 * B * C);
    let dc = 0;
    for (let b = 0; b < B; b++) {
      const [kr, kc] = this.pixelK(b, dk);
      const gr = 2 * (mrr * kr + mrc * kc), gc = 2 * (mrc * kr + mcc * kc);
      const wr = gr * ct + gc * st, wc = -gr * st + gc * ct;
      for (let i = 0; i < R; i++) (rowF[2 * (b * R + i)] = Math.cos(wr * fr[i])), (rowF[2 * (b * R + i) + 1] = -Math.sin(wr * fr[i]));
      for (let j = 0; j < C; j++) (colF[2 * (b * C + j)] = Math.cos(wc * fc[j])), (colF[2 * (b * C + j) + 1] = -Math.sin(wc * fc[j]));
      dc += N * this.means[b];
    }
    const d = this.device;
    const grid = this.fft.grid(new Float32Array(2 * N), R, C);
    try {
      const tables = [this.upload(rowF), this.upload(colF), this.upload(weights)];
      const params = new ArrayBuffer(32);
      new Uint32Array(params, 0, 3).set([R, C, B]);
      new Float32Array(params, 16, 1)[0] = dc;
      const uniform = d.createBuffer({ size: 32, usage: BU.UNIFORM | BU.COPY_DST });
      d.queue.writeBuffer(uniform, 0, params);
      grid.made.push(...tables, uniform);
      const enc = d.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(this.pipeline);
      pass.setBindGroup(0, d.createBindGroup({ layout: this.pipeline.getBindGroupLayout(0),
        entries: [this.g, regions, ...tables, grid.a, uniform].map((buffer, binding) => ({ binding, resource: { buffer } })) }));
      const groups = Math.ceil(N / 64);
      pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
      const out = this.fft.record(pass, grid, grid.a, 1);
      pass.end();
      const o = await this.fft.readBack(enc, grid, out);
      const phase = new Float64Array(N);
      for (let q = 0; q < N; q++) phase[q] = Math.atan2(o[2 * q + 1], o[2 * q]);  // arg O (the 1/(N·B) scale is positive)
      return phase;
    } finally {
      this.fft.release(grid);
    }
  }

  /** Frees G and the regions on the adapter. */
  destroy(): void {
    this.g.destroy();
    this.regions?.destroy();
  }
}
