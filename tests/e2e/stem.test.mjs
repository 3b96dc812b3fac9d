// End-to-end test of the 4D-STEM acquisition page (web/src/stem/acquisition_page.ts) in Debian's Chromium
// (headless, playwright-core from web/'s node_modules): writes a `stem demo` acquisition, serves it, opens the
// inventory (the acquisition is listed with its readiness) and the acquisition page, and checks:
//   - the calibration table shows the beam energy and the disk from GET /api/acquisitions/a0/calibration;
//   - the mean pattern and the virtual image are drawn (not blank); the image is computed on the page's WebGPU
//     adapter (SwiftShader here; TM_ALLOW_NO_WEBGPU=1 accepts a Chromium without one) from the block uploaded
//     once, and its numbers (window.tmStem) equal the CLI's `stem mask --inner X --outer Y` .npy for the annulus
//     the page shows; "Compute on: server" gives the same numbers and names its placement;
//   - dragging the outer ring on the pattern (pointer events) changes the annulus and the image, which again
//     equals the CLI's for the new radii; the read-out gives px and mrad;
//   - a preset button (ADF) sets the annulus the server's preset uses;
//   - clicking the virtual image shows that scan position's pattern, equal to `stem export --frame R,C`;
//   - with the adapter's limit lowered below the block (localStorage tm.stem.maxBlockBytes) the page refuses the
//     block naming what would fit (the ladder), says the server computes the images, and they equal the CLI's;
//   - no page errors; screenshot build/e2e/stem.png (not blank).
// Image times while dragging are logged (a smoke figure on SwiftShader), not asserted.
//
// Environment: TM_BIN (default build/tensormorph), TM_E2E_OUT (default e2e/ beside TM_BIN), CHROMIUM (default
// /usr/lib/chromium/chromium or /usr/bin/chromium). Exits 0 with "SKIPPED: no chromium" only when Chromium is
// not installed.
import { cpSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { OUT_DIR, WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, getJson, launchBrowser, pngStats, readNpy, runTest, sameValues, startServer, tm, watchErrors } from "./harness.mjs";

const chromiumPath = chromiumOrSkip();
const ALLOW_NO_WEBGPU = process.env.TM_ALLOW_NO_WEBGPU === "1";
let step = "setup";
const { log, check } = checker("[e2e stem]", () => step);

async function main() {
  const { chromium, tmp, env } = e2eSetup("stem", check);
  let server = null;
  let context = null;
  try {
    step = "acquisition";
    const acq = join(tmp, "stem");
    tm(["stem", "demo", "--out", acq, "--scan", "12,10", "--detector", "48", "--files", "2"], env);
    const master = join(acq, "demo_master.h5");
    // A copy still being written: its second data file appears later (moved in during the test).
    const partial = join(tmp, "partial");
    cpSync(acq, partial, { recursive: true });
    const later = join(tmp, "later_data_000002.h5");
    renameSync(join(partial, "demo_data_000002.h5"), later);
    server = await startServer([master, join(partial, "demo_master.h5"), "--web-root", WEB_DIST], env);
    const base = server.url;
    const cliMask = (inner, outer) => {
      const out = join(tmp, `mask-${inner}-${outer}.npy`);
      tm(["stem", "mask", master, "--inner", inner, "--outer", outer, "-o", out], env);
      return readNpy(out);
    };

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    // This test follows the decoded block's bands (GET …/block); the chunks decoded on the page are stem_decode.test.mjs's.
    await page.addInitScript(() => localStorage.setItem("tm.stem.decode", "block"));
    await page.setViewportSize({ width: 1100, height: 900 });

    step = "inventory";
    await page.goto(base);
    await page.locator("#acquisitions a").first().waitFor({ timeout: 60_000 });
    const listed = await page.locator("#acquisitions li").first().textContent();
    check(listed.includes("demo_master.h5") && listed.includes("complete"), `the inventory lists the acquisition: "${listed}"`);

    step = "acquisition page";
    await page.locator("#acquisitions a").first().click();
    await page.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
    const cal = await getJson(base, "/api/acquisitions/a0/calibration");
    const facts = await page.locator("#stem-calibration").textContent();
    check(facts.includes("300000") && facts.includes(cal.disk.source), "the calibration table shows the energy and the disk's source");
    const mean = await pngStats(page, (await page.locator("#stem-pattern").screenshot()).toString("base64"));
    check(mean.colours > 8, `the mean pattern is drawn (${mean.colours} colours)`);

    const shown = async () => page.evaluate(() => ({ inner: window.tmStem.inner, outer: window.tmStem.outer, values: window.tmStem.image.values, requests: window.tmStem.requests, inner_q: document.querySelector("#stem-image").dataset.inner, outer_q: document.querySelector("#stem-image").dataset.outer }));
    const path = await page.evaluate(() => document.querySelector("#stem-image").dataset.path);
    const note = await page.locator("#stem-compute-note").textContent();
    if (ALLOW_NO_WEBGPU && path !== "page") log(`no WebGPU adapter (${note}): the page path is not checked`);
    else check(path === "page", `the virtual image is computed on the page's adapter: "${note}"`);
    // The progress line: in the document before the page's first request, each band of the block, then the time to the first image.
    const opening = await page.evaluate(() => window.tmStemOpen);
    check(opening.shownAt - opening.openedAt < 300, `the progress line appears ${(opening.shownAt - opening.openedAt).toFixed(1)} ms after opening (within 300 ms)`);
    if (path === "page") {
      const bands = new Set(opening.steps.map((x) => /band (\d+) of \d+ decoding on the server/.exec(x.text)?.[1]).filter(Boolean)).size;
      check(bands >= 4 && opening.steps.some((x) => /decoded block received: 0\.5 of 0\.5 MiB in \d+ bands/.test(x.text)),
        `it shows the block's ${bands} bands and bytes: ${JSON.stringify(opening.steps.map((x) => x.text).slice(-4))}`);
    }
    const openedLine = await page.locator("#stem-progress").textContent();
    check(/^opened: first virtual image \d+\.\d\d s after opening/.test(openedLine) && opening.firstImageAt > opening.shownAt, `and then the time to the first image: "${openedLine}"`);
    step = "figures with their numbers";
    // Axes in mrad (from the disk's centre) and nm, colour bars whose end labels are the drawn range, and "save
    // figure" writing an SVG with the same ticks and a PNG.
    const fig = await page.evaluate(() => {
      const part = (id) => { const c = document.getElementById(id); return { ticks: c.dataset.ticks.split("|"), title: c.title, hidden: c.hidden }; };
      const href = (id) => { const a = document.getElementById(id); a.dispatchEvent(new PointerEvent("pointerdown")); return a.href; };
      return { px: part("stem-pattern-figure-x-axis"), pbar: part("stem-pattern-figure-colour-bar"), ix: part("stem-image-figure-x-axis"),
        iy: part("stem-image-figure-y-axis"), ibar: part("stem-image-figure-colour-bar"), values: window.tmStem.image.values,
        svg: decodeURIComponent(href("stem-image-save-svg").replace(/^data:image\/svg\+xml;charset=utf-8,/, "")), png: href("stem-image-save-png") };
    });
    check(/mrad from the disk's centre/.test(fig.px.title) && fig.px.ticks.includes("0") && fig.px.ticks.some((t) => Number(t) < 0),
      `the pattern's x axis is in mrad from the disk's centre: ${fig.px.ticks.join(", ")}`);
    check(/scan x \(nm\)/.test(fig.ix.title) && /scan y \(nm\)/.test(fig.iy.title) && fig.ix.ticks[0] === "0" && fig.ix.ticks.length >= 3,
      `the virtual image's axes are in nm: x ${fig.ix.ticks.join(", ")}; y ${fig.iy.ticks.join(", ")}`);
    const lo = Math.min(...fig.values), hi = Math.max(...fig.values);
    check(fig.ibar.ticks[0] === String(lo) && fig.ibar.ticks[fig.ibar.ticks.length - 1] === String(hi) && fig.ibar.ticks.length >= 3 && /summed counts/.test(fig.ibar.title),
      `its colour bar runs from the image's min ${lo} to its max ${hi} with ticks: ${fig.ibar.ticks.join(", ")}`);
    check(/counts \(log1p\)/.test(fig.pbar.title) && fig.pbar.ticks.length >= 3, `the pattern's colour bar says log1p: ${fig.pbar.title}`);
    const svgTicks = [...fig.svg.matchAll(/class="tick-x">([^<]*)</g)].map((m) => m[1]);
    const svgBar = [...fig.svg.matchAll(/class="tick-bar">([^<]*)</g)].map((m) => m[1]);
    check(fig.svg.startsWith("<svg") && /<title>[^<]*virtual image/.test(fig.svg) && (fig.svg.match(/<image /g) ?? []).length === 2 &&
      svgTicks.join("|") === fig.ix.ticks.join("|") && svgBar.join("|") === fig.ibar.ticks.join("|") && fig.svg.includes("scan x (nm)"),
      `save figure (SVG) has the title, the image and colour bar embedded, and the same ticks (x ${svgTicks.join(", ")}; bar ${svgBar.join(", ")})`);
    const pngSize = await page.evaluate(async (url) => { const b = await createImageBitmap(await (await fetch(url)).blob()); return [b.width, b.height]; }, fig.png);
    check(fig.png.startsWith("data:image/png;base64,") && pngSize[0] > 2 * 320 && pngSize[1] > 2 * 100, `save figure (PNG) is a ${pngSize.join(" × ")} picture`);

    step = "acquisition page";
    let s = await shown();
    let want = cliMask(s.inner_q, s.outer_q);
    check(sameValues(s.values, want.values), `the virtual image (${path}) equals the CLI's stem mask --inner ${s.inner_q} --outer ${s.outer_q} (${want.values.length} positions)`);

    step = "compute on the server";
    await page.selectOption("#stem-compute-on", "server");
    await page.waitForFunction(() => document.querySelector("#stem-image").dataset.path === "server" && document.querySelector("#stem-image").dataset.state === "ready", null, { timeout: 60_000 });
    const server_values = (await shown()).values;
    check(sameValues(server_values, want.values), "the server's image for the same annulus is the same");
    check((await page.locator("#stem-image-caption").textContent()).includes("stem.compact_sums on cpu"), "and says where it ran (its placement: the resident copy's sums, on the host)");
    if (path === "page") await page.selectOption("#stem-compute-on", "page");
    await page.waitForFunction((p) => document.querySelector("#stem-image").dataset.path === p && document.querySelector("#stem-image").dataset.state === "ready", path, { timeout: 60_000 });

    step = "drag the outer ring";
    const box = await page.locator("#stem-ring").boundingBox();
    const scale = box.width / 48;
    const cx = box.x + (cal.disk.col + 0.5) * scale;
    const cy = box.y + (cal.disk.row + 0.5) * scale;
    const before = s;
    await page.mouse.move(cx + s.outer * scale, cy);
    await page.mouse.down();
    for (let k = 1; k <= 10; k++) await page.mouse.move(cx + (s.outer + 1.4 * k) * scale, cy, { steps: 2 });
    await page.mouse.up();
    await page.waitForFunction((o) => {
      const img = document.querySelector("#stem-image");
      return img.dataset.state === "ready" && Number(img.dataset.outer) > o + 5;
    }, before.outer, { timeout: 120_000 });
    s = await shown();
    const readout = await page.locator("#stem-detector").textContent();
    check(s.outer > before.outer + 5, `dragging moved the outer radius ${before.outer.toFixed(2)} → ${s.outer.toFixed(2)} px (${s.requests - before.requests} requests while dragging)`);
    check(/mrad/.test(readout), `the read-out gives px and mrad: "${readout}"`);
    check(!sameValues(s.values, before.values), "the virtual image changed");
    want = cliMask(s.inner_q, s.outer_q);
    check(sameValues(s.values, want.values), `after the drag the image (${path}) equals the CLI's stem mask --inner ${s.inner_q} --outer ${s.outer_q} (a dense detector: total - complement)`);
    const ms = await page.evaluate(() => window.tmStem.imageMs.slice());
    const sorted = ms.slice(-(s.requests - before.requests)).sort((a, b) => a - b);
    log(`image time while dragging (${path}): median ${sorted[Math.floor(sorted.length / 2)].toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms over ${sorted.length} images (12 x 10 x 48 x 48, SwiftShader, headless: a smoke figure)`);

    step = "preset";
    const adf = await getJson(base, "/api/acquisitions/a0/products/adf");
    await page.locator("#stem-preset-adf").click();
    await page.waitForFunction((inner) => Math.abs(window.tmStem.inner - inner) < 1e-9 && document.querySelector("#stem-image").dataset.state === "ready", adf.detector.inner_px, { timeout: 120_000 });
    check(true, `ADF sets the server preset's inner radius ${adf.detector.inner_px} px`);

    step = "click a scan position";
    const ib = await page.locator("#stem-image").boundingBox();
    const row = 7;
    const col = 3;
    await page.locator("#stem-image").click({ position: { x: (col + 0.5) * (ib.width / 10), y: (row + 0.5) * (ib.height / 12) } });  // 12 x 10 scan
    try {
      await page.waitForFunction(() => window.tmStem.frame !== null, null, { timeout: 60_000 });
    } catch (e) {
      throw new Error(`no frame shown after the click (${e.message}); page errors: ${errors.join("; ")}`);
    }
    const frame = await page.evaluate(() => window.tmStem.frame);
    const exported = join(tmp, "frame.npy");
    tm(["stem", "export", master, "--frame", `${row},${col}`, "-o", exported], env);
    check(frame.position[0] === row && frame.position[1] === col, `the click chose scan position (${frame.position})`);
    check(sameValues(frame.values, readNpy(exported).values), "its pattern equals stem export --frame");
    check((await page.locator("#stem-pattern-caption").textContent()).includes(`(${row}, ${col})`), "the caption names the position");

    step = "movies";
    // Each movie link's bytes equal `stem movie` with the same request (its query mapped to the CLI's flags).
    const FLAG = { along: "--patterns-along", sweep: "--sweep", inner: "--inner", from: "--from", to: "--to", steps: "--steps", center: "--center",
      transform: "--transform", colormap: "--colormap", detector_bin: "--detector-bin" };
    for (const id of ["stem-movie-line", "stem-movie-sweep"]) {
      await page.locator(`#${id}`).dispatchEvent("pointerdown");
      const href = await page.locator(`#${id}`).getAttribute("href");
      const url = new URL(href, base);
      const args = [];
      for (const [k, v] of url.searchParams) if (FLAG[k]) args.push(FLAG[k], v);
      const out = join(tmp, `${id}.${url.searchParams.get("format")}`);
      tm(["stem", "movie", master, ...args, "-o", out], env);
      const bytes = await page.evaluate(async (u) => Array.from(new Uint8Array(await (await fetch(u)).arrayBuffer())), url.href);
      const want = readFileSync(out);
      check(bytes.length === want.length && want.every((b, i) => b === bytes[i]), `the ${id} link (${url.search}) gives the bytes of stem movie ${args.join(" ")} (${want.length} bytes)`);
    }
    check((await page.locator("#stem-movie-line").textContent()).includes(`row ${row}`), "the patterns movie follows the clicked position's row");
    // A click fetches it as a named request (progress and Cancel on the server-progress line) and saves the same bytes.
    const [download] = await Promise.all([page.waitForEvent("download", { timeout: 120_000 }), page.locator("#stem-movie-line").click()]);
    const saved = readFileSync(await download.path());
    const lineOut = readFileSync(join(tmp, "stem-movie-line.gif"));
    const movieProgress = await page.evaluate(() => window.tmStemProgress.products.last);
    check(saved.equals(lineOut) && /-row\.gif$/.test(download.suggestedFilename()) && movieProgress?.outcome === "done",
      `clicking the link saves ${download.suggestedFilename()} (${saved.length} bytes, stem movie's) through a named request (${movieProgress?.stage}, ${movieProgress?.outcome})`);

    step = "pattern display";
    const meanOut = join(tmp, "mean.npy");
    const maxOut = join(tmp, "max.npy");
    tm(["stem", "mean-dp", master, "-o", meanOut], env);
    tm(["stem", "mean-dp", master, "--max", "-o", maxOut], env);
    if (path === "page") await page.waitForFunction(() => document.querySelector("#stem-pattern").dataset.path === "page", null, { timeout: 60_000 });
    const patternPath = await page.evaluate(() => document.querySelector("#stem-pattern").dataset.path);
    check(sameValues(await page.evaluate(() => window.tmStem.pattern.values), readNpy(meanOut).values),
      `the mean pattern (${patternPath}) equals the CLI's stem mean-dp`);
    if (path === "page") check(patternPath === "page", "and was computed on the page's adapter");
    const patternBefore = await pngStats(page, (await page.locator("#stem-pattern").screenshot()).toString("base64"));
    await page.selectOption("#stem-pattern-of", "max");
    await page.waitForFunction(() => document.querySelector("#stem-pattern").dataset.showing === "max", null, { timeout: 60_000 });
    check(sameValues(await page.evaluate(() => window.tmStem.pattern.values), readNpy(maxOut).values), "the max pattern equals the CLI's stem mean-dp --max");
    await page.selectOption("#stem-pattern-transform", "linear");
    await page.selectOption("#stem-pattern-cmap", "magma");
    const patternAfter = await pngStats(page, (await page.locator("#stem-pattern").screenshot()).toString("base64"));
    const scaleBar = await page.evaluate(() => window.tmStem.scaleBar);
    check(patternAfter.colours > 8 && patternAfter.variance !== patternBefore.variance, `the max pattern, linear, magma is drawn (${patternAfter.colours} colours)`);
    check(/^[0-9.]+ mrad$/.test(scaleBar), `the pattern has a scale bar in mrad: "${scaleBar}"`);
    // the virtual image's real-space scale bar: a 1-2-5 length in nm, a quarter of the field or less
    const imageBar = await page.evaluate(() => ({ label: window.tmStem.imageScaleBar, cols: window.tmStem.image.shape[1] }));
    const barNm = Number(imageBar.label.replace(/ nm$/, ""));
    const fieldNm = (cal.scan_step.unit === "nm" ? cal.scan_step.value : cal.scan_step.value / 10) * imageBar.cols;
    const mantissa = barNm / 10 ** Math.floor(Math.log10(barNm) + 1e-9);
    check(/^[0-9.]+ nm$/.test(imageBar.label) && barNm <= fieldNm / 4 + 1e-12 && barNm > fieldNm / 40 && [1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-9),
      `the virtual image has a scale bar of ${imageBar.label} (field ${fieldNm.toPrecision(4)} nm: ${imageBar.cols} positions of ${cal.scan_step.value} ${cal.scan_step.unit})`);
    await page.selectOption("#stem-pattern-limits", "custom");
    check((await page.locator("#stem-pattern-lo").inputValue()) !== "", "custom limits start from the limits drawn");

    step = "hover a scan position";
    const hb = await page.locator("#stem-image").boundingBox();
    await page.mouse.move(hb.x + 2.5 * (hb.width / 10), hb.y + 4.5 * (hb.height / 12));
    await page.waitForFunction(() => window.tmStem.hover && window.tmStem.hover[0] === 4 && window.tmStem.hover[1] === 2, null, { timeout: 60_000 });
    check((await page.locator("#stem-pattern-caption").textContent()).includes("(4, 2)"), "hovering shows that position's pattern");

    step = "DF preset";
    const df = await getJson(base, "/api/acquisitions/a0/products/df");
    await page.locator("#stem-preset-df").click();
    await page.waitForFunction((inner) => Math.abs(window.tmStem.inner - inner) < 1e-9 && Number(document.querySelector("#stem-image").dataset.inner) === Number(inner.toFixed(3)) &&
      document.querySelector("#stem-image").dataset.state === "ready", df.detector.inner_px, { timeout: 120_000 });
    const dfOut = join(tmp, "df.npy");
    tm(["stem", "df", master, "-o", dfOut], env);
    check(sameValues((await shown()).values, readNpy(dfOut).values), `DF (${path}) equals the CLI's stem df`);

    step = "rectangle detector";
    await page.selectOption("#stem-detector-shape", "rectangle");
    const rb = await page.locator("#stem-ring").boundingBox();
    const rs = rb.width / 48;
    await page.mouse.move(rb.x + (10 + 0.5) * rs, rb.y + (12 + 0.5) * rs);
    await page.mouse.down();
    for (let k = 1; k <= 6; k++) await page.mouse.move(rb.x + (10 + 3 * k + 0.5) * rs, rb.y + (12 + 2 * k + 0.5) * rs, { steps: 2 });
    await page.mouse.up();
    await page.waitForFunction(() => document.querySelector("#stem-image").dataset.rect === "12,10,25,29" && document.querySelector("#stem-image").dataset.state === "ready", null, { timeout: 120_000 });
    const rectOut = join(tmp, "rect.npy");
    tm(["stem", "mask", master, "--rect", "12,10,25,29", "-o", rectOut], env);
    check(sameValues((await shown()).values, readNpy(rectOut).values), `the dragged rectangle rows [12, 25) x columns [10, 29) (${path}) equals the CLI's stem mask --rect`);

    step = "centre of mass and DPC";
    await page.waitForFunction(() => document.querySelector("#stem-field")?.dataset.state === "ready", null, { timeout: 120_000 });
    const close = (a, b, rel) => {
      const scaleAbs = Math.max(...b.map(Math.abs));
      let worst = 0;
      for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / scaleAbs);
      return { ok: a.length === b.length && worst <= rel, worst };
    };
    const comOut = join(tmp, "com.npy");
    tm(["stem", "com", master, "-o", comOut], env);
    const fieldState = async () => page.evaluate(() => ({ ...window.tmStemFields.shown, comOn: window.tmStemFields.comOn, found: window.tmStemFields.found }));
    let fs = await fieldState();
    const comCmp = close(fs.values, readNpy(comOut).values, 1e-5);
    check(fs.view === "com" && comCmp.ok, `CoM (${fs.comOn}) equals the CLI's stem com within 1e-5 of its largest value (worst ${comCmp.worst.toExponential(2)})`);
    if (!(ALLOW_NO_WEBGPU && path !== "page")) check(fs.comOn === "page", "CoM sums were computed on the page's adapter");
    const dpcOut = join(tmp, "dpc.npy");
    tm(["stem", "dpc", master, "-o", dpcOut], env);
    const dpcReport = JSON.parse(readFileSync(`${dpcOut}.json`, "utf8"));
    await page.selectOption("#stem-field-view", "dpc");
    await page.waitForFunction(() => document.querySelector("#stem-field").dataset.view === "dpc" && document.querySelector("#stem-field").dataset.state === "ready", null, { timeout: 60_000 });
    fs = await fieldState();
    const dpcCmp = close(fs.values, readNpy(dpcOut).values, 1e-5);
    check(Math.abs(fs.found.angleDeg - dpcReport.rotation.angle_deg) < 1e-6 && fs.found.transpose === dpcReport.rotation.transpose,
      `the DPC rotation found on the page ${fs.found.angleDeg.toFixed(4)}° equals the CLI's ${dpcReport.rotation.angle_deg.toFixed(4)}°`);
    check(dpcCmp.ok, `DPC equals the CLI's stem dpc within 1e-5 (worst ${dpcCmp.worst.toExponential(2)})`);
    check(/curl/.test(await page.locator("#stem-dpc-readout").textContent()), "the curl is shown");
    // the hue legend: the colour to the right of its centre is the field's colour of a +column vector, below it a
    // +row vector's (the same hue = direction rule, at full length); it is shown with the colour-wheel views only
    const legend = await page.evaluate(() => {
      const c = document.querySelector("#stem-field-legend");
      const ctx = c.getContext("2d");
      const n = c.width, r = (n - 28) / 2, at = (x, y) => Array.from(ctx.getImageData(Math.floor(x), Math.floor(y), 1, 1).data);
      return { hidden: c.hidden, right: at(n / 2 + r - 3, n / 2), below: at(n / 2, n / 2 + r - 3), left: at(n / 2 - r + 3, n / 2) };
    });
    // the same hue (channels relative to the brightest; the samples sit a little inside the rim, so a little darker)
    const near = (a, b) => a[3] === 255 && a.slice(0, 3).every((v, i) => Math.abs(v / Math.max(...a.slice(0, 3)) - b[i] / 255) <= 0.05);
    check(!legend.hidden && near(legend.right, [255, 0, 0]) && near(legend.below, [128, 255, 0]) && near(legend.left, [0, 255, 255]),
      `the hue legend: +column red ${legend.right}, +row chartreuse ${legend.below}, -column cyan ${legend.left}`);
    await page.selectOption("#stem-field-view", "idpc");
    await page.waitForFunction(() => document.querySelector("#stem-field").dataset.view === "idpc" && document.querySelector("#stem-field").dataset.state === "ready", null, { timeout: 120_000 });
    check(await page.evaluate(() => document.querySelector("#stem-field-legend").hidden), "the hue legend is hidden for iDPC");
    fs = await fieldState();
    const idpcOut = join(tmp, "idpc.npy");
    tm(["stem", "idpc", master, "-o", idpcOut], env);
    // On the page iDPC and the FFT views are float32 FFTs in WGSL, held to their tolerances by e2e.stem_fourier; here
    // they only have to agree with the CLI's within 1e-4 of its largest value (the server's FFTW within 1e-6 / exactly).
    if (!(ALLOW_NO_WEBGPU && path !== "page")) check(fs.on === "page", "iDPC was computed on the page's adapter");
    const idpcCmp = close(fs.values, readNpy(idpcOut).values, fs.on === "page" ? 1e-4 : 1e-6);
    check(idpcCmp.ok, `iDPC (${fs.on}, at the page's rotation) equals the CLI's stem idpc within ${fs.on === "page" ? 1e-4 : 1e-6} (worst ${idpcCmp.worst.toExponential(2)})`);

    await page.selectOption("#stem-field-view", "fft-dp");
    await page.waitForFunction(() => document.querySelector("#stem-field").dataset.view === "fft-dp" && document.querySelector("#stem-field").dataset.state === "ready", null, { timeout: 120_000 });
    const fftOut = join(tmp, "fft-dp.npy");
    tm(["stem", "fft", master, "--of", "mean-dp", "-o", fftOut], env);
    fs = await fieldState();
    const fftWant = readNpy(fftOut).values;
    check(fs.on === "page" ? close(fs.values, fftWant, 1e-4).ok : sameValues(fs.values, fftWant),
      `the FFT view of the mean pattern (${fs.on}) equals stem fft --of mean-dp${fs.on === "page" ? " within 1e-4 of its largest value" : ""}`);

    step = "detector bin on the page's adapter";
    const viewed = async (pg) => pg.evaluate(() => ({ center: window.tmStem.center, values: window.tmStem.image.values, inner: document.querySelector("#stem-image").dataset.inner,
      outer: document.querySelector("#stem-image").dataset.outer, path: document.querySelector("#stem-image").dataset.path, note: document.querySelector("#stem-compute-note").textContent }));
    const cliView = (v, extra) => {
      const out = join(tmp, `view-${extra.join("_")}-${v.inner}-${v.outer}.npy`);
      tm(["stem", "mask", master, "--center", `${v.center[0]},${v.center[1]}`, "--inner", v.inner, "--outer", v.outer, ...extra, "-o", out], env);
      return readNpy(out).values;
    };
    await page.selectOption("#stem-detector-bin", "2");
    await page.waitForFunction(() => window.tmStem.view.bin === 2 && document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
    let v = await viewed(page);
    if (path === "page") check(v.path === "page" && /binned 2 × 2 on the adapter/.test(v.note), `the page bins its resident block on the adapter: "${v.note}"`);
    check(sameValues(v.values, cliView(v, ["--detector-bin", "2"])), `the binned view's image (${v.path}) equals the CLI's stem mask --detector-bin 2 --center ${v.center} --inner ${v.inner} --outer ${v.outer}`);
    await page.waitForFunction(() => document.querySelector("#stem-field")?.dataset.state === "ready", null, { timeout: 120_000 });
    const comBinOut = join(tmp, "com-bin2.npy");
    tm(["stem", "com", master, "--detector-bin", "2", "-o", comBinOut], env);
    const comBin = close((await fieldState()).values, readNpy(comBinOut).values, 1e-5);
    check(comBin.ok, `and its CoM equals the CLI's stem com --detector-bin 2 (worst ${comBin.worst.toExponential(2)})`);
    await page.selectOption("#stem-detector-bin", "1");
    await page.waitForFunction(() => window.tmStem.view.bin === 1 && document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });

    step = "SSB preview";
    // The sliders' ranges come from the calibration (the probe's geometric diameter reaching the scan's field).
    const ranges = await page.evaluate(() => ({ text: document.getElementById("stem-ssb-ranges").textContent, max: Number(document.getElementById("stem-ssb-c10").max),
      c12: Number(document.getElementById("stem-ssb-c12").max) }));
    const wantC10 = await page.evaluate((c) => {
      const stepA = c.scan_step.unit === "nm" ? c.scan_step.value * 10 : c.scan_step.value;
      const raw = Math.min(50000, Math.max(1000, (Math.max(...window.tmStem.image.shape) * stepA) / (2 * c.semiangle.value * 1e-3)));
      const p = 10 ** Math.floor(Math.log10(raw));
      return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw);
    }, cal);
    check(/from the calibration/.test(ranges.text) && ranges.max === wantC10 && ranges.c12 === wantC10 / 2,
      `the SSB sliders' ranges come from the calibration (|C10| ≤ ${ranges.max} Å, C12 ≤ ${ranges.c12} Å): "${ranges.text}"`);
    // Here the server path (the CLI's numbers exactly); the page's WGSL preview is held to its tolerance by e2e.stem_ssb.
    await page.evaluate(() => {
      document.getElementById("stem-ssb-on").value = "server";
      for (const [id, v] of [["stem-ssb-c10", "500"], ["stem-ssb-c12", "100"], ["stem-ssb-phi12", "30"]]) document.getElementById(id).value = v;
    });
    await page.locator("#stem-ssb-compute").click();
    await page.waitForFunction(() => document.querySelector("#stem-ssb").dataset.state === "ready" && window.tmStemSsb.c10 === 500, null, { timeout: 180_000 });
    const ssbOut = join(tmp, "ssb.npy");
    tm(["stem", "ssb", master, "--C10", "500", "--C12", "100", "--phi12", "30", "-o", ssbOut], env);
    const ssbPage = await page.evaluate(() => window.tmStemSsb.phase.values);
    check(sameValues(ssbPage, readNpy(ssbOut).values), `the SSB preview for C10 500 A, C12 100 A, phi12 30 deg equals the CLI's stem ssb (${ssbPage.length} positions)`);
    check(/computed on the server/.test(await page.locator("#stem-ssb-caption").textContent()), "and says where it ran");
    const rotation = await page.evaluate(() => window.tmStemSsb.rotationDeg);
    // C10 typed into its number box (Enter): the slider follows and the preview is computed for exactly that value
    await page.locator("#stem-ssb-c10-value").fill("-300");
    await page.locator("#stem-ssb-c10-value").press("Enter");
    await page.waitForFunction(() => document.querySelector("#stem-ssb").dataset.state === "ready" && window.tmStemSsb.c10 === -300, null, { timeout: 180_000 });
    check((await page.locator("#stem-ssb-c10").inputValue()) === "-300", "the C10 slider follows its number box");
    tm(["stem", "ssb", master, "--C10", "-300", "--C12", "100", "--phi12", "30", "--scan-rotation-deg", String(rotation), "-o", ssbOut], env);
    check(typeof rotation === "number" && sameValues(await page.evaluate(() => window.tmStemSsb.phase.values), readNpy(ssbOut).values),
      `the next preview passes the chosen scan rotation (${rotation}°) back and equals stem ssb --C10 -300 … --scan-rotation-deg ${rotation}`);

    step = "the SSB fit";
    // Fit: the server fits as stem ssb --fit does; the controls take the fitted values and the phase is the CLI's
    await page.locator("#stem-ssb-fit").click();
    await page.waitForFunction(() => document.querySelector("#stem-ssb").dataset.state === "ready" && window.tmStemSsb.c10 !== -300, null, { timeout: 180_000 });
    const fitOut = join(tmp, "ssb-fit.npy");
    const fitted = JSON.parse(tm(["stem", "ssb", master, "--fit", "-o", fitOut, "--json"], env).stdout).aberrations;
    const onPage = await page.evaluate(() => ({ c10: window.tmStemSsb.c10, c12: window.tmStemSsb.c12, phi12: window.tmStemSsb.phi12,
      box: document.getElementById("stem-ssb-c10-value").value, slider: document.getElementById("stem-ssb-c10").value }));
    check(onPage.c10 === fitted.C10 && onPage.c12 === fitted.C12 && onPage.phi12 === fitted.phi12,
      `the page's fit gives the CLI's aberrations (C10 ${fitted.C10.toFixed(2)} Å, C12 ${fitted.C12.toFixed(2)} Å, phi12 ${fitted.phi12.toFixed(2)} deg)`);
    // the box holds the value exactly; the slider as closely as a range input can (about 15 digits)
    check(Number(onPage.box) === fitted.C10 && Math.abs(Number(onPage.slider) - fitted.C10) < 1e-9,
      `the C10 box and slider show the fitted value (${onPage.box}, ${onPage.slider})`);
    check(sameValues(await page.evaluate(() => window.tmStemSsb.phase.values), readNpy(fitOut).values), "and its phase equals stem ssb --fit's");
    check(/fitted \(around the estimate, \d+ evaluations/.test(await page.locator("#stem-ssb-caption").textContent()), "the caption says it was fitted and how");
    const fitProgress = await page.evaluate(() => window.tmStemProgress.ssb.last);
    check(fitProgress?.outcome === "done" && /^fitting the aberrations: /.test(fitProgress.stage) && fitProgress.done >= 1,
      `the fit was a named request whose progress the server kept: ${JSON.stringify(fitProgress)}`);

    step = "a line profile and a region's mean pattern";
    // Drawn by dragging on the virtual image: a line along scan row 2 samples exactly that row's values; a region
    // of rows 1–4, columns 2–6 averages its patterns on the server, equal to the CLI's stem mean-dp --scan-region.
    const dragOnImage = async (from, to) => {
      const shape = await page.evaluate(() => window.tmStem.image.shape);
      await page.locator("#stem-image").scrollIntoViewIfNeeded();
      const bb = await page.locator("#stem-image").boundingBox();
      const at = ([row, col]) => [bb.x + (col / shape[1]) * bb.width, bb.y + (row / shape[0]) * bb.height];
      await page.mouse.move(...at(from));
      await page.mouse.down();
      await page.mouse.move(...at([(from[0] + to[0]) / 2, (from[1] + to[1]) / 2]));
      await page.mouse.move(...at(to));
      await page.mouse.up();
      return shape;
    };
    await page.selectOption("#stem-image-drag", "line");
    const imageCols = (await page.evaluate(() => window.tmStem.image.shape))[1];
    const lineShape = await dragOnImage([2.5, 0.5], [2.5, imageCols - 0.5]);
    await page.waitForFunction(() => document.querySelector("#stem-line-profile")?.hidden === false, null, { timeout: 30_000 });
    const line = await page.evaluate(() => ({ samples: window.tmStemTools.samples, values: window.tmStem.image.values, plot: { ...document.querySelector("#stem-line-profile").dataset },
      x: document.querySelector("#stem-line-profile-x-axis").title }));
    const rowTwo = line.values.slice(2 * lineShape[1], 3 * lineShape[1]);
    check(sameValues(line.samples, rowTwo) && line.plot.count === String(rowTwo.length) && /distance along the line \(nm\)/.test(line.x),
      `a line along scan row 2 plots its ${line.samples.length} values (${line.plot.range}), distance in nm`);
    await page.selectOption("#stem-image-drag", "region");
    await dragOnImage([1.2, 2.2], [4.8, 6.8]);
    await page.waitForFunction(() => document.querySelector("#stem-pattern").dataset.showing === "region 1,5,2,7", null, { timeout: 60_000 });
    const regionMean = join(tmp, "mean-region.npy");
    tm(["stem", "mean-dp", master, "--scan-region", "1,5,2,7", "-o", regionMean], env);
    const regionShown = await page.evaluate(() => ({ values: window.tmStem.pattern.values, caption: document.querySelector("#stem-pattern-caption").textContent }));
    check(sameValues(regionShown.values, readNpy(regionMean).values) && /mean pattern of scan rows 1–4, columns 2–6 \(20 positions\)/.test(regionShown.caption),
      `a region of rows 1–4, columns 2–6 shows its mean pattern, equal to stem mean-dp --scan-region 1,5,2,7: "${regionShown.caption}"`);
    await page.selectOption("#stem-image-drag", "hover");

    step = "cancel the block's download";
    if (path !== "page") log("no WebGPU adapter: the page fetches no block, so there is nothing to cancel");
    else {
      const slow = await context.newPage();
      const slowErrors = watchErrors(slow);
      // Each band answers 1.5 s late, so the download is still running when Cancel is pressed.
      await slow.route("**/block?*", async (route) => {
        await new Promise((done) => setTimeout(done, 1500));
        await route.continue().catch(() => {});
      });
      await slow.goto(new URL("#/acquisition/a0", base).href);
      await slow.locator("#stem-progress-cancel:not([hidden])").waitFor({ timeout: 60_000 });
      const during = await slow.locator("#stem-progress-text").textContent();
      await slow.locator("#stem-progress-cancel").click();
      await slow.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
      const cancelledNote = await slow.locator("#stem-compute-note").textContent();
      check(/band \d+ of \d+/.test(during) && /cancelled on the page/.test(cancelledNote) &&
        (await slow.evaluate(() => document.querySelector("#stem-image").dataset.path)) === "server",
        `Cancel during "${during}" stops the download and the server computes the image: "${cancelledNote}"`);
      const slowImage = await slow.evaluate(() => ({ values: window.tmStem.image.values, inner: document.querySelector("#stem-image").dataset.inner, outer: document.querySelector("#stem-image").dataset.outer }));
      check(sameValues(slowImage.values, cliMask(slowImage.inner, slowImage.outer).values), "with the same numbers as the CLI");
      check(slowErrors.length === 0, `no page errors there${slowErrors.length ? ": " + slowErrors.join("; ") : ""}`);
      await slow.close();
    }

    step = "cancel a server product";
    {
      // The first virtual image is the server's: held 1.5 s on its way, the progress line offers Cancel after 300 ms,
      // and the server, told before the request arrives, refuses it as cancelled.
      const held = await context.newPage();
      const heldErrors = watchErrors(held);
      await held.route("**/products/mask?*", async (route) => {
        await new Promise((done) => setTimeout(done, 1500));
        await route.continue().catch(() => {});
      });
      await held.goto(new URL("#/acquisition/a0", base).href);
      await held.locator("#stem-server-progress-cancel:not([hidden])").waitFor({ timeout: 60_000 });
      const offered = await held.locator("#stem-server-progress").textContent();
      await held.locator("#stem-server-progress-cancel").click();
      await held.waitForFunction(() => window.tmStemProgress?.products?.last?.outcome === "cancelled", null, { timeout: 60_000 });
      const after = await held.locator("#stem-server-progress").textContent();
      check(/virtual image on the server: sent, waiting/.test(offered) && /cancelled/.test(after),
        `Cancel on "${offered.trim()}" cancels the server's image: "${after.trim()}"`);
      // the cancelled request's 409 is what Cancel asks for; anything else is an error
      const unexpected = heldErrors.filter((e) => !/409 GET \/api\/acquisitions\/a0\/products\/mask|status of 409/.test(e));
      check(unexpected.length === 0, `no other page errors there${unexpected.length ? ": " + unexpected.join("; ") : ""}`);
      await held.close();
    }

    step = "an adapter too small for the block";
    const small = await context.newPage();
    const smallErrors = watchErrors(small);
    await small.addInitScript(() => {
      localStorage.setItem("tm.stem.maxBlockBytes", "300000");  // the block is 552960 bytes
      localStorage.setItem("tm.stem.maxBindingBytes", "100000");  // the views' blocks then span several device buffers
    });
    await small.goto(new URL("#/acquisition/a0", base).href);
    await small.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
    const refusal = await small.locator("#stem-compute-note").textContent();
    check(/holds at most 0\.3 MiB/.test(refusal) && /detector bin of 2/.test(refusal) && /scan crop of 8 × 7/.test(refusal),
      `the page refuses the block and names the ladder: "${refusal}"`);
    check((await small.evaluate(() => document.querySelector("#stem-image").dataset.path)) === "server", "and the server computes the image instead (shown)");
    const smallValues = await small.evaluate(() => window.tmStem.image.values);
    const smallCli = cliMask("0.000", "5.997");
    check(sameValues(smallValues, smallCli.values), "with the same numbers as the CLI");
    const acqScan = smallCli.shape;
    // At full resolution from the server's resident copy, not a forced bin or crop; the caption says which path ran.
    const smallCaption = await small.locator("#stem-image-caption").textContent();
    const smallShape = await small.evaluate(() => window.tmStem.image.shape);
    check((await small.evaluate(() => document.querySelector("#stem-image").dataset.serverPath)) === "resident" &&
      /resident copy at full resolution \(\d+\.\d MiB in host memory/.test(smallCaption) && smallShape.join("x") === acqScan.join("x"),
      `from the server's resident copy at the full ${smallShape.join(" × ")} scan: "${smallCaption}"`);
    for (const [id, extra] of [["bin-2", ["--detector-bin", "2"]], ["crop", null]]) {
      await small.locator(`#stem-ladder-${id}`).click();
      await small.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
      const sv = await viewed(small);
      const view = await small.evaluate(() => window.tmStem.view);
      const args = extra ?? ["--scan-region", view.region.join(",")];
      if (path === "page") check(sv.path === "page" && /in 3 device buffers/.test(sv.note), `the ladder's ${id} view is computed on the page, its block in 3 buffers: "${sv.note}"`);
      check((await small.locator("#stem-view").textContent()).length > 6, `the choice is shown: "${await small.locator("#stem-view").textContent()}"`);
      check(sameValues(sv.values, cliView(sv, args)), `and its image equals the CLI's stem mask ${args.join(" ")} (${sv.values.length} positions)`);
      // Chunked patterns and CoM sums (the block spans 3 buffers): equal to the CLI's for the same view.
      const meanView = join(tmp, `mean-${id}.npy`);
      const comView = join(tmp, `com-${id}.npy`);
      tm(["stem", "mean-dp", master, ...args, "-o", meanView], env);
      tm(["stem", "com", master, ...args, "-o", comView], env);
      await small.waitForFunction(() => document.querySelector("#stem-field")?.dataset.state === "ready", null, { timeout: 120_000 });
      const chunkedMean = await small.evaluate(() => window.tmStem.pattern.values);
      const chunkedCom = close(await small.evaluate(() => window.tmStemFields.shown.values), readNpy(comView).values, 1e-5);
      check(sameValues(chunkedMean, readNpy(meanView).values) && chunkedCom.ok,
        `and its mean pattern and CoM (chunked) equal stem mean-dp / stem com ${args.join(" ")} (CoM worst ${chunkedCom.worst.toExponential(2)})`);
      if (id === "bin-2") {
        await small.goto(new URL("#/acquisition/a0", base).href);
        await small.reload();
        await small.waitForFunction(() => document.querySelector("#stem-ladder-crop") !== null, null, { timeout: 120_000 });
      }
    }
    check(smallErrors.length === 0, `no page errors there${smallErrors.length ? ": " + smallErrors.join("; ") : ""}`);
    await small.close();

    step = "an acquisition still being written";
    // The server keeps at most 4 readiness streams and frees a closed page's at its next heartbeat (within 2 s):
    // let the pages closed above release theirs.
    await new Promise((done) => setTimeout(done, 5000));
    const inventory = await context.newPage();
    const inventoryErrors = watchErrors(inventory);
    await inventory.goto(base);
    await inventory.locator('#acquisitions li[data-acquisition="a1"]').waitFor({ timeout: 60_000 });
    const listedA1 = inventory.locator('#acquisitions li[data-acquisition="a1"] .readiness');
    check((await listedA1.getAttribute("data-status")) === "incomplete", `the inventory lists the copy as "${await listedA1.textContent()}"`);
    const writing = await context.newPage();
    const writingErrors = watchErrors(writing);
    await writing.goto(new URL("#/acquisition/a1", base).href);
    await writing.waitForFunction(() => document.querySelector("#stem-readiness")?.dataset.status !== undefined, null, { timeout: 60_000 });
    const before1 = await writing.locator("#stem-readiness").textContent();
    check(!/^complete/.test(before1) && (await writing.locator("#stem-waiting").count()) === 1, `the page shows it incomplete and waits: "${before1}"`);
    renameSync(later, join(partial, "demo_data_000002.h5"));
    await writing.waitForFunction(() => document.querySelector("#stem-readiness").dataset.status === "complete" && document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
    check(true, `the readiness event arrived and the page opened the products: "${await writing.locator("#stem-readiness").textContent()}"`);
    check(writingErrors.length === 0, `no page errors there${writingErrors.length ? ": " + writingErrors.join("; ") : ""}`);
    await writing.close();
    await inventory.waitForFunction(() => document.querySelector('#acquisitions li[data-acquisition="a1"] .readiness').dataset.status === "complete", null, { timeout: 60_000 });
    check(true, `and the inventory's line followed by events: "${await listedA1.textContent()}"`);
    check(inventoryErrors.length === 0, `no inventory errors${inventoryErrors.length ? ": " + inventoryErrors.join("; ") : ""}`);
    await inventory.close();

    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(OUT_DIR, "stem.png"), fullPage: true });
    const shot = await pngStats(page, (await page.screenshot()).toString("base64"));
    check(shot.colours > 16, `screenshot ${join(OUT_DIR, "stem.png")} is not blank (${shot.colours} colours)`);
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join("; ") : ""}`);
    log(`products computed on the server: ${(await page.locator("#stem-image-caption").textContent())}`);
    console.log("PASS: stem e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 540_000);
