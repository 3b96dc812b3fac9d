// A display request on the page (what resolve_params + colorize + histogram256 do on the server,
// src/display/display_kernels.cpp): limits resolved like the server (missing ends automatic, centred for a
// diverging map), thresholds built in the page (thresholds.ts), then TM_OP_DISPLAY_COLORIZE on the WebGPU
// adapter when one exists, else on the CPU here. The result says which path ran.
//
// window.tmDisplay exposes it (and the adapter report) for the e2e test, tests/e2e/webgpu.test.mjs.
import { colorizeCpu, gpuColorizer, adapterReport, type AdapterReport } from "./colorize";
import { colormapTable, COLORMAP_NAMES, DIVERGING_MAPS } from "./colormap_tables";
import { autoLimits, colorThresholds, DEFAULT_LOG_FLOOR, parseTransform, validateLimits } from "./thresholds";

export interface DisplayRequest {
  transform: string; // linear, log, signed-log
  logFloor?: number; // default 1e-12
  lo?: number | null; // data units; missing: automatic
  hi?: number | null;
  colormap: string;
}

export interface DisplayResult {
  lo: number;
  hi: number;
  rgba: Uint8Array;
  counts: number[]; // bins 0..255, nan, pos_inf, neg_inf
  path: "webgpu" | "cpu";
  adapter: AdapterReport | null;
}

/** The colours and display histogram of values under request; `path` "auto" prefers WebGPU. */
export async function displayColorize(values: Float64Array, req: DisplayRequest, path: "auto" | "webgpu" | "cpu" = "auto"): Promise<DisplayResult> {
  const t = parseTransform(req.transform);
  const floor = req.logFloor ?? DEFAULT_LOG_FLOOR;
  const table = colormapTable(req.colormap);
  let lo = req.lo ?? null;
  let hi = req.hi ?? null;
  if (lo === null || hi === null) {
    const centre = lo === null && hi === null && DIVERGING_MAPS.has(req.colormap);
    const a = autoLimits(values, t, centre);
    lo ??= a[0];
    hi ??= a[1];
  }
  validateLimits(lo, hi, t, floor);
  const th = colorThresholds(lo, hi, t, floor);
  const gpu = path === "cpu" ? null : await gpuColorizer();
  if (path === "webgpu" && !gpu) throw new Error(adapterReport()?.label ?? "webgpu: unavailable");
  const out = gpu ? await gpu.colorize(values, th, table) : colorizeCpu(values, th, table);
  return { lo, hi, ...out, path: gpu ? "webgpu" : "cpu", adapter: adapterReport() };
}

/** A golden input: a number, or "nan", "inf", "-inf" (tests/goldens/display/cases.json). */
function goldenValue(v: number | string): number {
  if (typeof v === "number") return v;
  if (v === "nan") return NaN;
  if (v === "inf") return Infinity;
  if (v === "-inf") return -Infinity;
  throw new Error("bad golden value " + v);
}

function hex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

declare global {
  interface Window {
    tmDisplay?: unknown;
  }
}

/** Installs window.tmDisplay (adapter report and a golden-case runner) for tests and the console. */
export function exposeDisplay(): void {
  window.tmDisplay = {
    colormaps: COLORMAP_NAMES,
    adapter: async (): Promise<AdapterReport | null> => {
      await gpuColorizer();
      return adapterReport();
    },
    /** Runs golden cases (cases.json entries) under each map; RGBA as lower-case hex per case. */
    runGoldens: async (cases: { name: string; transform: string; log_floor: number; lo: number | null; hi: number | null; values: (number | string)[] }[],
                       maps: string[], path: "auto" | "webgpu" | "cpu" = "webgpu") => {
      const out: { map: string; name: string; lo: number; hi: number; rgba: string; counts: number[]; path: string }[] = [];
      for (const map of maps)
        for (const c of cases) {
          const values = Float64Array.from(c.values.map(goldenValue));
          const r = await displayColorize(values, { transform: c.transform, logFloor: c.log_floor, lo: c.lo, hi: c.hi, colormap: map }, path);
          out.push({ map, name: c.name, lo: r.lo, hi: r.hi, rgba: hex(r.rgba), counts: r.counts, path: r.path });
        }
      return out;
    },
  };
}
