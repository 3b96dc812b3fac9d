// The local-files page (#/local): a Dectris acquisition opened from the user's disk with no server data endpoint.
// A file picker and drag and drop take the master (`*_master.h5`) and its data files (`*_data_NNNNNN.h5`);
// local_acquisition.ts reads the HDF5 container in the page (only the bytes it needs) and hands each window of
// frames' stored chunks to the page's WGSL decoder (webgpu/decode.ts, the same one GET …/chunks feeds); the decoded
// block is uploaded once (webgpu/masked_sums.ts) and the page computes what the acquisition page computes on its
// adapter: the mean/max pattern, virtual images of a dragged detector, a position's pattern, CoM/DPC/iDPC/FFT
// (field_panel.ts, fourier_views.ts). What needs the server (the SSB preview and fit, movies, the server's disk
// finder and presets, product caches) is listed on the page as such, never attempted.
//
// window.tmStemLocal (the e2e test reads it): state ("idle" | "opening" | "decoding" | "ready" | "refused"), the
// refusal, the files, the virtual image and the mean pattern shown, and setAnnulus(inner, outer) (pixels, inclusive)
// → the virtual image recomputed.
import { el } from "../../dom";
import { DetectorEditor } from "../detector_editor";
import { displayControls, showLimits } from "../display_controls";
import { fieldPanel } from "../field_panel";
import { drawGrid, drawScaleBar } from "../grid_draw";
import { blockFrame } from "../webgpu/block";
import { ChunkRefused, decodeBlockOnPage, type DecodeReport } from "../webgpu/decode";
import { BlockRefused, blockRefusal, pageBlockLimit } from "../webgpu/ladder";
import { GpuMaskedSums, PageDevice } from "../webgpu/masked_sums";
import { LocalAcquisition, type LocalQuantity, LocalRefused } from "./local_acquisition";
import { npyBlob } from "./npy";

const PX = 320;

/** What the page shows, for the e2e test. */
export interface LocalState {
  state: "idle" | "opening" | "decoding" | "ready" | "refused";
  error: string;
  files: string[];
  frames: number;
  center: [number, number];
  inner: number;
  outer: number;
  image: { shape: [number, number]; values: number[] } | null;
  mean: number[] | null;
  report: DecodeReport | null;
  setAnnulus: (inner: number, outer: number) => Promise<void>;
}

/** What the local mode cannot do, and why (each needs the server's files or its CPU products). */
export const SERVER_ONLY = [
  "the SSB preview and fit (the server's SSB: its first preview and the aberration fit)",
  "movies (GIF/MP4 of a radius sweep or of patterns along a scan row)",
  "the BF/ABF/ADF/HAADF/DF presets and the bright-field disk the server finds from the data (here the disk is estimated from the mean pattern)",
  "the mean pattern of a dragged scan region, and product caches (`stem prepare`)",
  "float frames (EMPAD), other HDF5 filters or layouts, and the other formats (MIB, NPY, raw): open those with `tensormorph serve`",
];

function quantityText(q: LocalQuantity, digits = 4): string {
  if (q.value === undefined) return `unknown (${q.missing ?? "no source"})`;
  return `${Number(q.value.toPrecision(digits))} ${q.unit} (${q.source})`;
}

/** The relativistic electron wavelength in Å for a beam energy in eV (src/stem/calibration.cpp). */
function wavelengthA(ev: number): number {
  const h = 6.62607015e-34, m0 = 9.1093837015e-31, e = 1.602176634e-19, c = 299792458.0;
  return (h / Math.sqrt(2 * m0 * e * ev * (1 + (e * ev) / (2 * m0 * c * c)))) * 1e10;
}

/** The bright-field disk estimated from the mean pattern: the pixels above half its maximum, their centroid and the
 *  radius of a disk of their area (pixels). */
function estimateDisk(mean: number[], rows: number, cols: number): { row: number; col: number; radius: number } {
  const max = Math.max(...mean);
  let n = 0, sr = 0, sc = 0;
  for (let i = 0; i < mean.length; i++)
    if (mean[i] > max / 2) n++, (sr += Math.floor(i / cols)), (sc += i % cols);
  if (!n) return { row: (rows - 1) / 2, col: (cols - 1) / 2, radius: Math.min(rows, cols) / 4 };
  return { row: sr / n, col: sc / n, radius: Math.sqrt(n / Math.PI) };
}

export function renderLocalPage(root: HTMLElement): void {
  document.title = "Local 4D-STEM files · Tensormorph";
  const input = el("input", { type: "file", id: "stem-local-files", multiple: "", accept: ".h5,.hdf5,.nxs" }) as HTMLInputElement;
  const drop = el("div", { class: "stem-local-drop", id: "stem-local-drop" }, "Drop the master file (*_master.h5) and its data files (*_data_NNNNNN.h5) here, or choose them: ", input);
  const status = el("p", { class: "status", id: "stem-local-status", "data-state": "idle" }, "No files chosen. Nothing is uploaded: the files are read and decoded in this page.");
  const error = el("p", { class: "error", id: "stem-local-error", hidden: "" });
  const body = el("div", { id: "stem-local-body" });
  const serverOnly = el("section", { id: "stem-local-server-only" }, el("h3", {}, "Needs the server"),
    el("p", { class: "status" }, "Opened from local files, this page computes on its WebGPU adapter only. These need `tensormorph serve` with the acquisition:"),
    el("ul", {}, ...SERVER_ONLY.map((s) => el("li", {}, s))));
  root.replaceChildren(el("h2", {}, "4D-STEM: local files"), drop, status, error, body, serverOnly);
  const st: LocalState = { state: "idle", error: "", files: [], frames: 0, center: [0, 0], inner: 0, outer: 0, image: null, mean: null, report: null, setAnnulus: async () => {} };
  (window as unknown as { tmStemLocal: LocalState }).tmStemLocal = st;
  let opened: GpuMaskedSums | null = null;
  let seq = 0;

  const setState = (s: LocalState["state"], text: string) => {
    st.state = s;
    status.dataset.state = s;
    status.textContent = text;
  };
  const refuse = (e: unknown) => {
    const msg = e instanceof Error ? e.message : String(e);
    st.error = msg;
    error.textContent = `cannot open the local files: ${msg}`;
    error.hidden = false;
    setState("refused", "refused (see the message above)");
  };

  const open = async (files: File[]) => {
    const mine = ++seq;
    opened?.device.destroy();
    opened = null;
    body.replaceChildren();
    error.hidden = true;
    st.error = "";
    st.image = null;
    st.mean = null;
    st.files = files.map((f) => f.name);
    setState("opening", `reading the HDF5 containers of ${files.map((f) => f.name).join(", ")}`);
    try {
      const acq = await LocalAcquisition.open(files);
      if (mine !== seq) return;
      if (!acq.scan) {
        const scanInput = el("input", { id: "stem-local-scan", placeholder: "rows,cols", size: "10" }) as HTMLInputElement;
        const go = el("button", { type: "button", id: "stem-local-scan-set" }, "Set scan shape");
        body.append(el("p", { class: "notice" }, `The file records no scan shape and ${acq.frames} frames are not a square: give rows,cols `, scanInput, go));
        await new Promise<void>((resolve) =>
          go.addEventListener("click", () => {
            try {
              const [r, c] = scanInput.value.split(",").map(Number);
              acq.setScan(r, c, "given on the page");
              resolve();
            } catch (e) {
              refuse(e);
            }
          }));
        body.replaceChildren();
      }
      await show(acq, mine);
    } catch (e) {
      if (mine === seq) refuse(e);
    }
  };

  const show = async (acq: LocalAcquisition, mine: number) => {
    const [rows, cols] = acq.scan!;
    const [kr, kc] = acq.detector;
    st.frames = acq.frames;
    const shape: [number, number, number, number] = [rows, cols, kr, kc];
    const early = blockRefusal({ shape, dtype: acq.dtype, bytes: Math.ceil((acq.frames * acq.frameBytes) / 4) * 4 }, pageBlockLimit());
    if (early) throw new LocalRefused(`${acq.name}: ${early.reason} (the local mode has no server to crop or bin: open it with \`tensormorph serve\`)`);
    setState("decoding", `decoding ${acq.frames} frames' chunks on the page's adapter`);
    const dev = await PageDevice.request();
    let got;
    try {
      got = await decodeBlockOnPage((s, n) => acq.window(s, n), dev.device, shape, acq.dtype, {
        mask: true,
        onProgress: (p) => setState("decoding", `decoding on the page's adapter: window ${p.window} of ${p.windows}, ${(p.decodedBytes / 2 ** 20).toFixed(1)} of ${(p.totalBytes / 2 ** 20).toFixed(1)} MiB`),
      });
    } catch (e) {
      dev.device.destroy();
      throw e instanceof ChunkRefused ? new LocalRefused(e.message) : e;
    }
    const g = got ? await GpuMaskedSums.open(got.block, dev) : new BlockRefused("not decoded");
    if (g instanceof BlockRefused) {
      dev.device.destroy();
      throw new LocalRefused(`${acq.name}: ${g.reason}`);
    }
    if (mine !== seq) return g.device.destroy();
    opened = g;
    const report = got!.report;
    st.report = report;
    const patterns = await g.patterns();
    st.mean = patterns.mean;
    const disk = estimateDisk(patterns.mean, kr, kc);
    const cal = acq.calibration;
    const mradPerPx = cal.detectorAnglePerPixel.value ?? (cal.semiangle.value ? cal.semiangle.value / disk.radius : undefined);

    const facts = el("table", { class: "facts", id: "stem-calibration" });
    const fact = (k: string, v: string) => facts.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
    fact("files", `${acq.files.length > 0 ? `${acq.master.name} + ${acq.files.filter((f) => f !== acq.master.name).join(", ")}` : acq.master.name} (${acq.filters.join(", ")} chunks)`);
    fact("scan × detector", `${rows} × ${cols} × ${kr} × ${kc} ${acq.dtype} (scan: ${acq.scanSource})`);
    fact("beam energy", quantityText(cal.energy));
    fact("wavelength", cal.energy.value ? `${(wavelengthA(cal.energy.value) * 100).toPrecision(5)} pm (from the beam energy, relativistic)` : "unknown (no beam energy)");
    fact("convergence semi-angle", quantityText(cal.semiangle));
    fact("scan step", quantityText(cal.scanStep));
    fact("detector angle per pixel", cal.detectorAnglePerPixel.value !== undefined ? quantityText(cal.detectorAnglePerPixel)
      : mradPerPx ? `${mradPerPx.toPrecision(4)} mrad (convergence semi-angle / the estimated disk radius)` : `unknown (${cal.detectorAnglePerPixel.missing}; no semi-angle to derive it)`);
    fact("detector distance", quantityText(cal.detectorDistance));
    fact("detector pixel size", quantityText(cal.pixelSize));
    if (acq.unreadGroups.length) fact("metadata not read", `${acq.unreadGroups.join("; ")}: quantities there show as unknown`);
    fact("bad pixels", `${acq.badPixels.length} (pixel_mask > 0) and the value ${acq.sentinel} zeroed, as the server's products do`);
    fact("bright-field disk", `centre (${disk.row.toFixed(2)}, ${disk.col.toFixed(2)}), radius ${disk.radius.toFixed(2)} px (estimated on the page: the mean pattern's pixels above half its maximum)`);
    const rate = report.decodeMs > 0 ? report.decodedBytes / 2 ** 20 / (report.decodeMs / 1000) : 0;
    const decodeLine = el("p", { class: "status", id: "stem-decode-report", "data-path": "local", "data-read-bytes": String(report.wireBytes), "data-decoded-bytes": String(report.decodedBytes), "data-chunks": String(report.chunks) },
      `decode: ${report.chunks} compressed chunks read from the local files (${(report.wireBytes / 2 ** 20).toFixed(2)} MiB read for ${(report.decodedBytes / 2 ** 20).toFixed(2)} MiB of frames) and decoded on the page's adapter (WGSL, ${dev.name}): ` +
      `${rate.toFixed(1)} MiB/s (${report.decodeMs.toFixed(0)} ms on the adapter, ${report.fetchMs.toFixed(0)} ms reading the files, ${report.windows} window${report.windows > 1 ? "s" : ""})`);

    const pattern = el("canvas", { id: "stem-pattern", width: String(PX), height: String(PX) }) as HTMLCanvasElement;
    const ring = el("canvas", { id: "stem-ring", width: String(PX), height: String(PX) }) as HTMLCanvasElement;
    const image = el("canvas", { id: "stem-image", width: String(PX), height: String(Math.max(1, Math.round((PX * rows) / cols))) }) as HTMLCanvasElement;
    const readout = el("p", { class: "status", id: "stem-detector" });
    const patternCaption = el("p", { class: "status", id: "stem-pattern-caption" });
    const imageCaption = el("p", { class: "status", id: "stem-image-caption" });
    const hover = el("p", { class: "status", id: "stem-hover" }, "hover the image: a position's pattern");
    const patternOf = el("select", { id: "stem-pattern-of" }, el("option", { value: "mean" }, "mean pattern"), el("option", { value: "max" }, "max pattern")) as HTMLSelectElement;
    const npy = el("a", { id: "stem-export-npy", download: `${acq.name}-virtual.npy`, href: "#" }, "virtual image .npy");
    let shown: { values: number[]; what: string } = { values: patterns.mean, what: "mean diffraction pattern" };
    const patternDisplay = displayControls("stem-pattern", { transform: "log", colormap: "viridis", limits: "full" }, () => redrawPattern());
    const imageDisplay = displayControls("stem-image", { transform: "linear", colormap: "gray", limits: "full" }, () => redrawImage());
    const editor = new DetectorEditor(ring, kr, kc, [disk.row, disk.col], disk.radius, mradPerPx, readout, () => void refreshImage());
    st.center = [disk.row, disk.col];
    const redrawPattern = () => {
      showLimits("stem-pattern", drawGrid(pattern, shown.values, kr, kc, patternDisplay.get()));
      pattern.dataset.scaleBar = mradPerPx ? drawScaleBar(pattern, mradPerPx / editor.scale, "mrad") : drawScaleBar(pattern, 1 / editor.scale, "px");
      patternCaption.textContent = `${shown.what} — computed on the page's adapter: ${g.adapter}`;
    };
    const stepNm = cal.scanStep.value ? cal.scanStep.value / 10 : undefined;
    const redrawImage = () => {
      if (!st.image) return;
      showLimits("stem-image", drawGrid(image, st.image.values, rows, cols, imageDisplay.get()));
      image.dataset.scaleBar = stepNm ? drawScaleBar(image, (stepNm * cols) / image.width, "nm") : "";
    };
    let running: Promise<void> = Promise.resolve();
    const refreshImage = () => (running = running.then(async () => {
      const pixels = editor.pixels();
      st.inner = editor.det.inner;
      st.outer = editor.det.outer;
      if (!pixels.length) {
        imageCaption.textContent = "the detector holds no pixel";
        return;
      }
      const r = await g.image(pixels);
      st.image = { shape: [rows, cols], values: r.values };
      image.dataset.inner = String(editor.det.inner);
      image.dataset.outer = String(editor.det.outer);
      redrawImage();
      imageCaption.textContent = `virtual image, ${pixels.length} detector pixels — computed on the page's adapter: ${g.adapter}`;
    }).catch((e) => refuse(e)));
    st.setAnnulus = async (inner, outer) => {
      editor.setAnnulus(inner, outer);
      await refreshImage();
    };
    patternOf.addEventListener("change", () => {
      shown = patternOf.value === "max" ? { values: patterns.max, what: "max diffraction pattern" } : { values: patterns.mean, what: "mean diffraction pattern" };
      redrawPattern();
    });
    image.addEventListener("mousemove", (ev) => {
      const b = image.getBoundingClientRect();
      const row = Math.floor(((ev.clientY - b.top) / b.height) * rows), col = Math.floor(((ev.clientX - b.left) / b.width) * cols);
      if (row < 0 || col < 0 || row >= rows || col >= cols) return;
      hover.textContent = `scan (${row}, ${col}): ${st.image?.values[row * cols + col] ?? "?"}`;
      shown = { values: blockFrame(g.block, row, col), what: `pattern at scan position (${row}, ${col}), from the block on the page` };
      redrawPattern();
    });
    npy.addEventListener("click", () => {
      if (st.image) npy.href = URL.createObjectURL(npyBlob("<u8", [rows, cols], st.image.values));
    });
    // CoM, DPC, iDPC and FFT: the acquisition page's panel, with the block always on the page (its server path,
    // taken only without a block, is never reached; the path it would name is no server's).
    const fields = fieldPanel("/local-files/no-server", [rows, cols], () => g, () => editor.params(), {}, () => "",
      async (gg) => (await gg.image(editor.pixels())).values);
    (window as unknown as { tmStemFields: unknown }).tmStemFields = fields.state;
    body.replaceChildren(facts, decodeLine,
      el("div", { class: "toolbar" }, patternOf, npy),
      el("div", { class: "stem-panels" },
        el("figure", { class: "stem-figure" }, el("div", { class: "stem-stack" }, pattern, ring), patternDisplay.element, patternCaption, readout),
        el("figure", { class: "stem-figure" }, image, imageDisplay.element, imageCaption, hover)),
      fields.element);
    editor.draw();
    redrawPattern();
    await refreshImage();
    await fields.refresh();
    if (mine === seq) setState("ready", `${acq.name}: ${acq.frames} frames from ${acq.files.length} data file${acq.files.length > 1 ? "s" : ""}, decoded on the page's adapter; no server involved`);
  };

  input.addEventListener("change", () => void open([...(input.files ?? [])]));
  drop.addEventListener("dragover", (ev) => {
    ev.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (ev) => {
    ev.preventDefault();
    drop.classList.remove("over");
    void open([...(ev.dataTransfer?.files ?? [])]);
  });
}
