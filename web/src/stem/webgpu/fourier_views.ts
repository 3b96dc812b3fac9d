// The iDPC and FFT views of the acquisition page on its WebGPU adapter, in float32 (fft.ts, idpc.wgsl.ts), with the
// CPU's formulas (src/stem/products/dpc.cpp integrate_dpc and fft_view, numpy's conventions):
// - iDPC: z = u + i·v of the rotated CoM field (float64 on the page, each component already mean-free) as float32,
//   FFT2 on the adapter, the spectral integration there (idpc.wgsl.ts), IFFT2 there; then on the page in float64:
//   real part / (R·C), minus its mean, negated.
// - FFT view: fftshift(log1p |FFT2(x)|). The page subtracts x's mean in float64 before the float32 upload (the
//   transform is linear: this only moves the zero frequency, whose value the page sets to Σ x in float64) so that
//   the float32 rounding scales with the image's variation, not its level; FFT2 on the adapter; |·|, log1p and the
//   shift in float64 on the page.
// Tolerances against the CPU's float64 (FFTW), checked by tests/e2e/stem_fourier.test.mjs on the demo data:
// IDPC_TOLERANCE and FFT_VIEW_TOLERANCE, each a bound on max |page − CPU| over the image divided by the CPU image's
// range (max − min).
import { FftRefused, GpuFft, fftPath } from "./fft";
import { IDPC_WGSL } from "./idpc.wgsl";

/* eslint-disable @typescript-eslint/no-explicit-any */
const BU = { COPY_DST: 0x8, UNIFORM: 0x40 };

/** max |page − CPU| / (CPU max − CPU min) of the iDPC image, at most. */
export const IDPC_TOLERANCE = 1e-5;
/** max |page − CPU| / (CPU max − CPU min) of the FFT view (log1p units), at most. */
export const FFT_VIEW_TOLERANCE = 1e-4;

export { FftRefused };

/** How a rows × cols grid is transformed, for the captions: "radix-2" or "Bluestein (m)" per axis. */
export function fftPathText(rows: number, cols: number): string {
  const one = (n: number) => {
    const p = fftPath(n);
    return p.path === "radix-2" ? `${n} radix-2` : `${n} Bluestein (radix-2 convolution of ${p.m})`;
  };
  return rows === cols ? `${one(rows)} on both axes` : `rows of ${one(cols)}, columns of ${one(rows)}`;
}

export class GpuFourierViews {
  private readonly fft: GpuFft;
  private readonly spectrum: any;

  private constructor(private readonly device: any) {
    this.fft = new GpuFft(device);
    const module = device.createShaderModule({ code: IDPC_WGSL });
    this.spectrum = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "idpc_spectrum" } });
  }

  private static made = new WeakMap<object, GpuFourierViews>();

  /** The views on `device` (the pipelines built once per device). */
  static on(device: any): GpuFourierViews {
    let v = GpuFourierViews.made.get(device);
    if (!v) GpuFourierViews.made.set(device, (v = new GpuFourierViews(device)));
    return v;
  }

  /** iDPC of the rotated field (u, v: rows × cols, row-major, detector pixels), as integrate_dpc returns it. */
  async idpc(u: ArrayLike<number>, v: ArrayLike<number>, rows: number, cols: number): Promise<Float64Array> {
    const n = rows * cols;
    const z = new Float32Array(2 * n);
    for (let i = 0; i < n; i++) (z[2 * i] = u[i]), (z[2 * i + 1] = v[i]);
    const g = this.fft.grid(z, rows, cols);
    try {
      const d = this.device;
      const params = d.createBuffer({ size: 16, usage: BU.UNIFORM | BU.COPY_DST });
      g.made.push(params);
      d.queue.writeBuffer(params, 0, new Uint32Array([rows, cols, 0, 0]));
      const enc = d.createCommandEncoder();
      const pass = enc.beginComputePass();
      const spectrum = this.fft.record(pass, g, g.a, -1);
      const phi = spectrum === g.a ? g.b : g.a;
      pass.setPipeline(this.spectrum);
      pass.setBindGroup(0, d.createBindGroup({ layout: this.spectrum.getBindGroupLayout(0),
        entries: [spectrum, phi, params].map((buffer, binding) => ({ binding, resource: { buffer } })) }));
      const groups = Math.ceil(n / 64);
      pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
      const out = this.fft.record(pass, g, phi, 1);
      pass.end();
      const c = await this.fft.readBack(enc, g, out);
      const phase = new Float64Array(n);
      let sum = 0;
      for (let i = 0; i < n; i++) sum += phase[i] = c[2 * i] / n;
      const mean = sum / n;
      for (let i = 0; i < n; i++) phase[i] = -(phase[i] - mean);
      return phase;
    } finally {
      this.fft.release(g);
    }
  }

  /** fftshift(log1p |FFT2(values)|) of a rows × cols image, as fft_view returns it. */
  async fftView(values: ArrayLike<number>, rows: number, cols: number): Promise<Float64Array> {
    const n = rows * cols;
    let sum = 0;
    for (let i = 0; i < n; i++) sum += values[i];
    const mean = sum / n;
    const x = new Float32Array(2 * n);
    for (let i = 0; i < n; i++) x[2 * i] = values[i] - mean;
    const f = await this.fft.transform2d(x, rows, cols, -1);
    const out = new Float64Array(n);
    for (let i = 0; i < rows; i++)
      for (let j = 0; j < cols; j++) {
        const k = i * cols + j;
        const mag = k === 0 ? Math.abs(sum) : Math.hypot(f[2 * k], f[2 * k + 1]);  // the zero frequency: Σ x in float64
        out[((i + (rows >> 1)) % rows) * cols + ((j + (cols >> 1)) % cols)] = Math.log1p(mag);
      }
    return out;
  }
}
