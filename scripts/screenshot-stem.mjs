// Regenerates docs/images/stem-acquisition.png: the acquisition page on a `stem demo` acquisition (32 x 32 x 64 x 64)
// with the ADF preset, a clicked scan position's pattern, the DPC view, an SSB preview and a line profile drawn across
// the virtual image, in Debian's Chromium.
//
//   TM_BIN=build/tensormorph node scripts/screenshot-stem.mjs
import { join } from "node:path";
import { ROOT, WEB_DIST, chromiumOrSkip, e2eSetup, e2eTeardown, launchBrowser, startServer, tm } from "../tests/e2e/harness.mjs";

const chromiumPath = chromiumOrSkip();
const { chromium, tmp, env } = e2eSetup("stem-screenshot", (ok, what) => {
  if (!ok) throw new Error(what);
});
let server = null;
let context = null;
try {
  const acq = join(tmp, "stem");
  tm(["stem", "demo", "--out", acq, "--scan", "32,32", "--detector", "64"], env);
  server = await startServer([join(acq, "demo_master.h5"), "--web-root", WEB_DIST], env);
  context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
  const page = context.pages()[0] ?? (await context.newPage());
  await page.setViewportSize({ width: 1100, height: 900 });
  await page.goto(new URL("#/acquisition/a0", server.url).href);
  const ready = (sel) => page.waitForFunction((s) => document.querySelector(s)?.dataset.state === "ready", sel, { timeout: 300_000 });
  await ready("#stem-image");
  await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 300_000 });
  await page.locator("#stem-preset-adf").click();
  await ready("#stem-image");
  const box = await page.locator("#stem-image").boundingBox();
  await page.locator("#stem-image").click({ position: { x: box.width * 0.4, y: box.height * 0.6 } });
  await page.waitForFunction(() => window.tmStem.frame !== null, null, { timeout: 60_000 });
  await page.locator("#stem-preset-adf").click();  // back to the pattern with the ring, the frame kept for the movies
  await ready("#stem-field");
  await page.selectOption("#stem-field-view", "dpc");
  await ready("#stem-field");
  await page.evaluate(() => (document.getElementById("stem-ssb-c10").value = "200"));
  await page.locator("#stem-ssb-compute").click();
  await ready("#stem-ssb");
  // A line profile across the virtual image (drag mode "line"), shown under it.
  await page.selectOption("#stem-image-drag", "line");
  await page.locator("#stem-image").scrollIntoViewIfNeeded();
  const ib = await page.locator("#stem-image").boundingBox();
  await page.mouse.move(ib.x + ib.width * 0.1, ib.y + ib.height * 0.2);
  await page.mouse.down();
  await page.mouse.move(ib.x + ib.width * 0.5, ib.y + ib.height * 0.5);
  await page.mouse.move(ib.x + ib.width * 0.9, ib.y + ib.height * 0.8);
  await page.mouse.up();
  await page.waitForFunction(() => document.querySelector("#stem-line-profile")?.hidden === false, null, { timeout: 60_000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  const out = join(ROOT, "docs", "images", "stem-acquisition.png");
  await page.screenshot({ path: out, fullPage: true });
  console.log(`wrote ${out}`);
} finally {
  await e2eTeardown(tmp, server, context);
}
