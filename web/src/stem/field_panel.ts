// The centre-of-mass panel of the acquisition page: CoM as a colour wheel, DPC with its rotation (found by the
// minimum mean squared curl, or set with the slider and the transpose box; ⟨curl²⟩ and ⟨div²⟩ shown), iDPC and the
// FFT views of the current virtual image and of the mean pattern. CoM and DPC are computed on the page when its
// adapter holds the block (the exact CoM sums in WGSL, the division and rotation in float64 with the CPU's formulas:
// com_field.ts), else from the server's com product. iDPC and the FFT views are computed on the same adapter then
// (float32 FFTs in WGSL, webgpu/fourier_views.ts, within its stated tolerances of the CPU's float64), else — no
// adapter, "Compute on: server", or a grid larger than one storage binding — by the server (FFTW, float64); the
// caption and the canvas's data-path say which ran. Every request carries the page's view (scan_region, detector_bin).
import { apiUrl, getJson, type Placement } from "../api";
import { el } from "../dom";
import { latestWins } from "./latest_wins";
import { centerOfMass, curlMoments, findRotation, rotateField, stacked, type Field } from "./com_field";
import { displayControls, showLimits } from "./display_controls";
import { drawColourWheel, drawGrid, drawHueLegend } from "./grid_draw";
import { FftRefused, fftPathText, FFT_VIEW_TOLERANCE, GpuFourierViews, IDPC_TOLERANCE } from "./webgpu/fourier_views";
import type { GpuMaskedSums } from "./webgpu/masked_sums";

export interface FieldState {
  view: "com" | "dpc" | "idpc" | "fft" | "fft-dp";
  com: Field | null;
  /** Where the CoM came from: the page's adapter, the server's product, or the prepared product cache (as stored). */
  comOn: "page" | "server" | "cache" | "";
  rotationDeg: number;
  transpose: boolean;
  found: { angleDeg: number; transpose: boolean } | null;
  curl2: number;
  div2: number;
  shown: { view: string; shape: number[]; values: number[]; on: string } | null;
  /** Why the last iDPC / FFT view was not computed on the page ("" when it was, or for the CoM views). */
  fourierRefused: string;
}

interface Product {
  shape: number[];
  values: number[];
  placement: Placement[];
}

const PX = 320;

/** The page's own virtual image of the current detector, from the block `g` holds (scan rows × cols values). */
export type PageImage = (g: GpuMaskedSums) => Promise<number[]>;

/** The CoM field from the prepared product cache (GET …/prepared/com) and the cache's identity, or null when the
 *  cache does not answer (prepared.ts). */
export type PreparedCom = () => { product: Promise<Product>; from: string } | null;

export function fieldPanel(path: string, scan: [number, number], gpu: () => GpuMaskedSums | null, detectorParams: () => Record<string, string>,
  viewParams: Record<string, string>, placementText: (p: Placement[]) => string, pageImage: PageImage, preparedCom: PreparedCom = () => null): { element: HTMLElement; state: FieldState; refresh: () => Promise<void> } {
  const st: FieldState = { view: "com", com: null, comOn: "", rotationDeg: 0, transpose: false, found: null, curl2: NaN, div2: NaN, shown: null, fourierRefused: "" };
  const canvas = el("canvas", { id: "stem-field", width: String(PX), height: String(Math.max(1, Math.round((PX * scan[0]) / scan[1]))), "data-state": "idle" });
  const caption = el("p", { class: "status", id: "stem-field-caption" });
  // The hue legend of the colour-wheel views: which colour is which direction (hidden for the other views).
  const legend = el("canvas", { id: "stem-field-legend", width: "96", height: "96", class: "hue-legend", title: "hue = direction, brightness = length" }) as HTMLCanvasElement;
  drawHueLegend(legend);
  const view = el("select", { id: "stem-field-view", title: "centre-of-mass view" },
    el("option", { value: "com" }, "CoM (colour wheel)"), el("option", { value: "dpc" }, "DPC (rotated, colour wheel)"),
    el("option", { value: "idpc" }, "iDPC"), el("option", { value: "fft" }, "FFT of the virtual image"),
    el("option", { value: "fft-dp" }, "FFT of the mean pattern"));
  const slider = el("input", { id: "stem-dpc-rotation", type: "range", min: "0", max: "180", step: "0.1", value: "0", title: "DPC rotation (degrees)" });
  const transpose = el("input", { id: "stem-dpc-transpose", type: "checkbox", title: "swap the CoM components before rotating" });
  const useFound = el("button", { type: "button", id: "stem-dpc-found" }, "Found rotation");
  const rotationText = el("span", { id: "stem-dpc-readout", class: "status" });
  const displayParams = displayControls("stem-field", { transform: "linear", colormap: "gray", limits: "full" }, () => void refresh());
  const element = el("section", { class: "stem-field-panel" },
    el("h3", {}, "Centre of mass, DPC, iDPC, FFT"),
    el("div", { class: "toolbar" }, view, el("label", {}, "rotation ", slider), el("label", {}, transpose, " transpose"), useFound, rotationText, displayParams.element),
    el("div", { class: "stem-field-figure" }, canvas, legend), caption);

  const fitCanvas = (rows: number, cols: number) => {
    const height = String(Math.max(1, Math.round((PX * rows) / cols)));
    if (canvas.getAttribute("height") !== height) canvas.setAttribute("height", height);
  };
  let comFrom = "";
  const ensureCom = async (): Promise<void> => {
    if (st.com) return;
    const g = gpu();
    const cached = preparedCom();
    if (cached) {  // the field as prepared (`stem com --cache`'s numbers): nothing computed
      const p = await cached.product;
      const n = scan[0] * scan[1];
      st.com = { rows: scan[0], cols: scan[1], u: Float64Array.from(p.values.slice(0, n)), v: Float64Array.from(p.values.slice(n)) };
      st.comOn = "cache";
      comFrom = cached.from;
    } else if (g) {
      st.com = centerOfMass(await g.comSums(), scan[0], scan[1]);
      st.comOn = "page";
    } else {
      const p = await getJson<Product>(`${path}/products/com`, viewParams);
      const n = scan[0] * scan[1];
      st.com = { rows: scan[0], cols: scan[1], u: Float64Array.from(p.values.slice(0, n)), v: Float64Array.from(p.values.slice(n)) };
      st.comOn = "server";
    }
    const f = findRotation(st.com);
    if (f) {
      st.found = { angleDeg: (f.angle * 180) / Math.PI, transpose: f.transpose };
      st.rotationDeg = st.found.angleDeg;
      st.transpose = f.transpose;
      slider.value = String(st.rotationDeg);
      transpose.checked = st.transpose;
    }
  };

  // iDPC or an FFT view on the page's adapter (fourier_views.ts), or null when the page has no adapter or the grid is
  // refused (st.fourierRefused says why; the server computes it then).
  const pageFourier = async (v: "idpc" | "fft" | "fft-dp", rotated: Field): Promise<{ shape: number[]; values: number[]; text: string } | null> => {
    const g = gpu();
    st.fourierRefused = g ? "" : "no block on the page's adapter, or Compute on: server";
    if (!g) return null;
    const views = GpuFourierViews.on(g.device);
    const [rows, cols, kr, kc] = g.block.shape;
    try {
      const [r, c, values] = v === "idpc" ? [rows, cols, await views.idpc(rotated.u, rotated.v, rows, cols)]
        : v === "fft" ? [rows, cols, await views.fftView(await pageImage(g), rows, cols)]
        : [kr, kc, await views.fftView((await g.patterns()).mean, kr, kc)];
      const tolerance = v === "idpc" ? IDPC_TOLERANCE : FFT_VIEW_TOLERANCE;
      return { shape: [r, c], values: Array.from(values),
        text: `computed on the page's adapter (${g.adapter}): float32 FFT in WGSL, ${fftPathText(r, c)}; within ${tolerance} of the range of the CPU's float64` };
    } catch (e) {
      if (!(e instanceof FftRefused)) throw e;
      st.fourierRefused = e.message;
      return null;
    }
  };

  // One computation at a time, the latest view last (a slow iDPC must not overwrite a newer CoM).
  const refresh = latestWins(async () => {
    st.view = view.value as FieldState["view"];
    await ensureCom();
    const com = st.com as Field;
    const rotated = rotateField(com, (st.rotationDeg * Math.PI) / 180, st.transpose);
    const m = curlMoments(rotated);
    st.curl2 = m ? m.kk : NaN;
    st.div2 = m ? m.dd : NaN;
    rotationText.textContent = `rotation ${st.rotationDeg.toFixed(2)}°${st.transpose ? " (transposed)" : ""}` +
      (st.found ? `; found ${st.found.angleDeg.toFixed(2)}°${st.found.transpose ? " transposed" : ""}` : "") +
      (m ? `; ⟨curl²⟩ ${m.kk.toExponential(3)}, ⟨div²⟩ ${m.dd.toExponential(3)} px²` : "");
    const where = st.comOn === "page" ? `CoM sums on the page's adapter (${gpu()?.adapter}), field in float64 on the page`
      : st.comOn === "cache" ? `CoM from ${comFrom}, as stored (not recomputed)${st.view === "dpc" ? "; rotated in float64 on the page" : ""}` : "CoM from the server";
    if (st.view === "com" || st.view === "dpc") {
      const f = st.view === "com" ? com : rotated;
      fitCanvas(scan[0], scan[1]);
      const max = drawColourWheel(canvas, f.u, f.v, scan[0], scan[1]);
      st.shown = { view: st.view, shape: [2, scan[0], scan[1]], values: stacked(f), on: st.comOn };
      caption.textContent = `${st.view === "com" ? "centre of mass" : "DPC"}: hue = direction, brightness = length (max ${max.toFixed(3)} px) — ${where}`;
    } else {
      const params: Record<string, string> = st.view === "idpc"
        ? { rotation_deg: String(st.rotationDeg), transpose: st.transpose ? "1" : "0", ...viewParams }
        : st.view === "fft" ? { of: "mask", ...detectorParams() } : { of: "mean-dp", ...viewParams };
      const product = st.view === "idpc" ? "idpc" : "fft";
      const what = { idpc: "iDPC at the rotation above", fft: "FFT (log1p |FFT2|, shifted) of the virtual image", "fft-dp": "FFT (log1p |FFT2|, shifted) of the mean pattern" }[st.view];
      const onPage = await pageFourier(st.view, rotated);
      let shown: { shape: number[]; values: number[]; on: string; text: string };
      if (onPage) {
        shown = { ...onPage, on: "page" };
      } else {
        const p = await getJson<Product>(`${path}/products/${product}`, params);
        const why = st.fourierRefused ? ` (not on the page: ${st.fourierRefused})` : "";
        shown = { shape: p.shape, values: p.values, on: "server", text: `${placementText(p.placement)}, FFTW in float64${why}` };
      }
      const [rows, cols] = shown.shape.slice(-2);
      fitCanvas(rows, cols);
      showLimits("stem-field", drawGrid(canvas, shown.values, rows, cols, displayParams.get()));
      st.shown = { view: st.view, shape: shown.shape, values: shown.values, on: shown.on };
      caption.textContent = `${what} — ${shown.text}`;
      canvas.dataset.href = apiUrl(`${path}/products/${product}`, { ...params, format: "npy" });
    }
    canvas.dataset.view = st.view;
    canvas.dataset.path = st.view === "com" || st.view === "dpc" ? st.comOn : (st.shown?.on ?? "");
    legend.hidden = st.view !== "com" && st.view !== "dpc";
  }, canvas, "centre-of-mass view");
  view.addEventListener("change", () => void refresh());
  slider.addEventListener("input", () => {
    st.rotationDeg = Number(slider.value);
    void refresh();
  });
  transpose.addEventListener("change", () => {
    st.transpose = transpose.checked;
    void refresh();
  });
  useFound.addEventListener("click", () => {
    if (!st.found) return;
    st.rotationDeg = st.found.angleDeg;
    st.transpose = st.found.transpose;
    slider.value = String(st.rotationDeg);
    transpose.checked = st.transpose;
    void refresh();
  });
  return { element, state: st, refresh };
}
