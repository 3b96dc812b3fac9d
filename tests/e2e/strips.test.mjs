// End-to-end test of the tensor page's comparison strips ("Across layers", web/src/strips.ts) in Debian's
// Chromium (headless, playwright-core from web/'s node_modules): writes a 4-layer demo checkpoint, indexes
// and serves it (with the GGUF fixture ../shared/fixtures/gguf/tiny-mixed.gguf as a second checkpoint when it
// exists; otherwise "SKIPPED: quantized strips (no fixtures …)"), and checks, against GET /api/tensors:
// - the grouping functions the page exposes (window.tmLayerGroups) on a few names;
// - on the page of layer 2's down_proj, #strips lists exactly the API's 4 tensors of that role in layer
//   order, layer 2 is highlighted, each row's data-mean / data-std / data-absmax equal the API's stats;
// - rows far below the view fetch nothing until scrolled to, and no more thumbnail fetches ran at once than the section allows (data-max-inflight ≤ data-concurrency);
// - every thumbnail loaded (naturalWidth > 0), all share the section's data-limits, which for "full"
//   limits are ±(max abs_max over the layers) as docs/viewer.md says, and the cells of each are not blank;
// - the stat selector redraws every thumbnail with new shared limits (abs_max: [0, max(|mean| + 3 std)]);
// - with the GGUF fixture, a quantized tensor's strip shows every layer's thumbnail;
// - a render the server refuses (a 409 simulated with page.route) shows the server's message in its row;
// - clicking another layer's number opens that tensor's page;
// then saves build/e2e/strips.png (the section) and checks it is not a single colour.
//
// Environment: TM_BIN (default build/tensormorph), TM_E2E_OUT (default e2e/ beside TM_BIN), TM_FIXTURES,
// CHROMIUM. Exits 0 with "SKIPPED: no chromium" only when Chromium is not installed.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { FIXTURES, OUT_DIR, WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, getJson, launchBrowser, pngStats, runTest, startServer, tm, watchErrors } from "./harness.mjs";

const LAYERS = 4;
const ROLE = /^model\.layers\.(\d+)\.mlp\.down_proj\.weight$/;
const TENSOR = "model.layers.2.mlp.down_proj.weight";
const GGUF = join(FIXTURES, "gguf", "tiny-mixed.gguf");
const BAR_WIDTH = 24; // the colour bar right of a render's cells (src/render/cell_image.h)

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[e2e strips]", () => step);

/** The strip section as data: its dataset and every row's dataset, link and thumbnail. */
function stripsSnapshot(page) {
  return page.evaluate(() => {
    const s = document.querySelector("#strips");
    if (!s) return null;
    const rows = [...s.querySelectorAll("tr.strip-row")].map((r) => {
      const img = r.querySelector("img.strip-thumb");
      return {
        ...r.dataset,
        current: r.classList.contains("current"),
        ariaCurrent: r.getAttribute("aria-current"),
        href: r.querySelector("a.strip-link")?.getAttribute("href"),
        img: img ? { limits: img.dataset.limits, naturalWidth: img.naturalWidth, complete: img.complete } : null,
        error: r.querySelector(".strip-error")?.textContent ?? null,
      };
    });
    return { ...s.dataset, rows };
  });
}

/** Waits until every row of #strips is settled (loaded, error or unavailable) and returns the snapshot. The
 *  strips are kept at the top of the view while it waits, as a person looking at them would: rows load only
 *  near the view (lazy loading, checked on its own above), and rows that grow when their thumbnails arrive can
 *  push the last row out of the observer's margin, where it rightly stays "waiting". */
async function waitSettled(page, what) {
  const settled = () => {
    const s = document.querySelector("#strips");
    if (!s || s.dataset.state !== "ready") return false;
    s.scrollIntoView({ block: "start" });
    const rows = [...s.querySelectorAll("tr.strip-row")];
    return rows.length > 0 && rows.every((r) => ["loaded", "error", "unavailable"].includes(r.dataset.state));
  };
  try {
    await page.waitForFunction(settled, null, { timeout: 180_000 });
  } catch (e) {
    throw new Error(`strips not settled after ${what}: ${JSON.stringify(await stripsSnapshot(page))} (${e.message})`);
  }
  return stripsSnapshot(page);
}

/** Colours and variance of each thumbnail's cells (the colour bar cut off): the PNG bytes the page shows
 *  (its blob URL), measured by the harness's pngStats. */
async function thumbPixels(page, barWidth) {
  const thumbs = await page.evaluate(() =>
    Promise.all([...document.querySelectorAll("#strips img.strip-thumb")].map(async (img) => {
      const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
      let binary = "";
      for (const b of bytes) binary += String.fromCharCode(b);
      return { name: img.closest("tr").dataset.name, png: btoa(binary) };
    })));
  return Promise.all(thumbs.map(async (t) => ({ name: t.name, ...(await pngStats(page, t.png, barWidth)) })));
}

const numOf = (v) => (typeof v === "number" ? v : v === "inf" ? Infinity : v === "-inf" ? -Infinity : NaN);

async function groupingChecks(page) {
  step = "grouping functions";
  const r = await page.evaluate(() => {
    const g = window.tmLayerGroups;
    const names = ["blk.10.attn_q.weight", "blk.2.attn_q.weight", "blk.2.attn_k.weight", "output.weight", "blk.0.attn_q.weight",
      "model.layers.3.experts.7.w1", "model.layers.4.experts.7.w1", "model.layers.4.experts.6.w1", "a/5/b", "a/6/b", "a.5/b"];
    return {
      split: g.splitLayer("model.layers.12.mlp.down_proj.weight"),
      none: g.splitLayer("model.norm.weight"),
      gguf: g.layerSiblings("blk.2.attn_q.weight", names),
      experts: g.layerSiblings("model.layers.3.experts.7.w1", names),
      slash: g.layerSiblings("a/5/b", names),
      query: g.siblingQuery("model.layers.12.mlp.down_proj.weight"),
      noLayer: g.layerSiblings("output.weight", names),
    };
  });
  check(JSON.stringify(r.split) === JSON.stringify({ prefix: "model.layers.", layer: 12, digits: "12", suffix: ".mlp.down_proj.weight" }), `splitLayer cuts at the first numeric segment: ${JSON.stringify(r.split)}`);
  check(r.none === null && r.noLayer.length === 0, "a name without a numeric segment has no layer");
  check(JSON.stringify(r.gguf.map((m) => m.name)) === JSON.stringify(["blk.0.attn_q.weight", "blk.2.attn_q.weight", "blk.10.attn_q.weight"]), `GGUF names group by role in numeric layer order: ${r.gguf.map((m) => m.name).join(", ")}`);
  check(JSON.stringify(r.experts.map((m) => m.layer)) === JSON.stringify([3, 4]) && r.experts.every((m) => m.name.includes("experts.7")), "a later numeric segment (the expert) stays fixed");
  check(JSON.stringify(r.slash.map((m) => m.name)) === JSON.stringify(["a/5/b", "a/6/b"]), "'/' separates segments too, and the separators must match");
  check(r.query === ".mlp.down_proj.weight", `the search term is the longer side of the layer segment (${r.query})`);
}

async function main() {
  const { chromium, tmp, env } = e2eSetup("strips", check);
  let server = null;
  let context = null;
  try {
    step = "demo checkpoint";
    const demo = join(tmp, "demo");
    tm(["demo", "--out", demo, "--layers", String(LAYERS)], env);
    tm(["index", demo], env);
    log(`wrote and indexed ${demo} (${LAYERS} layers)`);

    step = "serve";
    const hasGguf = existsSync(GGUF);
    server = await startServer([demo, ...(hasGguf ? [GGUF] : []), "--web-root", WEB_DIST], env);
    const base = server.url;
    log(`server at ${base}`);
    const list = await getJson(base, "/api/tensors?limit=100000");
    const role = list.tensors
      .filter((t) => t.checkpoint === "0" && ROLE.test(t.name))
      .map((t) => ({ ...t, layer: Number(ROLE.exec(t.name)[1]) }))
      .sort((a, b) => a.layer - b.layer);
    check(role.length === LAYERS && role.some((t) => t.name === TENSOR), `the API lists ${LAYERS} tensors of the role of ${TENSOR}`);

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "chromium-profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors = watchErrors(page);

    step = "open tensor";
    await page.setViewportSize({ width: 1400, height: 600 }); // the strips start below the fold (lazy loading)
    await page.goto(`${base}#/tensor/0/${encodeURIComponent(TENSOR)}`, { waitUntil: "domcontentloaded" });
    await page.waitForSelector("#tensor-name", { timeout: 60_000 });
    check((await page.textContent("#tensor-name")) === TENSOR, "the tensor page of layer 2 opened");
    await groupingChecks(page);

    step = "strip rows";
    await page.waitForSelector("#strips[data-state=ready]", { timeout: 60_000 });
    let snap = await stripsSnapshot(page);
    check(JSON.stringify(snap.rows.map((r) => r.name)) === JSON.stringify(role.map((t) => t.name)), `#strips lists exactly the API's ${LAYERS} tensors of the role in layer order: ${snap.rows.map((r) => r.layer).join(", ")}`);
    check(JSON.stringify(snap.rows.map((r) => Number(r.layer))) === JSON.stringify(role.map((t) => t.layer)), "each row's data-layer is its layer number");
    const current = snap.rows.filter((r) => r.current);
    check(current.length === 1 && current[0].name === TENSOR && current[0].ariaCurrent === "page", "exactly the current layer (2) is highlighted");
    for (const [i, r] of snap.rows.entries()) {
      const s = role[i].stats;
      check(Number(r.mean) === numOf(s.mean) && Number(r.std) === numOf(s.std) && Number(r.absmax) === numOf(s.abs_max), `layer ${r.layer}: data-mean ${r.mean}, data-std ${r.std}, data-absmax ${r.absmax} equal the API's stats`);
      check(r.href === `#/tensor/0/${encodeURIComponent(r.name)}`, `layer ${r.layer} links to its tensor page`);
    }

    step = "lazy loading";
    await page.waitForTimeout(2000); // time for any (wrong) eager fetch to start
    const below = await page.evaluate(() =>
      [...document.querySelectorAll("#strips tr.strip-row")].filter((r) => r.getBoundingClientRect().top > window.innerHeight + 250).map((r) => r.dataset.state),
    );
    check(below.length > 0 && below.every((st) => st === "waiting"), `rows far below the view fetch nothing until scrolled to (${below.length} rows: ${below.join(", ")})`);
    await page.setViewportSize({ width: 1400, height: 1000 });

    step = "thumbnails";
    await page.locator("#strips").scrollIntoViewIfNeeded();
    snap = await waitSettled(page, "scrolling to the strips");
    check(snap.rows.every((r) => r.state === "loaded"), `every thumbnail loaded${snap.rows.some((r) => r.error) ? ": " + snap.rows.map((r) => r.error).join(" | ") : ""}`);
    check(Number(snap.maxInflight) >= 1 && Number(snap.maxInflight) <= Number(snap.concurrency), `at most ${snap.concurrency} thumbnail fetches ran at once (saw ${snap.maxInflight})`);
    const limits = snap.rows.map((r) => r.img?.limits);
    check(limits.every((l) => l && l === snap.limits), `every thumbnail shares the section's limits ${snap.limits}`);
    check(snap.rows.every((r) => r.img.complete && r.img.naturalWidth > 0), `every thumbnail decoded (naturalWidth ${snap.rows.map((r) => r.img.naturalWidth).join(", ")})`);
    const [lo, hi] = snap.limits.split(",").map(Number);
    check(lo < hi && lo < 0 && hi > 0 && snap.colormap === "RdBu_r", `robust mean limits are a signed range with a diverging map (${lo}, ${hi}, ${snap.colormap})`);
    for (const p of await thumbPixels(page, BAR_WIDTH))
      check(p.variance > 0 && p.colours > 2, `the thumbnail of ${p.name} is not blank (${p.colours} colours, variance ${p.variance.toFixed(1)})`);

    step = "full limits";
    await page.selectOption("#strips-limits", "full");
    snap = await waitSettled(page, "choosing full limits");
    const absMax = Math.max(...role.map((t) => numOf(t.stats.abs_max)));
    check(snap.limitsMode === "full" && snap.limits === `${-absMax},${absMax}`, `full limits are ±(max abs_max over the layers) = ${snap.limits}`);
    check(snap.rows.every((r) => r.state === "loaded" && r.img.limits === snap.limits && r.img.naturalWidth > 0), "every thumbnail was redrawn with them");

    step = "stat selector";
    // Back to robust limits (full ones leave the small layers a single colour), then the abs_max statistic.
    await page.selectOption("#strips-limits", "robust");
    snap = await waitSettled(page, "back to robust limits");
    check(snap.limits === `${lo},${hi}`, "robust limits are restored");
    await page.selectOption("#strips-stat", "abs_max");
    snap = await waitSettled(page, "choosing abs_max");
    const spread = Math.max(...role.map((t) => Math.abs(numOf(t.stats.mean)) + 3 * numOf(t.stats.std)));
    check(snap.stat === "abs_max" && snap.limits === `0,${Math.min(absMax, spread)}` && snap.colormap === "viridis", `robust abs_max thumbnails use [0, max(|mean| + 3 std)] and viridis (${snap.limits})`);
    check(snap.rows.every((r) => r.state === "loaded" && r.img.limits === snap.limits), "every thumbnail was redrawn with the new stat");
    for (const p of await thumbPixels(page, BAR_WIDTH)) check(p.variance > 0, `the abs_max thumbnail of ${p.name} is not blank (${p.colours} colours)`);
    await page.selectOption("#strips-stat", "mean");
    snap = await waitSettled(page, "back to mean");

    step = "screenshot";
    const shotPath = join(OUT_DIR, "strips.png");
    const shot = await page.locator("#strips").screenshot({ path: shotPath });
    const shotStats = await pngStats(page, shot.toString("base64"));
    check(shotStats.colours > 16 && shotStats.variance > 0, `the screenshot ${shotPath} is not a single colour (${shotStats.colours}+ colours)`);

    step = "navigate";
    const target = role.find((t) => t.layer === 1);
    await page.click(`#strips tr.strip-row[data-layer="1"] a.strip-link`);
    await page.waitForFunction((n) => document.querySelector("#tensor-name")?.textContent === n, target.name, { timeout: 60_000 });
    check(decodeURIComponent(new URL(page.url()).hash) === `#/tensor/0/${target.name}`, `clicking layer 1 opened ${target.name}`);
    await page.waitForSelector("#strips[data-state=ready]", { timeout: 60_000 });
    snap = await stripsSnapshot(page);
    check(snap.rows.filter((r) => r.current).map((r) => r.name).join() === target.name, "its strip highlights layer 1");

    if (hasGguf) {
      step = "quantized strips";
      // Quantized tensors (here Q3_K and Q4_0) render like dense ones: the server draws them from the pyramid
      // of their dequantized values (or from the values when an index has no pyramid).
      const q = "blk.1.attn_q.weight";
      const qRole = list.tensors.filter((t) => t.checkpoint === "1" && /^blk\.\d+\.attn_q\.weight$/.test(t.name)).map((t) => t.name);
      await page.goto(`${base}#/tensor/1/${encodeURIComponent(q)}`);
      await page.waitForFunction((n) => document.querySelector("#tensor-name")?.textContent === n, q, { timeout: 60_000 });
      await page.waitForSelector("#strips[data-state=ready]", { timeout: 60_000 });
      await page.locator("#strips").scrollIntoViewIfNeeded();
      snap = await waitSettled(page, "opening a quantized tensor");
      check(JSON.stringify(snap.rows.map((r) => r.name)) === JSON.stringify(qRole), `its strip lists the API's ${qRole.length} attn_q tensors`);
      check(snap.rows.every((r) => r.state === "loaded" && r.img.naturalWidth > 0 && r.img.limits === snap.limits), `each quantized layer shows a thumbnail with the shared limits ${snap.limits}`);
    } else console.log("SKIPPED: quantized strips (no fixtures: ../shared/fixtures/gguf/tiny-mixed.gguf is absent)");

    step = "render error";
    // A render the server refuses (simulated: layer 3's answered with a 409 and the API's error body) shows
    // the server's message in its row, not a broken image; the other rows still load.
    const refused = role.find((t) => t.layer === 3).name;
    const message = "simulated: no backend here reads this tensor's format";
    const before = pageErrors.length;
    await page.route((url) => url.pathname === `/api/render/0/${encodeURIComponent(refused)}.png`, (route) =>
      route.fulfill({ status: 409, contentType: "application/json", body: JSON.stringify({ error: message }) }),
    );
    await page.goto(`${base}#/tensor/0/${encodeURIComponent(TENSOR)}`);
    await page.waitForFunction((n) => document.querySelector("#tensor-name")?.textContent === n, TENSOR, { timeout: 60_000 });
    await page.waitForSelector("#strips[data-state=ready]", { timeout: 60_000 });
    await page.locator("#strips").scrollIntoViewIfNeeded();
    snap = await waitSettled(page, "a refused render");
    const bad = snap.rows.find((r) => r.name === refused);
    check(bad.state === "error" && !bad.img && bad.error.includes(`409: ${message}`), `the refused layer shows the server's error text: ${bad.error}`);
    check(snap.rows.filter((r) => r.name !== refused).every((r) => r.state === "loaded"), "the other layers still load");
    await page.unrouteAll();
    // The only page errors allowed here are the browser's lines for the simulated 409.
    const simulated = pageErrors.splice(before).filter((e) => !/409/.test(e));
    pageErrors.push(...simulated);

    step = "errors";
    const banner = await page.evaluate(() => (document.querySelector("#error").hidden ? "" : document.querySelector("#error").textContent));
    check(banner === "", `no error banner${banner ? ": " + banner : ""}`);
    check(pageErrors.length === 0, `no page errors${pageErrors.length ? ": " + pageErrors.join(" | ") : ""}`);
    console.log("PASS: strips e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 540000);
