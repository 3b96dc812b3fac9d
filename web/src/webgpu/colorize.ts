// TM_OP_DISPLAY_COLORIZE (include/tensormorph/op_contracts.h) on the page's WebGPU adapter, with the same
// contract on the CPU (colorizeCpu) for when none exists. The WGSL kernel is colorize.wgsl.ts; the host
// side (thresholds in data space) is thresholds.ts; the colour tables colormap_tables.ts.
//
// gpuColorizer() asks navigator.gpu for an adapter once per page, logs what it got to the console
// ("webgpu: adapter …", with vendor, architecture, device, description and whether it is a fallback /
// software adapter such as SwiftShader) and keeps the report in adapterReport() for the page to show.
import { COLORIZE_WGSL } from "./colorize.wgsl";
import { colorIndexByThresholds, ordinal, type ColorThresholds } from "./thresholds";

/** bins 0..255, nan, pos_inf, neg_inf: TM_DISPLAY_COLORIZE_COUNTS. */
export const COUNTS = 259;

export interface ColorizeOutput {
  rgba: Uint8Array; // 4 bytes per value: R, G, B, A
  counts: number[]; // COUNTS entries
}

export interface AdapterReport {
  available: boolean;
  name: string; // e.g. "SwiftShader", or the adapter's description
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  fallback: boolean; // isFallbackAdapter
  software: boolean; // fallback, or a known software rasteriser (SwiftShader, llvmpipe, WARP)
  reason: string; // why none is available ("" when one is)
  label: string; // "webgpu: SwiftShader (software adapter)" / "webgpu: unavailable (…)"
}

// The few WebGPU types used here (the TypeScript DOM library in use has none).
/* eslint-disable @typescript-eslint/no-explicit-any */
type GPUDevice = any;
type GPUBuffer = any;
const BU = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const MAP_MODE_READ = 0x1;

const SOFTWARE = /swiftshader|llvmpipe|lavapipe|software|microsoft basic render|warp/i;

function unavailable(reason: string): AdapterReport {
  return {
    available: false, name: "", vendor: "", architecture: "", device: "", description: "",
    fallback: false, software: false, reason, label: `webgpu: unavailable (${reason})`,
  };
}

let report: AdapterReport | null = null;
let pending: Promise<GpuColorizer | null> | null = null;

/** The adapter report once gpuColorizer() has settled; null before. */
export function adapterReport(): AdapterReport | null {
  return report;
}

let reportListener: ((r: AdapterReport) => void) | null = null;

/** Calls `listener` once with the adapter report when gpuColorizer() settles (main.ts sends it to the server, which
 * keeps it for `tensormorph backends`: PUT /api/compute/webgpu). */
export function onAdapterReport(listener: (r: AdapterReport) => void): void {
  reportListener = listener;
}

/** The page's WebGPU colorizer, or null (with adapterReport() saying why) when no adapter is usable. */
export function gpuColorizer(): Promise<GpuColorizer | null> {
  pending ??= open().then((c) => {
    if (report && reportListener) reportListener(report);
    return c;
  });
  return pending;
}

/** What the page says of an adapter: its name (SwiftShader, else its description or vendor / architecture /
 * device), and whether it is a fallback or a known software rasteriser. */
export async function describeAdapter(adapter: any): Promise<{
  vendor: string; architecture: string; device: string; description: string; fallback: boolean; name: string; software: boolean;
}> {
  const info = adapter.info ?? (adapter.requestAdapterInfo ? await adapter.requestAdapterInfo() : {});
  const vendor = String(info.vendor ?? "");
  const architecture = String(info.architecture ?? "");
  const device = String(info.device ?? "");
  const description = String(info.description ?? "");
  const fallback = Boolean(info.isFallbackAdapter ?? adapter.isFallbackAdapter ?? false);
  const all = [vendor, architecture, device, description].join(" ");
  const name = /swiftshader/i.test(all)
    ? "SwiftShader"
    : description || [vendor, architecture, device].filter(Boolean).join(" ") || "unnamed adapter";
  return { vendor, architecture, device, description, fallback, name, software: fallback || SOFTWARE.test(all) };
}

async function open(): Promise<GpuColorizer | null> {
  const gpu = (globalThis.navigator as any)?.gpu;
  try {
    if (!gpu) throw new Error("navigator.gpu is absent (no WebGPU in this browser, or not a secure context)");
    const adapter = await gpu.requestAdapter();
    if (!adapter) throw new Error("requestAdapter() returned no adapter");
    const { vendor, architecture, device, description, fallback, name, software } = await describeAdapter(adapter);
    const gpuDevice: GPUDevice = await adapter.requestDevice({
      requiredLimits: { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize },
    });
    const colorizer = new GpuColorizer(gpuDevice);
    await colorizer.ready();
    report = {
      available: true, name, vendor, architecture, device, description, fallback, software, reason: "",
      label: `webgpu: ${name}${software ? " (software adapter)" : ""}`,
    };
    console.info(`${report.label}: adapter info`, JSON.stringify({ vendor, architecture, device, description, isFallbackAdapter: fallback }));
    return colorizer;
  } catch (e) {
    report = unavailable(e instanceof Error ? e.message : String(e));
    console.info(`${report.label}; display colours and histograms stay on the CPU / server path`);
    return null;
  }
}

/** The biased ordinal (2^63 + ordinal) of each threshold as (hi, lo) u32 pairs; entry 255 unused. */
function thresholdWords(th: ColorThresholds): Uint32Array {
  const w = new Uint32Array(512);
  for (let i = 0; i < 255; i++) {
    const b = ordinal(th.t[i]) + (1n << 63n);
    w[2 * i] = Number(b >> 32n);
    w[2 * i + 1] = Number(b & 0xffffffffn);
  }
  return w;
}

export class GpuColorizer {
  private readonly pipeline: any;
  private readonly maxValues: number;
  constructor(private readonly device: GPUDevice) {
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ code: COLORIZE_WGSL });
    this.pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
    this.compileErrors = device.popErrorScope();
    const limit = Number(device.limits.maxStorageBufferBindingSize);
    this.maxValues = Math.max(256, Math.min(Math.floor(limit / 8), 1 << 22));
  }
  private readonly compileErrors: Promise<any>;

  /** Resolves once the pipeline compiled; throws its validation error otherwise. */
  async ready(): Promise<void> {
    const err = await this.compileErrors;
    if (err) throw new Error("WGSL pipeline: " + err.message);
  }

  private buffer(size: number, usage: number, data?: ArrayBufferView): GPUBuffer {
    const b = this.device.createBuffer({ size: Math.max(16, Math.ceil(size / 4) * 4), usage });
    if (data) this.device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength);
    return b;
  }

  /**
   * The colours and histogram of values under th (255 thresholds, key mode) with table (256 x RGBA, 1024
   * bytes), exactly as TM_OP_DISPLAY_COLORIZE specifies. Runs in dispatches of at most maxValues values.
   */
  async colorize(values: Float64Array, th: ColorThresholds, table: Uint8Array): Promise<ColorizeOutput> {
    if (table.length !== 1024) throw new Error("colorize: the colour table must hold 256 RGBA entries");
    if (th.t.length !== 255) throw new Error("colorize: 255 thresholds are needed");
    for (let i = 0; i < 255; i++)
      if (th.t[i] !== th.t[i] || (i > 0 && th.t[i] < th.t[i - 1])) throw new Error("colorize: thresholds must be non-decreasing and not NaN");
    const d = this.device;
    const n = values.length;
    const rgba = new Uint8Array(4 * n);
    const counts = new Array<number>(COUNTS).fill(0);
    const thBuf = this.buffer(2048, BU.STORAGE | BU.COPY_DST, thresholdWords(th));
    const tableBuf = this.buffer(1024, BU.STORAGE | BU.COPY_DST, table);
    const cap = Math.min(this.maxValues, Math.max(n, 1));
    const valBuf = this.buffer(8 * cap, BU.STORAGE | BU.COPY_DST);
    const rgbaBuf = this.buffer(4 * cap, BU.STORAGE | BU.COPY_SRC);
    const countBuf = this.buffer(260 * 4, BU.STORAGE | BU.COPY_SRC | BU.COPY_DST);
    const paramBuf = this.buffer(16, BU.UNIFORM | BU.COPY_DST);
    const readRgba = this.buffer(4 * cap, BU.MAP_READ | BU.COPY_DST);
    const readCounts = this.buffer(260 * 4, BU.MAP_READ | BU.COPY_DST);
    const group = d.createBindGroup({
      layout: this.pipeline.getBindGroupLayout(0),
      entries: [valBuf, countBuf, rgbaBuf, thBuf, tableBuf, paramBuf].map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
    const zeros = new Uint32Array(260);
    try {
      for (let first = 0; first < n; first += cap) {
        const m = Math.min(cap, n - first);
        d.queue.writeBuffer(valBuf, 0, values.buffer, values.byteOffset + 8 * first, 8 * m);
        d.queue.writeBuffer(countBuf, 0, zeros);
        d.queue.writeBuffer(paramBuf, 0, new Uint32Array([m, th.keyMode, 0, 0]));
        const enc = d.createCommandEncoder();
        const pass = enc.beginComputePass();
        pass.setPipeline(this.pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(Math.min(Math.ceil(m / 256), 4096));
        pass.end();
        enc.copyBufferToBuffer(rgbaBuf, 0, readRgba, 0, Math.ceil((4 * m) / 4) * 4);
        enc.copyBufferToBuffer(countBuf, 0, readCounts, 0, 260 * 4);
        d.queue.submit([enc.finish()]);
        await Promise.all([readRgba.mapAsync(MAP_MODE_READ, 0, 4 * m), readCounts.mapAsync(MAP_MODE_READ)]);
        rgba.set(new Uint8Array(readRgba.getMappedRange(0, 4 * m)), 4 * first);
        const c = new Uint32Array(readCounts.getMappedRange());
        for (let s = 0; s < COUNTS; s++) counts[s] += c[s];
        readRgba.unmap();
        readCounts.unmap();
      }
    } finally {
      for (const b of [thBuf, tableBuf, valBuf, rgbaBuf, countBuf, paramBuf, readRgba, readCounts]) b.destroy();
    }
    return { rgba, counts };
  }
}

/** The same contract on the CPU: the path the page takes when no WebGPU adapter exists. */
export function colorizeCpu(values: Float64Array, th: ColorThresholds, table: Uint8Array): ColorizeOutput {
  const rgba = new Uint8Array(4 * values.length);
  const counts = new Array<number>(COUNTS).fill(0);
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    const k = colorIndexByThresholds(th, x);
    if (k === 256) {
      counts[256]++;
      continue; // (0, 0, 0, 0)
    }
    rgba.set(table.subarray(4 * k, 4 * k + 4), 4 * i);
    if (x === Infinity) counts[257]++;
    else if (x === -Infinity) counts[258]++;
    else counts[k]++;
  }
  return { rgba, counts };
}
