// End-to-end test of the acquisition page's iDPC and FFT views on its WebGPU adapter (web/src/stem/webgpu/fft.ts,
// fourier_views.ts: float32 FFTs in WGSL) against the CLI's float64 (FFTW) on the same `stem demo` acquisition, in
// Debian's Chromium (headless, SwiftShader). The scan is 16 × 12 and the frames 40 × 40, so every FFT path runs:
// radix-2 (16, and Bluestein's convolutions of 32 and 128) and Bluestein (12, 40), along rows and along columns.
// It checks:
//   - iDPC (at the page's found rotation) is computed on the page and within IDPC_TOLERANCE of `stem idpc
//     --rotation-deg θ [--transpose]`: max |page − CLI| ≤ tolerance × (CLI max − CLI min);
//   - the FFT view of the virtual image (the annulus shown) and of the mean pattern are computed on the page and
//     within FFT_VIEW_TOLERANCE of `stem fft --of mask --inner --outer` and `stem fft --of mean-dp`, the same way;
//   - each caption names the page's adapter and the tolerance the test holds it to;
//   - "Compute on: server" gives the server's iDPC (FFTW), equal to the CLI's within 1e-9 of its range, and says so;
//   - with the FFTs' storage binding lowered (localStorage tm.stem.maxFftBindingBytes) a grid that does not fit is
//     refused naming the sizes and the server computes it (equal to the CLI's), while smaller grids stay on the page;
//   - no page errors.
// The measured errors are logged. Runs in about 12 s (SwiftShader, 2 cores).
//
// Environment: TM_BIN (default build/tensormorph), TM_WEB_DIST (default web/dist), CHROMIUM, TM_ALLOW_NO_WEBGPU=1
// (accept a Chromium without a WebGPU adapter: the server path only). Exits 0 with "SKIPPED: no chromium" only when
// Chromium is not installed.
import { join } from "node:path";
import { WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, launchBrowser, readNpy, runTest, sameValues, startServer, tm, watchErrors } from "./harness.mjs";

// The frozen bounds (web/src/stem/webgpu/fourier_views.ts states the same numbers; docs/viewer.md explains them).
const IDPC_TOLERANCE = 1e-5;
const FFT_VIEW_TOLERANCE = 1e-4;
const ALLOW_NO_WEBGPU = process.env.TM_ALLOW_NO_WEBGPU === "1";

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[e2e stem fourier]", () => step);

/** max |a − b| / (max b − min b), and the worst index. */
function relativeToRange(a, b) {
  let lo = Infinity, hi = -Infinity, worst = 0, at = -1;
  for (const v of b) (lo = Math.min(lo, v)), (hi = Math.max(hi, v));
  if (a.length !== b.length) return { error: Infinity, at, range: hi - lo };
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= worst)) (worst = d), (at = i);
  }
  return { error: worst / (hi - lo), at, range: hi - lo };
}

async function main() {
  const started = Date.now();
  const { chromium, tmp, env } = e2eSetup("stem-fourier", check);
  let server = null;
  let context = null;
  try {
    step = "acquisition";
    const acq = join(tmp, "stem");
    tm(["stem", "demo", "--out", acq, "--scan", "16,12", "--detector", "40", "--files", "1"], env);
    const master = join(acq, "demo_master.h5");
    server = await startServer([master, "--web-root", WEB_DIST], env);
    const cli = (name, args) => {
      const out = join(tmp, `${name}.npy`);
      tm(["stem", ...args.slice(0, 1), master, ...args.slice(1), "-o", out], env);
      return readNpy(out).values;
    };

    step = "page";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    await page.goto(new URL("#/acquisition/a0", server.url).href);
    await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1" && document.querySelector("#stem-field")?.dataset.state === "ready",
      null, { timeout: 120_000 });
    const onPage = (await page.evaluate(() => document.querySelector("#stem-image").dataset.path)) === "page";
    if (!onPage && ALLOW_NO_WEBGPU) log(`no WebGPU adapter (${await page.locator("#stem-compute-note").textContent()}): the page path is not checked`);
    else check(onPage, "the page's adapter holds the block");
    const want = onPage ? "page" : "server";

    const show = async (view) => {
      await page.selectOption("#stem-field-view", view);
      await page.waitForFunction((v) => document.querySelector("#stem-field").dataset.view === v && document.querySelector("#stem-field").dataset.state === "ready", view, { timeout: 60_000 });
      return page.evaluate(() => ({ ...window.tmStemFields.shown, rotationDeg: window.tmStemFields.rotationDeg, transpose: window.tmStemFields.transpose,
        refused: window.tmStemFields.fourierRefused, path: document.querySelector("#stem-field").dataset.path, caption: document.querySelector("#stem-field-caption").textContent }));
    };
    const judge = (name, shown, reference, bound) => {
      check(shown.on === want && shown.path === want, `${name} ran on the ${want} (${shown.caption})`);
      if (want === "page") check(shown.caption.includes(`within ${bound} of the range`), `and its caption states the tolerance ${bound}`);
      const r = relativeToRange(shown.values, reference);
      check(r.error <= bound, `${name}: max |page − CLI| = ${(r.error * r.range).toExponential(3)} = ${r.error.toExponential(3)} of the CLI's range ${r.range.toPrecision(6)} (bound ${bound}; worst at ${r.at})`);
      return r;
    };

    step = "iDPC";
    const idpc = await show("idpc");
    const idpcWant = cli("idpc", ["idpc", "--rotation-deg", String(idpc.rotationDeg), ...(idpc.transpose ? ["--transpose"] : [])]);
    check(idpc.shape.join(",") === "16,12", `iDPC is 16 x 12 at the page's rotation ${idpc.rotationDeg.toFixed(4)}°${idpc.transpose ? " (transposed)" : ""}`);
    const idpcErr = judge("iDPC", idpc, idpcWant, IDPC_TOLERANCE);

    step = "FFT of the virtual image";
    const fft = await show("fft");
    const ring = await page.evaluate(() => ({ inner: document.querySelector("#stem-image").dataset.inner, outer: document.querySelector("#stem-image").dataset.outer }));
    const fftErr = judge(`FFT of the virtual image (annulus ${ring.inner}–${ring.outer} px)`, fft, cli("fft-mask", ["fft", "--of", "mask", "--inner", ring.inner, "--outer", ring.outer]), FFT_VIEW_TOLERANCE);

    step = "FFT of the mean pattern";
    const dp = await show("fft-dp");
    check(dp.shape.join(",") === "40,40", "the mean pattern's FFT is 40 x 40");
    const dpErr = judge("FFT of the mean pattern", dp, cli("fft-dp", ["fft", "--of", "mean-dp"]), FFT_VIEW_TOLERANCE);

    step = "compute on the server";
    if (onPage) {
      await page.selectOption("#stem-compute-on", "server");
      await page.waitForFunction(() => document.querySelector("#stem-image").dataset.path === "server" && document.querySelector("#stem-image").dataset.state === "ready", null, { timeout: 60_000 });
      const server = await show("idpc");
      check(server.on === "server" && /FFTW in float64/.test(server.caption), `"Compute on: server" gives the server's iDPC: "${server.caption}"`);
      const exact = cli("idpc-server", ["idpc", "--rotation-deg", String(server.rotationDeg), ...(server.transpose ? ["--transpose"] : [])]);
      const r = relativeToRange(server.values, exact);
      check(r.error <= 1e-9, `and it equals the CLI's within 1e-9 of its range (${r.error.toExponential(2)})`);
    }
    step = "a transform over one storage binding";
    if (onPage) {
      // localStorage tm.stem.maxFftBindingBytes lowers the adapter's binding for the FFTs alone: the 16 x 12 grids
      // (1536 bytes, Bluestein scratch 4096) still fit, the mean pattern's 40 x 40 (12800 bytes, scratch 40960) does not.
      await page.evaluate(() => localStorage.setItem("tm.stem.maxFftBindingBytes", "8192"));
      await page.reload();
      await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1" && document.querySelector("#stem-field")?.dataset.state === "ready",
        null, { timeout: 120_000 });
      const small = await show("idpc");
      check(small.on === "page", "iDPC (16 x 12) still runs on the page");
      const refused = await show("fft-dp");
      check(refused.on === "server" && /not on the page: a 40 x 40 float32 complex FFT needs 12800 bytes and 40960 of Bluestein scratch in one storage binding each, the adapter allows 8192/.test(refused.caption),
        `the mean pattern's FFT is refused with the sizes and computed by the server: "${refused.caption}"`);
      check(sameValues(refused.values, cli("fft-dp-server", ["fft", "--of", "mean-dp"])), "and equals stem fft --of mean-dp");
    }
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join("; ") : ""}`);
    log(`measured (${want}): iDPC ${idpcErr.error.toExponential(2)}, FFT of the virtual image ${fftErr.error.toExponential(2)}, FFT of the mean pattern ${dpErr.error.toExponential(2)} of the CLI's range; ${((Date.now() - started) / 1000).toFixed(1)} s`);
    console.log("PASS: stem fourier e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 120_000);
