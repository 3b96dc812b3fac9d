// End-to-end test of the 4D-STEM acquisition page (web/src/stem/acquisition_page.ts) on acquisitions that are not
// Dectris HDF5 (issue 48: "the viewer opens each format"), in Debian's Chromium (headless, playwright-core from
// web/'s node_modules). It writes into a temporary folder
//   - a Quantum Detectors Merlin acquisition: scan.mib + scan.hdr (tests/fixtures/mib_writer.py, Debian's
//     /usr/bin/python3 + numpy), an 8 × 8 scan of 256 × 256 raw 12-bit (R64) single-chip frames with a bright disk,
//     the scan shape from the .hdr's ScanY/ScanX;
//   - a NumPy acquisition: stack.npy, a (6, 5, 32, 32) '<u2' array saved by numpy;
//   - an EMPAD acquisition: empad.xml + empad.raw (tests/fixtures/empad_writer.py), a 7 × 6 scan of 128 × 128
//     float32 frames (130-row records) with the sidecar's beam energy, field of view, scan_size and calibrated
//     diffraction angle;
// serves the three (`tensormorph serve scan.mib stack.npy empad.xml`), and checks:
//   - the inventory lists each by name with its readiness ("complete"), and GET /api/acquisitions names the format
//     ("mib", "npy");
//   - each acquisition's page draws the mean pattern and the virtual image (not blank); the image is computed on the
//     page's WebGPU adapter (SwiftShader here; TM_ALLOW_NO_WEBGPU=1 accepts a Chromium without one) and its numbers
//     (window.tmStem) equal the CLI's `stem mask PATH --inner X --outer Y` .npy for the annulus the page shows; the
//     mean pattern's numbers equal `stem mean-dp PATH`;
//   - EMPAD's float frames take the server's products: the page does not ask for the block (no 409 in the page's
//     requests), says why ("float kernels are not implemented") and that the image is "computed on the server"; the
//     image equals `stem mask`, the BF preset's image equals `stem bf`, the mean pattern `stem mean-dp` (float64, bit
//     for bit through JSON); the calibration table shows the sidecar's beam energy, scan step and detector angle per
//     pixel with their sources;
//   - no page errors; screenshots build/e2e/stem-mib.png, stem-npy.png and stem-empad.png (not blank).
// The rest of the page (dragging, presets, fields, SSB, movies, readiness events) is format-neutral and tested on
// Dectris data by stem.test.mjs.
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

/** Writes tmp/scan.mib (+ .hdr), tmp/stack.npy and tmp/empad.xml (+ .raw) with numpy and the MIB and EMPAD fixture
 *  writers; returns their paths. */
function writeAcquisitions(tmp, env) {
  const mib = join(tmp, "scan.mib");
  const npy = join(tmp, "stack.npy");
  const code = `
import sys
import numpy as np
import mib_writer as mw
import empad_writer as ew
mib, npy, folder = sys.argv[1:4]
rng = np.random.default_rng(48)
frames = mw.counts(rng, (64, 256, 256), 12, np.uint16)
mw.write(mib, frames, hdr=mw.hdr_text(64, 8, depth=12, scan=(8, 8)), raw=True, depth=12)
a = rng.integers(0, 40, size=(6, 5, 32, 32)).astype("<u2")
a[..., 11:21, 12:20] += 500
np.save(npy, a)
ew.write(folder, "empad", ew.frames(rng, 7 * 6), scan=(7, 6), fov="[1.2e-08, 1.4e-08]", scan_size="0.5",
         calibration={"source.get_voltage": "300000.0", "calibrated_diffraction_angle": "0.00025"})
`;
  const r = spawnSync(PYTHON, ["-c", code, mib, npy, tmp], { env: { ...env, PYTHONPATH: join(ROOT, "tests", "fixtures") }, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${PYTHON} (mib_writer, empad_writer, numpy): exit ${r.status}\n${r.stdout}\n${r.stderr}`);
  return { mib, npy, empad: join(tmp, "empad.xml") };
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
      { id: "a2", format: "empad", path: files.empad, name: "empad.xml", shot: "stem-empad.png", server: true },
    ];
    server = await startServer([files.mib, files.npy, files.empad, "--web-root", WEB_DIST], env);
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
      await page.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 120_000 });
      const path = await page.evaluate(() => document.querySelector("#stem-image").dataset.path);
      const note = await page.locator("#stem-compute-note").textContent();
      if (c.server) {
        // Float frames: the server's products, and the page says so (the block is not asked for: no 409 above).
        const caption = await page.locator("#stem-image-caption").textContent();
        const notePath = await page.locator("#stem-compute-note").getAttribute("data-path");
        check(path === "server" && notePath === "server", `float frames: the virtual image is the server's (image ${path}, note ${notePath})`);
        check(note.includes("float32") && note.includes("float kernels are not implemented"), `the page says why: "${note}"`);
        check(caption.includes("computed on the server"), `the caption says which path ran: "${caption}"`);
        check(await page.locator("#stem-compute-on option[value=page]").isDisabled(), "'Compute on: page adapter' is disabled");
        const facts = await page.locator("#stem-calibration").textContent();
        for (const want of ["300000 eV (file: beam energy)", "10 angstrom (file: empad/scan_step (from root/iom_measurements/optics.get_full_scan_field_of_view[0] × root/scan_parameters/scan_size ÷ root/pix_x))", "0.25 mrad (file: empad/detector_angle_per_pixel (from root/iom_measurements/calibrated_diffraction_angle))"])
          check(facts.includes(want), `the calibration table shows "${want}"`);
      } else if (ALLOW_NO_WEBGPU && path !== "page") log(`no WebGPU adapter (${note}): the page path is not checked`);
      else {
        check(path === "page", `the virtual image is computed on the page's adapter: "${note}"`);
        // Not Dectris HDF5 chunks: the page fetches the decoded block (GET …/chunks is not asked for) and says why.
        const decode = await page.locator("#stem-decode-report").textContent();
        check((await page.locator("#stem-decode-report").getAttribute("data-path")) === "block" && /does not serve this acquisition's frames as chunks/.test(decode),
          `the block was decoded on the server, the report says why: "${decode}"`);
      }

      const s = await page.evaluate(() => ({ values: window.tmStem.image.values, inner: document.querySelector("#stem-image").dataset.inner, outer: document.querySelector("#stem-image").dataset.outer }));
      const maskOut = join(tmp, `mask-${c.format}.npy`);
      tm(["stem", "mask", c.path, "--inner", s.inner, "--outer", s.outer, "-o", maskOut], env);
      const want = readNpy(maskOut);
      check(sameValues(s.values, want.values), `the virtual image (${path}) equals the CLI's stem mask ${c.name} --inner ${s.inner} --outer ${s.outer} (${want.values.length} positions)`);
      check(new Set(s.values).size > 1, "and it varies over the scan");
      if (c.server) {
        // The BF preset: the server's bf detector, drawn as a mask image; equal to the CLI's stem bf.
        const before = await page.evaluate(() => window.tmStem.requests);
        await page.locator("#stem-preset-bf").click();
        await page.waitForFunction((n) => window.tmStem.requests > n && document.querySelector("#stem-image").dataset.state === "ready", before, { timeout: 60_000 });
        const bfOut = join(tmp, `bf-${c.format}.npy`);
        tm(["stem", "bf", c.path, "-o", bfOut], env);
        const bf = readNpy(bfOut);
        const shown = await page.evaluate(() => window.tmStem.image.values);
        check(sameValues(shown, bf.values), `the BF preset's image equals the CLI's stem bf ${c.name} (${bf.values.length} positions, float64)`);
      }

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
