// End-to-end test of the acquisition page's SSB preview on its WebGPU adapter (web/src/stem/webgpu/ssb_preview.ts:
// G prepared once from the page's block, each slider move a float32 redraw in WGSL) against the CLI's float64
// `tensormorph stem ssb --C10 --C12 --phi12 --scan-rotation-deg -o x.npy` on the same `stem demo` acquisition, in
// Debian's Chromium (headless, SwiftShader). The scan is 16 × 20 (rows radix-2, columns Bluestein) and the frames
// 48 × 48, one of whose simulated dead pixels falls in the bright-field disk (the page must leave it out as the
// server does: the bright-field pixels are counted).
// It checks:
//   - the first preview (Compute) runs on the server and says why (it finds the scan rotation and the calibration);
//   - three slider settings (C10 only; C10 with C12 and φ12; a negative C10 and φ12) redraw on the page's adapter and
//     are within SSB_PREVIEW_TOLERANCE rad (absolute) of the CLI's phase at the scan rotation the server chose;
//   - the caption names the adapter path, the adapter and the tolerance;
//   - "Compute on: server" gives the server's phase, equal to the CLI's;
//   - with the SSB's storage binding lowered (localStorage tm.stem.maxSsbBindingBytes) the page refuses, naming the
//     sizes, and the server computes the slider's preview (equal to the CLI's);
//   - no page errors.
// The measured errors and the page's redraw times (SwiftShader: smoke only, not a performance claim) are logged.
//
// Environment: TM_SSB_SCAN=R,C and TM_SSB_DETECTOR=K (another demo size, for a smoke timing: bench/RESULTS.md), TM_BIN (default build/tensormorph), TM_WEB_DIST (default web/dist), CHROMIUM, TM_ALLOW_NO_WEBGPU=1
// (accept a Chromium without a WebGPU adapter: the server path only). Exits 0 with "SKIPPED: no chromium" only when
// Chromium is not installed.
import { join } from "node:path";
import { WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, launchBrowser, readNpy, runTest, sameValues, startServer, tm, watchErrors } from "./harness.mjs";

// The frozen bound (web/src/stem/webgpu/ssb_preview.ts states the same number; docs/viewer.md explains it).
const SSB_PREVIEW_TOLERANCE = 1e-5;
const ALLOW_NO_WEBGPU = process.env.TM_ALLOW_NO_WEBGPU === "1";
const SCAN = (process.env.TM_SSB_SCAN ?? "16,20").split(",").map(Number);
const DETECTOR = process.env.TM_SSB_DETECTOR ?? "48";
// Seed 3 puts one of the demo's 4 dead pixels inside the 16 × 20 × 48² acquisition's bright-field disk.
const SEED = process.env.TM_SSB_SCAN ? "1" : "3";
const SETTINGS = [
  { c10: 400, c12: 0, phi12: 0 },
  { c10: 250, c12: 150, phi12: 35 },
  { c10: -600, c12: 300, phi12: -60 },
];

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[e2e stem ssb]", () => step);

function maxAbsDiff(a, b) {
  if (a.length !== b.length) return { error: Infinity, at: -1 };
  let worst = 0, at = -1;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= worst)) (worst = d), (at = i);
  }
  return { error: worst, at };
}

async function main() {
  const started = Date.now();
  const { chromium, tmp, env } = e2eSetup("stem-ssb", check);
  let server = null;
  let context = null;
  try {
    step = "acquisition";
    const acq = join(tmp, "stem");
    tm(["stem", "demo", "--out", acq, "--scan", SCAN.join(","), "--detector", DETECTOR, "--files", "1", "--C12-nm", "3", "--phi12-deg", "20", "--seed", SEED], env);
    const master = join(acq, "demo_master.h5");
    server = await startServer([master, "--web-root", WEB_DIST], env);
    const cli = (name, s, rotation) => {
      const out = join(tmp, `${name}.npy`);
      tm(["stem", "ssb", master, "--C10", String(s.c10), "--C12", String(s.c12), "--phi12", String(s.phi12), "--scan-rotation-deg", String(rotation), "-o", out], env);
      return readNpy(out).values;
    };

    step = "page";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    const open = async (reload = false) => {
      if (reload) await page.reload();
      else await page.goto(new URL("#/acquisition/a0", server.url).href);
      await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
      return (await page.evaluate(() => document.querySelector("#stem-image").dataset.path)) === "page";
    };
    const onPage = await open();
    if (!onPage && ALLOW_NO_WEBGPU) log(`no WebGPU adapter (${await page.locator("#stem-compute-note").textContent()}): the page path is not checked`);
    else check(onPage, "the page's adapter holds the block");
    const want = onPage ? "page" : "server";
    const shown = () => page.evaluate(() => ({ values: window.tmStemSsb.phase.values, shape: window.tmStemSsb.phase.shape, path: window.tmStemSsb.path,
      rotation: window.tmStemSsb.rotationDeg, refused: window.tmStemSsb.pageRefused, redrawMs: window.tmStemSsb.redrawMs, prepareMs: window.tmStemSsb.prepareMs, pixels: window.tmStemSsb.pagePixels, excluded: window.tmStemSsb.pageExcluded,
      caption: document.querySelector("#stem-ssb-caption").textContent, dataPath: document.querySelector("#stem-ssb").dataset.path }));
    // Types the three values into the number boxes (each a change: one computation in flight, the latest wins) and
    // waits until the phase shown is for all three.
    const setSliders = async (s) => {
      for (const [id, v] of [["c12", s.c12], ["phi12", s.phi12], ["c10", s.c10]]) {
        await page.locator(`#stem-ssb-${id}-value`).fill(String(v));
        await page.locator(`#stem-ssb-${id}-value`).press("Enter");
      }
      try {
        await page.waitForFunction((s) => document.querySelector("#stem-ssb").dataset.state === "ready" && window.tmStemSsb.c10 === s.c10 &&
          window.tmStemSsb.c12 === s.c12 && window.tmStemSsb.phi12 === s.phi12, s, { timeout: 90_000 });
      } catch (e) {
        const now = await page.evaluate(() => ({ state: document.querySelector("#stem-ssb").dataset.state, c10: window.tmStemSsb.c10, c12: window.tmStemSsb.c12,
          phi12: window.tmStemSsb.phi12, boxes: ["c10", "c12", "phi12"].map((id) => document.getElementById(`stem-ssb-${id}-value`).value),
          caption: document.querySelector("#stem-ssb-caption").textContent, errors: [...document.querySelectorAll(".error")].map((x) => x.textContent) }));
        throw new Error(`the preview for ${JSON.stringify(s)} did not come: ${JSON.stringify(now)}; page errors: ${errors.join("; ")} (${e.message.split("\n")[0]})`);
      }
      return shown();
    };

    step = "the first preview (server)";
    await page.locator("#stem-ssb-compute").click();
    await page.waitForFunction(() => document.querySelector("#stem-ssb").dataset.state === "ready" && window.tmStemSsb.path !== null, null, { timeout: 120_000 });
    const first = await shown();
    check(first.path === "server" && first.dataPath === "server" && typeof first.rotation === "number", `the first preview runs on the server (rotation ${first.rotation}°)`);
    if (onPage) check(/not on the page: the first preview runs on the server: it finds the scan rotation/.test(first.caption), `and says why: "${first.caption}"`);

    const measured = [];
    for (const [k, s] of SETTINGS.entries()) {
      step = `slider setting ${k + 1}: C10 ${s.c10} Å, C12 ${s.c12} Å, φ12 ${s.phi12}°`;
      const got = await setSliders(s);
      check(got.path === want && got.dataPath === want, `the preview ran on the ${want}: "${got.caption}"`);
      check(got.shape.join(",") === SCAN.join(","), `the phase is ${SCAN.join(" x ")}`);
      const ref = cli(`ssb-${k}`, s, first.rotation);
      const d = maxAbsDiff(got.values, ref);
      measured.push(d.error);
      if (want === "page") {
        check(/computed on the page's adapter: SwiftShader|computed on the page's adapter: /.test(got.caption) && got.caption.includes(`within ${SSB_PREVIEW_TOLERANCE} rad of stem ssb`),
          "the caption names the page's adapter and the tolerance");
        check(d.error <= SSB_PREVIEW_TOLERANCE, `max |page − CLI| = ${d.error.toExponential(3)} rad (bound ${SSB_PREVIEW_TOLERANCE}; worst at ${d.at}; CLI phase range ${Math.min(...ref).toFixed(4)}…${Math.max(...ref).toFixed(4)} rad)`);
      } else {
        check(sameValues(got.values, ref), "the server's phase equals the CLI's");
      }
    }
    const timing = await shown();
    if (want === "page" && !process.env.TM_SSB_SCAN) check(timing.excluded === 1, `the page left the dead pixel in the disk out, as the server does (${timing.pixels} bright-field pixels)`);
    if (want === "page")
      log(`G of ${timing.pixels} bright-field pixels (${timing.excluded} of the disk's left out as the file's bad pixels, as the server does); page redraws (SwiftShader, smoke only; the first also makes the overlap regions): ${timing.redrawMs.map((m) => m.toFixed(1)).join(", ")} ms; G prepared once in ${timing.prepareMs?.toFixed(1)} ms`);

    step = "compute on the server";
    if (onPage) {
      await page.selectOption("#stem-ssb-on", "server");
      await page.waitForFunction(() => document.querySelector("#stem-ssb").dataset.state === "ready" && window.tmStemSsb.path === "server", null, { timeout: 120_000 });
      const server = await shown();
      check(/computed on the server/.test(server.caption), `"Compute on: server" gives the server's preview: "${server.caption}"`);
      check(sameValues(server.values, cli("ssb-server", SETTINGS[SETTINGS.length - 1], first.rotation)), "and it equals the CLI's");
    }

    step = "G over one storage binding";
    if (onPage) {
      // localStorage tm.stem.maxSsbBindingBytes lowers the binding for the SSB preview alone: G (B pixels × 320
      // positions × 8 bytes) no longer fits, so the page refuses naming the sizes and the server answers.
      await page.evaluate(() => localStorage.setItem("tm.stem.maxSsbBindingBytes", "4096"));
      check(await open(true), "the page's adapter still holds the block after a reload");
      await page.locator("#stem-ssb-compute").click();
      await page.waitForFunction(() => document.querySelector("#stem-ssb").dataset.state === "ready" && window.tmStemSsb.path !== null, null, { timeout: 120_000 });
      const s = SETTINGS[1];
      const refused = await setSliders(s);
      check(refused.path === "server" && new RegExp(`not on the page: the \\d+ bright-field pixels' spectra over the ${SCAN.join(" x ")} scan need \\d+ bytes in one storage binding, the adapter allows 4096`).test(refused.caption),
        `refused with the sizes, computed by the server: "${refused.caption}"`);
      check(sameValues(refused.values, cli("ssb-refused", s, refused.rotation)), "and equal to the CLI's");
    }
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join("; ") : ""}`);
    log(`measured (${want}): max |page − CLI| ${measured.map((e) => e.toExponential(2)).join(", ")} rad; ${((Date.now() - started) / 1000).toFixed(1)} s`);
    console.log("PASS: stem ssb e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 120_000);
