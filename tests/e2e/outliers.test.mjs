// End-to-end test: the heatmap never hides an outlier (issue 46), in Debian's Chromium (headless, WebGPU on
// SwiftShader), driven by playwright-core. It writes and indexes the demo checkpoint, exports the tensor that holds
// the planted outliers (two hot input columns and one 41.5 value) with `tensormorph export`, finds them in the
// values (numpy-free: the .npy is read here), opens the tensor page with abs_max and log, and at the default zoom
// and at every zoom-out step checks, on the canvas's own pixels, that:
//   - the drawn level's cells are each at least one device pixel (the browser never shrinks cells away);
//   - the cell holding the 41.5 value, and the cells of both hot columns at five rows, are drawn with exactly the
//     colour of their cell in the tile image the page coloured (window.tmHeatmap.pixels) at a device pixel whose
//     centre lies inside the cell or at most one pixel from it (the browser's nearest-neighbour scaling and
//     snapping), and that colour stands out from the tile's most common colour.
// It also checks that robust limits (mean, linear) come from the tensor's exact p1 / p99 (its detail's quantiles)
// and that the page says so, and that the outliers list names the 41.5, both hot columns, the NaN and the Inf at
// their positions in the values and centres the view on an entry when clicked.
//
// Environment: as tests/e2e/heatmap.test.mjs (TM_BIN, TM_E2E_OUT, CHROMIUM). Exits 0 with "SKIPPED: no chromium"
// only when Chromium is not installed; a Chromium without a WebGPU adapter fails (the page path is what is tested).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { checker, chromiumOrSkip, demoCheckpoint, e2eSetup, e2eTeardown, getJson, launchBrowser, readNpy, runTest, startServer, tm, watchErrors, WEB_DIST } from "./harness.mjs";

const TENSOR = "model.layers.0.mlp.down_proj.weight";
const ZOOM_OUT_STEPS = 3; // the page lets the view shrink to 1/8 of the fitted scale: three halvings

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[outliers]", () => step);

/** The planted outliers in row-major values of rows × cols: the largest finite |v| and the two columns whose
 *  mean |v| is largest (the demo's hot input columns). */
function findOutliers(values, rows, cols) {
  let point = { row: 0, col: 0, value: 0 };
  const colSum = new Float64Array(cols);
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) {
      const v = values[r * cols + c];
      if (!Number.isFinite(v)) continue;
      colSum[c] += Math.abs(v);
      if (Math.abs(v) > Math.abs(point.value)) point = { row: r, col: c, value: v };
    }
  const order = [...colSum.keys()].sort((a, b) => colSum[b] - colSum[a]);
  return { point, hot: order.slice(0, 2) };
}

/** Waits until the heatmap has drawn every wanted tile of the current view; returns its dataset. */
async function ready(page, what) {
  try {
    const h = await page.waitForFunction(() => {
      const c = document.querySelector("#heatmap");
      return c && c.dataset.state === "ready" && c.dataset.colourPath === "webgpu" ? { ...c.dataset } : null;
    }, null, { timeout: 120_000 });
    return await h.jsonValue();
  } catch (e) {
    const now = await page.evaluate(() => ({ ...document.querySelector("#heatmap")?.dataset, status: document.querySelector("#heatmap-status")?.textContent }));
    throw new Error(`heatmap not ready after ${what}: ${JSON.stringify(now)} (${e.message})`);
  }
}

/** For each element (row, col) of `targets`: the colour its cell has in the tile image the page coloured at the
 *  drawn level, the colour the canvas shows at a device pixel inside that cell, and the tile's most common colour. */
async function probe(page, targets, cols) {
  return page.evaluate(({ targets, cols }) => {
    const c = document.querySelector("#heatmap");
    const d = c.dataset;
    const dpr = c.width / c.clientWidth;
    const [ox, oy, sx, sy] = [d.ox, d.oy, d.sx, d.sy].map(Number);
    const [cellR, cellC] = [Number(d.cellRows), Number(d.cellCols)];
    const level = d.source === "overview" ? -1 : Number(d.level);
    const ctx = c.getContext("2d");
    const tiles = window.tmHeatmap.tiles().filter((t) => t.path === "webgpu" && t.level === level && t.key.includes("|abs_max|log|"));
    return targets.map(({ row, col, what }) => {
      const t = tiles.find((t) => row >= t.r0 && row < t.r0 + t.srcH * cellR && col >= t.c0 && col < t.c0 + t.srcW * cellC);
      if (!t) return { what, error: `no level-${level} tile covers element (${row}, ${col})` };
      const [ci, cj] = [Math.floor((row - t.r0) / cellR), Math.floor((col - t.c0) / cellC)];
      const px = t.srcW; // one bitmap pixel per cell on the page path
      const bitmap = window.tmHeatmap.pixels(t.key);
      const cell = bitmap.slice(4 * (ci * px + cj), 4 * (ci * px + cj) + 4);
      const counts = new Map();
      for (let k = 0; k < bitmap.length; k += 4) {
        const key = bitmap.slice(k, k + 4).join(",");
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      const modal = [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
      // The cell's span in device pixels, and a pixel whose centre lies inside it.
      const x0 = (t.c0 + cj * cellC - ox) * sx * dpr, x1 = (Math.min(cols, t.c0 + (cj + 1) * cellC) - ox) * sx * dpr;
      const y0 = (t.r0 + ci * cellR - oy) * sy * dpr, y1 = (t.r0 + (ci + 1) * cellR - oy) * sy * dpr;
      const kx = Math.ceil(x0 - 0.5), ky = Math.ceil(y0 - 0.5);
      if (!(kx + 0.5 < x1 && ky + 0.5 < y1)) return { what, error: `the cell spans less than a device pixel (${(x1 - x0).toFixed(2)} × ${(y1 - y0).toFixed(2)})` };
      if (kx < 0 || ky < 0 || kx >= c.width || ky >= c.height) return { what, offscreen: true };
      // The device pixels whose centres lie inside the cell's span, and one pixel around it: the browser's
      // nearest-neighbour scaling and its snapping of the destination to whole device pixels may put the cell's
      // colour one pixel off the ideal geometry (seen at exactly 1.00 px per cell). The first pixel inside the span
      // showing the cell's colour, else the nearest one around it, else the first pixel inside the span.
      const inside = [], around = [];
      for (let y = ky - 1; y + 0.5 < y1 + 1; y++)
        for (let x = kx - 1; x + 0.5 < x1 + 1; x++) {
          if (x < 0 || y < 0 || x >= c.width || y >= c.height) continue;
          (x >= kx && y >= ky && x + 0.5 < x1 && y + 0.5 < y1 ? inside : around).push([x, y]);
        }
      const colour = ([x, y]) => Array.from(ctx.getImageData(x, y, 1, 1).data).join(",");
      const hit = inside.find((p) => colour(p) === cell.join(",")) ?? around.find((p) => colour(p) === cell.join(","));
      const at = hit ?? inside[0];
      return { what, cell: cell.join(","), shown: colour(at), modal, at, offset: Boolean(hit && !inside.includes(hit)),
               span: [(x1 - x0).toFixed(2), (y1 - y0).toFixed(2)] };
    });
  }, { targets, cols });
}

async function main() {
  const t0 = Date.now();
  const { chromium, tmp, env } = e2eSetup("outliers", check);
  let server = null;
  let context = null;
  try {
    step = "demo checkpoint";
    const demo = demoCheckpoint(tmp, env);
    const npy = join(tmp, "down_proj.npy");
    tm(["export", demo, TENSOR, "-o", npy], env);
    const { values, shape } = readNpy(npy);
    const [rows, cols] = shape;
    const { point, hot } = findOutliers(values, rows, cols);
    check(point.value === 41.5 && hot.length === 2, `the planted outliers: ${point.value} at (${point.row}, ${point.col}), hot columns ${hot.join(" and ")} of ${rows} × ${cols}`);
    const targets = [{ row: point.row, col: point.col, what: `the ${point.value} value` }];
    for (const col of hot) for (const f of [0.1, 0.3, 0.5, 0.7, 0.9]) targets.push({ row: Math.floor(f * rows), col, what: `hot column ${col} at row ${Math.floor(f * rows)}` });

    step = "a checkpoint with NaN and Inf";
    // Written here (the safetensors layout: an 8-byte little-endian header length, the JSON header, the bytes): "bad"
    // holds 1 NaN and 2 infinities, "clean" none. Served second, so the demo stays checkpoint 0.
    const damaged = join(tmp, "damaged.safetensors");
    const header = Buffer.from(JSON.stringify({ bad: { dtype: "F32", shape: [2, 3], data_offsets: [0, 24] },
                                                clean: { dtype: "F32", shape: [4], data_offsets: [24, 40] } }));
    const data = Buffer.from(new Float32Array([1, NaN, 2, Infinity, -Infinity, 3, 0.5, 1.5, 2.5, 3.5]).buffer);
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(damaged, Buffer.concat([length, header, data]));

    step = "serve";
    server = await startServer([demo, damaged, "--web-root", WEB_DIST], env);
    const base = server.url.split("?")[0].replace(/\/$/, "");
    const detail = await getJson(server.url, `/api/tensors/0/${encodeURIComponent(TENSOR)}`);

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "chromium-profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${base}/#/tensor/0/${encodeURIComponent(TENSOR)}`);

    step = "robust limits";
    let state = await ready(page, "opening the tensor");
    const q = Object.fromEntries(detail.stats.quantiles.values.map((v) => [v.p, Number(v.value)]));
    const m = Math.max(Math.abs(q[0.01]), Math.abs(q[0.99]));
    const legend = await page.locator(".legend-label").allTextContents();
    check(/robust: the tensor's p1 to p99 \(exact/.test(state.limitsSource ?? ""), `robust limits come from the tensor's quantiles: "${state.limitsSource}"`);
    check(/\(robust: the tensor's p1 to p99/.test(await page.textContent("#heatmap-status")), "and the status line says which limits are in force");
    log(`p1 ${q[0.01]}, p99 ${q[0.99]}; legend ${legend.join(" / ")} (a diverging map: ±${m})`);

    step = "abs_max, log";
    await page.selectOption("#stat", "abs_max");
    await page.selectOption("#transform", "log");
    for (let zoom = 0; zoom <= ZOOM_OUT_STEPS; zoom++) {
      step = zoom ? `zoom-out step ${zoom}` : "default zoom";
      if (zoom) await page.click("button[title='zoom out']");
      state = await ready(page, step);
      const dpr = await page.evaluate(() => { const c = document.querySelector("#heatmap"); return c.width / c.clientWidth; });
      const cellPx = [Number(state.cellRows) * Number(state.sy) * dpr, Number(state.cellCols) * Number(state.sx) * dpr];
      check(cellPx[0] >= 1 - 1e-9 && cellPx[1] >= 1 - 1e-9,
        `${step}: ${Number(state.sx).toFixed(3)} px per element, level ${state.level} (${state.source}), a cell is ${state.cellRows} × ${state.cellCols} elements = ${cellPx.map((v) => v.toFixed(2)).join(" × ")} device px`);
      const seen = await probe(page, targets, cols);
      for (const s of seen) {
        if (s.offscreen) continue;
        check(!s.error, `${step}: ${s.what}: ${s.error ?? "its cell found"}`);
        check(s.shown === s.cell && s.cell !== s.modal,
          `${step}: ${s.what} is drawn in its cell's colour ${s.cell} at device pixel ${s.at}${s.offset ? " (one pixel off the ideal span)" : ""} (cell ${s.span.join(" × ")} px; the tile's common colour ${s.modal}; the canvas shows ${s.shown})`);
      }
    }

    step = "the outliers list";
    // The server's list (from the pyramid, each resolved on its tile's values) names the planted elements exactly,
    // and each entry centres the heatmap on its element.
    await page.waitForFunction(() => ["ready", "error"].includes(document.querySelector("#outliers")?.dataset.state), null, { timeout: 60_000 });
    const entries = await page.$$eval("#outliers button.outlier", (bs) => bs.map((b) => ({ ...b.dataset, text: b.textContent })));
    const at = (kind) => entries.filter((e) => e.kind === kind).map((e) => `${e.row},${e.col}`);
    const nonfinite = (test) => values.map((v, i) => (test(v) ? `${Math.floor(i / cols)},${i % cols}` : null)).filter(Boolean);
    check(entries[0]?.kind === "abs_max" && `${entries[0].row},${entries[0].col}` === `${point.row},${point.col}` && /^\|x\| large: 41\.5 at row/.test(entries[0].text),
      `the first entry is the ${point.value} at (${point.row}, ${point.col}): "${entries[0]?.text}"`);
    const hotListed = hot.filter((c) => entries.some((e) => e.kind === "abs_max" && Number(e.col) === c));
    check(hotListed.length === 2, `both hot columns (${hot.join(", ")}) have entries among the largest |x| (${at("abs_max").join(" ")})`);
    check(JSON.stringify(at("nan")) === JSON.stringify(nonfinite(Number.isNaN)) && JSON.stringify(at("inf")) === JSON.stringify(nonfinite((v) => v === Infinity || v === -Infinity)),
      `the NaN at ${at("nan").join(" ")} and the Inf at ${at("inf").join(" ")} are where the values have them`);
    await page.click("#outliers button.outlier >> nth=0");
    await page.waitForFunction(() => { const c = document.querySelector("#heatmap"); return c.dataset.centred && c.dataset.level === "0" && c.dataset.state === "ready"; }, null, { timeout: 60_000 })
      .catch(() => {});  // the check below says what was shown instead
    state = await ready(page, "jumping to the first outlier");
    check(state.centred === `${point.row},${point.col},0` && state.level === "0",
      `clicking it centres the view on that element at level 0 (${state.centred}, level ${state.level}, ${Number(state.sx).toFixed(1)} px per element)`);

    step = "save figure";
    const saved = await page.evaluate(() => {
      const a = document.getElementById("heatmap-save-svg");
      a.dispatchEvent(new PointerEvent("pointerdown"));
      return decodeURIComponent(a.href.replace(/^data:image\/svg\+xml;charset=utf-8,/, ""));
    });
    const bar = [...saved.matchAll(/class="tick-bar">([^<]*)</g)].map((m) => m[1]);
    const columnTicks = [...saved.matchAll(/class="tick-x">([^<]*)</g)].map((m) => m[1]);
    check(saved.startsWith("<svg") && saved.includes(`<title>${TENSOR}: abs_max per cell, log</title>`) && bar[bar.length - 1] === "41.5" && columnTicks.length >= 2 &&
      columnTicks.every((c) => /^\d+$/.test(c)), `the heatmap's figure (SVG) has its title, column indices ${columnTicks.join(", ")} and a colour bar up to ${bar[bar.length - 1]} (${bar.join(", ")})`);

    step = "line profiles";
    // The row holding the 41.5 and the column holding the NaN, plotted from GET /api/profile: every value counted,
    // the finite range the values' own, the NaN marked; a 1-D tensor is plotted when its page opens.
    const plotted = async (along, at) => {
      await page.selectOption("#profile-axis", along);
      await page.fill("#profile-index", String(at));
      await page.click("#profile-plot-button");
      await page.waitForFunction((want) => document.querySelector("#profile")?.dataset.state === "ready" && document.querySelector("#profile").dataset.shown === want, `${along},${at}`, { timeout: 60_000 });
      return page.evaluate(() => ({ ...document.querySelector("#profile-plot").dataset, caption: document.querySelector("#profile-plot-caption").textContent }));
    };
    const finite = (xs) => xs.filter(Number.isFinite);
    const rowValues = values.slice(point.row * cols, (point.row + 1) * cols);
    let shownProfile = await plotted("row", point.row);
    check(shownProfile.count === String(cols) && shownProfile.range === `${Math.min(...finite(rowValues))},${Math.max(...finite(rowValues))}` && shownProfile.nonfinite === "0",
      `row ${point.row}: ${shownProfile.count} values from ${shownProfile.range} ("${shownProfile.caption}")`);
    const nanAt = values.findIndex(Number.isNaN);
    const colValues = values.filter((_, i) => i % cols === nanAt % cols);
    shownProfile = await plotted("col", nanAt % cols);
    check(shownProfile.count === String(rows) && shownProfile.nonfinite === "1" && shownProfile.range === `${Math.min(...finite(colValues))},${Math.max(...finite(colValues))}`,
      `column ${nanAt % cols}: ${shownProfile.count} values, its NaN marked ("${shownProfile.caption}")`);
    const norm = "model.layers.0.input_layernorm.weight";
    const normNpy = join(tmp, "norm.npy");
    tm(["export", demo, norm, "-o", normNpy], env);
    const normValues = readNpy(normNpy).values;
    await page.goto(`${base}/#/tensor/0/${encodeURIComponent(norm)}`);
    await page.waitForFunction(() => document.querySelector("#profile")?.dataset.state === "ready", null, { timeout: 60_000 });
    const oneD = await page.evaluate(() => ({ ...document.querySelector("#profile-plot").dataset }));
    check(oneD.count === String(normValues.length) && oneD.range === `${Math.min(...normValues)},${Math.max(...normValues)}` && /its values/.test(oneD.title),
      `the 1-D ${norm} is drawn as a line plot of its ${oneD.count} values (${oneD.range})`);

    step = "the inventory flags NaN and Inf";
    await page.goto(`${base}/`);
    await page.click("#view-list");
    await page.waitForSelector("#inventory tbody tr[data-name]", { timeout: 60_000 });
    const listed = (await getJson(server.url, "/api/tensors")).tensors;
    const want = listed.filter((t) => t.stats && t.stats.nan_count + t.stats.inf_count > 0).map((t) => `${t.checkpoint}/${t.name}=${t.stats.nan_count + t.stats.inf_count}`).sort();
    const flagged = await page.$$eval("#inventory tbody tr.nonfinite", (rows) => rows.map((r) => `${r.dataset.checkpoint}/${r.dataset.name}=${r.dataset.nonfinite}`).sort());
    check(want.includes("1/bad=3") && !want.some((w) => w.startsWith("1/clean")), `the API counts bad's 1 NaN and 2 infinities (${want.join(", ")})`);
    check(JSON.stringify(flagged) === JSON.stringify(want), `the flagged rows are the tensors the API counts NaN or Inf in (${flagged.join(", ")})`);
    const title = await page.getAttribute('#inventory tbody tr[data-name="bad"] td.num span[title]', "title");
    check(title === "1 NaN, 2 ±Inf", `its NaN/Inf cell says how many of each ("${title}")`);
    const status = await page.getAttribute("#inventory-status", "data-nonfinite").catch(() => null);
    check(status === String(want.length), `the status line counts the tensors holding NaN or Inf (${status})`);

    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
    console.log(`PASS: outliers e2e (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 300000);
