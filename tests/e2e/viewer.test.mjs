// End-to-end test of the viewer in Debian's Chromium (headless, driven by playwright-core from web/'s
// node_modules): writes the demo checkpoint, starts `tensormorph serve` on it (with the GGUF fixture
// ../shared/fixtures/gguf/tiny-mixed.gguf as a second checkpoint when it exists; otherwise it prints
// "SKIPPED: quantization facts (no fixtures …)"), checks the inventory tree against GET /api/tensors and
// /api/checkpoints (root and children sums, a block expanded, search, a leaf opened, file / shard on the
// tensor page), the quantization table of quantized tensors against the API, then in the list view
// searches a tensor, opens it, waits for the heatmap, checks the canvas is not blank, zooms and pans, hovers and
// checks the read-out against the API's tile JSON, switches the colour map, and saves a screenshot to
// build/e2e/ that must not be a single colour. Then the placement of the last render on the tensor page
// (equal to the API's report), and the Compute panel on a second server with the test plugins and its own
// settings directory: the backends listed equal GET /api/compute's (with their kernels' inputs), an
// unavailable one shows its reason, the per-op planner column equals the API's placement_preview (under
// auto and after each save), prefer / never are changed through the UI and saved (GET /api/compute
// returns them; a 400 is shown), a fallback is shown on the tensor page, then restored;
// compute-panel.png is saved beside viewer.png.
//
// Environment: TM_BIN (default build/tensormorph), TM_E2E_OUT (default e2e/ beside TM_BIN), TM_FIXTURES
// (default ../shared/fixtures beside the checkout), CHROMIUM (default /usr/lib/chromium/chromium or
// /usr/bin/chromium). Exits 0 with "SKIPPED: no chromium" only when Chromium is not installed.
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { FIXTURES, OUT_DIR, TM_BIN, WEB_DIST, checker, chromiumOrSkip, demoCheckpoint, e2eSetup, e2eTeardown, getJson, launchBrowser, runTest, startServer, watchErrors } from "./harness.mjs";

const TENSOR = "model.layers.0.mlp.down_proj.weight";
const SEARCH = "down_proj";
const GGUF = join(FIXTURES, "gguf", "tiny-mixed.gguf");

const chromiumPath = chromiumOrSkip();

let step = "setup";
const { log, check } = checker("[e2e]", () => step);



/** RGBA statistics of a canvas, or of a PNG (base64) decoded by the browser. */
async function pixelStats(page, { selector, png }) {
  return page.evaluate(
    async ({ selector, png }) => {
      let data;
      if (selector) {
        const c = document.querySelector(selector);
        data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      } else {
        const bytes = Uint8Array.from(atob(png), (ch) => ch.charCodeAt(0));
        const bmp = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
        const c = new OffscreenCanvas(bmp.width, bmp.height);
        const ctx = c.getContext("2d");
        ctx.drawImage(bmp, 0, 0);
        data = ctx.getImageData(0, 0, bmp.width, bmp.height).data;
      }
      const colours = new Set();
      let sum = 0;
      let sum2 = 0;
      let grey = 0;
      let opaque = 0;
      const n = data.length / 4;
      for (let i = 0; i < data.length; i += 4) {
        const v = data[i] + data[i + 1] + data[i + 2];
        sum += v;
        sum2 += v * v;
        if (colours.size < 4096) colours.add((data[i] << 24) | (data[i + 1] << 16) | (data[i + 2] << 8) | data[i + 3]);
        if (data[i + 3] === 255) {
          opaque++;
          if (data[i] === data[i + 1] && data[i + 1] === data[i + 2]) grey++;
        }
      }
      const mean = sum / n;
      return { pixels: n, colours: colours.size, variance: sum2 / n - mean * mean, greyFraction: opaque ? grey / opaque : 0 };
    },
    { selector, png },
  );
}

async function waitReady(page, what) {
  // The heatmap's state as one snapshot, taken when it is ready (every visible tile drawn) or failed.
  const snapshot = () => {
    const c = document.querySelector("#heatmap");
    if (!c || !["ready", "error"].includes(c.dataset.state)) return null;
    return { ...c.dataset, status: document.querySelector("#heatmap-status")?.textContent, error: document.querySelector("#error")?.textContent };
  };
  let state;
  try {
    state = await (await page.waitForFunction(snapshot, null, { timeout: 120_000 })).jsonValue();
  } catch (e) {
    const now = await page.evaluate(() => ({ ...document.querySelector("#heatmap")?.dataset, status: document.querySelector("#heatmap-status")?.textContent, error: document.querySelector("#error")?.textContent }));
    throw new Error(`heatmap not ready after ${what}: ${JSON.stringify(now)} (${e.message})`);
  }
  if (state.state !== "ready") throw new Error(`heatmap failed after ${what}: ${JSON.stringify(state)}`);
  return state;
}

async function main() {
  const { chromium, tmp, env } = e2eSetup("viewer", check);
  let server = null;
  let context = null;
  try {
    step = "demo checkpoint";
    const demo = demoCheckpoint(tmp, env);
    log(`wrote and indexed ${demo}`);

    step = "serve";
    // The GGUF reference fixture (quantized tensors of many types), as a second checkpoint when it is here.
    const hasGguf = existsSync(GGUF);
    server = await startServer([demo, ...(hasGguf ? [GGUF] : []), "--web-root", WEB_DIST], env);
    log(`server at ${server.url}`);
    const base = server.url;
    const list = await getJson(base, "/api/tensors");
    const expected = list.tensors.filter((t) => t.name.toLowerCase().includes(SEARCH)).map((t) => t.name);
    check(expected.includes(TENSOR), `the API lists ${TENSOR}`);
    const detail = await getJson(base, `/api/tensors/0/${encodeURIComponent(TENSOR)}`);
    check(detail.pyramid && detail.pyramid.levels.length > 0, "the tensor has a pyramid");
    const [tileRows, tileCols] = detail.pyramid.tile_size;

    step = "browser";
    const profile = join(tmp, "chromium-profile");
    context = await launchBrowser(chromium, chromiumPath, profile);
    // This test checks the server's render placements (display.colorize where the constraints put it): the
    // heatmap's "Colour on" is forced to "server" (the page's WebGPU path is tests/e2e/heatmap.test.mjs').
    await context.addInitScript(() => localStorage.setItem("tm.heatmap.colourOn", "server"));
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors = watchErrors(page);

    await treeChecks(page, base, list, detail);
    if (hasGguf) await quantizationChecks(page, base, list);
    else console.log("SKIPPED: quantization facts (no fixtures: ../shared/fixtures/gguf/tiny-mixed.gguf is absent)");

    step = "inventory";
    await page.goto(base, { waitUntil: "domcontentloaded" });
    await page.waitForSelector("#view-list", { timeout: 60_000 });
    await page.click("#view-list");
    await page.waitForSelector("#inventory tbody tr[data-name]", { timeout: 60_000 });
    check((await page.getAttribute("#view-list", "aria-pressed")) === "true" && (await page.locator("#inventory-tree").count()) === 0, "the List button switches to the flat list");
    const deq = await page.$$eval("#inventory tbody tr[data-dequantized-from]", (rows) => rows.map((r) => `${r.dataset.checkpoint}/${r.dataset.name}=${r.dataset.dequantizedFrom}`).sort());
    const apiDeq = list.tensors.filter((t) => t.dequantized_from).map((t) => `${t.checkpoint}/${t.name}=${t.dequantized_from}`).sort();
    check(JSON.stringify(deq) === JSON.stringify(apiDeq), `the list marks exactly the API's ${apiDeq.length} dequantized tensors with their stored type`);
    const allRows = await page.locator("#inventory tbody tr[data-name]").count();
    check(allRows === list.tensors.length, `the inventory shows every tensor (${allRows})`);

    step = "search";
    await page.fill("#search", SEARCH);
    await page.waitForFunction((n) => document.querySelectorAll("#inventory tbody tr[data-name]").length === n, expected.length, { timeout: 10_000 });
    const shown = await page.$$eval("#inventory tbody tr[data-name]", (rows) => rows.map((r) => r.dataset.name));
    check(JSON.stringify([...shown].sort()) === JSON.stringify([...expected].sort()), `searching "${SEARCH}" shows exactly the ${expected.length} matching tensors`);

    step = "open tensor";
    await page.click(`#inventory tbody tr[data-name="${TENSOR}"] td:nth-child(2)`);
    await page.waitForSelector("#tensor-name", { timeout: 30_000 });
    check((await page.textContent("#tensor-name")) === TENSOR, "the tensor page opened");
    check((await page.locator("#stats").count()) === 1 && (await page.locator("#histogram").count()) === 1, "statistics and histogram are shown");

    step = "heatmap";
    let state = await waitReady(page, "opening");
    check(Number(state.tiles) > 0 && state.loaded === state.tiles, `every visible tile loaded (${state.loaded}/${state.tiles} at level ${state.level})`);
    const first = await pixelStats(page, { selector: "#heatmap" });
    check(first.variance > 0 && first.colours > 2, `the heatmap canvas is not blank (variance ${first.variance.toFixed(1)}, ${first.colours} colours)`);

    step = "zoom and pan";
    const box = await page.locator("#heatmap").boundingBox();
    const before = state;
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -600);
    await page.waitForFunction((sx) => document.querySelector("#heatmap").dataset.sx !== sx, before.sx, { timeout: 10_000 });
    state = await waitReady(page, "zooming in");
    check(Number(state.sx) > Number(before.sx) * 1.5, `the wheel zooms in (${Number(before.sx).toFixed(3)} -> ${Number(state.sx).toFixed(3)} px per element)`);
    const zoomed = state;
    await page.mouse.down();
    await page.mouse.move(box.x + box.width / 2 + 120, box.y + box.height / 2 + 40, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction((ox) => document.querySelector("#heatmap").dataset.ox !== ox, zoomed.ox, { timeout: 10_000 });
    state = await waitReady(page, "panning");
    check(Number(state.ox) < Number(zoomed.ox) && Number(state.oy) < Number(zoomed.oy), "dragging pans the view");
    await page.click("button[title='fit the tensor to the view']");
    await page.waitForFunction((sx) => document.querySelector("#heatmap").dataset.sx !== sx, state.sx);
    state = await waitReady(page, "fit");

    step = "hover read-out";
    const sx = Number(state.sx), sy = Number(state.sy), ox = Number(state.ox), oy = Number(state.oy), level = Number(state.level);
    const rows = detail.pyramid.view.rows, cols = detail.pyramid.view.cols;
    // The centre of a tile in the middle of the tensor at the level shown, so rounding cannot cross an edge.
    const spanR = tileRows * 2 ** level, spanC = tileCols * 2 ** level;
    const [gridCols, gridRows] = detail.pyramid.levels[level].grid;
    const tx = Math.floor((gridCols - 1) / 2), ty = Math.floor(gridRows / 2);
    const col = (tx * spanC + Math.min(cols, (tx + 1) * spanC)) / 2, row = (ty * spanR + Math.min(rows, (ty + 1) * spanR)) / 2;
    const px = (col - ox) * sx, py = (row - oy) * sy;
    check(px > 0 && py > 0 && px < box.width && py < box.height, `the centre of tile (${tx}, ${ty}) at level ${level} (row ${Math.floor(row)}, column ${Math.floor(col)}) is on the canvas`);
    await page.mouse.move(box.x + px, box.y + py);
    const key = `${level}|${tx}|${ty}|0`;
    await page.waitForFunction((k) => {
      const d = document.querySelector("#readout").dataset;
      return d.key === k && (d.state === "ready" || d.state === "error");
    }, key, { timeout: 30_000 });
    const ro = await page.evaluate(() => ({ ...document.querySelector("#readout").dataset, text: document.querySelector("#readout").innerText.replace(/\s+/g, " ") }));
    check(ro.state === "ready", `the read-out shows tile (${tx}, ${ty}) at level ${level}: ${ro.text}`);
    const tile = await getJson(base, `/api/tiles/0/${encodeURIComponent(TENSOR)}?level=${level}&x=${tx}&y=${ty}&format=json`);
    for (const f of ["count", "min", "max", "mean"])
      check(ro[f] === String(tile.stats[f]), `read-out ${f} ${ro[f]} equals the API's tile ${f} ${tile.stats[f]}`);
    const shownMean = Number(await page.textContent("#readout [data-field=mean]"));
    check(Math.abs(shownMean - Number(tile.stats.mean)) <= 1e-5 * Math.abs(Number(tile.stats.mean)) + 1e-12, `the displayed mean ${shownMean} rounds the tile's mean`);
    const shownCount = (await page.textContent("#readout [data-field=count]")).replace(/,/g, "");
    check(shownCount === String(tile.stats.count), "the displayed count is the tile's count");

    step = "colour map";
    await page.selectOption("#colormap", "gray");
    await page.waitForFunction(() => /gray/.test(document.querySelector("#heatmap-status").textContent), null, { timeout: 30_000 });
    state = await waitReady(page, "gray colour map");
    const grey = await pixelStats(page, { selector: "#heatmap" });
    check(grey.greyFraction > 0.99 && grey.variance > 0, `the gray map draws grey levels (${(grey.greyFraction * 100).toFixed(1)} % grey, variance ${grey.variance.toFixed(1)})`);
    await page.selectOption("#colormap", "auto");
    state = await waitReady(page, "auto colour map");
    await page.mouse.move(box.x + px + 1, box.y + py + 1);
    await page.waitForFunction(() => document.querySelector("#readout").dataset.state === "ready", null, { timeout: 30_000 });

    step = "render placement";
    // The tensor page shows the placement report of the last render; on this server (no constraints) the
    // backend of display.colorize must be the one the API reports for the same tensor.
    await page.waitForFunction(() => Number(document.querySelector("#render-placement")?.dataset.renders) > 0, null, { timeout: 30_000 });
    const apiRender = await getJson(base, `/api/render/0/${encodeURIComponent(TENSOR)}.png?format=json`);
    const apiColorize = apiRender.placement.find((p) => p.op === "display.colorize");
    check(apiColorize && apiColorize.backend, `the API reports where display.colorize ran (${apiColorize?.backend}, ${apiColorize?.reason})`);
    const shownColorize = await page.evaluate(() => {
      const r = document.querySelector('#render-placement-table tr[data-op="display.colorize"]');
      return r ? { ...r.dataset, text: r.textContent } : null;
    });
    check(shownColorize && shownColorize.backend === apiColorize.backend, `the tensor page shows display.colorize ran on ${shownColorize?.backend} (API: ${apiColorize.backend})`);
    check(shownColorize.fallback === "false", "no fallback is shown without constraints");

    step = "screenshot";
    const shotPath = join(OUT_DIR, "viewer.png");
    const shot = await page.screenshot({ path: shotPath, fullPage: true });
    const shotStats = await pixelStats(page, { png: shot.toString("base64") });
    check(shotStats.colours > 16 && shotStats.variance > 0, `the screenshot ${shotPath} is not a single colour (${shotStats.colours}+ colours)`);

    step = "errors";
    const banner = await page.evaluate(() => (document.querySelector("#error").hidden ? "" : document.querySelector("#error").textContent));
    check(banner === "", `no error banner${banner ? ": " + banner : ""}`);
    check(pageErrors.length === 0, `no page errors${pageErrors.length ? ": " + pageErrors.join(" | ") : ""}`);

    step = "error display";
    await page.goto(`${base}#/tensor/0/no.such.tensor`);
    await page.waitForSelector("#error:not([hidden])", { timeout: 30_000 });
    const message = await page.textContent("#error .error-text");
    check(/404/.test(message), `an unknown tensor shows the API's 404 on the page: ${message.trim()}`);
    step = "token";
    // A server that requires a token: the printed URL carries ?token=, and the app passes it on every API request.
    const tokenServer = await startServer([demo, "--web-root", WEB_DIST, "--token", "e2e-token-0123456789"], env);
    try {
      check(/[?&]token=e2e-token-0123456789/.test(tokenServer.url), `the token server prints its URL with the token (${tokenServer.url})`);
      const denied = await fetch(new URL("/api/tensors", tokenServer.url));
      check(denied.status === 401, "the API refuses a request without the token");
      const tokenPage = await context.newPage();
      const apiRequests = [];
      tokenPage.on("request", (r) => {
        if (new URL(r.url()).pathname.startsWith("/api/")) apiRequests.push(r.url());
      });
      tokenPage.on("pageerror", (e) => pageErrors.push(String(e)));
      await tokenPage.goto(tokenServer.url + "#/list", { waitUntil: "domcontentloaded" });
      await tokenPage.waitForSelector("#inventory tbody tr[data-name]", { timeout: 60_000 });
      await tokenPage.click(`#inventory tbody tr[data-name="${TENSOR}"] td:nth-child(2)`);
      await waitReady(tokenPage, "opening with a token");
      const hb = await tokenPage.locator("#heatmap").boundingBox();
      await tokenPage.mouse.move(hb.x + hb.width / 2, hb.y + hb.height / 2);
      await tokenPage.waitForFunction(() => document.querySelector("#readout").dataset.state === "ready", null, { timeout: 30_000 });
      const bare = apiRequests.filter((u) => new URL(u).searchParams.get("token") !== "e2e-token-0123456789");
      check(apiRequests.length >= 4 && bare.length === 0, `every API request (${apiRequests.length}) carries the token${bare.length ? "; not: " + bare.join(", ") : ""}`);
      await tokenPage.close();
    } finally {
      tokenServer.proc.kill("SIGTERM");
    }

    await computePanelChecks(context, demo, tmp, env);

    writeFileSync(join(OUT_DIR, "viewer-result.json"), JSON.stringify({ ok: true, tensor: TENSOR, tile: { level, x: tx, y: ty }, stats: tile.stats }, null, 2));
    console.log("PASS: viewer e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

/** The tree rows drawn now, in order (their data-* and label). */
async function treeRows(page) {
  return page.$$eval("#inventory-tree tbody tr[data-id]", (rows) => rows.map((r) => ({ ...r.dataset, label: r.querySelector(".tree-label, a")?.textContent ?? "" })));
}

/** The rows drawn directly under the row with data-id `id`. */
function childrenOf(rows, id) {
  const i = rows.findIndex((r) => r.id === id);
  const d = Number(rows[i].depth);
  const out = [];
  for (let j = i + 1; j < rows.length && Number(rows[j].depth) > d; j++) if (Number(rows[j].depth) === d + 1) out.push(rows[j]);
  return out;
}

/** The API's tensors a tree row covers: a checkpoint's all, a group's or block's names under its prefix, a leaf's own. */
function covered(list, r) {
  return list.tensors.filter(
    (t) => t.checkpoint === r.checkpoint && (r.kind === "checkpoint" || (r.kind === "leaf" ? t.name === r.prefix : t.name.startsWith(r.prefix + "."))),
  );
}

/** Whether a tree row's tensors, parameters, bytes and dtypes equal the sums over the API's tensors it covers. */
function sumsMatch(list, r) {
  const ts = covered(list, r);
  const want = new Map();
  for (const t of ts) want.set(t.dequantized_from ?? t.dtype, (want.get(t.dequantized_from ?? t.dtype) ?? 0) + 1);
  const shown = new Map(r.dtypes.split(",").filter(Boolean).map((x) => [x.slice(0, x.lastIndexOf(":")), Number(x.slice(x.lastIndexOf(":") + 1))]));
  return (
    ts.length > 0 &&
    ts.length === Number(r.tensors) &&
    ts.reduce((a, t) => a + t.parameters, 0) === Number(r.parameters) &&
    ts.reduce((a, t) => a + t.bytes, 0) === Number(r.bytes) &&
    want.size === shown.size &&
    [...want].every(([d, n]) => shown.get(d) === n)
  );
}

/** Clicks a tree node's row (not its link) and waits for the redraw to show it with data-expanded = `open`. */
async function toggleNode(page, id, open) {
  const sel = `#inventory-tree tr[data-id="${id}"]`;
  await page.click(`${sel} td:nth-child(2)`);
  await page.waitForSelector(`${sel}[data-expanded="${open}"]`, { timeout: 10_000 });
}

/**
 * The inventory's tree (the default view): one root per checkpoint whose counts and sums equal the API's;
 * a root's children are one per first name segment, with their sums; the checkpoints' files are listed;
 * expanding a block (and its groups) shows exactly its tensors; a search narrows the tree to the matches;
 * clicking a leaf opens that tensor, whose page shows the file / shard the API names.
 */
async function treeChecks(page, base, list, detail) {
  step = "tree";
  const cks = (await getJson(base, "/api/checkpoints")).checkpoints;
  await page.goto(base, { waitUntil: "domcontentloaded" });
  await page.waitForSelector("#inventory-tree tbody tr[data-kind=checkpoint]", { timeout: 60_000 });
  check((await page.getAttribute("#view-tree", "aria-pressed")) === "true" && (await page.locator("#inventory").count()) === 0, "the inventory opens as a tree");
  let rows = await treeRows(page);
  const roots = rows.filter((r) => r.kind === "checkpoint");
  check(JSON.stringify(roots.map((r) => r.checkpoint)) === JSON.stringify(cks.map((c) => c.id)), `one tree root per checkpoint (${roots.map((r) => r.label).join(", ")})`);
  for (const r of roots) {
    check(sumsMatch(list, r), `root ${r.label}: ${r.tensors} tensors, ${r.parameters} parameters, ${r.bytes} bytes, dtypes ${r.dtypes}, as GET /api/tensors sums them`);
    const kids = childrenOf(rows, r.id);
    const firsts = new Set(covered(list, r).map((t) => t.name.split(".")[0]));
    check(kids.length === firsts.size && kids.every((k) => sumsMatch(list, k)), `root ${r.label} has one child per first name segment (${kids.map((k) => k.label).join(", ")}), each with the API's sums`);
    const sum = (f) => kids.reduce((a, k) => a + Number(k[f]), 0);
    check(sum("tensors") === Number(r.tensors) && sum("parameters") === Number(r.parameters) && sum("bytes") === Number(r.bytes), `root ${r.label}: its children's tensors, parameters and bytes add up to it`);
  }
  for (const c of cks) {
    const files = await page.$$eval(`#checkpoints tr[data-checkpoint="${c.id}"] .file`, (els) => els.map((e) => e.dataset.file));
    check(JSON.stringify(files) === JSON.stringify(c.files.map((f) => f.name)), `checkpoint ${c.name} lists its ${files.length} file(s): ${files.join(", ")}`);
  }

  step = "tree block";
  const model = rows.find((r) => r.checkpoint === "0" && r.prefix === "model");
  check(model && model.expanded === "false", "the demo's `model` node is shown, collapsed");
  await toggleNode(page, model.id, true);
  rows = await treeRows(page);
  const block = childrenOf(rows, model.id).find((r) => r.kind === "block");
  check(block && block.prefix === "model.layers.0" && sumsMatch(list, block), `expanding model shows the block ${block?.label} (${block?.tensors} tensors, ${block?.parameters} parameters)`);
  await toggleNode(page, block.id, true);
  for (;;) {
    rows = await treeRows(page);
    const closed = rows.find((r) => r.prefix.startsWith(block.prefix + ".") && r.expanded === "false");
    if (!closed) break;
    await toggleNode(page, closed.id, true);
  }
  const leaves = rows.filter((r) => r.kind === "leaf" && r.prefix.startsWith(block.prefix + ".")).map((r) => r.name).sort();
  const want = covered(list, block).map((t) => t.name).sort();
  check(JSON.stringify(leaves) === JSON.stringify(want), `expanding ${block.label} shows exactly its ${want.length} tensors`);
  check(childrenOf(rows, block.id).every((k) => sumsMatch(list, k)), `${block.label}'s children carry the API's sums`);
  await toggleNode(page, model.id, false);
  check((await treeRows(page)).every((r) => !r.prefix.startsWith("model.")), "collapsing model hides everything under it");

  step = "tree search";
  for (const q of ["attn", SEARCH]) {
    await page.fill("#search", q);
    const expected = list.tensors.filter((t) => t.name.toLowerCase().includes(q)).map((t) => `${t.checkpoint}/${t.name}`).sort();
    await page.waitForFunction((n) => document.querySelector("#inventory-status")?.dataset.matches === String(n) && document.querySelectorAll("#inventory-tree tr[data-kind=leaf]").length === n, expected.length, { timeout: 10_000 });
    rows = await treeRows(page);
    const shown = rows.filter((r) => r.kind === "leaf").map((r) => `${r.checkpoint}/${r.name}`).sort();
    check(JSON.stringify(shown) === JSON.stringify(expected), `searching "${q}" narrows the tree to exactly the ${expected.length} matching tensors, their branches expanded`);
    const wrong = rows.filter((r) => r.kind !== "leaf" && Number(r.matches) !== covered(list, r).filter((t) => t.name.toLowerCase().includes(q)).length);
    check(wrong.length === 0, `every node shown under "${q}" counts its matches as the API's names do${wrong.length ? "; not: " + wrong.map((r) => r.id).join(", ") : ""}`);
  }

  step = "tree open";
  await page.click(`#inventory-tree tr[data-kind=leaf][data-checkpoint="0"][data-name="${TENSOR}"] td:nth-child(3)`);
  await page.waitForFunction((n) => document.querySelector("#tensor-name")?.textContent === n, TENSOR, { timeout: 30_000 });
  check(true, `clicking the leaf ${TENSOR} opens its page`);
  const file = await page.textContent('#facts tr[data-field="file"] td');
  check(file === detail.file, `the tensor page names the file the API gives: ${file}`);
  const demo = cks.find((c) => c.id === "0");
  const i = demo.files.findIndex((f) => f.name === detail.file);
  const shard = await page.textContent('#facts tr[data-field="shard"] td');
  check(i >= 0 && shard.startsWith(`shard ${i + 1} of ${demo.files.length}`), `and its shard: ${shard}`);
  check((await page.textContent('#facts tr[data-field="offset"] td')).startsWith(detail.offset.toLocaleString("en-US")), `and its offset ${detail.offset}`);
  check((await page.locator("#quantization").count()) === 0, "a dense tensor has no quantization table");
}

/** The API's quantization fields as the page's #quantization rows carry them (data-field → data-value). */
function quantFields(q) {
  const text = (v) => (Array.isArray(v) ? v.map(text).join(",") : v !== null && typeof v === "object" ? JSON.stringify(v) : String(v));
  const out = {};
  for (const [k, v] of Object.entries(q)) if (k !== "packed") out[k] = text(v);
  for (const [k, v] of Object.entries(q.packed ?? {})) if (k !== "parts") out[`packed.${k}`] = text(v);
  return out;
}

/** Quantized tensors of the GGUF fixture: the page's quantization table equals the API's fields, its file the API's. */
async function quantizationChecks(page, base, list) {
  step = "quantization facts";
  const quantized = list.tensors.filter((t) => t.checkpoint === "1" && t.dequantized_from);
  check(quantized.length > 0, `the GGUF fixture has ${quantized.length} quantized tensors`);
  const picks = [...new Set(quantized.map((t) => t.dequantized_from))].slice(0, 3).map((d) => quantized.find((t) => t.dequantized_from === d));
  for (const t of picks) {
    await page.goto(`${base}#/tensor/1/${encodeURIComponent(t.name)}`);
    await page.waitForFunction((n) => document.querySelector("#tensor-name")?.textContent === n && document.querySelector("#facts"), t.name, { timeout: 30_000 });
    const d = await getJson(base, `/api/tensors/1/${encodeURIComponent(t.name)}`);
    check(d.quantization && d.quantization.stored_type === t.dequantized_from, `the API describes ${t.name}'s quantization (${d.quantization?.stored_type})`);
    const shown = await page.$$eval("#quantization tr[data-field]", (rows) => Object.fromEntries(rows.map((r) => [r.dataset.field, r.dataset.value])));
    const want = quantFields(d.quantization);
    check(JSON.stringify(shown, Object.keys(shown).sort()) === JSON.stringify(want, Object.keys(want).sort()), `${t.name}: the quantization table equals the API's ${JSON.stringify(want)}`);
    const bpw = await page.textContent('#quantization tr[data-field="bits_per_weight"] td');
    check(Math.abs(Number(bpw) - d.quantization.bits_per_weight) <= 1e-5 * d.quantization.bits_per_weight, `${t.name}: ${bpw} bits per weight shown`);
    check((await page.textContent('#facts tr[data-field="file"] td')) === d.file, `${t.name}: the file shown is the API's ${d.file}`);
  }
}

/** The backend names, in order, of the elements matching `selector` (their data-backend). */
async function names(page, selector) {
  return page.$$eval(selector, (els) => els.map((e) => e.dataset.backend));
}

/** Clicks the panel's Save and waits for the panel to be redrawn with the server's answer, or for the error. */
async function saveConstraints(page) {
  // The panel is redrawn after a save: a message element without the mark is the new one.
  await page.evaluate(() => document.querySelector("#compute-saved-message")?.setAttribute("data-stale", ""));
  await page.click("#compute-save");
  await page.waitForFunction(
    () => {
      const ok = document.querySelector("#compute-saved-message:not([data-stale])");
      const err = document.querySelector("#compute-save-error");
      return (ok && !ok.hidden && ok.textContent) || (err && !err.hidden) ? true : null;
    },
    null,
    { timeout: 30_000 },
  );
  return page.evaluate(() => {
    const err = document.querySelector("#compute-save-error");
    return err && !err.hidden ? { error: err.textContent } : { message: document.querySelector("#compute-saved-message").textContent };
  });
}

/** The panel's planner column equals the API's placement_preview for every op (backend, reason, or the error). */
async function checkPreview(page, doc, when) {
  const cells = await page.$$eval("#op-matrix tbody tr", (rows) =>
    rows.map((r) => {
      const c = r.querySelector("td.preview");
      const rejected = [...(c?.querySelectorAll("details.preview-rejected li") ?? [])].map((li) => li.dataset.backend);
      return { op: r.dataset.op, backend: c?.dataset.backend, reason: c?.dataset.reason, text: c?.textContent ?? "", rejected };
    }),
  );
  const byOp = new Map(doc.placement_preview.map((pv) => [pv.op, pv]));
  const missingRows = doc.placement_preview.filter((pv) => !cells.some((c) => c.op === pv.op)).map((pv) => pv.op);
  check(missingRows.length === 0, `${when}: every op of placement_preview has a row${missingRows.length ? "; not: " + missingRows.join(", ") : ""}`);
  const noPreview = cells.filter((c) => !byOp.has(c.op)).map((c) => c.op);
  if (noPreview.length) log(`${when}: no preview from the server for ${noPreview.join(", ")}`);
  const wrong = [];
  for (const c of cells) {
    const pv = byOp.get(c.op);
    if (!pv) continue;
    const p = pv.placement;
    const ok = p
      ? c.backend === p.backend && c.reason === p.reason && JSON.stringify(c.rejected) === JSON.stringify(p.rejected.map((r) => r.backend))
      : c.backend === "" && c.text.includes(pv.error ?? "");
    if (!ok) wrong.push(`${c.op}: shown ${c.backend}/${c.reason}, API ${p ? p.backend + "/" + p.reason : "null: " + pv.error}`);
  }
  const summary = [...new Set(doc.placement_preview.map((pv) => pv.placement?.backend ?? "none"))].join(", ");
  check(wrong.length === 0, `${when}: the panel's per-op backend, reason and rejected candidates equal placement_preview for ${byOp.size} op(s) (${summary})${wrong.length ? "; wrong: " + wrong.join(" | ") : ""}`);
}

async function computePanelChecks(context, demo, tmp, baseEnv) {
  step = "compute server";
  // Its own settings directory (PUT writes $XDG_CONFIG_HOME/tensormorph/settings.json), and a plugin
  // directory holding the binary's plugins plus the test plugins (an unavailable backend, a plugin that
  // fails to load, a simulated accelerator) when this build has them.
  const pluginDir = join(tmp, "plugins");
  mkdirSync(pluginDir);
  const binDir = dirname(resolve(TM_BIN));
  for (const d of [join(binDir, "plugins"), join(binDir, "tests", "plugins")])
    if (existsSync(d)) for (const f of readdirSync(d)) if (f.endsWith(".so")) symlinkSync(join(d, f), join(pluginDir, f));
  const env = { ...baseEnv, TENSORMORPH_PLUGIN_DIR: pluginDir, XDG_CONFIG_HOME: join(tmp, "config-compute"), HOME: join(tmp, "home-compute") };
  mkdirSync(env.XDG_CONFIG_HOME);
  mkdirSync(env.HOME);
  const hasTestPlugins = existsSync(join(pluginDir, "libtensormorph-backend-testabsent.so"));
  const srv = await startServer([demo, "--web-root", WEB_DIST], env);
  const page = await context.newPage();
  const errors = watchErrors(page);
  try {
    const base = srv.url;
    const doc0 = await getJson(base, "/api/compute");
    check(doc0.settings_file.startsWith(env.XDG_CONFIG_HOME), `the server's settings file is in the test's directory (${doc0.settings_file})`);
    check(doc0.constraints.prefer.length === 0 && doc0.constraints.never.length === 0, "no constraint is saved at start");

    step = "compute panel";
    await page.goto(base, { waitUntil: "domcontentloaded" });
    await page.click("#nav-compute");
    await page.waitForSelector("#backends section.backend", { timeout: 30_000 });
    const shown = await names(page, "#backends section.backend");
    const listed = doc0.backends.map((b) => b.name);
    check(JSON.stringify(shown) === JSON.stringify(listed), `the panel lists exactly the API's backends: ${shown.join(", ")}`);
    for (const b of doc0.backends) {
      const card = `#backends section.backend[data-backend="${b.name}"]`;
      check((await page.getAttribute(card, "data-available")) === String(b.available), `${b.name} is shown ${b.available ? "available" : "unavailable"}`);
      const devices = await page.$$eval(`${card} table.devices tr[data-device]`, (rows) => rows.map((r) => r.textContent));
      check(devices.length === b.devices.length && b.devices.every((d, i) => devices[i].includes(d.name)), `${b.name}: its ${b.devices.length} device(s) are listed by name`);
      const kernels = await page.$$eval(`${card} ul.kernels li[data-op]`, (rows) => rows.map((r) => ({ op: r.dataset.op, inputs: r.dataset.inputs, text: r.textContent })));
      check(
        kernels.length === b.kernels.length &&
          b.kernels.every((k, i) => kernels[i].op === k.op && kernels[i].inputs === k.dtypes.join(" ") && kernels[i].text.includes(k.precision) && k.required_features.every((f) => kernels[i].text.includes(f))),
        `${b.name}: its ${b.kernels.length} kernel(s) are listed with what they take, their precision and required features`,
      );
    }
    const accel = doc0.backends.find((b) => b.name === "testaccel");
    const ggml = accel?.kernels.find((k) => k.op === "dequantize.ggml");
    if (ggml) {
      const shownInputs = await page.textContent('#backends section.backend[data-backend="testaccel"] ul.kernels li[data-op="dequantize.ggml"] .inputs span');
      check(shownInputs === ggml.dtypes.join(" "), `testaccel's dequantize.ggml takes "${shownInputs}", as the API says`);
    } else if (hasTestPlugins) {
      check(false, "testaccel lists a dequantize.ggml kernel");
    }
    const unavailable = doc0.backends.filter((b) => !b.available);
    if (hasTestPlugins) check(unavailable.length > 0, `with the test plugins some backend is unavailable (${unavailable.map((b) => b.name).join(", ")})`);
    for (const b of unavailable) {
      const text = await page.textContent(`#backends section.backend[data-backend="${b.name}"] .backend-reason`);
      check(text.includes(b.reason) && text.includes(b.detail), `unavailable ${b.name} shows its reason: ${text.trim()}`);
    }
    // The panel opens on a summary, one line per backend; a device or driver simply absent is "not on this machine",
    // not an error; each card's devices and kernels are folded (details) unless a self-test failed.
    const summaryRows = await page.$$eval("#backend-summary tr[data-backend]", (rows) => rows.map((r) => `${r.dataset.backend}=${r.dataset.status}`));
    const wantRows = doc0.backends.map((b) => `${b.name}=${b.available ? "available" : ["no_device", "no_driver"].includes(b.reason) ? "absent" : "unavailable"}`);
    check(JSON.stringify(summaryRows) === JSON.stringify(wantRows), `the panel opens on a summary: ${summaryRows.join(", ")}`);
    const absentBadges = await page.$$eval("#backends .badge.absent", (bs) => bs.length);
    check(absentBadges === doc0.backends.filter((b) => !b.available && ["no_device", "no_driver"].includes(b.reason)).length, `${absentBadges} backend(s) drawn as absent, not as errors`);
    check((await page.$$eval("#backends details.backend-details", (ds) => ds.filter((d) => d.open).length)) ===
      doc0.backends.filter((b) => (doc0.self_tests ?? []).some((v) => v.backend === b.name && v.status === "failed")).length, "each card's details are folded unless a self-test failed");
    const matrixOps = await page.$$eval("#op-matrix tbody tr", (rows) => rows.map((r) => r.dataset.op));
    const allOps = [...new Set(doc0.backends.flatMap((b) => b.ops.map((o) => o.op)))];
    check(JSON.stringify(matrixOps) === JSON.stringify(allOps), `the placement table has one row per op (${allOps.length})`);
    await checkPreview(page, doc0, "under auto");
    check((await page.locator("#not-installed li").count()) === doc0.not_installed.length, `the ${doc0.not_installed.length} backends this build lacks are listed`);
    check((await page.locator("#plugin-failures li").count()) === doc0.plugin_load_failures.length, `the ${doc0.plugin_load_failures.length} plugin load failure(s) are listed`);

    step = "compute constraints";
    // never: [vulkan] (or another backend this server knows), chosen and saved through the UI.
    const target = listed.includes("vulkan") ? "vulkan" : listed.find((n) => n !== "cpu") ?? listed[0];
    check((await page.isDisabled("#compute-save")) === true, "Save is disabled while nothing changed");
    await page.selectOption("#never-add", target);
    check(JSON.stringify(await names(page, "#never-list li[data-backend]")) === JSON.stringify([target]), `${target} is in the never list (unsaved)`);
    let saved = await saveConstraints(page);
    check(!saved.error, `saving never: [${target}] succeeds: ${saved.message ?? saved.error}`);
    let doc = await getJson(base, "/api/compute");
    check(JSON.stringify(doc.constraints.never) === JSON.stringify([target]) && doc.effective.never.includes(target), `GET /api/compute now returns never: [${target}] (saved and effective)`);
    check(readFileSync(doc.settings_file, "utf8").includes(target), "the settings file holds it");
    check((await page.textContent("#saved-never")) === target && (await page.locator(`section.backend[data-backend="${target}"] .badge.never`).count()) === 1, "the panel shows the saved constraint");
    await checkPreview(page, doc, `with never: [${target}]`);

    // A backend both preferred and never used: the server refuses it (400) and the panel shows its message.
    await page.selectOption("#prefer-add", target);
    check(await page.isVisible("#compute-overlap"), "the panel warns that the lists overlap");
    saved = await saveConstraints(page);
    check(saved.error && /400/.test(saved.error) && /both preferred and never used/.test(saved.error), `the server's 400 is shown: ${saved.error}`);
    doc = await getJson(base, "/api/compute");
    check(doc.constraints.prefer.length === 0 && JSON.stringify(doc.constraints.never) === JSON.stringify([target]), "the refused change was not saved");
    await page.click("#compute-revert");

    // An ordered prefer list: add two backends, move the second first, save.
    const available = doc0.backends.filter((b) => b.available && b.name !== target).map((b) => b.name);
    if (available.length >= 2) {
      const [a, b] = available;
      await page.selectOption("#prefer-add", a);
      await page.selectOption("#prefer-add", b);
      await page.click(`#prefer-list li[data-backend="${b}"] button.up`);
      check(JSON.stringify(await names(page, "#prefer-list li[data-backend]")) === JSON.stringify([b, a]), `the prefer order is ${b}, ${a}`);
      saved = await saveConstraints(page);
      check(!saved.error, `saving prefer: [${b}, ${a}] succeeds`);
      doc = await getJson(base, "/api/compute");
      check(JSON.stringify(doc.constraints.prefer) === JSON.stringify([b, a]) && JSON.stringify(doc.constraints.never) === JSON.stringify([target]), `GET /api/compute returns prefer: [${b}, ${a}] and still never: [${target}]`);
    } else log(`only ${available.length} other available backend(s): the prefer order is not exercised`);

    step = "compute preview";
    // prefer [testaccel, cpu]: the panel shows the server's preview for every op. stats.moments is placed
    // on a preferred backend (user_preferred): testaccel when its kernel takes the preview's request, else
    // cpu with testaccel among the rejected, its reason shown as the API gives it. An op testaccel lacks
    // goes to cpu, preferred second (user_preferred; fallback_missing_kernel, when no preferred backend has
    // the op, is checked in "compute fallback").
    if (accel?.available && listed.includes("cpu")) {
      await page.click("#compute-auto");
      await page.selectOption("#prefer-add", "testaccel");
      await page.selectOption("#prefer-add", "cpu");
      saved = await saveConstraints(page);
      check(!saved.error, "saving prefer: [testaccel, cpu] succeeds");
      doc = await getJson(base, "/api/compute");
      check(JSON.stringify(doc.effective.prefer) === JSON.stringify(["testaccel", "cpu"]) && doc.effective.never.length === 0, "GET /api/compute applies prefer: [testaccel, cpu]");
      await checkPreview(page, doc, "with prefer: [testaccel, cpu]");
      const preview = (op) => doc.placement_preview.find((pv) => pv.op === op);
      const cellOf = (op) =>
        page.evaluate((o) => {
          const c = document.querySelector(`#op-matrix tr[data-op="${o}"] td.preview`);
          return { ...c?.dataset, rejected: [...(c?.querySelectorAll("details.preview-rejected li") ?? [])].map((li) => li.textContent) };
        }, op);
      const mv = preview("stats.moments");
      const moments = mv?.placement;
      check(moments && ["testaccel", "cpu"].includes(moments.backend) && moments.reason === "user_preferred", `the API previews stats.moments (${mv?.request.dtype}) on ${moments?.backend} (${moments?.reason})`);
      let cell = await cellOf("stats.moments");
      check(cell.backend === moments.backend && cell.reason === moments.reason, `the panel shows stats.moments on ${cell.backend} (${cell.reason})`);
      if (moments.backend !== "testaccel") {
        const r = moments.rejected.find((x) => x.backend === "testaccel");
        check(r, `the API says why testaccel was not used: ${r?.reason} (${r?.detail})`);
        check(cell.rejected.some((t) => t.startsWith("testaccel") && t.includes(r.reason)), `the panel lists testaccel as rejected: ${cell.rejected.find((t) => t.startsWith("testaccel"))}`);
      }
      const lacking = doc.placement_preview.find((pv) => !accel.kernels.some((k) => k.op === pv.op) && doc.backends.find((b) => b.name === "cpu").kernels.some((k) => k.op === pv.op));
      check(lacking, `an op testaccel lacks and cpu has is previewed (${lacking?.op})`);
      check(lacking.placement?.backend === "cpu" && lacking.placement.reason === "user_preferred", `the API previews ${lacking.op} on cpu, preferred second: ${lacking.placement?.backend}, ${lacking.placement?.reason}`);
      cell = await cellOf(lacking.op);
      check(cell.backend === "cpu" && cell.reason === lacking.placement.reason && cell.rejected.some((t) => t.startsWith("testaccel") && t.includes("missing_kernel")), `the panel shows ${lacking.op} on cpu (${cell.reason}), testaccel rejected for missing_kernel`);
    } else log("testaccel is not available here: the preview under prefer [testaccel, cpu] is not exercised");

    // never: [cpu]: an op only cpu has cannot be placed; the panel shows the planner's message instead.
    const cpuOnly = doc0.placement_preview.find((pv) => doc0.backends.every((b) => b.name === "cpu" || !b.kernels.some((k) => k.op === pv.op)));
    if (cpuOnly) {
      await page.click("#compute-auto");
      await page.selectOption("#never-add", "cpu");
      saved = await saveConstraints(page);
      check(!saved.error, "saving never: [cpu] succeeds");
      doc = await getJson(base, "/api/compute");
      const pv = doc.placement_preview.find((x) => x.op === cpuOnly.op);
      check(pv.placement === null && pv.error, `the API cannot place ${cpuOnly.op} without cpu: ${pv.error?.split("\n")[0]}`);
      await checkPreview(page, doc, "with never: [cpu]");
      check(await page.isVisible(`#op-matrix tr[data-op="${cpuOnly.op}"] td.preview.error .preview-error`), `the panel shows the planner's message for ${cpuOnly.op}`);
    }

    step = "compute screenshot";
    const shotPath = join(OUT_DIR, "compute-panel.png");
    await page.screenshot({ path: shotPath, fullPage: true });
    check(existsSync(shotPath), `saved ${shotPath}`);

    step = "compute fallback";
    // prefer a backend without a display.colorize kernel: the render falls back, and the tensor page says so.
    const noColorize = doc0.backends.find((b) => b.available && !b.ops.some((o) => o.op === "display.colorize"));
    if (noColorize) {
      await page.click("#compute-auto");
      await page.selectOption("#prefer-add", noColorize.name);
      saved = await saveConstraints(page);
      check(!saved.error, `saving prefer: [${noColorize.name}] succeeds`);
      doc = await getJson(base, "/api/compute");
      await checkPreview(page, doc, `with prefer: [${noColorize.name}]`);
      const pvColorize = doc.placement_preview.find((pv) => pv.op === "display.colorize")?.placement;
      check(pvColorize?.reason === "fallback_missing_kernel", `the API previews display.colorize as a fallback (${pvColorize?.backend}, ${pvColorize?.reason})`);
      check((await page.getAttribute('#op-matrix tr[data-op="display.colorize"] td.preview', "class")).includes("fallback"), "the panel marks that preview as a fallback");
      await page.goto(`${base}#/tensor/0/${encodeURIComponent(TENSOR)}`);
      await page.waitForFunction(() => Number(document.querySelector("#render-placement")?.dataset.renders) > 0, null, { timeout: 60_000 });
      const row = await page.evaluate(() => ({ ...document.querySelector('#render-placement-table tr[data-op="display.colorize"]')?.dataset }));
      const api = (await getJson(base, `/api/render/0/${encodeURIComponent(TENSOR)}.png?format=json`)).placement.find((p) => p.op === "display.colorize");
      check(api.reason === "fallback_missing_kernel", `the API reports the fallback (${api.backend}, ${api.reason})`);
      check(row.backend === api.backend && row.reason === api.reason && row.fallback === "true", `the tensor page shows the fallback: ${row.backend}, ${row.reason}`);
      check(await page.isVisible(".fallback-note"), "and says it fell back");
      await page.click("#nav-compute");
      await page.waitForSelector("#backends section.backend", { timeout: 30_000 });
      const last = await page.getAttribute('#op-matrix tr[data-op="display.colorize"] td.last', "data-backend");
      check(last === api.backend, `the panel's "last run" column shows display.colorize on ${last}`);
    } else log("no available backend lacks display.colorize: the fallback is not exercised");

    step = "compute restore";
    await page.click("#compute-auto");
    saved = await saveConstraints(page);
    check(!saved.error, "clearing every constraint succeeds");
    doc = await getJson(base, "/api/compute");
    check(doc.constraints.prefer.length === 0 && doc.constraints.never.length === 0 && doc.mode === "auto", "GET /api/compute is back to auto with no constraint");
    const banner = await page.evaluate(() => (document.querySelector("#error").hidden ? "" : document.querySelector("#error").textContent));
    check(banner === "", `no error banner on the compute panel${banner ? ": " + banner : ""}`);
    // The only errors allowed are the deliberately refused PUT (and the browser's console line for it).
    const unexpected = errors.filter((e) => !/^400 PUT \/api\/compute$/.test(e) && !/status of 400/.test(e));
    check(unexpected.length === 0, `no unexpected page errors${unexpected.length ? ": " + unexpected.join(" | ") : ""}`);
  } finally {
    await page.close().catch(() => {});
    srv.proc.kill("SIGTERM");
  }
}

runTest(main, () => step, 540000);
