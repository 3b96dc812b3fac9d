// The acquisition page (#/acquisition/{id}): a 4D-STEM acquisition's readiness (followed by events while it is
// written) and calibration (with sources); its mean or max diffraction pattern (log/linear, colour map, limits,
// a scale bar in mrad) with a virtual detector drawn on it and edited by dragging (annulus, disk, rectangle;
// presets BF/ABF/ADF/HAADF/DF: detector_editor.ts); the virtual image of that detector (recomputed while
// dragging, one request in flight, the latest wins); the pattern at a hovered or clicked scan position; CoM, DPC,
// iDPC and FFT views (field_panel.ts); an SSB preview (ssb_panel.ts); and exports (.npy as the CLI writes it, PNG
// of the canvas). Numbers come from the server (GET /api/acquisitions/…, docs/api.md, the same domain calls as
// `tensormorph stem`, each product saying where it ran), or, with a WebGPU adapter whose limits hold the decoded
// block, from the page's adapter (stem/webgpu/masked_sums.ts: the block uploaded once, the same numbers as the
// CLI's); "Compute on" switches between the page and the server, and says why the page cannot when it cannot
// (float frames, EMPAD's: no WGSL float kernels, the server computes them). A prepared acquisition's product cache
// (stem prepare, prepared.ts) is drawn as served: its patterns, preset images and CoM are not computed at all.
import { ApiError, apiUrl, getJson, type Placement } from "../api";
import { el, showError } from "../dom";
import { type Figure, FigureFrame, saveFigureLinks } from "../figure";
import { latestWins, wasCancelled } from "./latest_wins";
import { DetectorEditor, type DetectorShape } from "./detector_editor";
import { displayControls, showLimits } from "./display_controls";
import { fieldPanel } from "./field_panel";
import { drawGrid, drawScaleBar } from "./grid_draw";
import { followReadiness } from "./readiness_events";
import { aberrationRanges, ssbPanel } from "./ssb_panel";
import { colourBarOf, detectorAxes, scanAxes } from "./stem_figures";
import { ImageTools } from "./image_tools";
import { ServerProgress } from "./server_progress";
import { OpenProgress } from "./open_progress";
import { PreparedCache } from "./prepared";
import { blockFrame, fetchBlock, type StemBlock, WIDTH } from "./webgpu/block";
import { ChunkRefused, decodeBlockOnPage, exposeDecodeCheck } from "./webgpu/decode";
import { DecodeReportLine, decodeChoice, decodeSelect } from "./decode_report";
import { BlockRefused, blockRefusal, pageBlockLimit } from "./webgpu/ladder";
import { GpuMaskedSums, PageDevice } from "./webgpu/masked_sums";

/** What the page works on: the whole acquisition, or a scan crop and/or a detector bin (the memory ladder's steps,
 *  the CLI's --scan-region R0,R1,C0,C1 and --detector-bin N); every server request and page kernel uses it. */
export interface StemView {
  bin: number;
  region: [number, number, number, number] | null;
}

exposeDecodeCheck();

/** The full block resident on the page's adapter, per acquisition, kept across views (binning it needs no download). */
const resident = new Map<string, GpuMaskedSums>();

/** The open page's progress line (open_progress.ts), kept across rebuilds of its view. */
let progress: OpenProgress | null = null;

interface Sourced {
  value?: number;
  unit?: string;
  source?: string;
  missing?: string;
}

interface Acquisition {
  id: string;
  name: string;
  path: string;
  detector_shape: number[];
  dtype: string;
  scan_shape: number[] | null;
  scan_shape_problem?: string;
  /** Whether GET …/chunks serves the frames (bitshuffle+LZ4 or unfiltered HDF5): the page decodes them itself. */
  stored_chunks?: boolean;
  readiness: { status: string; frames_present: number; frames_expected: number | null; problems: string[] };
}

interface Calibration {
  energy: Sourced;
  wavelength_A?: number | null;
  semiangle: Sourced;
  scan_step: Sourced;
  detector_angle_per_pixel: Sourced;
  disk: { row: number; col: number; radius: number; source: string };
}

interface Product {
  shape: number[];
  dtype: string;
  values: number[];
  placement: Placement[];
  detector?: { inner_px: number | string; outer_px: number | string; inner_mrad?: number; outer_mrad?: number; pixels: number };
  /** The server's load provenance; `resident` says whether its resident copy answered (docs/api.md). */
  provenance?: { resident?: ResidentUse };
}

/** The server's resident copy as a product reports it: `used: false` with `why` when the product streamed. */
interface ResidentUse {
  used?: boolean;
  why?: string;
  where?: string;
  bytes?: number;
  built_at?: string;
  built_now?: boolean;
}

/** What the page shows, for the end-to-end test (window.tmStem) and the read-outs. */
interface StemState {
  id: string;
  inner: number;
  outer: number;
  center: [number, number];
  image: Product | null;
  pattern: Product | null;
  frame: { position: [number, number]; values: number[] } | null;
  requests: number;
  /** Where the virtual image is computed: "page" (the adapter) or "server"; why not the page, when it is not. */
  computeOn: "page" | "server";
  pageRefused: string;
  /** Milliseconds of each virtual image computed (request to drawn), for the frame-time measurement. */
  imageMs: number[];
  shape: string;
  view: StemView;
  viewText: string;
  patternOf: "mean" | "max";
  hover: [number, number] | null;
  scaleBar: string;
  /** The virtual image's real-space scale bar ("2 nm"), "" when the scan step is unknown. */
  imageScaleBar: string;
  /** Each product computed since the page opened ("image on page", "patterns on server", …); what the product cache
   *  answered is not computed and not listed (prepared.ts). */
  computed: string[];
}

const PATTERN_PX = 320;
const IMAGE_PX = 320;

function sourcedText(s: Sourced | undefined, digits = 4): string {
  if (!s) return "—";
  if (s.value === undefined || s.value === null) return `unknown (${s.missing ?? "no source"})`;
  return `${Number(s.value.toPrecision(digits))} ${s.unit ?? ""} (${s.source ?? "?"})`;
}

function placementText(p: Placement[]): string {
  if (!p.length) return "";
  const where = [...new Set(p.map((x) => `${x.op} on ${x.backend}`))];
  return `computed on the server: ${where.join(", ")}`;
}

/** Which server path answered a product: "resident" (its compact copy, full resolution) or "streamed" (decoded
 *  from the files for this request), and the words the caption shows for it. */
function serverPath(p: Product): { path: "resident" | "streamed"; text: string } {
  const r = p.provenance?.resident;
  if (r && r.used !== false && r.bytes !== undefined) {
    const built = r.built_now ? "built by this request" : `built ${r.built_at ?? "earlier"}`;
    return { path: "resident", text: `from the server's resident copy at full resolution (${(r.bytes / 2 ** 20).toFixed(1)} MiB in ${!r.where || r.where === "host" ? "host memory" : r.where}, ${built})` };
  }
  return { path: "streamed", text: `decoded from the files for this request${r?.why ? ` (not resident: ${r.why})` : ""}` };
}

/** Why the page's WGSL kernels cannot take frames of this dtype ("" when they can): they read integer counts (u8,
 *  u16, u32); float frames (EMPAD's float32) have no WebGPU kernel, so the server's products (float64 sums in the
 *  contract's order, docs/stem.md "Float frames") are shown, and the block (which the server refuses, 409) is not asked for. */
function pageKernelRefusal(dtype: string): string {
  if (!dtype.startsWith("f")) return "";
  return `the frames are ${dtype === "f32" ? "float32" : dtype === "f64" ? "float64" : dtype}: the page's WebGPU kernels read integer counts (u8, u16, u32) and float kernels are not implemented, so the server computes every product`;
}

export async function renderAcquisitionPage(root: HTMLElement, id: string): Promise<void> {
  const openedAt = performance.now();
  const path = `/api/acquisitions/${encodeURIComponent(id)}`;
  const heading = el("h2", {}, `4D-STEM: ${id}`);
  root.replaceChildren(heading);
  progress = new OpenProgress(root, openedAt);
  progress.stage("opening: reading the acquisition's summary from the server");
  const acq = await getJson<Acquisition>(path);
  document.title = `${acq.name} · Tensormorph`;
  heading.textContent = `4D-STEM: ${acq.name}`;
  const readiness = el("p", { class: "status", id: "stem-readiness" });
  const showReadiness = (a: Acquisition) => {
    const r = a.readiness;
    readiness.textContent = `${r.status}: ${r.frames_present} of ${r.frames_expected ?? "?"} frames` + (r.problems.length ? ` — ${r.problems.join("; ")}` : "");
    readiness.dataset.status = r.status;
    readiness.dataset.frames = String(r.frames_present);
  };
  showReadiness(acq);
  heading.after(readiness);
  // Readiness follows the files by events (GET …/events); the page is built once every frame is present.
  let built = false;
  const stop = followReadiness(id, (a) => {
    showReadiness(a as unknown as Acquisition);
    if (a.readiness.status === "complete" && !built && acq.readiness.status !== "complete") {
      built = true;
      void buildPage(root, path, a as unknown as Acquisition).catch((e) => showError(e, "acquisition"));
    }
  });
  stopOnLeaving(stop);
  if (acq.readiness.status !== "complete") {
    progress.stage("waiting for every frame to be written");
    root.append(el("p", { class: "notice", id: "stem-waiting" }, "Products are computed once every frame is present: this page follows the files and opens them when they are."));
    return;
  }
  built = true;
  await buildPage(root, path, acq);
}

async function buildPage(root: HTMLElement, path: string, acq: Acquisition, view: StemView = { bin: 1, region: null }): Promise<void> {
  document.getElementById("stem-waiting")?.remove();
  for (const old of root.querySelectorAll(".stem-built")) old.remove();
  const id = acq.id;
  const shown = progress ?? new OpenProgress(root, performance.now());
  shown.rebuilding();
  shown.stage("reading the calibration (the bright-field disk is found from the data when the file does not record it)");
  const cal = await getJson<Calibration & { placement: Placement[] }>(`${path}/calibration`);
  const [fullRows, fullCols] = acq.detector_shape;
  const fullScan = (acq.scan_shape ?? [0, 0]) as [number, number];
  const b = view.bin;
  const [detRows, detCols] = [Math.ceil(fullRows / b), Math.ceil(fullCols / b)];
  const r = view.region;
  const scan: [number, number] = r ? [r[1] - r[0], r[3] - r[2]] : fullScan;
  const viewParams: Record<string, string> = {
    ...(b > 1 ? { detector_bin: String(b) } : {}),
    ...(r ? { scan_region: r.join(",") } : {}),
  };
  const viewText = [r ? `scan rows ${r[0]}–${r[1] - 1}, columns ${r[2]}–${r[3] - 1}` : "", b > 1 ? `detector binned ${b} × ${b}` : ""].filter(Boolean).join(", ") || "the whole acquisition";
  const detMrad = cal.detector_angle_per_pixel?.value;
  const mradPerPx = detMrad ? detMrad * b : undefined;  // per binned pixel
  const facts = el("table", { class: "facts stem-built", id: "stem-calibration" });
  const fact = (k: string, v: string, rowId = "") => facts.append(el("tr", rowId ? { id: rowId } : {}, el("th", {}, k), el("td", {}, v)));
  fact("scan × detector", `${scan.join(" × ")} × ${detRows} × ${detCols} ${acq.dtype}`);
  fact("beam energy", sourcedText(cal.energy));
  fact("wavelength", cal.wavelength_A ? `${(cal.wavelength_A * 100).toPrecision(5)} pm (from the beam energy, relativistic)` : "unknown (no beam energy)");
  fact("convergence semi-angle", sourcedText(cal.semiangle));
  fact("scan step", sourcedText(cal.scan_step));
  fact("detector angle per pixel", sourcedText(cal.detector_angle_per_pixel));
  fact("bright-field disk", `centre (${cal.disk.row.toFixed(2)}, ${cal.disk.col.toFixed(2)}), radius ${cal.disk.radius.toFixed(2)} px (${cal.disk.source})`);
  fact("scan rotation", "not recorded in the file; the DPC rotation (below) is found from the CoM field's minimum curl", "stem-scan-rotation");

  // The disk in the view's pixels: a binned pixel i covers [i·b, i·b + b), so centre → (c + 0.5) / b − 0.5.
  const disk = { row: (cal.disk.row + 0.5) / b - 0.5, col: (cal.disk.col + 0.5) / b - 0.5, radius: cal.disk.radius / b };
  const st: StemState = {
    id, inner: 0, outer: disk.radius, center: [disk.row, disk.col], view, viewText, image: null, pattern: null, frame: null, requests: 0,
    computeOn: "server", pageRefused: "not tried yet", imageMs: [], shape: "annulus", patternOf: "mean", hover: null, scaleBar: "", imageScaleBar: "", computed: [],
  };
  // The product cache (stem prepare): its products are drawn as stored; the preset the image shows from it (null once
  // the detector is changed, which is computed).
  const prepared = await PreparedCache.open(path, viewParams, () => {
    fields.state.com = null;
    void refreshImage();
    void showPattern();
    void fields.refresh();
  });
  let cachedPreset: string | null = prepared.hit ? "bf" : null;
  (window as unknown as { tmStem: StemState }).tmStem = st;

  const pattern = el("canvas", { id: "stem-pattern", width: String(PATTERN_PX), height: String(PATTERN_PX), "data-state": "loading" });
  const ring = el("canvas", { id: "stem-ring", width: String(PATTERN_PX), height: String(PATTERN_PX) });
  const image = el("canvas", { id: "stem-image", width: String(IMAGE_PX), height: String(IMAGE_PX), "data-state": "loading" });
  const readout = el("p", { class: "status", id: "stem-detector" });
  const patternCaption = el("p", { class: "status", id: "stem-pattern-caption" }, "mean diffraction pattern");
  const imageCaption = el("p", { class: "status", id: "stem-image-caption" });
  const hover = el("p", { class: "status", id: "stem-hover" }, "hover the image: a position's pattern; click: keep it");
  const presets = el("span", { class: "view-toggle", role: "group", "aria-label": "detector presets" });
  const shape = el("select", { id: "stem-detector-shape", title: "detector shape" },
    ...(["annulus", "disk", "rectangle"] as const).map((s) => el("option", { value: s }, s)));
  const npy = el("a", { id: "stem-export-npy", download: `${acq.name}-virtual.npy` }, "virtual image .npy");
  const png = el("a", { id: "stem-export-png", download: `${acq.name}-virtual.png`, href: "#" }, "virtual image PNG");
  // Movies (GET …/movie: the file `stem movie` writes for the same request), linked for the current detector,
  // position and display: the outer radius sweeping up to the current one, and the patterns along the scan row of
  // the kept (clicked) position, else the middle row.
  const movieFormat = el("select", { id: "stem-movie-format", title: "movie format" }, el("option", { value: "gif" }, "GIF"), el("option", { value: "mp4" }, "MP4"));
  const movieSweep = el("a", { id: "stem-movie-sweep", href: "#" }, "outer radius sweep");
  const movieLine = el("a", { id: "stem-movie-line", href: "#" }, "patterns along a scan row");
  const patternOf = el("select", { id: "stem-pattern-of", title: "which pattern" },
    el("option", { value: "mean" }, "mean pattern"), el("option", { value: "max" }, "max pattern"));
  const meanButton = el("button", { type: "button", id: "stem-show-mean" }, "Show pattern");
  const computeOn = el("select", { id: "stem-compute-on", title: "where the virtual images are computed" },
    el("option", { value: "page" }, "Compute on: page adapter"), el("option", { value: "server" }, "Compute on: server"));
  const computeNote = el("p", { class: "status", id: "stem-compute-note" });
  const decodeReport = new DecodeReportLine();
  const decodePath = decodeSelect(() => {
    resident.delete(path);
    void buildPage(root, path, acq, view).catch((e) => showError(e, "view"));
  });
  const patternDisplay = displayControls("stem-pattern", { transform: "log", colormap: "viridis", limits: "full" }, () => redrawPattern());
  const imageDisplay = displayControls("stem-image", { transform: "linear", colormap: "gray", limits: "full" }, () => redrawImage());

  const editor = new DetectorEditor(ring, detRows, detCols, st.center, disk.radius, mradPerPx, readout, () => {
    cachedPreset = null;  // a changed detector is computed
    syncDetector();
    void refreshImage();
  });
  const syncDetector = () => {
    st.inner = editor.det.inner;
    st.outer = editor.det.outer;
    st.shape = editor.det.shape;
  };
  let gpu: GpuMaskedSums | null = null;
  const fields = fieldPanel(path, scan, () => (st.computeOn === "page" ? gpu : null), () => ({ ...editor.params(), ...viewParams }), viewParams, placementText,
    async (g) => (await pageImage(g)).values, () => (prepared.used ? { product: prepared.product("com"), from: prepared.identity() } : null));
  if (cachedPreset) {
    const bf = prepared.preset(cachedPreset);
    if (bf) editor.setAnnulus(bf.inner, bf.outer);
  }
  const stepA = cal.scan_step?.value && cal.scan_step.value > 0 ? (cal.scan_step.unit === "nm" ? cal.scan_step.value * 10 : cal.scan_step.value) : undefined;
  // The SSB preview's page path reads the acquisition's whole block (what the server's SSB reads: no crop, no bin).
  const ssb = ssbPanel(path, scan, placementText, aberrationRanges(scan, cal.semiangle?.value, stepA), () => {
    const full = resident.get(path);
    if (full) return { device: full.device, block: full.block, adapter: full.adapter };
    if (r || b > 1) return `the page holds this view's block (${viewText}), not the whole acquisition's that SSB reads`;
    return st.pageRefused ? `the page holds no block (${st.pageRefused})` : "the page's block is not ready yet";
  });
  (window as unknown as { tmStemFields: unknown }).tmStemFields = fields.state;
  (window as unknown as { tmStemSsb: unknown }).tmStemSsb = ssb.state;

  const binSelect = el("select", { id: "stem-detector-bin", title: "detector bin (on the page's adapter when it holds the block)" },
    ...[1, 2, 4, 8].map((n) => el("option", { value: String(n) }, n === 1 ? "detector: full" : `detector bin ${n}`)));
  binSelect.value = String(b);
  binSelect.addEventListener("change", () => void buildPage(root, path, acq, { bin: Number(binSelect.value), region: view.region }).catch((e) => showError(e, "view")));
  const viewLine = el("p", { class: "status", id: "stem-view" }, `view: ${viewText}`);
  const ladder = el("div", { class: "toolbar", id: "stem-ladder" });
  // Server products of this view show their progress after 300 ms, with a Cancel (server_progress.ts).
  const serverWork = new ServerProgress("stem-server-progress");
  const shared = window as unknown as { tmStemProgress?: Record<string, ServerProgress> };
  shared.tmStemProgress = { ...shared.tmStemProgress, products: serverWork };
  // One image column is one scan position, `scan_step` apart (Å in the calibration, shown in nm); unknown: none.
  const scanStep = cal.scan_step?.value;
  const nmPerStep = scanStep && scanStep > 0 ? (cal.scan_step.unit === "nm" ? scanStep : scanStep / 10) : undefined;
  // Dragging on the virtual image: a line profile, or a scan region whose patterns the server averages.
  const tools = new ImageTools({
    image, nmPerStep, title: () => `${acq.name}: virtual image`,
    current: () => (st.image ? { shape: st.image.shape, values: st.image.values } : null),
    onRegion: async ([r0, r1], [c0, c1]) => {
      const abs = r ? [r0 + r[0], r1 + r[0], c0 + r[2], c1 + r[2]] : [r0, r1, c0, c1];
      try {
        const p = await getJson<Product>(`${path}/products/mean-dp`, { ...(b > 1 ? { detector_bin: String(b) } : {}), scan_region: abs.join(",") });
        st.pattern = p;
        shownPattern = { values: p.values, rows: p.shape[0], cols: p.shape[1],
          what: `mean pattern of scan rows ${abs[0]}–${abs[1] - 1}, columns ${abs[2]}–${abs[3] - 1} (${(r1 - r0) * (c1 - c0)} positions) — ${placementText(p.placement)}` };
        redrawPattern();
        pattern.dataset.showing = `region ${abs.join(",")}`;
      } catch (e) {
        showError(e, "mean pattern of the region");
      }
    },
  });
  (window as unknown as { tmStemTools: unknown }).tmStemTools = tools.state;
  // Each picture with its numbers (figure.ts): axes in mrad / nm, a colour bar with ticks, and "save figure".
  const patternFrame = new FigureFrame("stem-pattern-figure");
  const imageFrame = new FigureFrame("stem-image-figure");
  let patternFigure: Figure | null = null;
  let imageFigure: Figure | null = null;
  const framed = (frame: FigureFrame, stack: HTMLElement) =>
    el("div", { class: "figure-grid" }, frame.yAxis, stack, frame.bar, el("span", {}), frame.xAxis);
  root.append(
    facts,
    el("div", { class: "toolbar stem-built" }, shape, presets, binSelect, computeOn, decodePath, npy, png),
    el("div", { class: "toolbar stem-built", id: "stem-movies" }, "Movie: ", movieFormat, movieSweep, movieLine),
    el("div", { class: "stem-built" }, viewLine, computeNote, decodeReport.element, prepared.element, ladder, serverWork.element),
    el("div", { class: "stem-panels stem-built" },
      el("figure", { class: "stem-figure" }, framed(patternFrame, el("div", { class: "stem-stack" }, pattern, ring)),
        el("div", { class: "toolbar" }, patternOf, meanButton, patternDisplay.element), patternCaption, readout,
        saveFigureLinks("stem-pattern-save", `${acq.name}-pattern`, () => patternFigure)),
      el("figure", { class: "stem-figure" }, framed(imageFrame, el("div", { class: "stem-image-stack" }, image, tools.overlay)),
        el("div", { class: "toolbar" }, imageDisplay.element, tools.select), imageCaption, hover, tools.plot.element,
        saveFigureLinks("stem-image-save", `${acq.name}-virtual-image`, () => imageFigure && { ...imageFigure, note: `${viewText}; ${imageCaption.textContent ?? ""}` }))),
    fields.element,
    ssb.element,
  );
  fields.element.classList.add("stem-built");
  ssb.element.classList.add("stem-built");

  // The pattern canvas shows the mean/max pattern or one position's frame, with the display choices and a scale bar.
  let shownPattern: { values: number[]; rows: number; cols: number; what: string } | null = null;
  const redrawPattern = () => {
    if (!shownPattern) return;
    const d = patternDisplay.get();
    const used = drawGrid(pattern, shownPattern.values, shownPattern.rows, shownPattern.cols, d);
    showLimits("stem-pattern", used);
    const perCanvasPx = 1 / editor.scale;  // detector pixels per canvas pixel
    st.scaleBar = mradPerPx ? drawScaleBar(pattern, perCanvasPx * mradPerPx, "mrad") : drawScaleBar(pattern, perCanvasPx, "px");
    pattern.dataset.scaleBar = st.scaleBar;
    patternCaption.textContent = `${shownPattern.what} (${d.transform === "log" ? "log1p" : "linear"}, ${d.colormap})`;
    const what = pattern.dataset.showing?.startsWith("frame") || shownPattern.what.startsWith("pattern at") ? "counts" : st.patternOf === "max" ? "max counts" : "mean counts";
    patternFigure = { title: `${acq.name}: ${shownPattern.what.split(" — ")[0].split(", ")[0]}`, image: pattern,
      ...detectorAxes(shownPattern.rows, shownPattern.cols, st.center, mradPerPx), colourBar: colourBarOf(d, used, what), note: shownPattern.what };
    patternFrame.draw(patternFigure, pattern.clientWidth || pattern.width, pattern.clientHeight || pattern.height);
  };
  // The virtual image with a real-space scale bar (nmPerStep, above; none when the step is unknown).
  const redrawImage = () => {
    if (!st.image) return;
    const d = imageDisplay.get();
    const used = drawGrid(image, st.image.values, st.image.shape[0], st.image.shape[1], d);
    showLimits("stem-image", used);
    st.imageScaleBar = nmPerStep ? drawScaleBar(image, (nmPerStep * st.image.shape[1]) / image.width, "nm") : "";
    image.dataset.scaleBar = st.imageScaleBar;
    const det = editor.det;
    const detector = det.shape === "rectangle" ? "rectangle detector" : `${det.shape} ${det.inner.toFixed(2)}–${det.outer.toFixed(2)} px${mradPerPx ? ` (${(det.inner * mradPerPx).toFixed(1)}–${(det.outer * mradPerPx).toFixed(1)} mrad)` : ""}`;
    imageFigure = { title: `${acq.name}: virtual image, ${detector}`, image, ...scanAxes(st.image.shape[0], st.image.shape[1], nmPerStep),
      colourBar: colourBarOf(d, used, "summed counts") };
    imageFrame.draw(imageFigure, image.clientWidth || image.width, image.clientHeight || image.height);
  };

  // The virtual image of the current detector: one request in flight; a newer detector waits for it, then runs.
  const refreshImage = latestWins(async () => {
    const params = editor.params();
    st.requests++;
    const t0 = performance.now();
    const cached = prepared.used ? cachedPreset : null;
    const onPage = !cached && gpu !== null && st.computeOn === "page";
    const p: Product = cached ? await prepared.product(cached) : onPage ? await pageImage(gpu as GpuMaskedSums)
      : await serverWork.run("virtual image on the server", (named) => getJson<Product>(`${path}/products/mask`, { ...params, ...viewParams, ...named }));
    if (!cached && !onPage) st.computed.push("image on server");  // the page's own: pageImage
    st.image = p;
    image.dataset.path = cached ? "cache" : onPage ? "page" : "server";
    const height = String(Math.max(1, Math.round((IMAGE_PX * p.shape[0]) / p.shape[1])));  // the scan's aspect
    if (image.getAttribute("height") !== height) image.setAttribute("height", height);
    redrawImage();
    st.imageMs.push(performance.now() - t0);
    shown.imageDrawn(cached ? "from the prepared cache" : onPage ? "computed on the page's adapter" : "computed on the server");
    const served = onPage || cached ? null : serverPath(p);
    image.dataset.serverPath = served?.path ?? "";
    imageCaption.textContent = `virtual image, ${p.detector?.pixels ?? "?"} detector pixels — ` +
      (cached ? `${cached.toUpperCase()} from ${prepared.identity()}, as stored (not recomputed)`
        : onPage ? `computed on the page's adapter: ${gpu?.adapter}` : `${placementText(p.placement)}, ${served?.text}`);
    image.dataset.inner = params.inner ?? "";
    image.dataset.outer = params.outer ?? "";
    image.dataset.rect = params.rect ?? "";
    npy.href = cached ? apiUrl(`${path}/prepared/${cached}`, { ...viewParams, format: "npy" }) : apiUrl(`${path}/products/mask`, { ...params, ...viewParams, format: "npy" });
    updateMovies();
  }, image, "virtual image");

  // The page path: the block uploaded once to the adapter, each detector one dispatch.
  const pageImage = async (g: GpuMaskedSums): Promise<Product> => {
    st.computed.push("image on page");
    const pixels = editor.pixels();
    if (!pixels.length) throw new Error(`virtual detector: no pixel of the ${detRows}x${detCols} detector lies inside ${JSON.stringify(editor.params())}`);
    const r = await g.image(pixels);
    return { shape: [g.block.shape[0], g.block.shape[1]], dtype: "<u8", values: r.values, placement: [], detector: { inner_px: st.inner, outer_px: st.outer, pixels: pixels.length } };
  };
  // The page path for this view: the full block (fetched once per acquisition, kept resident), binned on the
  // adapter when the view bins it, or a block of the view from the server when the full one does not fit. A block
  // the adapter cannot hold is refused with the ladder's steps, offered as buttons; the server computes meanwhile.
  const openPagePath = async () => {
    let how = "";
    const refusal = pageKernelRefusal(acq.dtype);
    if (refusal) st.pageRefused = refusal;
    else try {
      const full = resident.get(path);
      if (full && !r) {
        decodeReport.reused();
        if (b === 1) (gpu = full), (how = "the decoded block was uploaded once");
        else {
          const binned = await full.binned(b);
          if (typeof binned === "string") st.pageRefused = binned;
          else (gpu = binned), (how = `the resident block was binned ${b} × ${b} on the adapter (WGSL)`);
        }
      } else if (!("gpu" in navigator)) {
        st.pageRefused = "no WebGPU in this browser";
      } else {
        let early: BlockRefused | null = null;
        const accept = (v: { shape: StemBlock["shape"]; dtype: StemBlock["dtype"]; bytes: number }) => !(early = blockRefusal(v, pageBlockLimit()));
        let block: StemBlock | null = null;
        let shared: PageDevice | null = null;
        let fallback = "";
        // The whole acquisition's chunks decoded on the adapter (decode.ts), unless the block path was chosen, the
        // view is a crop or a server-side bin, or the frames are not stored as chunks the page decodes.
        if (decodeChoice() === "chunks" && !acq.stored_chunks) fallback = "the server does not serve this acquisition's frames as chunks the page decodes (not bitshuffle+LZ4 or unfiltered HDF5)";
        else if (decodeChoice() === "chunks" && !r && b === 1) {
          try {
            shared = await PageDevice.request();
            const signal = shown.blockSignal();
            const got = await decodeBlockOnPage(path, shared.device, [scan[0], scan[1], detRows, detCols], acq.dtype as StemBlock["dtype"],
              { accept, signal, onProgress: (p) => shown.chunks(p) });
            if (got) {
              block = got.block;
              decodeReport.report(got.report, shared.name);
            }
          } catch (e) {
            if (!(e instanceof ChunkRefused && e.fallback)) {
              decodeReport.refused(e instanceof Error ? e.message : String(e));
              throw e;
            }
            fallback = e.message;
          }
        }
        if (!block && !early && (decodeChoice() === "block" || fallback || r || b > 1)) {
          // The block in bands with their progress and a Cancel; refused before the download when the page cannot hold it.
          const rowBytes = scan[1] * detRows * detCols * (b > 1 ? 4 : WIDTH[acq.dtype as keyof typeof WIDTH] ?? 4);
          const t0 = performance.now();
          block = await fetchBlock(path, viewParams, { scanRows: scan[0], rowBytes, signal: shown.blockSignal(), onProgress: (p) => shown.block(p), accept });
          if (block) decodeReport.block(block.words.byteLength, performance.now() - t0, fallback);
        }
        const opened = block ? await GpuMaskedSums.open(block, shared ?? undefined) : (early as BlockRefused | null) ?? new BlockRefused("the block's download stopped");
        if (opened instanceof BlockRefused) {
          st.pageRefused = opened.reason;
          for (const step of opened.steps) {
            const button = el("button", { type: "button", id: `stem-ladder-${step.id}` }, `Use ${step.label}`);
            button.addEventListener("click", () => void buildPage(root, path, acq, step.view).catch((e) => showError(e, "view")));
            ladder.append(button);
          }
        } else {
          gpu = opened;
          // The block the page computes from, for the e2e test's byte comparison with …/block (a reference, no copy).
          (window as unknown as { tmStemPageBlock: unknown }).tmStemPageBlock = { path, decode: decodeReport.path, block: opened.block };
          if (!r && b === 1) resident.set(path, opened);
          how = decodeReport.path === "chunks" ? "the stored chunks were decoded on the adapter (WGSL)"
            : `the decoded block${r || b > 1 ? " of this view, made on the server," : ""} was uploaded once`;
        }
      }
      if (gpu) st.pageRefused = "";
    } catch (e) {
      st.pageRefused = e instanceof Error ? e.message : String(e);
    }
    st.computeOn = gpu ? "page" : "server";
    computeOn.value = st.computeOn;
    (computeOn.querySelector("option[value=page]") as HTMLOptionElement).disabled = !gpu;
    computeNote.textContent = gpu
      ? `virtual images, patterns and CoM sums on the page's adapter (${gpu.adapter}): ${how} (${(gpu.block.words.byteLength / 2 ** 20).toFixed(1)} MiB` +
        `${gpu.chunkCount > 1 ? ` in ${gpu.chunkCount} device buffers, each within one storage binding` : ""})`
      : `virtual images on the server, from its resident copy at full resolution when it holds one (the caption under the image says which path ran): the page cannot (${st.pageRefused})`;
    computeNote.dataset.path = gpu ? "page" : "server";
    shown.blockEnded(gpu !== null);
  };
  computeOn.addEventListener("change", () => {
    st.computeOn = computeOn.value === "page" && gpu ? "page" : "server";
    fields.state.com = null;  // recomputed where the choice says
    void refreshImage();
    void showPattern();
  });
  shape.addEventListener("change", () => {
    cachedPreset = null;
    editor.setShape(shape.value as DetectorShape);
    syncDetector();
    void refreshImage();
  });

  // The mean and max patterns: on the page's adapter when it holds the block (one pass for both), else the server's.
  let pagePatterns: { mean: number[]; max: number[] } | null = null;
  // One computation at a time, the latest choice last (a slow server pattern must not overwrite a newer page one).
  const showPattern = latestWins(async () => {
    const max = patternOf.value === "max";
    st.patternOf = max ? "max" : "mean";
    let p: Product;
    let where: string;
    let from: "cache" | "page" | "server";
    if (prepared.used) {
      p = await prepared.product("mean-dp", max ? { max: "1" } : {});
      where = `from ${prepared.identity()}, as stored (not recomputed)`;
      from = "cache";
    } else if (gpu && st.computeOn === "page") {
      if (!pagePatterns) st.computed.push("patterns on page");
      pagePatterns ??= await gpu.patterns();
      p = { shape: [detRows, detCols], dtype: max ? "<u4" : "<f8", values: max ? pagePatterns.max : pagePatterns.mean, placement: [] };
      where = `computed on the page's adapter: ${gpu.adapter}`;
      from = "page";
    } else {
      st.computed.push("pattern on server");
      p = await serverWork.run(`${max ? "max" : "mean"} pattern on the server`, (named) =>
        getJson<Product>(`${path}/products/mean-dp`, { ...(max ? { max: "1" } : {}), ...viewParams, ...named }));
      where = placementText(p.placement);
      from = "server";
    }
    st.pattern = p;
    pattern.dataset.path = from;
    shownPattern = { values: p.values, rows: p.shape[0], cols: p.shape[1], what: `${st.patternOf} diffraction pattern — ${where}` };
    redrawPattern();
    pattern.dataset.showing = st.patternOf;
  }, pattern, "pattern");
  meanButton.addEventListener("click", () => void showPattern());
  patternOf.addEventListener("change", () => void showPattern());

  for (const name of ["bf", "abf", "adf", "haadf", "df"]) {
    const b = el("button", { type: "button", id: `stem-preset-${name}` }, name.toUpperCase());
    b.addEventListener("click", async () => {
      try {
        const cachedDetector = prepared.used ? prepared.preset(name) : null;
        if (cachedDetector) {  // the preset's radii and image as prepared: nothing computed
          shape.value = "annulus";
          editor.setShape("annulus");
          editor.setAnnulus(cachedDetector.inner, Number.isFinite(cachedDetector.outer) ? cachedDetector.outer : Math.hypot(detRows, detCols));
          syncDetector();
          cachedPreset = name;
          await refreshImage();
          return;
        }
        const p = await getJson<Product>(`${path}/products/${name}`, viewParams);
        const outer = Number(p.detector?.outer_px);
        shape.value = "annulus";
        editor.setShape("annulus");
        editor.setAnnulus(Number(p.detector?.inner_px), Number.isFinite(outer) ? outer : Math.hypot(detRows, detCols));
        syncDetector();
        await refreshImage();
      } catch (e) {
        showError(e, `${name} preset`);
      }
    });
    presets.append(b);
  }

  // Hovering the virtual image shows that position's pattern (from the resident block when the page holds it, else
  // decoded on the server, one request in flight); clicking keeps it (st.frame).
  const positionAt = (ev: MouseEvent): [number, number] | null => {
    if (!st.image) return null;
    const r = image.getBoundingClientRect();
    const [rows, cols] = st.image.shape;
    const row = Math.floor(((ev.clientY - r.top) / r.height) * rows);
    const col = Math.floor(((ev.clientX - r.left) / r.width) * cols);
    return row >= 0 && col >= 0 && row < rows && col < cols ? [row, col] : null;
  };
  let frameInFlight = false;
  const showFrame = async (row: number, col: number, keep: boolean) => {
    const value = st.image ? st.image.values[row * st.image.shape[1] + col] : NaN;
    hover.textContent = `scan (${row}, ${col}): ${value}`;
    st.hover = [row, col];
    let values: number[];
    let where: string;
    if (gpu) {
      values = blockFrame(gpu.block, row, col);
      where = "from the block resident on the page";
    } else {
      if (frameInFlight && !keep) return;
      frameInFlight = true;
      try {
        values = (await getJson<{ values: number[] }>(`${path}/frame`, { row: row + (r ? r[0] : 0), col: col + (r ? r[2] : 0), ...(b > 1 ? { detector_bin: String(b) } : {}) })).values;
      } finally {
        frameInFlight = false;
      }
      where = "decoded on the server";
    }
    if (keep) {
      st.frame = { position: [row, col], values };
      updateMovies();
    }
    shownPattern = { values, rows: detRows, cols: detCols, what: `pattern at scan position (${row}, ${col}), ${where}` };
    redrawPattern();
    pattern.dataset.showing = `frame ${row},${col}`;
  };
  image.addEventListener("mousemove", (ev) => {
    if (tools.mode() !== "hover") return;
    const at = positionAt(ev);
    if (at && (!st.hover || at[0] !== st.hover[0] || at[1] !== st.hover[1])) void showFrame(at[0], at[1], false).catch((e) => showError(e, "diffraction pattern"));
  });
  image.addEventListener("click", (ev) => {
    if (tools.mode() !== "hover") return;
    const at = positionAt(ev);
    if (at) void showFrame(at[0], at[1], true).catch((e) => showError(e, "diffraction pattern"));
  });
  const displayQuery = (d: { transform: string; colormap: string; limits: unknown }): Record<string, string> => ({
    transform: d.transform, colormap: d.colormap,
    ...(Array.isArray(d.limits) ? { lo: String(d.limits[0]), hi: String(d.limits[1]) } : {}),
  });
  const updateMovies = () => {
    const format = movieFormat.value;
    const bin = b > 1 ? { detector_bin: String(b) } : {};
    const det = editor.det;
    if (det.shape === "rectangle") {
      movieSweep.removeAttribute("href");
      movieSweep.title = "a radius sweep needs an annulus or a disk";
    } else {
      const to = Math.max(det.outer, det.inner + 1);
      const from = det.inner + (to - det.inner) / 16;  // the first frame one step wide, the last the current detector
      movieSweep.href = apiUrl(`${path}/movie`, { sweep: "outer", inner: det.inner.toFixed(3), from: from.toFixed(3), to: to.toFixed(3), steps: "16",
        center: `${st.center[0]},${st.center[1]}`, format, ...bin, ...displayQuery(imageDisplay.get()) });
      movieSweep.title = "";
    }
    const row = (st.frame ? st.frame.position[0] : Math.floor(scan[0] / 2)) + (r ? r[0] : 0);
    const [c0, c1] = r ? [r[2], r[3] - 1] : [0, scan[1] - 1];
    movieLine.href = apiUrl(`${path}/movie`, { along: `${row},${c0}:${row},${c1}`, format, ...bin, ...displayQuery(patternDisplay.get()) });
    movieLine.textContent = `patterns along scan row ${row}`;
    for (const a of [movieSweep, movieLine]) a.setAttribute("download", `${acq.name}-${a === movieSweep ? "sweep" : "row"}.${format}`);
  };
  for (const target of [movieFormat, movieSweep, movieLine]) target.addEventListener(target === movieFormat ? "change" : "pointerdown", updateMovies);
  // A click fetches the movie as a named request, so its progress (each pass's frames) and Cancel show on the
  // server-progress line, then saves it under the link's file name; the link itself stays the movie's URL.
  for (const link of [movieSweep, movieLine])
    link.addEventListener("click", (ev) => {
      if (ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey || !link.getAttribute("href")) return;
      ev.preventDefault();
      updateMovies();
      const url = new URL(link.href);
      void serverWork.run(`movie (${link.textContent}) on the server`, async (named) => {
        for (const [k, v] of Object.entries(named)) url.searchParams.set(k, v);
        const res = await fetch(url.href);
        if (!res.ok) throw new ApiError(res.status, `${res.status}: ${((await res.json().catch(() => ({}))) as { error?: string }).error ?? res.statusText}`, url.href);
        const save = el("a", { href: URL.createObjectURL(await res.blob()), download: link.getAttribute("download") ?? "movie" });
        save.click();
        setTimeout(() => URL.revokeObjectURL(save.href), 60_000);
      }).catch((e) => { if (!wasCancelled(e)) showError(e, "movie"); });
    });
  png.addEventListener("click", () => {
    png.href = image.toDataURL("image/png");
  });

  editor.draw();
  syncDetector();
  // The first pixels come from the server (its resident copy, else one decode) while the block for the page's
  // adapter downloads beside them; once the page holds the block it computes, and redraws from its own numbers.
  // #stem-compute-on's data-ready says the page path is settled and its images drawn.
  shown.stage(prepared.used ? `reading the ${st.patternOf} pattern and the BF image from the prepared product cache`
    : `computing the ${st.patternOf} pattern and the first virtual image on the server`);
  const pagePathOpened = openPagePath();
  await showPattern();
  await refreshImage();
  await pagePathOpened;
  if (gpu) {  // what the cache drew stays: the adapter computes only what the cache does not hold
    if (!prepared.used) await showPattern();
    if (!(prepared.used && cachedPreset)) await refreshImage();
  }
  computeOn.dataset.ready = "1";
  await fields.refresh();
  if (fields.state.found)
    (facts.querySelector("#stem-scan-rotation td") as HTMLElement).textContent =
      `not recorded in the file; DPC rotation found ${fields.state.found.angleDeg.toFixed(2)}°${fields.state.found.transpose ? " (transposed)" : ""} (minimum curl of the CoM field)`;
}

/** Closes a readiness stream when the page changes (the server keeps few streams: one left open would hold one). */
function stopOnLeaving(stop: () => void): void {
  window.addEventListener("hashchange", stop, { once: true });
}

/** The most inventory lines that follow readiness events at once: the server keeps at most 4 readiness streams, and
 *  an acquisition's own page needs one. */
const kInventoryStreams = 2;

/** The acquisitions the server serves, as links to their pages (empty when there are none). The lines of those
 *  still being written follow their readiness events (the first kInventoryStreams; the others say to reload). */
export async function acquisitionList(): Promise<HTMLElement> {
  const box = el("div", { class: "acquisitions-box", id: "acquisitions" });
  const list = (await getJson<{ acquisitions: Acquisition[] }>("/api/acquisitions")).acquisitions;
  if (!list.length) return box;
  const ul = el("ul", {});
  let streams = 0;
  for (const a of list) {
    const status = el("span", { class: "readiness", "data-status": a.readiness.status });
    const show = (r: Acquisition["readiness"], note = "") => {
      status.textContent = `${r.status}${r.status === "complete" ? "" : ` (${r.frames_present} of ${r.frames_expected ?? "?"} frames)`}${note}`;
      status.dataset.status = r.status;
    };
    show(a.readiness);
    if (a.readiness.status !== "complete") {
      if (streams++ < kInventoryStreams) {
        stopOnLeaving(followReadiness(a.id, (summary) => show(summary.readiness)));
      } else show(a.readiness, ", reload to update");
    }
    ul.append(el("li", { "data-acquisition": a.id }, el("a", { href: `#/acquisition/${encodeURIComponent(a.id)}` }, a.name), " — ", status,
      `, ${a.detector_shape.join(" × ")} ${a.dtype} frames`));
  }
  box.append(el("h2", {}, "4D-STEM acquisitions"), ul);
  return box;
}
