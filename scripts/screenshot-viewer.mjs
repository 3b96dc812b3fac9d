// Regenerates the tensor pictures of the README and docs/viewer.md from the demo checkpoint (`tensormorph demo`,
// indexed), in Debian's Chromium:
// - docs/images/viewer.png: the tensor page of model.layers.0.mlp.down_proj.weight, abs max on a log scale (the
//   two hot columns and the 41.5 weight), with its index axes, the colour bar's ticks and the hover read-out of
//   the tile holding the 41.5;
// - docs/images/viewer-strips.png: the "Across layers" strips of the same role;
// - docs/images/demo-down-proj-abs-max.png: the CLI's figure of the same tensor (`tensormorph render`, the
//   command the README prints under it).
//
//   TM_BIN=build/tensormorph node scripts/screenshot-viewer.mjs
import { join } from "node:path";
import { ROOT, WEB_DIST, chromiumOrSkip, e2eSetup, e2eTeardown, launchBrowser, startServer, tm } from "../tests/e2e/harness.mjs";

const TENSOR = "model.layers.0.mlp.down_proj.weight";
const images = join(ROOT, "docs", "images");
const chromiumPath = chromiumOrSkip();
const { chromium, tmp, env } = e2eSetup("viewer-screenshot", (ok, what) => {
  if (!ok) throw new Error(what);
});
let server = null;
let context = null;
try {
  const demo = join(tmp, "demo");
  tm(["demo", "--out", demo, "--no-gguf"], env);
  tm(["index", demo], env);
  const figure = join(images, "demo-down-proj-abs-max.png");
  tm(["render", demo, TENSOR, "--stat", "abs_max", "--transform", "log", "-o", figure], env);
  console.log(`wrote ${figure}`);

  server = await startServer([demo, "--web-root", WEB_DIST], env);
  const base = server.url.split("?")[0].replace(/\/$/, "");
  context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
  const page = context.pages()[0] ?? (await context.newPage());
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(`${base}/#/tensor/0/${encodeURIComponent(TENSOR)}`);
  const ready = () => page.waitForFunction(() => document.querySelector("#heatmap")?.dataset.state === "ready", null, { timeout: 300_000 });
  await ready();
  await page.selectOption("#stat", "abs_max");
  await page.selectOption("#transform", "log");
  await ready();
  // The strips first (their rows load only near the view), so that the page's picture shows them loaded.
  await page.locator("#strips").scrollIntoViewIfNeeded();
  await page.waitForFunction(() => {
    const s = document.querySelector("#strips");
    if (!s || s.dataset.state !== "ready") return false;
    s.scrollIntoView({ block: "start" });
    const rows = [...s.querySelectorAll("tr.strip-row")];
    return rows.length > 0 && rows.every((r) => ["loaded", "error", "unavailable"].includes(r.dataset.state));
  }, null, { timeout: 300_000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  // Hover the 41.5 (the demo puts it at row rows/4, column cols/2), placed with the view's own geometry (the
  // canvas' data-ox/oy: the element at its top-left corner; data-sx/sy: CSS pixels per element): the read-out then
  // shows the exact statistics of the cell under it.
  const where = await page.evaluate(async (name) => {
    const c = document.querySelector("#heatmap");
    const r = c.getBoundingClientRect();
    const d = c.dataset;
    const [rows, cols] = (await (await fetch(`/api/tensors/0/${encodeURIComponent(name)}`)).json()).shape;
    const row = Math.floor(rows / 4) + 0.5;
    const col = Math.floor(cols / 2) + 0.5;
    return { x: r.left + (col - Number(d.ox)) * Number(d.sx), y: r.top + (row - Number(d.oy)) * Number(d.sy) };
  }, TENSOR);
  await page.mouse.move(where.x, where.y);
  await page.waitForFunction(() => document.querySelector("#readout")?.dataset.state === "ready", null, { timeout: 60_000 })
    .catch(() => console.log("the hover read-out did not settle: the picture shows it as it is"));
  const viewer = join(images, "viewer.png");
  await page.screenshot({ path: viewer, fullPage: true });
  console.log(`wrote ${viewer}`);

  await page.locator("#strips").scrollIntoViewIfNeeded();
  const strips = join(images, "viewer-strips.png");
  await page.locator("#strips").screenshot({ path: strips });
  console.log(`wrote ${strips}`);
} finally {
  await e2eTeardown(tmp, server, context);
}
