// The SSB preview of the acquisition page: single-sideband ptychography's phase for the aberrations set with the
// C10 (defocus), C12 (two-fold astigmatism, both in Å as `tensormorph stem ssb --C10/--C12`) and φ12 (degrees)
// sliders or their number boxes, computed by the server's backends (GET …/ssb, the CLI's domain call, placed and reported); one request
// in flight, the latest setting wins; the scan rotation the first preview chose is passed back to the next ones.
// Export of the phase as .npy.
import { apiUrl, getJson, type Placement } from "../api";
import { el } from "../dom";
import { latestWins } from "./latest_wins";
import { displayControls, showLimits } from "./display_controls";
import { drawGrid } from "./grid_draw";

interface Phase {
  shape: number[];
  values: number[];
  placement: Placement[];
  calibration?: { scan_rotation?: { value?: number; source?: string } };
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

export function ssbPanel(path: string, scan: [number, number], placementText: (p: Placement[]) => string): { element: HTMLElement; state: SsbState } {
  const st: SsbState = { c10: 0, c12: 0, phi12: 0, phase: null, requests: 0, rotationDeg: null };
  const canvas = el("canvas", { id: "stem-ssb", width: String(PX), height: String(Math.max(1, Math.round((PX * scan[0]) / scan[1]))), "data-state": "idle" });
  const caption = el("p", { class: "status", id: "stem-ssb-caption" }, "press Compute, or move a slider");
  // A slider for dragging and, beside it, a number box (id "<id>-value") for typing an exact value: each follows the
  // other; a typed value outside the slider's range widens the range to it. Either one's change computes.
  const slider = (id: string, label: string, min: number, max: number, step: number) => {
    const input = el("input", { id, type: "range", min: String(min), max: String(max), step: String(step), value: "0" }) as HTMLInputElement;
    const box = el("input", { id: `${id}-value`, type: "number", step: "any", value: "0", class: "number-entry" }) as HTMLInputElement;
    const sync = () => (box.value = input.value);
    input.addEventListener("input", sync);
    input.addEventListener("change", () => void compute());
    box.addEventListener("change", () => {
      const v = Number(box.value);
      if (box.value.trim() === "" || !Number.isFinite(v)) {
        box.value = input.value;  // not a number: the slider's value stands
        return;
      }
      if (v < Number(input.min)) input.min = String(v);
      if (v > Number(input.max)) input.max = String(v);
      input.step = "any";  // the typed value exactly, not rounded to the slider's step
      input.value = String(v);
      void compute();
    });
    return { input, sync, element: el("label", {}, `${label} `, input, box) };
  };
  const c10 = slider("stem-ssb-c10", "C10 (Å)", -5000, 5000, 10);
  const c12 = slider("stem-ssb-c12", "C12 (Å)", 0, 2000, 10);
  const phi12 = slider("stem-ssb-phi12", "φ12 (°)", -90, 90, 1);
  const go = el("button", { type: "button", id: "stem-ssb-compute" }, "Compute");
  const npy = el("a", { id: "stem-ssb-npy", download: "ssb-phase.npy" }, "phase .npy");
  const display = displayControls("stem-ssb", { transform: "linear", colormap: "gray", limits: "robust" }, () => draw());
  const element = el("section", { class: "stem-ssb-panel" }, el("h3", {}, "SSB preview"),
    el("div", { class: "toolbar" }, c10.element, c12.element, phi12.element, go, npy, display.element), canvas, caption);

  const draw = () => {
    if (!st.phase) return;
    const [rows, cols] = st.phase.shape;
    showLimits("stem-ssb", drawGrid(canvas, st.phase.values, rows, cols, display.get()));
  };
  const compute = latestWins(async () => {
    for (const s of [c10, c12, phi12]) s.sync();  // the read-outs show what is computed, however the value was set
    const params: Record<string, string> = { c10: c10.input.value, c12: c12.input.value, phi12: phi12.input.value };
    if (st.rotationDeg !== null) params.rotation_deg = String(st.rotationDeg);
    st.requests++;
    const t0 = performance.now();
    st.phase = await getJson<Phase>(`${path}/ssb`, params);
    [st.c10, st.c12, st.phi12] = [Number(params.c10), Number(params.c12), Number(params.phi12)];
    const rotation = st.phase.calibration?.scan_rotation;
    if (st.rotationDeg === null && typeof rotation?.value === "number") st.rotationDeg = rotation.value;
    draw();
    caption.textContent = `phase (rad) for C10 ${params.c10} Å, C12 ${params.c12} Å, φ12 ${params.phi12}°, scan rotation ` +
      `${rotation?.value?.toFixed(2) ?? "?"}° (${rotation?.source ?? "?"}), in ` +
      `${(performance.now() - t0).toFixed(0)} ms — ${placementText(st.phase.placement)}`;
    npy.href = apiUrl(`${path}/ssb`, { ...params, format: "npy" });
  }, canvas, "SSB preview");
  go.addEventListener("click", () => void compute());
  return { element, state: st };
}
