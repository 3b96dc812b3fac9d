// End-to-end test of the viewer's WebGPU display kernel (web/src/webgpu/: TM_OP_DISPLAY_COLORIZE in WGSL) in
// Debian's Chromium (headless, --enable-unsafe-webgpu: a SwiftShader adapter here), driven by playwright-core
// from web/'s node_modules. It writes and indexes the demo checkpoint, starts `tensormorph serve`, opens the
// page and checks:
//   - the page asked for an adapter, logged it ("webgpu: … adapter info" on the console) and, when it is a
//     software adapter (SwiftShader), marked it as such (window.tmDisplay.adapter(), the console line);
//   - every golden case of tests/goldens/display/cases.json under every colour map (<map>.json) run through
//     the WebGPU kernel in the page gives exactly the goldens' RGBA bytes, histogram bins and NaN / ±Inf
//     counts, and the resolved limits equal the goldens' lo / hi; the page's CPU path (the fallback) too;
//   - the tensor page's "display on this page" panel coloured the raw tile statistics on WebGPU and its
//     histogram equals the server's render of the same cells (GET /api/render…&format=json).
//
// Environment: TM_BIN (default build/tensormorph), CHROMIUM (default /usr/lib/chromium/chromium or
// /usr/bin/chromium), TM_ALLOW_NO_WEBGPU=1 (accept a Chromium without a WebGPU adapter: only the CPU path is
// checked then). Exits 0 with "SKIPPED: no chromium" only when Chromium is not installed.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ROOT, WEB_DIST, checker, chromiumOrSkip, demoCheckpoint, e2eSetup, e2eTeardown, launchBrowser, runTest, startServer, watchErrors } from "./harness.mjs";

const GOLDENS = join(ROOT, "tests", "goldens", "display");
const TENSOR = "model.layers.0.mlp.down_proj.weight";
const ALLOW_NO_WEBGPU = process.env.TM_ALLOW_NO_WEBGPU === "1";

const chromiumPath = chromiumOrSkip();

let step = "setup";
const { log, check } = checker("[webgpu]", () => step);



/** The goldens: cases.json and every <map>.json, as the C++ test reads them (tests/unit/display_test.cpp). */
function loadGoldens() {
  const cases = JSON.parse(readFileSync(join(GOLDENS, "cases.json"), "utf8")).cases;
  const maps = readdirSync(GOLDENS).filter((f) => f.endsWith(".json") && f !== "cases.json").map((f) => f.slice(0, -5)).sort();
  const golden = Object.fromEntries(maps.map((m) => [m, JSON.parse(readFileSync(join(GOLDENS, `${m}.json`), "utf8"))]));
  return { cases, maps, golden };
}

/** Compares the page's results with the goldens; returns [cases compared, values compared, mismatches]. */
function compare(results, cases, golden, path) {
  const mismatches = [];
  let values = 0;
  for (const r of results) {
    const ci = cases.findIndex((c) => c.name === r.name);
    const g = golden[r.map].cases[ci];
    const where = `${r.map} / ${r.name} (${path})`;
    if (g.name !== r.name) mismatches.push(`${where}: golden case order differs`);
    if (r.path !== path) mismatches.push(`${where}: ran on ${r.path}, not ${path}`);
    if (r.lo !== g.lo || r.hi !== g.hi) mismatches.push(`${where}: limits [${r.lo}, ${r.hi}], golden [${g.lo}, ${g.hi}]`);
    const n = cases[ci].values.length;
    if (g.rgba.length !== 8 * n || r.rgba.length !== 8 * n) mismatches.push(`${where}: RGBA length ${r.rgba.length}, golden ${g.rgba.length}, want ${8 * n}`);
    for (let i = 0; i < n; i++) {
      const got = r.rgba.substr(8 * i, 8);
      const want = g.rgba.substr(8 * i, 8);
      if (got !== want) mismatches.push(`${where}: input ${i} = ${JSON.stringify(cases[ci].values[i])}: ${got}, golden ${want}`);
    }
    values += n;
    const bins = new Array(256).fill(0);
    for (const [k, c] of g.histogram.bins) bins[k] = c;
    const want = [...bins, g.histogram.nan, g.histogram.pos_inf, g.histogram.neg_inf];
    for (let s = 0; s < 259; s++)
      if (r.counts[s] !== want[s]) mismatches.push(`${where}: count ${s < 256 ? "bin " + s : ["nan", "pos_inf", "neg_inf"][s - 256]} = ${r.counts[s]}, golden ${want[s]}`);
  }
  return [results.length, values, mismatches];
}

async function main() {
  const t0 = Date.now();
  const { cases, maps, golden } = loadGoldens();
  check(cases.length >= 10 && maps.length === 11, `${cases.length} golden cases and ${maps.length} colour maps read`);
  const { chromium, tmp, env } = e2eSetup("webgpu", check);
  let server = null;
  let context = null;
  try {
    step = "demo checkpoint";
    const demo = demoCheckpoint(tmp, env);
    step = "serve";
    server = await startServer([demo, "--web-root", WEB_DIST], env);
    log(`server at ${server.url}`);

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "chromium-profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const consoleLines = [];
    const errors = watchErrors(page, [], (line) => consoleLines.push(line));
    await page.goto(server.url, { waitUntil: "domcontentloaded" });
    await page.waitForFunction(() => window.tmDisplay !== undefined, null, { timeout: 30_000 });

    step = "adapter";
    const adapter = await page.evaluate(() => window.tmDisplay.adapter());
    log(`adapter: ${JSON.stringify(adapter)}`);
    const logged = consoleLines.find((l) => l.startsWith("webgpu:"));
    check(logged !== undefined, `the page logged its adapter: ${logged}`);
    const haveGpu = adapter && adapter.available;
    if (!haveGpu) {
      if (!ALLOW_NO_WEBGPU) throw new Error(`Chromium offers no WebGPU adapter (${adapter?.reason}); set TM_ALLOW_NO_WEBGPU=1 to accept that`);
      log(`no WebGPU adapter (${adapter?.reason}); TM_ALLOW_NO_WEBGPU=1: checking the CPU path only`);
    } else {
      check(/adapter info/.test(logged) && logged.includes(adapter.label), "the console line names the adapter and its info");
      if (/swiftshader/i.test([adapter.vendor, adapter.architecture, adapter.device, adapter.description].join(" ")) || adapter.fallback) {
        check(adapter.software && adapter.label === `webgpu: ${adapter.name} (software adapter)`, `the software adapter is marked as such: "${adapter.label}"`);
        check(adapter.name === "SwiftShader", "here it is SwiftShader");
      }
    }

    const paths = haveGpu ? ["webgpu", "cpu"] : ["cpu"];
    for (const path of paths) {
      step = `goldens (${path})`;
      const t = Date.now();
      const results = await page.evaluate(({ cases, maps, path }) => window.tmDisplay.runGoldens(cases, maps, path), { cases, maps, path });
      const [n, values, mismatches] = compare(results, cases, golden, path);
      if (mismatches.length) {
        console.error(mismatches.slice(0, 40).join("\n"));
        throw new Error(`check failed (${step}): ${mismatches.length} mismatches against the goldens`);
      }
      check(n === cases.length * maps.length, `${path}: ${n} cases (${cases.length} × ${maps.length} colour maps), ${values} values: RGBA bytes, histograms and limits equal the goldens (${Date.now() - t} ms)`);
    }

    const tensorUrl = `${server.url.split("?")[0].replace(/\/$/, "")}/#/tensor/0/${encodeURIComponent(TENSOR)}`;
    /** The panel's state once it finished a style other than `after` (its data-key). */
    const panelDone = async (p, after) =>
      (
        await p.waitForFunction((after) => {
          const e = document.querySelector("#gpu-display");
          return e && ["ready", "error"].includes(e.dataset.state) && e.dataset.key !== after ? { ...e.dataset, text: e.textContent } : null;
        }, after, { timeout: 60_000 })
      ).jsonValue();

    step = "tensor page";
    await page.goto(tensorUrl);
    let panel = await panelDone(page, "");
    log(`panel: ${JSON.stringify(panel)}`);
    check(panel.state === "ready", "the tile-statistics panel finished");
    check(panel.path === (haveGpu ? "webgpu" : "server"), `it ran on ${panel.path}`);
    if (haveGpu) check(panel.text.includes(adapter.label), "it names the adapter");
    check(panel.match === "true", `its histogram equals the server's render of the same cells (${panel.cells} cells)`);
    for (const [id, value] of [["#stat", "envelope"], ["#transform", "signed-log"], ["#colormap", "twilight"], ["#stat", "std"], ["#transform", "log"]]) {
      await page.selectOption(id, value);
      panel = await panelDone(page, panel.key);
      check(panel.state === "ready" && panel.path === (haveGpu ? "webgpu" : "server") && panel.match === "true",
        `${id} ${value}: on ${panel.path}, the histogram equals the server's (${panel.key})`);
    }

    step = "fallback";
    // A page without navigator.gpu: the panel takes the server's path and says so.
    const bare = await context.newPage();
    await bare.addInitScript(() => Object.defineProperty(Navigator.prototype, "gpu", { get: () => undefined, configurable: true }));
    await bare.goto(tensorUrl);
    const fb = await panelDone(bare, "");
    check(fb.state === "ready" && fb.path === "server" && /webgpu: unavailable/.test(fb.text), `without an adapter the panel shows the server path: "${fb.text}"`);
    await bare.close();

    step = "compute panel";
    await page.goto(`${server.url.split("?")[0].replace(/\/$/, "")}/#/compute`);
    const line = await (await page.waitForFunction(() => document.querySelector("#page-webgpu")?.dataset.adapter !== undefined && document.querySelector("#page-webgpu").textContent, null, { timeout: 30_000 })).jsonValue();
    if (haveGpu) check(line.includes(adapter.label), `the Compute panel shows the page's adapter: "${line}"`);
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
    console.log(`PASS: webgpu e2e (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 240000);
