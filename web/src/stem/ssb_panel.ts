// The SSB preview of the acquisition page: single-sideband ptychography's phase for the aberrations set with the
// C10 (defocus), C12 (two-fold astigmatism, both in Å as `tensormorph stem ssb --C10/--C12`) and φ12 (degrees)
// sliders or their number boxes; one computation in flight, the latest setting wins. Two paths, chosen with
// "Compute on" (#stem-ssb-on) and named in the caption (the canvas's data-path):
// - page (the default when the page holds the acquisition's whole block on a WebGPU adapter): the WGSL preview
//   (webgpu/ssb_preview.ts), G prepared once from that block, each slider move a cheap redraw on the adapter,
//   within SSB_PREVIEW_TOLERANCE rad of the CLI's float64. It needs what the server's SSB resolved (the scan
//   rotation: DPC, its 180° by the lower loss; the calibration and the disk), so the first preview runs on the server.
// - server: GET …/ssb (the CLI's domain call, placed and reported), also the fallback, saying why, when the page
//   cannot (no adapter or block, G over one storage binding, the bright-field pixels not matched).
// The scan rotation the first preview chose is passed back to the next ones. Fit always runs on the server
// (GET …/ssb?fit=1, `stem ssb --fit`). The .npy export is the server's (GET …/ssb?format=npy).
import { apiUrl, getJson, type Placement } from "../api";
import { ServerProgress } from "./server_progress";
import { el } from "../dom";
import { latestWins } from "./latest_wins";
import { displayControls, showLimits } from "./display_controls";
import { drawGrid } from "./grid_draw";
import type { StemBlock } from "./webgpu/block";
import { GpuSsbPreview, SSB_PREVIEW_TOLERANCE, SsbPreviewRefused } from "./webgpu/ssb_preview";

interface Phase {
  shape: number[];
  values: number[];
  placement: Placement[];
  calibration?: {
    scan_rotation?: { value?: number; source?: string };
    wavelength_A?: number;
    semiangle?: { value?: number };
    scan_step?: { value?: number; unit?: string };
    detector_angle_per_pixel?: { value?: number };
  };
  disk?: { row: number; col: number; radius: number };
  bright_field_pixels?: number;
  aberrations?: { C10: number; C12: number; phi12: number };
  fit?: { search: string; evaluations: number; seconds: number };
}

export interface SsbState {
  c10: number;
  c12: number;
  phi12: number;
  phase: Phase | null;
  requests: number;
  /** The scan rotation the first preview chose (between the DPC candidates, by the lower SSB loss), passed back
   *  as rotation_deg so that later previews skip that search. */
  rotationDeg: number | null;
  /** Where the shown phase was computed: "page" (the adapter, WGSL) or "server". */
  path: "page" | "server" | null;
  /** Why the page path did not run the last preview ("" when it did, or when the server was chosen). */
  pageRefused: string;
  /** Milliseconds of each page redraw (slider move to phase ready), and of the one preparation of G. */
  redrawMs: number[];
  prepareMs: number | null;
  /** The page's bright-field pixels, and those of the disk it left out as the file's bad pixels (as the server does). */
  pagePixels: number | null;
  pageExcluded: number | null;
}

/** The page's WebGPU adapter holding the acquisition's whole block (the one the server's SSB reads), or why not. */
export type SsbPageSource = () => { device: unknown; block: StemBlock; adapter: string } | string;

const PX = 320;

/** The aberration sliders' ranges from the calibration: |C10| up to where the probe's geometric diameter (2 α C10)
 *  equals the scan's field of view (beyond it the bright-field disk's parallax shifts leave the scan), as a 1-2-5
 *  number of Å between 1000 and 50,000; C12 up to half of it; the steps a thousandth. Without the semi-angle or the
 *  scan step, ±5000 Å, said so. */
export function aberrationRanges(scan: [number, number], semiangleMrad?: number, scanStepA?: number): { c10: number; c12: number; why: string } {
  if (!(semiangleMrad && semiangleMrad > 0 && scanStepA && scanStepA > 0))
    return { c10: 5000, c12: 2000, why: "slider ranges ±5000 Å and 0–2000 Å (not from the calibration: the semi-angle or the scan step is unknown)" };
  const field = Math.max(scan[0], scan[1]) * scanStepA;  // Å
  const raw = Math.min(50000, Math.max(1000, field / (2 * semiangleMrad * 1e-3)));
  const p = 10 ** Math.floor(Math.log10(raw));
  const c10 = ([1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw) ?? 10 * p);
  return { c10, c12: c10 / 2, why: `slider ranges from the calibration: |C10| ≤ ${c10} Å, where the probe's geometric diameter 2αC10 reaches the scan's ${field.toPrecision(3)} Å field (α ${semiangleMrad} mrad; clamped to 1000–50000 Å); C12 ≤ ${c10 / 2} Å; a typed value beyond widens the range` };
}

export function ssbPanel(path: string, scan: [number, number], placementText: (p: Placement[]) => string,
  ranges: { c10: number; c12: number; why: string } = aberrationRanges(scan),
  pageSource: SsbPageSource = () => "no WebGPU block on this page"): { element: HTMLElement; state: SsbState } {
  const st: SsbState = { c10: 0, c12: 0, phi12: 0, phase: null, requests: 0, rotationDeg: null, path: null, pageRefused: "", redrawMs: [], prepareMs: null, pagePixels: null, pageExcluded: null };
  // The fit and previews show their progress (frames, then the fit's evaluations) with a Cancel (server_progress.ts).
  const progress = new ServerProgress("stem-ssb-progress");
  const canvas = el("canvas", { id: "stem-ssb", width: String(PX), height: String(Math.max(1, Math.round((PX * scan[0]) / scan[1]))), "data-state": "idle" });
  const caption = el("p", { class: "status", id: "stem-ssb-caption" }, "press Compute, or move a slider");
  // A slider for dragging and, beside it, a number box (id "<id>-value") for typing an exact value: each follows the
  // other; a typed value outside the slider's range widens the range to it. Either one's change computes.
  const slider = (id: string, label: string, min: number, max: number, step: number) => {
    const input = el("input", { id, type: "range", min: String(min), max: String(max), step: String(step), value: "0" }) as HTMLInputElement;
    const box = el("input", { id: `${id}-value`, type: "number", step: "any", value: "0", class: "number-entry" }) as HTMLInputElement;
    // A range input keeps about 15 significant digits: a typed or fitted value is kept exactly beside it, and used
    // while the slider still shows it (until the slider is moved).
    let exact: { value: string; slider: string } | null = null;
    const value = () => (exact && exact.slider === input.value ? exact.value : input.value);
    const sync = () => (box.value = value());
    input.addEventListener("input", () => {
      exact = null;
      sync();
    });
    input.addEventListener("change", () => void compute());
    // Sets both to v exactly (a typed or fitted value): the slider's range widens to it, its step stops rounding.
    const set = (v: number) => {
      if (v < Number(input.min)) input.min = String(v);
      if (v > Number(input.max)) input.max = String(v);
      input.step = "any";
      input.value = String(v);
      exact = { value: String(v), slider: input.value };
      box.value = exact.value;
    };
    box.addEventListener("change", () => {
      const v = Number(box.value);
      if (box.value.trim() === "" || !Number.isFinite(v)) {
        box.value = input.value;  // not a number: the slider's value stands
        return;
      }
      set(v);
      void compute();
    });
    return { input, sync, set, value, element: el("label", {}, `${label} `, input, box) };
  };
  const c10 = slider("stem-ssb-c10", "C10 (Å)", -ranges.c10, ranges.c10, ranges.c10 / 1000);
  const c12 = slider("stem-ssb-c12", "C12 (Å)", 0, ranges.c12, ranges.c12 / 1000);
  const phi12 = slider("stem-ssb-phi12", "φ12 (°)", -90, 90, 1);
  const go = el("button", { type: "button", id: "stem-ssb-compute" }, "Compute");
  // Fit: the server fits C10, C12 and φ12 as `stem ssb --fit` does (GET …/ssb?fit=1) and the controls take its values.
  const fitButton = el("button", { type: "button", id: "stem-ssb-fit", title: "fit C10, C12 and φ12 on the server (stem ssb --fit): the fit always runs on the server" }, "Fit (server)");
  const on = el("select", { id: "stem-ssb-on", title: "where the SSB preview is computed" },
    el("option", { value: "page" }, "Compute on: page adapter"), el("option", { value: "server" }, "Compute on: server")) as HTMLSelectElement;
  on.addEventListener("change", () => void compute());
  let fitNext = false;
  const npy = el("a", { id: "stem-ssb-npy", download: "ssb-phase.npy" }, "phase .npy");
  const display = displayControls("stem-ssb", { transform: "linear", colormap: "gray", limits: "robust" }, () => draw());
  const element = el("section", { class: "stem-ssb-panel" }, el("h3", {}, "SSB preview"),
    el("div", { class: "toolbar" }, c10.element, c12.element, phi12.element, go, fitButton, on, npy, display.element),
    el("p", { class: "hint", id: "stem-ssb-ranges" }, ranges.why),
    el("p", { class: "hint", id: "stem-ssb-paths" }, "Slider moves redraw on the page's WebGPU adapter (WGSL, float32, within " +
      `${SSB_PREVIEW_TOLERANCE} rad of stem ssb) once the first preview has come from the server (it finds the scan rotation and the calibration); ` +
      "Fit runs on the server (stem ssb --fit); the .npy export is the server's."),
    progress.element, canvas, caption);
  const shared = window as unknown as { tmStemProgress?: Record<string, ServerProgress> };
  shared.tmStemProgress = { ...shared.tmStemProgress, ssb: progress };

  const draw = () => {
    if (!st.phase) return;
    const [rows, cols] = st.phase.shape;
    showLimits("stem-ssb", drawGrid(canvas, st.phase.values, rows, cols, display.get()));
  };
  const compute = latestWins(async () => {
    const fitting = fitNext;
    fitNext = false;
    for (const s of [c10, c12, phi12]) s.sync();  // the read-outs show what is computed, however the value was set
    const params: Record<string, string> = { c10: c10.value(), c12: c12.value(), phi12: phi12.value() };
    if (fitting) {
      params.fit = "1";  // the fit chooses the scan rotation itself, as the CLI's does
      caption.textContent = "fitting C10, C12 and φ12 on the server (the parallax estimate, a search around it, the simplex)…";
    } else if (st.rotationDeg !== null) {
      params.rotation_deg = String(st.rotationDeg);
    }
    st.requests++;
    const t0 = performance.now();
    // The page path when chosen and possible (not for a fit); else the server, saying why not the page.
    const onPage = fitting ? null : on.value === "page" ? await pagePreview() : null;
    st.pageRefused = fitting ? "the fit runs on the server" : on.value === "page" ? pageWhy : "";
    let pageText = "";
    let values: Float64Array | null = null;
    const t1 = performance.now();  // the redraw alone (G's preparation, once, is prepareMs)
    if (onPage && st.phase && st.rotationDeg !== null) {
      try {
        values = await onPage.phase({ c10: Number(params.c10), c12: Number(params.c12), phi12: Number(params.phi12) }, st.rotationDeg);
      } catch (e) {  // e.g. the device lost: the server answers from now on, saying why
        pageWhy = `the page's preview failed (${e instanceof Error ? e.message : String(e)})`;
        st.pageRefused = pageWhy;
        prepared = null;
        preparing = Promise.resolve(null);
      }
    }
    if (onPage && values && st.phase) {
      const ms = performance.now() - t1;
      st.redrawMs.push(ms);
      console.log(`[ssb] page redraw ${ms.toFixed(1)} ms (${onPage.rows} x ${onPage.cols} scan, ${onPage.pixels.length} bright-field pixels)`);
      st.phase = { ...st.phase, shape: [onPage.rows, onPage.cols], values: Array.from(values), placement: [],
        aberrations: { C10: Number(params.c10), C12: Number(params.c12), phi12: Number(params.phi12) } };
      st.path = "page";
      pageText = `computed on the page's adapter: ${pageAdapter} (WGSL, float32, within ${SSB_PREVIEW_TOLERANCE} rad of stem ssb; ` +
        `G of ${onPage.pixels.length} bright-field pixels resident, ${(onPage.residentBytes / 2 ** 20).toFixed(1)} MiB, prepared once in ${onPage.prepareMs.toFixed(0)} ms from the page's block)`;
    } else {
      st.phase = await progress.run(fitting ? "SSB fit on the server" : "SSB preview on the server", (named) => getJson<Phase>(`${path}/ssb`, { ...params, ...named }));
      st.path = "server";
      lastServer = st.phase;
    }
    const ab = st.phase.aberrations;
    if (fitting && ab) {  // the controls take the fitted values; later previews start from them
      c10.set(ab.C10), c12.set(ab.C12), phi12.set(ab.phi12);
      [params.c10, params.c12, params.phi12] = [String(ab.C10), String(ab.C12), String(ab.phi12)];
      delete params.fit;
    }
    [st.c10, st.c12, st.phi12] = [Number(params.c10), Number(params.c12), Number(params.phi12)];
    const rotation = st.phase.calibration?.scan_rotation;
    if ((fitting || st.rotationDeg === null) && typeof rotation?.value === "number") st.rotationDeg = rotation.value;
    if (st.rotationDeg !== null) params.rotation_deg = String(st.rotationDeg);
    draw();
    canvas.dataset.path = st.path;
    const fitText = fitting && st.phase.fit
      ? `fitted (${st.phase.fit.search}, ${st.phase.fit.evaluations} evaluations, ${st.phase.fit.seconds.toFixed(2)} s): `
      : "";
    caption.textContent = `phase (rad) for ${fitText}C10 ${Number(params.c10).toFixed(1)} Å, C12 ${Number(params.c12).toFixed(1)} Å, ` +
      `φ12 ${Number(params.phi12).toFixed(1)}°, scan rotation ${rotation?.value?.toFixed(2) ?? "?"}° (${rotation?.source ?? "?"}), in ` +
      `${(performance.now() - t0).toFixed(0)} ms — ${pageText || `${placementText(st.phase.placement)}${st.pageRefused ? ` (not on the page: ${st.pageRefused})` : ""}`}`;
    npy.href = apiUrl(`${path}/ssb`, { ...params, format: "npy" });
  }, canvas, "SSB preview");
  // The page path: G prepared once, from the block the page holds and what the last server preview resolved.
  let lastServer: Phase | null = null;
  let prepared: GpuSsbPreview | null = null;
  let preparing: Promise<GpuSsbPreview | null> | null = null;
  let pageWhy = "";
  let pageAdapter = "";
  const pagePreview = async (): Promise<GpuSsbPreview | null> => {
    if (prepared) return prepared;
    if (st.rotationDeg === null || !lastServer) {
      pageWhy = "the first preview runs on the server: it finds the scan rotation and the calibration the page's preview uses";
      return null;
    }
    const source = pageSource();
    if (typeof source === "string") {
      pageWhy = source;
      return null;
    }
    const r = lastServer;
    const c = r.calibration;
    const stepA = c?.scan_step?.value !== undefined && c.scan_step.unit === "nm" ? c.scan_step.value * 10 : c?.scan_step?.value;
    const need = [c?.wavelength_A, c?.semiangle?.value, stepA, c?.detector_angle_per_pixel?.value, r.disk?.radius, r.bright_field_pixels];
    if (!need.every((v) => typeof v === "number" && Number.isFinite(v)) || !r.disk) {
      pageWhy = "the server's report lacks the calibration the page's preview needs";
      return null;
    }
    preparing ??= GpuSsbPreview.prepare(source.device, source.block, {
      wavelengthA: need[0] as number, semiangleMrad: need[1] as number, scanStepA: need[2] as number, mradPerPx: need[3] as number,
      diskRow: r.disk.row, diskCol: r.disk.col, diskRadius: r.disk.radius, brightFieldPixels: need[5] as number,
    }).catch((e) => {
      pageWhy = e instanceof SsbPreviewRefused ? e.message : `the page's preview failed: ${e instanceof Error ? e.message : String(e)}`;
      return null;
    });
    prepared = await preparing;
    if (!prepared) return null;  // refused: preparing stays settled, so the refusal is not retried
    pageAdapter = source.adapter;
    [st.prepareMs, st.pagePixels, st.pageExcluded] = [prepared.prepareMs, prepared.pixels.length, prepared.excluded];
    pageWhy = "";
    return prepared;
  };
  go.addEventListener("click", () => void compute());
  fitButton.addEventListener("click", () => {
    fitNext = true;
    void compute();
  });
  return { element, state: st };
}
