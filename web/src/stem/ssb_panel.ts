// The SSB preview of the acquisition page: single-sideband ptychography's phase for the aberrations set with the
// C10 (defocus), C12 (two-fold astigmatism, both in Å as `tensormorph stem ssb --C10/--C12`) and φ12 (degrees)
// sliders or their number boxes, computed by the server's backends (GET …/ssb, the CLI's domain call, placed and reported); one request
// in flight, the latest setting wins; the scan rotation the first preview chose is passed back to the next ones.
// Export of the phase as .npy.
import { apiUrl, getJson, type Placement } from "../api";
import { ServerProgress } from "./server_progress";
import { el } from "../dom";
import { latestWins } from "./latest_wins";
import { displayControls, showLimits } from "./display_controls";
import { drawGrid } from "./grid_draw";

interface Phase {
  shape: number[];
  values: number[];
  placement: Placement[];
  calibration?: { scan_rotation?: { value?: number; source?: string } };
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
}

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
  ranges: { c10: number; c12: number; why: string } = aberrationRanges(scan)): { element: HTMLElement; state: SsbState } {
  const st: SsbState = { c10: 0, c12: 0, phi12: 0, phase: null, requests: 0, rotationDeg: null };
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
  const fitButton = el("button", { type: "button", id: "stem-ssb-fit", title: "fit C10, C12 and φ12 on the server (stem ssb --fit)" }, "Fit");
  let fitNext = false;
  const npy = el("a", { id: "stem-ssb-npy", download: "ssb-phase.npy" }, "phase .npy");
  const display = displayControls("stem-ssb", { transform: "linear", colormap: "gray", limits: "robust" }, () => draw());
  const element = el("section", { class: "stem-ssb-panel" }, el("h3", {}, "SSB preview"),
    el("div", { class: "toolbar" }, c10.element, c12.element, phi12.element, go, fitButton, npy, display.element),
    el("p", { class: "hint", id: "stem-ssb-ranges" }, ranges.why), progress.element, canvas, caption);
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
    st.phase = await progress.run(fitting ? "SSB fit on the server" : "SSB preview on the server", (named) => getJson<Phase>(`${path}/ssb`, { ...params, ...named }));
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
    const fitText = fitting && st.phase.fit
      ? `fitted (${st.phase.fit.search}, ${st.phase.fit.evaluations} evaluations, ${st.phase.fit.seconds.toFixed(2)} s): `
      : "";
    caption.textContent = `phase (rad) for ${fitText}C10 ${Number(params.c10).toFixed(1)} Å, C12 ${Number(params.c12).toFixed(1)} Å, ` +
      `φ12 ${Number(params.phi12).toFixed(1)}°, scan rotation ${rotation?.value?.toFixed(2) ?? "?"}° (${rotation?.source ?? "?"}), in ` +
      `${(performance.now() - t0).toFixed(0)} ms — ${placementText(st.phase.placement)}`;
    npy.href = apiUrl(`${path}/ssb`, { ...params, format: "npy" });
  }, canvas, "SSB preview");
  go.addEventListener("click", () => void compute());
  fitButton.addEventListener("click", () => {
    fitNext = true;
    void compute();
  });
  return { element, state: st };
}
