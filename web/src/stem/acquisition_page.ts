// The acquisition page (#/acquisition/{id}): a 4D-STEM acquisition's readiness and calibration (with sources),
// its mean diffraction pattern with an annular virtual detector drawn on it and edited by dragging, the virtual
// image of that detector (recomputed while dragging, one request in flight, the latest wins), the pattern at a
// clicked scan position, and exports (.npy as the CLI writes it, PNG of the canvas). Every number comes from the
// server (GET /api/acquisitions/…, docs/api.md), computed by the same domain calls as `tensormorph stem`, and
// each product says where it ran (its placement). With a WebGPU adapter whose limits hold the decoded block, the
// virtual images are computed on the page instead (stem/webgpu/masked_sums.ts: the block is uploaded once, the
// same numbers as the CLI's); "Compute on" switches between the page and the server, and says why the page
// cannot when it cannot.
import { apiUrl, getJson, type Placement } from "../api";
import { el, showError } from "../dom";
import { colormapTable } from "../webgpu/colormap_tables";
import { annulusPixels, fetchBlock, GpuMaskedSums } from "./webgpu/masked_sums";

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
  readiness: { status: string; frames_present: number; frames_expected: number | null; problems: string[] };
}

interface Calibration {
  energy: Sourced;
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
}

const PATTERN_PX = 320;
const IMAGE_PX = 320;

function sourcedText(s: Sourced | undefined, digits = 4): string {
  if (!s) return "—";
  if (s.value === undefined || s.value === null) return `unknown (${s.missing ?? "no source"})`;
  return `${Number(s.value.toPrecision(digits))} ${s.unit ?? ""} (${s.source ?? "?"})`;
}

/** Draws values (rows × cols) into a canvas of the given size with a colour map; log1p when `log`. */
function drawGrid(canvas: HTMLCanvasElement, values: number[], rows: number, cols: number, log: boolean, map = "viridis"): void {
  const off = new OffscreenCanvas(cols, rows);
  const ctx = off.getContext("2d");
  if (!ctx) return;
  const img = ctx.createImageData(cols, rows);
  const t = values.map((v) => (log ? Math.log1p(Math.max(0, v)) : v));
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of t)
    if (Number.isFinite(v)) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
  const table = colormapTable(map);
  for (let i = 0; i < t.length; i++) {
    const k = hi > lo && Number.isFinite(t[i]) ? Math.min(255, Math.max(0, Math.round(((t[i] - lo) / (hi - lo)) * 255))) : 0;
    img.data.set(table.subarray(4 * k, 4 * k + 4), 4 * i);
  }
  ctx.putImageData(img, 0, 0);
  const out = canvas.getContext("2d");
  if (!out) return;
  out.imageSmoothingEnabled = false;
  out.clearRect(0, 0, canvas.width, canvas.height);
  out.drawImage(off, 0, 0, canvas.width, canvas.height);
}

function placementText(p: Placement[]): string {
  if (!p.length) return "";
  const where = [...new Set(p.map((x) => `${x.op} on ${x.backend}`))];
  return `computed on the server: ${where.join(", ")}`;
}

export async function renderAcquisitionPage(root: HTMLElement, id: string): Promise<void> {
  const path = `/api/acquisitions/${encodeURIComponent(id)}`;
  const acq = await getJson<Acquisition>(path);
  document.title = `${acq.name} · Tensormorph`;
  const header = el("h2", {}, `4D-STEM: ${acq.name}`);
  const readiness = el("p", { class: "status", id: "stem-readiness" },
    `${acq.readiness.status}: ${acq.readiness.frames_present} of ${acq.readiness.frames_expected ?? "?"} frames` +
      (acq.readiness.problems.length ? ` — ${acq.readiness.problems.join("; ")}` : ""));
  root.replaceChildren(header, readiness);
  if (acq.readiness.status !== "complete") {
    root.append(el("p", { class: "notice" }, "Products are computed once every frame is present; reload when the acquisition is written."));
    return;
  }
  const cal = await getJson<Calibration & { placement: Placement[] }>(`${path}/calibration`);
  const [detRows, detCols] = acq.detector_shape;
  const scan = acq.scan_shape ?? [0, 0];
  const mradPerPx = cal.detector_angle_per_pixel?.value;
  const facts = el("table", { class: "facts", id: "stem-calibration" });
  const fact = (k: string, v: string) => facts.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
  fact("scan × detector", `${scan.join(" × ")} × ${detRows} × ${detCols} ${acq.dtype}`);
  fact("beam energy", sourcedText(cal.energy));
  fact("convergence semi-angle", sourcedText(cal.semiangle));
  fact("scan step", sourcedText(cal.scan_step));
  fact("detector angle per pixel", sourcedText(cal.detector_angle_per_pixel));
  fact("bright-field disk", `centre (${cal.disk.row.toFixed(2)}, ${cal.disk.col.toFixed(2)}), radius ${cal.disk.radius.toFixed(2)} px (${cal.disk.source})`);

  const st: StemState = {
    id, inner: 0, outer: cal.disk.radius, center: [cal.disk.row, cal.disk.col], image: null, pattern: null, frame: null, requests: 0,
    computeOn: "server", pageRefused: "not tried yet", imageMs: [],
  };
  (window as unknown as { tmStem: StemState }).tmStem = st;

  const pattern = el("canvas", { id: "stem-pattern", width: String(PATTERN_PX), height: String(PATTERN_PX), "data-state": "loading" });
  const ring = el("canvas", { id: "stem-ring", width: String(PATTERN_PX), height: String(PATTERN_PX) });
  const image = el("canvas", { id: "stem-image", width: String(IMAGE_PX), height: String(IMAGE_PX), "data-state": "loading" });
  const readout = el("p", { class: "status", id: "stem-detector" });
  const patternCaption = el("p", { class: "status", id: "stem-pattern-caption" }, "mean diffraction pattern (log)");
  const imageCaption = el("p", { class: "status", id: "stem-image-caption" });
  const presets = el("span", { class: "view-toggle", role: "group", "aria-label": "detector presets" });
  const npy = el("a", { id: "stem-export-npy", download: `${acq.name}-virtual.npy` }, "virtual image .npy");
  const png = el("a", { id: "stem-export-png", download: `${acq.name}-virtual.png`, href: "#" }, "virtual image PNG");
  const meanButton = el("button", { type: "button", id: "stem-show-mean" }, "Mean pattern");
  const computeOn = el("select", { id: "stem-compute-on", title: "where the virtual images are computed" },
    el("option", { value: "page" }, "Compute on: page adapter"), el("option", { value: "server" }, "Compute on: server"));
  const computeNote = el("p", { class: "status", id: "stem-compute-note" });
  root.append(
    facts,
    el("div", { class: "toolbar" }, presets, meanButton, computeOn, npy, png),
    computeNote,
    el("div", { class: "stem-panels" },
      el("figure", { class: "stem-figure" }, el("div", { class: "stem-stack" }, pattern, ring), patternCaption, readout),
      el("figure", { class: "stem-figure" }, image, imageCaption)),
  );

  const scale = PATTERN_PX / Math.max(detRows, detCols);
  const drawRing = () => {
    const ctx = ring.getContext("2d");
    if (!ctx) return;
    ctx.clearRect(0, 0, ring.width, ring.height);
    const [cy, cx] = [(st.center[0] + 0.5) * scale, (st.center[1] + 0.5) * scale];
    ctx.lineWidth = 2;
    for (const [r, colour] of [[st.inner, "#ff4d4d"], [st.outer, "#4dd2ff"]] as const) {
      ctx.strokeStyle = colour;
      ctx.beginPath();
      ctx.arc(cx, cy, Math.max(0, r * scale), 0, 2 * Math.PI);
      ctx.stroke();
    }
    const mrad = (px: number) => (mradPerPx ? ` (${(px * mradPerPx).toFixed(2)} mrad)` : "");
    readout.textContent = `annulus: inner ${st.inner.toFixed(2)} px${mrad(st.inner)}, outer ${st.outer.toFixed(2)} px${mrad(st.outer)}`;
    ring.dataset.inner = String(st.inner);
    ring.dataset.outer = String(st.outer);
  };

  // The virtual image of the current annulus: one request in flight; a newer annulus waits for it, then runs.
  let inFlight = false;
  let pending = false;
  const productParams = () => ({ inner: st.inner.toFixed(3), outer: st.outer.toFixed(3), center: `${st.center[0]},${st.center[1]}` });
  const refreshImage = async (): Promise<void> => {
    if (inFlight) {
      pending = true;
      return;
    }
    inFlight = true;
    image.dataset.state = "loading";
    try {
      do {
        pending = false;
        const params = productParams();
        st.requests++;
        const t0 = performance.now();
        const p = gpu && st.computeOn === "page" ? await pageImage(gpu, params) : await getJson<Product>(`${path}/products/mask`, params);
        st.image = p;
        image.dataset.path = gpu && st.computeOn === "page" ? "page" : "server";
        const height = String(Math.max(1, Math.round((IMAGE_PX * p.shape[0]) / p.shape[1])));  // the scan's aspect
        if (image.getAttribute("height") !== height) image.setAttribute("height", height);
        drawGrid(image, p.values, p.shape[0], p.shape[1], false, "gray");
        st.imageMs.push(performance.now() - t0);
        imageCaption.textContent = `virtual image, ${p.detector?.pixels ?? "?"} detector pixels — ` +
          (image.dataset.path === "page" ? `computed on the page's adapter: ${gpu?.adapter}` : placementText(p.placement));
        image.dataset.inner = params.inner;
        image.dataset.outer = params.outer;
        npy.href = apiUrl(`${path}/products/mask`, { ...params, format: "npy" });
      } while (pending);
      image.dataset.state = "ready";
    } catch (e) {
      image.dataset.state = "error";
      showError(e, "virtual image");
    } finally {
      inFlight = false;
    }
  };

  // The page path: the block uploaded once to the adapter, each annulus one dispatch.
  let gpu: GpuMaskedSums | null = null;
  const pageImage = async (g: GpuMaskedSums, params: { inner: string; outer: string }): Promise<Product> => {
    const pixels = annulusPixels(detRows, detCols, st.center[0], st.center[1], Number(params.inner), Number(params.outer));
    if (!pixels.length) throw new Error(`virtual detector: no pixel of the ${detRows}x${detCols} detector lies between radius ${params.inner} and ${params.outer}`);
    const r = await g.image(pixels);
    return { shape: [g.block.shape[0], g.block.shape[1]], dtype: "<u8", values: r.values, placement: [], detector: { inner_px: Number(params.inner), outer_px: Number(params.outer), pixels: pixels.length } };
  };
  const openPagePath = async () => {
    try {
      const opened = await GpuMaskedSums.open(await fetchBlock(path));
      if (typeof opened === "string") st.pageRefused = opened;
      else (gpu = opened), (st.pageRefused = "");
    } catch (e) {
      st.pageRefused = e instanceof Error ? e.message : String(e);
    }
    st.computeOn = gpu ? "page" : "server";
    computeOn.value = st.computeOn;
    (computeOn.querySelector("option[value=page]") as HTMLOptionElement).disabled = !gpu;
    computeNote.textContent = gpu
      ? `virtual images on the page's adapter (${gpu.adapter}): the decoded block (${(gpu.block.words.byteLength / 2 ** 20).toFixed(1)} MiB) was uploaded once`
      : `virtual images on the server: the page cannot (${st.pageRefused})`;
    computeOn.dataset.ready = "1";
  };
  computeOn.addEventListener("change", () => {
    st.computeOn = computeOn.value === "page" && gpu ? "page" : "server";
    void refreshImage();
  });

  const showMean = async () => {
    const p = st.pattern ?? (st.pattern = await getJson<Product>(`${path}/products/mean-dp`));
    drawGrid(pattern, p.values, p.shape[0], p.shape[1], true);
    patternCaption.textContent = `mean diffraction pattern (log) — ${placementText(p.placement)}`;
    pattern.dataset.state = "ready";
    pattern.dataset.showing = "mean";
  };
  meanButton.addEventListener("click", () => void showMean().catch((e) => showError(e, "mean pattern")));

  for (const name of ["bf", "abf", "adf", "haadf"]) {
    const b = el("button", { type: "button", id: `stem-preset-${name}` }, name.toUpperCase());
    b.addEventListener("click", async () => {
      try {
        const p = await getJson<Product>(`${path}/products/${name}`);
        const outer = Number(p.detector?.outer_px);
        st.inner = Number(p.detector?.inner_px);
        st.outer = Number.isFinite(outer) ? outer : Math.hypot(detRows, detCols);
        drawRing();
        await refreshImage();
      } catch (e) {
        showError(e, `${name} preset`);
      }
    });
    presets.append(b);
  }

  // Dragging on the pattern moves the nearer of the two radii to the pointer's distance from the disk centre.
  let dragging: "inner" | "outer" | null = null;
  const radiusAt = (ev: PointerEvent) => {
    const r = ring.getBoundingClientRect();
    const x = ((ev.clientX - r.left) / r.width) * ring.width / scale - 0.5;
    const y = ((ev.clientY - r.top) / r.height) * ring.height / scale - 0.5;
    return Math.hypot(y - st.center[0], x - st.center[1]);
  };
  ring.addEventListener("pointerdown", (ev) => {
    const d = radiusAt(ev);
    dragging = Math.abs(d - st.inner) < Math.abs(d - st.outer) ? "inner" : "outer";
    ring.setPointerCapture?.(ev.pointerId);
  });
  ring.addEventListener("pointermove", (ev) => {
    if (!dragging) return;
    const d = radiusAt(ev);
    if (dragging === "inner") st.inner = Math.min(d, st.outer);
    else st.outer = Math.max(d, st.inner);
    drawRing();
    void refreshImage();
  });
  const endDrag = () => {
    dragging = null;
  };
  ring.addEventListener("pointerup", endDrag);
  ring.addEventListener("pointercancel", endDrag);

  // Clicking the virtual image shows that scan position's pattern (decoded on the server).
  image.addEventListener("click", async (ev) => {
    if (!st.image) return;
    const r = image.getBoundingClientRect();
    const [rows, cols] = st.image.shape;
    const row = Math.min(rows - 1, Math.floor(((ev.clientY - r.top) / r.height) * rows));
    const col = Math.min(cols - 1, Math.floor(((ev.clientX - r.left) / r.width) * cols));
    try {
      const f = await getJson<{ shape: number[]; values: number[]; position: [number, number] }>(`${path}/frame`, { row, col });
      st.frame = { position: f.position, values: f.values };
      drawGrid(pattern, f.values, f.shape[0], f.shape[1], true);
      patternCaption.textContent = `pattern at scan position (${row}, ${col}) (log), decoded on the server`;
      pattern.dataset.showing = `frame ${row},${col}`;
    } catch (e) {
      showError(e, "diffraction pattern");
    }
  });
  png.addEventListener("click", () => {
    png.href = image.toDataURL("image/png");
  });

  drawRing();
  await showMean();
  await openPagePath();
  await refreshImage();
}

/** The acquisitions the server serves, as links to their pages (empty when there are none). */
export async function acquisitionList(): Promise<HTMLElement> {
  const box = el("div", { class: "acquisitions-box", id: "acquisitions" });
  const list = (await getJson<{ acquisitions: Acquisition[] }>("/api/acquisitions")).acquisitions;
  if (!list.length) return box;
  const ul = el("ul", {});
  for (const a of list)
    ul.append(el("li", {}, el("a", { href: `#/acquisition/${encodeURIComponent(a.id)}` }, a.name), ` — ${a.readiness.status}, ${a.detector_shape.join(" × ")} ${a.dtype} frames`));
  box.append(el("h2", {}, "4D-STEM acquisitions"), ul);
  return box;
}
