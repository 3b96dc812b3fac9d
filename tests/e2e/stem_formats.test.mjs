// End-to-end test of the 4D-STEM acquisition page (web/src/stem/acquisition_page.ts) on acquisitions that are not
// Dectris HDF5 (issue 48: "the viewer opens each format"), in Debian's Chromium (headless, playwright-core from
// web/'s node_modules). It writes into a temporary folder
//   - a Quantum Detectors Merlin acquisition: scan.mib + scan.hdr (tests/fixtures/mib_writer.py, Debian's
//     /usr/bin/python3 + numpy), an 8 × 8 scan of 256 × 256 raw 12-bit (R64) single-chip frames with a bright disk,
//     the scan shape from the .hdr's ScanY/ScanX;
//   - a NumPy acquisition: stack.npy, a (6, 5, 32, 32) '<u2' array saved by numpy;
// serves both (`tensormorph serve scan.mib stack.npy`), and checks:
//   - the inventory lists each by name with its readiness ("complete"), and GET /api/acquisitions names the format
//     ("mib", "npy");
//   - each acquisition's page draws the mean pattern and the virtual image (not blank); the image is computed on the
//     page's WebGPU adapter (SwiftShader here; TM_ALLOW_NO_WEBGPU=1 accepts a Chromium without one) and its numbers
//     (window.tmStem) equal the CLI's `stem mask PATH --inner X --outer Y` .npy for the annulus the page shows; the
//     mean pattern's numbers equal `stem mean-dp PATH`;
//   - no page errors; screenshots build/e2e/stem-mib.png and build/e2e/stem-npy.png (not blank).
// The rest of the page (dragging, presets, fields, SSB, movies, readiness events) is format-neutral and tested on
// Dectris data by stem.test.mjs. EMPAD is not read yet: no case for it.
//
// Environment: TM_BIN (default build/tensormorph), TM_E2E_OUT (default e2e/ beside TM_BIN), CHROMIUM (default
// /usr/lib/chromium/chromium or /usr/bin/chromium), PYTHON (default /usr/bin/python3, with numpy). Exits 0 with
// "SKIPPED: no chromium" only when Chromium is not installed.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { OUT_DIR, ROOT, WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, getJson, launchBrowser, pngStats, readNpy, runTest, sameValues, startServer, tm, watchErrors } from "./harness.mjs";

const chromiumPath = chromiumOrSkip();
const ALLOW_NO_WEBGPU = process.env.TM_ALLOW_NO_WEBGPU === "1";
const PYTHON = process.env.PYTHON || "/usr/bin/python3";
let step = "setup";
const { log, check } = checker("[e2e stem formats]", () => step);

/** Writes tmp/scan.mib (+ .hdr) and tmp/stack.npy with numpy and the MIB fixture writer; returns their paths. */
function writeAcquisitions(tmp, env) {
  const mib = join(tmp, "scan.mib");
  const npy = join(tmp, "stack.npy");
  const code = `
import sys
import numpy as np
import mib_writer as mw
mib, npy = sys.argv[1:3]
rng = np.random.default_rng(48)
frames = mw.counts(rng, (64, 256, 256), 12, np.uint16)
mw.write(mib, frames, hdr=mw.hdr_text(64, 8, depth=12, scan=(8, 8)), raw=True, depth=12)
a = rng.integers(0, 40, size=(6, 5, 32, 32)).astype("<u2")
a[..., 11:21, 12:20] += 500
np.save(npy, a)
`;
  const r = spawnSync(PYTHON, ["-c", code, mib, npy], { env: { ...env, PYTHONPATH: join(ROOT, "tests", "fixtures") }, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${PYTHON} (mib_writer, numpy): exit ${r.status}\n${r.stdout}\n${r.stderr}`);
  return { mib, npy };
}

async function main() {
  const { chromium, tmp, env } = e2eSetup("stem-formats", check);
  let server = null;
  let context = null;
  try {
    step = "acquisitions";
    const t0 = Date.now();
    const files = writeAcquisitions(tmp, env);
    const cases = [
      { id: "a0", format: "mib", path: files.mib, name: "scan.mib", shot: "stem-mib.png" },
      { id: "a1", format: "npy", path: files.npy, name: "stack.npy", shot: "stem-npy.png" },
    ];
    server = await startServer([files.mib, files.npy, "--web-root", WEB_DIST], env);
    const base = server.url;
    log(`fixtures written and served in ${Date.now() - t0} ms`);

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    await page.setViewportSize({ width: 1100, height: 900 });

    step = "inventory";
    const t1 = Date.now();
    await page.goto(base);
    await page.locator("#acquisitions a").first().waitFor({ timeout: 60_000 });
    const api = (await getJson(base, "/api/acquisitions")).acquisitions;
    for (const c of cases) {
      const listed = await page.locator(`#acquisitions li[data-acquisition="${c.id}"]`).textContent();
      const status = await page.locator(`#acquisitions li[data-acquisition="${c.id}"] .readiness`).getAttribute("data-status");
      check(listed.includes(c.name) && status === "complete", `the inventory lists ${c.name} as complete: "${listed}"`);
      const summary = api.find((a) => a.id === c.id);
      check(summary?.format === c.format, `GET /api/acquisitions names its format "${summary?.format}" (${summary?.layout})`);
    }

    for (const c of cases) {
      step = `${c.format} acquisition page`;
      // A fresh page per acquisition: after a hash change the previous page's #stem-image would read as ready.
      const page = await context.newPage();
      watchErrors(page, errors);
      await page.setViewportSize({ width: 1100, height: 900 });
      await page.goto(new URL(`#/acquisition/${c.id}`, base).href);
      await page.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready", null, { timeout: 120_000 });
      const path = await page.evaluate(() => document.querySelector("#stem-image").dataset.path);
      const note = await page.locator("#stem-compute-note").textContent();
      if (ALLOW_NO_WEBGPU && path !== "page") log(`no WebGPU adapter (${note}): the page path is not checked`);
      else check(path === "page", `the virtual image is computed on the page's adapter: "${note}"`);

      const s = await page.evaluate(() => ({ values: window.tmStem.image.values, inner: document.querySelector("#stem-image").dataset.inner, outer: document.querySelector("#stem-image").dataset.outer }));
      const maskOut = join(tmp, `mask-${c.format}.npy`);
      tm(["stem", "mask", c.path, "--inner", s.inner, "--outer", s.outer, "-o", maskOut], env);
      const want = readNpy(maskOut);
      check(sameValues(s.values, want.values), `the virtual image (${path}) equals the CLI's stem mask ${c.name} --inner ${s.inner} --outer ${s.outer} (${want.values.length} positions)`);
      check(new Set(s.values).size > 1, "and it varies over the scan");

      if (path === "page") await page.waitForFunction(() => document.querySelector("#stem-pattern").dataset.path === "page", null, { timeout: 60_000 });
      const meanOut = join(tmp, `mean-${c.format}.npy`);
      tm(["stem", "mean-dp", c.path, "-o", meanOut], env);
      check(sameValues(await page.evaluate(() => window.tmStem.pattern.values), readNpy(meanOut).values), "the mean pattern equals the CLI's stem mean-dp");

      const mean = await pngStats(page, (await page.locator("#stem-pattern").screenshot()).toString("base64"));
      check(mean.colours > 8, `the mean pattern is drawn (${mean.colours} colours)`);
      const image = await pngStats(page, (await page.locator("#stem-image").screenshot()).toString("base64"));
      check(image.colours > 2 && image.variance > 0, `the virtual image is drawn (${image.colours} colours)`);

      await page.evaluate(() => window.scrollTo(0, 0));
      const shotPath = join(OUT_DIR, c.shot);
      await page.screenshot({ path: shotPath, fullPage: true });
      const shot = await pngStats(page, (await page.screenshot()).toString("base64"));
      check(shot.colours > 16, `screenshot ${shotPath} is not blank (${shot.colours} colours)`);
      await page.close();
    }

    step = "page errors";
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join("; ") : ""}`);
    log(`browser part took ${Date.now() - t1} ms`);
    console.log("PASS: stem formats e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 240_000);
