// End-to-end test of the viewer's diff mode (issue 50), in Debian's Chromium (headless), driven by playwright-core.
// The changed-rows fixture (tests/cli/diff_serve_fixture.py, run with /usr/bin/python3 + numpy: two float32
// safetensors checkpoints, B = A with rows 300-303 + 0.5 and row 520 - 0.25 of model.layers.1.mlp.down_proj.weight,
// column 10 + 0.125 of layer 0's, a shape mismatch, a tensor only in A) is served as `tensormorph serve A B`. Then:
//   - on A's tensor page, "compare with" B opens diff mode for that tensor (#/diff/0/1/{name});
//   - the heatmap (level 0: 3 x 2 tiles of 256 x 256) draws max |Δ| per tile: the tiles holding the changed rows
//     (tile rows 1 and 2) carry numpy's max |Δ| of their elements and the unchanged tile row 0 is 0, each drawn on
//     the canvas in its tile's colour (read back from the canvas pixels), the changed ones in other colours;
//   - hovering a tile shows its difference statistics, equal to numpy's (counts and extremes exactly, sums to 1e-12),
//     and its histogram of Δ, every occupied bin's count equal to numpy's (docs/diff.md's binade bins);
//   - the signed quantity (largest |Δ| per tile) is + in tile row 1 and − in tile row 2 under a diverging map;
//   - zoomed in (one double-click) on row 520, the elements are drawn: Δ of each equals numpy's b − a at
//     sampled elements, drawn in its colour on the canvas, and only the changed rows differ from Δ = 0's colour;
//   - "Across layers" lists both layers' pairs with strips of max |Δ| per tile under one colour scale, showing where
//     each changed (layer 0: tile column 0; layer 1: tile rows 1 and 2), the list page ranks the changed tensor first and says why the
//     mismatched pair was not compared, and the Compute panel lists the diff and where its ops ran.
//
// Environment: TM_BIN, TM_E2E_OUT, CHROMIUM (as the other e2e tests), PYTHON (default /usr/bin/python3, with numpy).
// Exits 0 with "SKIPPED: no chromium" only when Chromium is not installed.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { checker, chromiumOrSkip, e2eSetup, e2eTeardown, getJson, launchBrowser, ROOT, runTest, startServer, watchErrors, WEB_DIST, OUT_DIR } from "./harness.mjs";

const PYTHON = process.env.PYTHON || "/usr/bin/python3";
const CHANGED = "model.layers.1.mlp.down_proj.weight";
const MISMATCH = "model.layers.0.self_attn.q_proj.weight";

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[diff]", () => step);
const T0 = Date.now();
const at = (name) => {
  step = name;
  log(`step "${name}" at ${((Date.now() - T0) / 1000).toFixed(1)} s`);
};

const num = (v) => (v === "nan" ? NaN : v === "inf" ? Infinity : v === "-inf" ? -Infinity : Number(v));
const close = (a, b) => a === b || Math.abs(a - b) <= 1e-12 * Math.max(Math.abs(a), Math.abs(b));

/** Waits until the diff heatmap has drawn every visible tile (of `quantity` when given); returns its dataset. */
async function ready(page, what, quantity = null) {
  try {
    const h = await page.waitForFunction((quantity) => {
      const c = document.querySelector("#diff-heatmap");
      return c && c.dataset.state === "ready" && (!quantity || c.dataset.quantity === quantity) ? { ...c.dataset } : null;
    }, quantity, { timeout: 30_000 });
    return await h.jsonValue();
  } catch (e) {
    const now = await page.evaluate(() => ({ ...document.querySelector("#diff-heatmap")?.dataset, status: document.querySelector("#diff-heatmap-status")?.textContent }));
    throw new Error(`diff heatmap not ready after ${what}: ${JSON.stringify(now)} (${e.message})`);
  }
}

/** The drawn tiles with the canvas' colour at each tile's centre (device pixels) and the page's coordinates of it. */
async function drawnTiles(page) {
  return page.evaluate(() => {
    const c = document.querySelector("#diff-heatmap");
    const d = c.dataset;
    const ctx = c.getContext("2d");
    const dpr = c.width / c.clientWidth;
    const box = c.getBoundingClientRect();
    return window.tmDiffHeatmap.drawn().map((t) => {
      const col = (t.col_begin + t.col_end) / 2, row = (t.row_begin + t.row_end) / 2;
      const x = (col - Number(d.ox)) * Number(d.sx), y = (row - Number(d.oy)) * Number(d.sy);
      const shown = Array.from(ctx.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data);
      return { ...t, shown, clientX: box.left + x, clientY: box.top + y };
    });
  });
}

async function main() {
  const t0 = Date.now();
  const { chromium, tmp, env } = e2eSetup("diff", check);
  let server = null;
  let context = null;
  try {
    at("fixture");
    const fx = spawnSync(PYTHON, [join(ROOT, "tests", "cli", "diff_serve_fixture.py"), tmp], { encoding: "utf8" });
    check(fx.status === 0, `the changed-rows fixture is written by numpy${fx.status ? ": " + fx.stderr : ""}`);
    const ref = JSON.parse(fx.stdout);
    const want = ref.tiles[CHANGED]["0"];

    at("serve");
    server = await startServer([ref.a, ref.b, "--web-root", WEB_DIST], env);
    const base = server.url.split("?")[0].replace(/\/$/, "");
    const doc = await getJson(server.url, "/api/diff/0/1");

    at("browser");
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "chromium-profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${base}/#/tensor/0/${encodeURIComponent(CHANGED)}`);
    await page.waitForSelector("#diff-b");

    at("choose B");
    await page.selectOption("#diff-b", "1");
    await page.waitForFunction(() => window.location.hash.startsWith("#/diff/0/1/"));
    check(decodeURIComponent(await page.evaluate(() => window.location.hash)) === `#/diff/0/1/${CHANGED}`, "choosing B on A's tensor page opens diff mode for the tensor");

    at("max |Δ| per tile");
    let state = await ready(page, "opening diff mode");
    check(state.level === "0" && state.quantity === "abs_delta", `level ${state.level}, ${state.quantity}, ${state.colormap} [${state.limits}] (${state.limitsSource})`);
    let tiles = await drawnTiles(page);
    check(tiles.length === want.length, `${tiles.length} level-0 tiles drawn (numpy: ${want.length})`);
    const tileAt = (list, ty, tx) => list.find((t) => t.ty === ty && t.tx === tx);
    for (const w of want) {
      const t = tileAt(tiles, w.ty, w.tx);
      check(t && t.value === w.max_abs_delta, `tile (${w.tx}, ${w.ty}) rows ${w.row_begin}-${w.row_end - 1}: max |Δ| ${t?.value} = numpy's ${w.max_abs_delta}`);
      check(t.shown.join() === t.rgba.join(), `tile (${w.tx}, ${w.ty}) is drawn in its colour ${t.rgba.join(",")} (the canvas shows ${t.shown.join(",")})`);
    }
    const rowsOf = (t) => Object.keys(ref.changed_rows).map(Number).filter((r) => r >= t.row_begin && r < t.row_end);
    for (const t of tiles) {
      const changed = rowsOf(t).length > 0;
      check(changed === t.value > 0, `tile (${t.tx}, ${t.ty}) ${changed ? `holds changed rows ${rowsOf(t).join(", ")} and shows them` : "holds no changed row and shows 0"}`);
    }
    const unchanged = tileAt(tiles, 0, 0).rgba.join();
    check(tiles.filter((t) => t.value > 0).every((t) => t.rgba.join() !== unchanged), "every changed tile's colour differs from the unchanged tiles'");

    at("hover");
    for (const [ty, tx] of [[1, 0], [2, 1], [0, 1]]) {
      const t = tileAt(tiles, ty, tx);
      await page.mouse.move(t.clientX, t.clientY);
      const r = await (await page.waitForFunction(([x, y]) => {
        const d = document.querySelector("#diff-readout").dataset;
        return d.state === "ready" && d.tx === String(x) && d.ty === String(y) ? { ...d } : null;
      }, [tx, ty])).jsonValue();
      const w = want.find((v) => v.ty === ty && v.tx === tx);
      for (const [k, f] of [["count", "count"], ["changed", "changed"], ["maxAbsDelta", "max_abs_delta"], ["minDelta", "min_delta"], ["maxDelta", "max_delta"]])
        check(num(r[k]) === num(w[f]), `hover tile (${tx}, ${ty}): ${f} ${r[k]} = numpy's ${w[f]}`);
      for (const [k, f] of [["sumDelta", "sum_delta"], ["sumSqDelta", "sum_sq_delta"], ["relChange", "rel_change"], ["cosine", "cosine"]])
        check(close(num(r[k]), num(w[f])), `hover tile (${tx}, ${ty}): ${f} ${r[k]} = numpy's ${w[f]} (1e-12)`);
      const bins = await (await page.waitForSelector("#diff-readout-histogram")).evaluate((t) => [...t.querySelectorAll("tr[data-bin]")].map((r) => [Number(r.dataset.bin), Number(r.dataset.count)]));
      const wantBins = w.hist.map((c, i) => [i, c]).filter(([, c]) => c);
      check(JSON.stringify(bins) === JSON.stringify(wantBins), `hover tile (${tx}, ${ty}): its histogram of Δ (bin, count) ${JSON.stringify(bins)} = numpy's`);
    }

    at("signed Δ");
    await page.selectOption("#diff-quantity", "extreme_delta");
    state = await ready(page, "the signed quantity", "extreme_delta");
    tiles = await drawnTiles(page);
    check(state.colormap === "RdBu_r" && num(state.limits.split(",")[0]) === -num(state.limits.split(",")[1]), `a diverging map with symmetric limits: ${state.colormap} [${state.limits}]`);
    check(tileAt(tiles, 1, 0).value === tileAt(want, 1, 0).max_delta && tileAt(tiles, 1, 0).value > 0, `tile row 1 (rows 300-303, + 0.5): ${tileAt(tiles, 1, 0).value}`);
    check(tileAt(tiles, 2, 0).value === tileAt(want, 2, 0).min_delta && tileAt(tiles, 2, 0).value < 0, `tile row 2 (row 520, - 0.25): ${tileAt(tiles, 2, 0).value}`);
    check(tileAt(tiles, 1, 0).rgba.join() !== tileAt(tiles, 2, 0).rgba.join(), "the + and − tiles have different colours");
    await page.screenshot({ path: join(OUT_DIR, "diff.png") });

    at("elements");
    // One double-click on row 520 of the fitted view (zooming x2 about the cursor): rows ~254-566 in view at ~1.7 px
    // per element, so rows
    // 300-303 and 520 are both drawn as elements.
    await page.click("button[title='fit the tensor to the view']");
    await page.waitForFunction(() => document.querySelector("#diff-heatmap").dataset.mode === "tiles");
    await ready(page, "fit");
    const p = await page.evaluate(([row, col]) => {
      const c = document.querySelector("#diff-heatmap"), d = c.dataset, box = c.getBoundingClientRect();
      return { x: box.left + (col - Number(d.ox)) * Number(d.sx), y: box.top + (row - Number(d.oy)) * Number(d.sy) };
    }, [520, 150]);
    await page.mouse.dblclick(p.x, p.y);
    state = await page.waitForFunction(() => {
      const d = document.querySelector("#diff-heatmap").dataset;
      return d.state === "ready" && d.mode === "elements" ? { ...d } : null;
    }, null, { timeout: 30_000 }).then((h) => h.jsonValue());
    log(`zoomed in on row 520: ${Number(state.sx).toFixed(2)} px per element, ${state.mode}, ${state.colormap} [${state.limits}]`);
    const seen = await page.evaluate((samples) => {
      const c = document.querySelector("#diff-heatmap"), d = c.dataset, ctx = c.getContext("2d"), dpr = c.width / c.clientWidth;
      return samples.map((s) => {
        const e = window.tmDiffHeatmap.element(s.row, s.col);
        const x = (s.col + 0.5 - Number(d.ox)) * Number(d.sx), y = (s.row + 0.5 - Number(d.oy)) * Number(d.sy);
        return { ...s, got: e?.delta, rgba: e?.rgba, shown: Array.from(ctx.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data) };
      });
    }, ref.samples);
    for (const s of seen) check(s.got === s.delta && s.shown.join() === s.rgba.join(),
      `element (${s.row}, ${s.col}): Δ ${s.got} = numpy's ${s.delta}, drawn in its colour ${s.rgba?.join(",")} (canvas ${s.shown.join(",")})`);
    const changedRows = new Set(Object.keys(ref.changed_rows).map(Number));
    const unchangedColour = seen.find((s) => !changedRows.has(s.row)).rgba.join();
    check(seen.every((s) => changedRows.has(s.row) === (s.rgba.join() !== unchangedColour)), `only the changed rows ${[...changedRows].join(", ")} are drawn in another colour than Δ = 0's`);

    at("across layers");
    await page.waitForFunction(() => [...document.querySelectorAll("#diff-strips tr.strip-row")].every((r) => r.dataset.state === "loaded"), null, { timeout: 30_000 });
    const strips = await page.$$eval("#diff-strips tr.strip-row", (rows) => rows.map((r) => {
      const c = r.querySelector("canvas.diff-strip-thumb");
      const px = Array.from(c.getContext("2d").getImageData(0, 0, c.width, c.height).data);
      const cells = [];
      for (let i = 0; i < px.length; i += 4) cells.push(px.slice(i, i + 4).join(","));
      return { ...r.dataset, current: r.classList.contains("current"), grid: c.dataset.grid, limits: c.dataset.limits, cells };
    }));
    const maxAbs = Math.max(...doc.pairs.filter((p) => p.name.endsWith("mlp.down_proj.weight")).map((p) => num(p.difference.max_abs_delta)));
    check(strips.every((s) => s.limits === `0,${maxAbs}`), `every layer's strip has one colour scale, 0 to the largest max |Δ| ${maxAbs}: ${strips.map((s) => s.limits).join(" | ")}`);
    const zero = strips[1].cells[0]; // layer 1, tile (0, 0): unchanged
    const pattern = (s) => s.cells.map((c) => (c === zero ? "." : "#")).join("");
    check(strips[0].grid === "3,2" && pattern(strips[0]) === "#.#.#.", `layer 0's strip (column 10 changed): tile column 0 changed in every tile row: ${pattern(strips[0])}`);
    check(strips[1].grid === "3,2" && pattern(strips[1]) === "..####", `layer 1's strip (rows 300-303, 520 changed): tile rows 1 and 2 changed: ${pattern(strips[1])}`);
    check(strips.length === 2 && strips[1].name === CHANGED && strips[1].current, `both layers' pairs, this one current: ${strips.map((s) => s.layer).join(", ")}`);
    for (const s of strips) check(num(s.relChange) === num(doc.pairs.find((p) => p.name === s.name).difference.rel_change), `layer ${s.layer}: relative change ${s.relChange} as the document`);

    at("list page");
    await page.goto(`${base}/#/diff/0/1`);
    await page.waitForSelector("#diff-ranking tr.diff-pair");
    const first = await page.$eval("#diff-ranking tr.diff-pair", (r) => r.dataset.name);
    check(first === CHANGED, `the list ranks ${first} first`);
    const skipped = await page.textContent("#diff-skipped");
    check(skipped.includes(MISMATCH) && skipped.includes("shape [8, 8] in A against [8, 4] in B"), `the mismatched pair is listed with the reason: ${skipped.trim()}`);

    at("compute panel");
    await page.goto(`${base}/#/compute`);
    const run = await (await page.waitForSelector("#compute-diffs .diff-run")).evaluate((p) => ({ ...p.dataset, text: p.textContent }));
    check(run.a === "0" && run.b === "1" && run.placed === String(doc.pairs.length) && run.dequantized === "0" && run.tileBackends === "cpu" &&
            /difference tiles by the placed op diff\.tile_stats on cpu/.test(run.text), `the Compute panel lists the diff and where its ops ran: ${JSON.stringify(run)}`);

    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
    log(`document: ${doc.pairs.length} pairs; ${Object.keys(ref.changed_rows).length} changed rows`);
    console.log(`PASS: diff e2e (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 120_000);
