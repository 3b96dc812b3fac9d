// End-to-end test of the viewer in Debian's Chromium (headless, driven by playwright-core from web/'s
// node_modules): writes the demo checkpoint, starts `tensormorph serve` on it, opens the page, searches a
// tensor, opens it, waits for the heatmap, checks the canvas is not blank, zooms and pans, hovers and
// checks the read-out against the API's tile JSON, switches the colour map, and saves a screenshot to
// build/e2e/ that must not be a single colour.
//
// Environment: TM_BIN (default build/tensormorph), TM_E2E_OUT (default e2e/ beside TM_BIN), CHROMIUM (default /usr/lib/chromium/chromium or
// /usr/bin/chromium). Exits 0 with "SKIPPED: no chromium" only when Chromium is not installed.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TM_BIN = process.env.TM_BIN || join(ROOT, "build", "tensormorph");
const WEB_DIST = join(ROOT, "web", "dist");
const OUT_DIR = process.env.TM_E2E_OUT || join(dirname(resolve(TM_BIN)), "e2e"); // build/e2e for build/tensormorph
const TENSOR = "model.layers.0.mlp.down_proj.weight";
const SEARCH = "down_proj";

const chromiumPath = [process.env.CHROMIUM, "/usr/lib/chromium/chromium", "/usr/bin/chromium"].find((p) => p && existsSync(p));
if (!chromiumPath) {
  console.log("SKIPPED: no chromium (install Debian's `chromium`; scripts/install-deps does)");
  process.exit(0);
}

let step = "setup";
const log = (msg) => console.log(`[e2e] ${msg}`);
function check(cond, msg) {
  if (!cond) throw new Error(`check failed (${step}): ${msg}`);
  log(`ok: ${msg}`);
}

function loadPlaywright() {
  const require = createRequire(join(ROOT, "web", "package.json"));
  try {
    return require("playwright-core");
  } catch (e) {
    throw new Error(`playwright-core not found in web/node_modules (run \`npm ci\` in web/, or build the \`web\` target): ${e.message}`);
  }
}

function startServer(args, env) {
  return new Promise((resolvePromise, reject) => {
    const proc = spawn(TM_BIN, ["serve", "--port", "0", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    const timer = setTimeout(() => reject(new Error(`serve printed no URL within 300 s\n${out}\n${err}`)), 300_000);
    proc.stdout.on("data", (d) => {
      out += d;
      const m = /serving \d+ checkpoint\(s\) on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolvePromise({ proc, url: m[1] });
      }
    });
    proc.stderr.on("data", (d) => (err += d));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited early (${code})\n${out}\n${err}`));
    });
  });
}

async function getJson(base, path) {
  const res = await fetch(new URL(path, base));
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

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
  const { chromium } = loadPlaywright();
  check(existsSync(TM_BIN), `the binary exists (${TM_BIN})`);
  check(existsSync(join(WEB_DIST, "index.html")) && existsSync(join(WEB_DIST, "app.js")), `the web app is built (${WEB_DIST})`);
  mkdirSync(OUT_DIR, { recursive: true });

  const tmp = mkdtempSync(join(tmpdir(), "tm-e2e-"));
  const env = { ...process.env };
  delete env.TENSORMORPH_PLUGIN_DIR;
  for (const [name, sub] of [["HOME", "home"], ["XDG_CONFIG_HOME", "config"], ["XDG_CACHE_HOME", "cache"]]) {
    env[name] = join(tmp, sub);
    mkdirSync(env[name]);
  }
  let server = null;
  let context = null;
  try {
    step = "demo checkpoint";
    const demo = join(tmp, "demo");
    for (const args of [["demo", "--out", demo, "--layers", "1"], ["index", demo]]) {
      const r = spawnSync(TM_BIN, args, { env, encoding: "utf8", timeout: 300_000 });
      if (r.status !== 0) throw new Error(`tensormorph ${args.join(" ")}: exit ${r.status}\n${r.stdout}\n${r.stderr}`);
    }
    log(`wrote and indexed ${demo}`);

    step = "serve";
    server = await startServer([demo, "--web-root", WEB_DIST], env);
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
    context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath,
      headless: true,
      viewport: { width: 1400, height: 1000 },
      args: [
        "--no-sandbox",
        "--disable-gpu-sandbox",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-unsafe-webgpu",
      ],
    });
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error") pageErrors.push(m.text());
    });
    page.on("response", (r) => {
      if (r.status() >= 400) pageErrors.push(`${r.status()} ${r.url()}`);
    });

    step = "inventory";
    await page.goto(base, { waitUntil: "domcontentloaded" });
    await page.waitForSelector("#inventory tbody tr[data-name]", { timeout: 60_000 });
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
      await tokenPage.goto(tokenServer.url, { waitUntil: "domcontentloaded" });
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

    writeFileSync(join(OUT_DIR, "viewer-result.json"), JSON.stringify({ ok: true, tensor: TENSOR, tile: { level, x: tx, y: ty }, stats: tile.stats }, null, 2));
    console.log("PASS: viewer e2e");
  } finally {
    if (context) await context.close().catch(() => {});
    if (server) {
      server.proc.kill("SIGTERM");
      await new Promise((r) => {
        const t = setTimeout(() => {
          server.proc.kill("SIGKILL");
          r();
        }, 10_000);
        server.proc.on("exit", () => {
          clearTimeout(t);
          r();
        });
      });
    }
    rmSync(tmp, { recursive: true, force: true });
  }
}

const guard = setTimeout(() => {
  console.error(`FAIL: timed out at step "${step}"`);
  process.exit(1);
}, 540_000);
main().then(
  () => {
    clearTimeout(guard);
    process.exit(0);
  },
  (e) => {
    console.error(`FAIL (${step}): ${e.stack || e}`);
    process.exit(1);
  },
);
