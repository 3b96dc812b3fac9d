// What the acquisition page's benches share (stem_page_bench.mjs, stem_decode_page_bench.mjs): their numeric
// command-line options, and one session: a `stem demo` set of SCAN² positions of DETECTOR² frames (written once into
// bench-data/ beside TM_BIN, reused by later runs), `tensormorph serve` on it, and Chromium with a page of
// 1100 × 900. The caller measures, then calls session.close() (server, browser and temporary folder go).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { TM_BIN, WEB_DIST, chromiumOrSkip, e2eSetup, e2eTeardown, launchBrowser, startServer, tm } from "../tests/e2e/harness.mjs";

// The number given as --NAME VALUE on the command line, else `fallback`.
export const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// Opens the session named `name` (its temporary folder's prefix) on the SCAN × SCAN × DETECTOR² demo set.
export async function openPageSession(name, scan, detector) {
  const chromiumPath = chromiumOrSkip();
  const { chromium, tmp, env } = e2eSetup(name, (ok, what) => {
    if (!ok) throw new Error(what);
  });
  const data = join(dirname(TM_BIN), "bench-data", `stem-viewer-${scan}-${detector}`);
  const master = join(data, "demo_master.h5");
  if (!existsSync(master)) tm(["stem", "demo", "--out", data, "--scan", `${scan},${scan}`, "--detector", String(detector), "--files", "4"], env);
  let server = null;
  let context = null;
  try {
    server = await startServer([master, "--web-root", WEB_DIST], env);
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    await page.setViewportSize({ width: 1100, height: 900 });
    return { env, tmp, master, server, context, page, close: () => e2eTeardown(tmp, server, context) };
  } catch (e) {
    await e2eTeardown(tmp, server, context);
    throw e;
  }
}

// Drags the acquisition page's outer detector ring outwards by `steps` detector pixels (pointer events on #stem-ring of
// a `detector`-pixel pattern), waiting for each virtual image; returns the page's time of each image (ms,
// window.tmStem.imageMs of this drag).
export async function dragOuterRing(page, detector, steps) {
  const box = await page.locator("#stem-ring").boundingBox();
  const st = await page.evaluate(() => ({ center: window.tmStem.center, outer: window.tmStem.outer, n: window.tmStem.imageMs.length }));
  const scale = box.width / detector;
  const cx = box.x + (st.center[1] + 0.5) * scale;
  const cy = box.y + (st.center[0] + 0.5) * scale;
  await page.mouse.move(cx + st.outer * scale, cy);
  await page.mouse.down();
  for (let k = 1; k <= steps; k++) {
    await page.mouse.move(cx + (st.outer + k) * scale, cy);
    await page.waitForFunction(() => document.querySelector("#stem-image").dataset.state === "ready", null, { timeout: 600_000 });
  }
  await page.mouse.up();
  return page.evaluate((n) => window.tmStem.imageMs.slice(n), st.n);
}
