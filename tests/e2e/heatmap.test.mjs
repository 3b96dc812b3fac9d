// End-to-end test of the heatmap's colour paths (web/src/heatmap.ts, heatmap_tiles.ts, overlay.ts) in
// Debian's Chromium (headless, --enable-unsafe-webgpu: a SwiftShader adapter here), driven by playwright-core
// from web/'s node_modules. It writes and indexes the demo checkpoint, starts `tensormorph serve`, opens a
// tensor page and checks:
//   - the heatmap colours on the page (#heatmap data-colour-path "webgpu") and names the adapter, marking a
//     software adapter (SwiftShader) as such; the tensor page's render-placement box counts webgpu;
//   - for one level-L tile and the overview (mean, then envelope), the RGBA the page drew for its cells (the tile's bitmap,
//     window.tmHeatmap.pixels) equals byte for byte the cell pixels of the server's PNG of the same tile and
//     style (decoded in the page, one pixel sampled per cell block, the colour bar excluded);
//   - "Colour on: server" switches to the server's PNGs (data-colour-path "server", PNG requests);
//   - the tile-grid overlay draws lines (data-overlay-tile-lines > 0, a pixel on a boundary changes) and its
//     legend names the tensor's file;
//   - frame times during a scripted pan / zoom (120 requestAnimationFrame frames of wheel and drag events,
//     run once to cache the tiles, then measured) on both paths: median, 95th percentile and fps are
//     printed ("frame-time webgpu: median X ms, p95 Y ms (N frames, SwiftShader, headless)"); only "frames
//     were produced" is asserted;
//   - a screenshot build/e2e/heatmap.png that is not blank; a page without navigator.gpu is coloured by the
//     server and says why; no page errors.
//
// Environment: TM_BIN (default build/tensormorph), TM_E2E_OUT (default e2e/ beside TM_BIN), CHROMIUM (default
// /usr/lib/chromium/chromium or /usr/bin/chromium), TM_ALLOW_NO_WEBGPU=1 (accept a Chromium without a WebGPU
// adapter: the page checks are skipped, the server path measured). Exits 0 with "SKIPPED: no chromium" only
// when Chromium is not installed.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { FIXTURES, OUT_DIR, WEB_DIST, checker, chromiumOrSkip, demoCheckpoint, e2eSetup, e2eTeardown, getJson, launchBrowser, pngStats, runTest, startServer, stopServer, watchErrors } from "./harness.mjs";

const TENSOR = "model.layers.0.mlp.down_proj.weight";
const ALLOW_NO_WEBGPU = process.env.TM_ALLOW_NO_WEBGPU === "1";
const FRAMES = 120;

const chromiumPath = chromiumOrSkip();

let step = "setup";
const { log, check } = checker("[heatmap]", () => step);

/** The heatmap's dataset once it is ready (every visible tile drawn) on `path`, or throws. */
async function waitReady(page, what, path) {
  const snapshot = (path) => {
    const c = document.querySelector("#heatmap");
    if (!c || !["ready", "error"].includes(c.dataset.state) || (path && c.dataset.colourPath !== path)) return null;
    return { ...c.dataset, status: document.querySelector("#heatmap-status")?.textContent, error: document.querySelector("#error")?.textContent };
  };
  let state;
  try {
    state = await (await page.waitForFunction(snapshot, path, { timeout: 120_000 })).jsonValue();
  } catch (e) {
    const now = await page.evaluate(() => ({ ...document.querySelector("#heatmap")?.dataset, status: document.querySelector("#heatmap-status")?.textContent }));
    throw new Error(`heatmap not ready after ${what}: ${JSON.stringify(now)} (${e.message})`);
  }
  if (state.state !== "ready") throw new Error(`heatmap failed after ${what}: ${JSON.stringify(state)}`);
  return state;
}

/**
 * Compares one cached level tile of the page path with the server's PNG of the same tile and style: the
 * page's bitmap (one pixel per cell block) against the PNG sampled at each block's top-left pixel.
 */
async function compareTile(page, level, stat) {
  return page.evaluate(async ({ level, name, want }) => {
    const tiles = window.tmHeatmap.tiles().filter((t) => t.path === "webgpu" && t.level === level && t.key.split("|")[1] === want);
    if (!tiles.length) return { error: `no webgpu tile of level ${level} cached` };
    const t = tiles[0];
    // key: webgpu|stat|transform|colormap|slice|limits#level/x/y (heatmap.ts, limits.ts)
    const [style, where] = t.key.split("#");
    const [, stat, transform, colormap, slice, limits] = style.split("|");
    const [, x, y] = where.split("/").map(Number);
    // level -1: the overview (no level / x / y)
    const q = new URLSearchParams(level < 0 ? { stat, transform, colormap, slice } : { level, x, y, stat, transform, colormap, slice });
    if (limits !== "auto") q.set("limits", limits);
    const path = `/api/render/0/${encodeURIComponent(name)}.png`;
    const info = await (await fetch(`${path}?${q}&format=json`)).json();
    const png = await (await fetch(`${path}?${q}`)).blob();
    const bmp = await createImageBitmap(png, { premultiplyAlpha: "none", colorSpaceConversion: "none" });
    const c = new OffscreenCanvas(bmp.width, bmp.height);
    const ctx = c.getContext("2d");
    ctx.drawImage(bmp, 0, 0);
    const server = ctx.getImageData(0, 0, bmp.width, bmp.height).data;
    const mine = window.tmHeatmap.pixels(t.key);
    const [scaleX, scaleY] = info.image.scale;
    const blocks = info.cells[1] * (stat === "envelope" ? 2 : 1);
    const rows = info.cells[0];
    let mismatches = 0;
    let first = "";
    const colours = new Set();
    for (let r = 0; r < rows; r++)
      for (let b = 0; b < blocks; b++) {
        const s = 4 * (r * scaleY * bmp.width + b * scaleX);
        const m = 4 * (r * t.srcW + b);
        const sv = Array.from(server.slice(s, s + 4));
        const mv = mine.slice(m, m + 4);
        colours.add(mv.join(","));
        if (sv.some((v, i) => v !== mv[i])) {
          mismatches++;
          if (!first) first = `row ${r} block ${b}: page ${mv}, server ${sv}`;
        }
      }
    return { key: t.key, blocks, rows, srcW: t.srcW, srcH: t.srcH, scale: info.image.scale, width: bmp.width, mismatches, first, colours: colours.size };
  }, { level, name: TENSOR, want: stat });
}

/** Runs FRAMES animation frames of wheel / drag events on the canvas; returns the frame intervals (ms). */
async function panZoom(page) {
  return page.evaluate(async (frames) => {
    const c = document.querySelector("#heatmap");
    const r = c.getBoundingClientRect();
    const cx = r.left + r.width / 2;
    const cy = r.top + r.height / 2;
    const third = Math.floor(frames / 3);
    const stamps = [];
    const pointer = (type, x, y) =>
      c.dispatchEvent(new PointerEvent(type, { bubbles: true, cancelable: true, pointerId: 1, pointerType: "mouse", button: 0, buttons: type === "pointerup" ? 0 : 1, clientX: x, clientY: y, isPrimary: true }));
    await new Promise((done) => {
      let i = 0;
      const tick = (ts) => {
        stamps.push(ts);
        if (i < third) c.dispatchEvent(new WheelEvent("wheel", { bubbles: true, cancelable: true, deltaY: -40, clientX: cx, clientY: cy }));
        else if (i < 2 * third) {
          const k = i - third;
          if (k === 0) pointer("pointerdown", cx, cy);
          pointer("pointermove", cx + 4 * k, cy + 2 * k);
          if (k === third - 1) pointer("pointerup", cx + 4 * k, cy + 2 * k);
        } else c.dispatchEvent(new WheelEvent("wheel", { bubbles: true, cancelable: true, deltaY: 40, clientX: cx, clientY: cy }));
        if (++i <= frames) requestAnimationFrame(tick);
        else done();
      };
      requestAnimationFrame(tick);
    });
    const intervals = [];
    for (let k = 1; k < stamps.length; k++) intervals.push(stamps[k] - stamps[k - 1]);
    return intervals;
  }, FRAMES);
}

function quantile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/** Measures one path: the script once to cache its tiles, fit, then measured; prints the frame-time line. */
async function measure(page, path, adapterName) {
  await page.click("button[title='fit the tensor to the view']");
  await waitReady(page, `fit (${path})`, path);
  const cold = await panZoom(page); // warm-up: loads every tile the script visits
  await waitReady(page, `warm-up pan/zoom (${path})`, path);
  await page.click("button[title='fit the tensor to the view']");
  await waitReady(page, `fit (${path})`, path);
  const drawsBefore = (await page.evaluate(() => window.tmHeatmap.drawTimes())).length;
  const t0 = Date.now();
  const intervals = await panZoom(page);
  const wall = Date.now() - t0;
  const draws = (await page.evaluate(() => window.tmHeatmap.drawTimes())).slice(drawsBefore);
  check(intervals.length >= FRAMES && draws.length > 0, `${path}: frames were produced (${intervals.length} frame intervals, ${draws.length} heatmap draws)`);
  const s = [...intervals].sort((a, b) => a - b);
  const d = [...draws].sort((a, b) => a - b);
  const median = quantile(s, 0.5);
  const line =
    `frame-time ${path}: median ${median.toFixed(2)} ms, p95 ${quantile(s, 0.95).toFixed(2)} ms, ` +
    `${(1000 / median).toFixed(1)} fps (${intervals.length} frames in ${wall} ms, ${adapterName}, headless); ` +
    `heatmap draw median ${quantile(d, 0.5).toFixed(2)} ms, p95 ${quantile(d, 0.95).toFixed(2)} ms (${draws.length} draws)`;
  const c = [...cold].sort((a, b) => a - b);
  const coldLine =
    `frame-time ${path} (first pass, tiles loading): median ${quantile(c, 0.5).toFixed(2)} ms, p95 ${quantile(c, 0.95).toFixed(2)} ms, ` +
    `max ${c[c.length - 1].toFixed(2)} ms (${c.length} frames, ${adapterName}, headless)`;
  console.log(line);
  console.log(coldLine);
  await waitReady(page, `measured pan/zoom (${path})`, path);
  return [line, coldLine];
}

async function main() {
  const t0 = Date.now();
  const { chromium, tmp, env } = e2eSetup("heatmap", check);
  let server = null;
  let context = null;
  try {
    step = "demo checkpoint";
    const demo = demoCheckpoint(tmp, env);
    step = "serve";
    server = await startServer([demo, "--web-root", WEB_DIST], env);
    const base = server.url;
    log(`server at ${base}`);
    const detail = await getJson(base, `/api/tensors/0/${encodeURIComponent(TENSOR)}`);
    check(detail.pyramid && detail.pyramid.levels.length > 0, "the tensor has a pyramid");

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "chromium-profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    const requests = [];
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith("/api/")) requests.push(u.pathname + u.search);
    });
    await page.goto(`${base.split("?")[0].replace(/\/$/, "")}/#/tensor/0/${encodeURIComponent(TENSOR)}`);

    step = "page path";
    let state = await waitReady(page, "opening the tensor", null);
    // The index axes: every label stands where its element begins (canvas edge + (index - origin) × px per element),
    // indices ascending 1-2-5 multiples inside the tensor, on both axes; zooming in makes the step no larger.
    const axes = () => page.evaluate(() => {
      const c = document.querySelector("#heatmap"), b = c.getBoundingClientRect(), d = c.dataset;
      const read = (id, horizontal) => [...document.querySelectorAll(`#${id} .axis-label`)].map((l) => {
        const r = l.getBoundingClientRect();
        const index = Number(l.dataset.index);
        const want = horizontal ? b.left + (index - Number(d.ox)) * Number(d.sx) : b.top + (index - Number(d.oy)) * Number(d.sy);
        return { index, off: (horizontal ? r.left : r.top) - want };
      });
      return { x: read("heatmap-axis-x", true), y: read("heatmap-axis-y", false) };
    });
    const axesOk = (a, what) => {
      for (const [name, labels, count] of [["column", a.x, detail.pyramid.view.cols], ["row", a.y, detail.pyramid.view.rows]]) {
        const step = labels.length > 1 ? labels[1].index - labels[0].index : 1;
        const mantissa = step / 10 ** Math.floor(Math.log10(step));
        check(labels.length >= 2 && labels.every((l, i) => l.index >= 0 && l.index < count && Math.abs(l.off) <= 2 && (i === 0 || l.index - labels[i - 1].index === step)) &&
              [1, 2, 5].includes(Math.round(mantissa)),
          `${what}: ${labels.length} ${name} labels every ${step} (${labels.map((l) => l.index).join(", ")}), each within 2 px of its element's edge`);
      }
      return a;
    };
    const fittedAxes = axesOk(await axes(), "fitted");
    const adapter = await page.evaluate(() => window.tmDisplay?.adapter());
    const haveGpu = Boolean(adapter?.available);
    if (!haveGpu && !ALLOW_NO_WEBGPU) throw new Error(`Chromium offers no WebGPU adapter (${adapter?.reason}); set TM_ALLOW_NO_WEBGPU=1 to accept that`);
    let adapterName = "no adapter";
    if (haveGpu) {
      check(state.colourPath === "webgpu" && state.colourChoice === "auto", `the heatmap colours on the page (data-colour-path ${state.colourPath}, choice ${state.colourChoice})`);
      const label = await page.textContent("#colour-path");
      check(state.adapter === adapter.name && label.includes(adapter.label), `it names the adapter: data-adapter "${state.adapter}", "${label}"`);
      if (adapter.software) check(state.adapterSoftware === "true" && label.includes("software adapter"), "a software adapter is marked as such");
      adapterName = adapter.software ? `${adapter.name}` : adapter.name;
      check(requests.some((u) => u.startsWith("/api/cells/")) && !requests.some((u) => /\/api\/render\/.*\.png\?(?!.*format=json).*level=/.test(u)), "its tiles come from GET /api/cells (no tile PNG was fetched)");
      await page.waitForFunction(() => (document.querySelector("#render-placement")?.dataset.backends ?? "").split(",").includes("webgpu"), null, { timeout: 30_000 });
      check(true, "the tensor page's render placement counts display.colorize on webgpu");

      step = "byte-exact";
      // At the fitted zoom the overview alone may be the view (its cells as coarse as the level whose cells cover a
      // device pixel): zoom in until level tiles are drawn, compare, then fit again.
      for (let k = 0; state.source === "overview" && k < 4; k++) {
        await page.click("button[title='zoom in']");
        state = await waitReady(page, "zoom in", "webgpu");
      }
      check(state.source === "tiles", `level-${state.level} tiles are drawn (${state.sx} px per element)`);
      const zoomedAxes = axesOk(await axes(), "zoomed in");
      check(zoomedAxes.x[1].index - zoomedAxes.x[0].index <= fittedAxes.x[1].index - fittedAxes.x[0].index, "zooming in makes the column step no larger");
      for (const stat of ["mean", "envelope"]) {
        if (stat !== "mean") {
          await page.selectOption("#stat", stat);
          state = await waitReady(page, `stat ${stat}`, "webgpu");
        }
        const level = Number(state.level);
        const r = await compareTile(page, level, stat);
        check(!r.error, `a level-${level} tile coloured on the page is cached (${r.error ?? r.key})`);
        check(r.mismatches === 0 && r.rows * r.blocks > 0 && r.colours > 1,
          `${stat}: the page's RGBA for ${r.rows} × ${r.blocks} cell blocks (${r.colours} colours) equals the server PNG's cell pixels (scale ${r.scale}, ${r.width} px wide)${r.first ? "; first difference " + r.first : ""}`);
        const o = await compareTile(page, -1, stat);
        check(!o.error && o.mismatches === 0 && o.rows * o.blocks > 0,
          `${stat}: the overview's ${o.rows} × ${o.blocks} cell blocks equal the server's overview PNG${o.error ? ": " + o.error : ""}${o.first ? "; first difference " + o.first : ""}`);
      }
      await page.selectOption("#stat", "mean");
      state = await waitReady(page, "stat mean", "webgpu");
      await page.click("button[title='fit the tensor to the view']");
      state = await waitReady(page, "fit", "webgpu");
    } else log(`no WebGPU adapter (${adapter?.reason}); TM_ALLOW_NO_WEBGPU=1: the page path is not checked`);

    step = "server path";
    const before = requests.length;
    await page.selectOption("#colour-on", "server");
    state = await waitReady(page, "Colour on: server", "server");
    const pngs = requests.slice(before).filter((u) => /^\/api\/render\/.*\.png\?/.test(u) && !u.includes("format=json"));
    const tiles = await page.evaluate(() => window.tmHeatmap.tiles().filter((t) => t.key.startsWith("server|")).length);
    check(state.colourPath === "server" && pngs.length > 0 && tiles > 0, `"server" draws the server's PNGs (${pngs.length} PNG requests, ${tiles} images cached)`);
    check(/coloured by the server/.test(await page.textContent("#colour-path")), "the control says so");

    step = "overlay";
    const level = Number(state.level);
    const spanC = detail.pyramid.tile_size[1] * 2 ** level;
    const cols = detail.pyramid.view.cols;
    const rows = detail.pyramid.view.rows;
    check(spanC < cols, `level ${level} has more than one tile column (${spanC} of ${cols} columns)`);
    const at = { x: Math.round((spanC - Number(state.ox)) * Number(state.sx)), y: Math.round((rows / 2 - Number(state.oy)) * Number(state.sy)) };
    const pixel = (p) => page.evaluate(({ x, y }) => {
      const c = document.querySelector("#heatmap");
      const dpr = c.width / c.clientWidth;
      return Array.from(c.getContext("2d").getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data);
    }, p);
    const plain = await pixel(at);
    await page.check("#overlay-tiles");
    await page.waitForFunction(() => Number(document.querySelector("#heatmap").dataset.overlayTileLines) > 0, null, { timeout: 10_000 });
    state = await waitReady(page, "tile grid on", "server");
    const lined = await pixel(at);
    check(Number(state.overlayTileLines) > 0, `the tile grid draws ${state.overlayTileLines} lines`);
    check(plain.some((v, i) => v !== lined[i]), `a pixel on a tile boundary (${at.x}, ${at.y}) changes: ${plain} -> ${lined}`);
    check(state.overlayLegend.includes(detail.file), `the overlay legend names the file: "${state.overlayLegend}"`);
    check(state.overlayBlockLines === "0", "a dense tensor draws no quantization block lines");
    await page.uncheck("#overlay-tiles");
    state = await waitReady(page, "tile grid off", "server");
    check(state.overlayTileLines === "0", "unchecked, no grid lines are drawn");

    step = "custom limits";
    {
      const mark = requests.length;
      await page.selectOption("#limits", "custom");
      check(await page.isVisible("#custom-limits"), "choosing custom limits shows the low / high inputs");
      await page.fill("#limit-lo", "0.5");
      await page.fill("#limit-hi", "-0.5");
      await page.click("#limit-apply");
      check((await page.textContent("#limit-why")).includes("below"), "low above high is refused on the page");
      await page.fill("#limit-lo", "-0.015625");
      await page.fill("#limit-hi", "0.03125");
      await page.click("#limit-apply");
      await page.waitForFunction(() => document.querySelector(".legend-label")?.textContent !== "", null, { timeout: 30_000 });
      await waitReady(page, "custom limits", "server");
      const used = requests.slice(mark).filter((u) => /^\/api\/render\/.*\.png\?/.test(u) && !u.includes("format=json"));
      check(used.length > 0 && used.every((u) => decodeURIComponent(u).includes("limits=-0.015625,0.03125")),
        `every tile drawn after "apply" asks the server for exactly those limits (${used.length} PNG requests)`);
      // The colour bar's ticks between its ends: 1-2-5 multiples inside the limits, each drawn at its value's place
      const bar = () => page.evaluate(() => {
        const b = document.querySelector(".legend-bar canvas.legend").getBoundingClientRect();
        return [...document.querySelectorAll("#heatmap-legend-ticks .legend-tick")].map((t) => {
          const r = t.getBoundingClientRect();
          return { value: Number(t.dataset.value), position: Number(t.dataset.position), label: t.textContent, y: (r.top + r.bottom) / 2, top: b.top, height: b.height };
        });
      });
      const ticks = await bar();
      const [lo, hi] = [-0.015625, 0.03125];
      check(ticks.length >= 3 && ticks.every((t) => t.value > lo && t.value < hi && Math.abs(t.position - (t.value - lo) / (hi - lo)) < 1e-9 &&
                                               Math.abs(Math.round(t.value / 0.01) * 0.01 - t.value) < 1e-12 &&
                                               Math.abs(t.y - (t.top + (1 - t.position) * t.height)) <= 1.5),
        `the colour bar has ticks at multiples of 0.01 placed at their values (${ticks.map((t) => `${t.label}@${t.position.toFixed(3)}`).join(", ")})`);
      await page.selectOption("#limits", "robust");
      await waitReady(page, "robust limits again", "server");
      check(!(await page.isVisible("#custom-limits")), "back to robust, the inputs are hidden");
      await page.selectOption("#transform", "log");
      await waitReady(page, "log transform", "server");
      await page.waitForFunction(() => [...document.querySelectorAll("#heatmap-legend-ticks .legend-tick")].length > 0, null, { timeout: 30_000 });
      const logTicks = await bar();
      check(logTicks.every((t) => Math.abs(Math.log10(Math.abs(t.value)) - Math.round(Math.log10(Math.abs(t.value)))) < 1e-9) &&
            logTicks.every((t, i) => i === 0 || t.position > logTicks[i - 1].position),
        `under log the ticks are powers of ten, in order (${logTicks.map((t) => t.label).join(", ")})`);
      await page.selectOption("#transform", "linear");
      await waitReady(page, "linear again", "server");
    }

    step = "frame times";
    const lines = [];
    if (haveGpu) {
      await page.selectOption("#colour-on", "auto");
      await waitReady(page, "Colour on: auto", "webgpu");
      lines.push(...(await measure(page, "webgpu", adapterName)));
      await page.selectOption("#colour-on", "server");
      await waitReady(page, "Colour on: server", "server");
    }
    lines.push(...(await measure(page, "server", "server PNGs")));
    await page.selectOption("#colour-on", haveGpu ? "auto" : "server");
    await page.click("button[title='fit the tensor to the view']");
    await waitReady(page, "fit", haveGpu ? "webgpu" : "server");

    step = "screenshot";
    await page.check("#overlay-tiles");
    await waitReady(page, "tile grid on", null);
    const shotPath = join(OUT_DIR, "heatmap.png");
    const shot = await page.screenshot({ path: shotPath, fullPage: true });
    const stats = await pngStats(page, shot.toString("base64"));
    check(existsSync(shotPath) && stats.colours > 16, `the screenshot ${shotPath} is not blank (${stats.colours}+ colours)`);

    step = "no adapter";
    // A page without navigator.gpu: "auto" takes the server's PNGs and says why.
    const bare = await context.newPage();
    bare.on("pageerror", (e) => errors.push(String(e)));
    await bare.addInitScript(() => Object.defineProperty(Navigator.prototype, "gpu", { get: () => undefined, configurable: true }));
    await bare.goto(`${base.split("?")[0].replace(/\/$/, "")}/#/tensor/0/${encodeURIComponent(TENSOR)}`);
    const fb = await waitReady(bare, "opening without WebGPU", "server");
    const fbLabel = await bare.textContent("#colour-path");
    check(fb.colourPath === "server" && fb.adapter === "" && /webgpu: unavailable/.test(fbLabel), `without an adapter the heatmap is coloured by the server: "${fbLabel}"`);
    await bare.close();

    step = "quantization blocks (GGUF fixture)";
    // A Q4_0 tensor of llama.cpp's reference file: 32-element blocks along each row of 256 columns.
    const gguf = join(FIXTURES, "gguf", "tiny-mixed.gguf");
    if (!existsSync(gguf)) {
      log(`SKIPPED quantization-block overlay: ${gguf} is absent (../shared/fixtures)`);
    } else {
      const qServer = await startServer([gguf, "--web-root", WEB_DIST], env);
      try {
        const qName = "blk.0.attn_q.weight";
        const qDetail = await (await fetch(new URL(`/api/tensors/0/${encodeURIComponent(qName)}`, qServer.url))).json();
        check(qDetail.quantization?.stored_type === "Q4_0" && qDetail.pyramid, `${qName} is Q4_0 with a pyramid`);
        const q = await context.newPage();
        q.on("pageerror", (e) => errors.push(String(e)));
        await q.addInitScript(() => localStorage.setItem("tm.heatmap.colourOn", "server"));
        await q.goto(`${qServer.url.split("?")[0].replace(/\/$/, "")}/#/tensor/0/${encodeURIComponent(qName)}`);
        await waitReady(q, "opening the Q4_0 tensor", null);
        await q.waitForFunction(() => !document.querySelector("#overlay-blocks")?.disabled, null, { timeout: 30_000 });
        await q.check("#overlay-blocks");
        await q.waitForFunction(() => Number(document.querySelector("#heatmap").dataset.overlayBlockLines) > 0, null, { timeout: 30_000 });
        const qs = await waitReady(q, "block overlay on", null);
        const cols = qDetail.pyramid.view.cols;
        const visible = Math.floor((qs.ox < 0 ? cols : cols - Number(qs.ox)) / 32);
        check(Number(qs.overlayBlockLines) >= 1 && Number(qs.overlayBlockLines) <= cols / 32 + 1,
          `the Q4_0 tensor draws ${qs.overlayBlockLines} block boundaries (32-element blocks over ${cols} columns; about ${visible} in view)`);
        await q.close();
      } finally {
        await stopServer(qServer);
      }
    }

    step = "errors";
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
    for (const l of lines) console.log(l);
    console.log(`PASS: heatmap e2e (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 420000);
