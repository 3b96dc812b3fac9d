// End-to-end test of the acquisition page reading the product cache of `tensormorph stem prepare` (web/src/stem/
// prepared.ts, GET /api/acquisitions/{id}/prepared[/{kind}]) in Debian's Chromium (headless, SwiftShader): a 12 × 10
// × 48 × 48 `stem demo` acquisition prepared into a cache the server is given (serve --product-cache), and a copy
// prepared then changed (a data file's modification time: the cache's key no longer matches). It checks:
//   - the page says the products come from the cache, naming its build time and source signature (#stem-prepared);
//   - the mean and max patterns, the BF image (the first drawn), the ADF image (its preset) and the CoM field are
//     drawn from the cache (data-path "cache") and equal the CLI's `stem … --cache DB` .npy values, whose bytes the
//     server's GET …/prepared/{kind}?format=npy serves unchanged;
//   - the calibration's bright-field disk is the cache's (no pattern pass);
//   - the request log has no GET …/products/ request and the page computed nothing (window.tmStem.computed) for them:
//     the block still downloads, for what the user changes;
//   - dragging the ADF's outer ring computes (on the adapter, else the server) and equals `stem mask --inner --outer`;
//   - unchecking #stem-use-prepared computes the pattern and CoM (equal to the cache's); checking it draws the cache's;
//   - the changed copy's page draws nothing from the cache and says why (stale: the files changed after prepare);
//   - no page errors.
// Environment: TM_BIN, TM_WEB_DIST, CHROMIUM, TM_ALLOW_NO_WEBGPU=1 (a Chromium without WebGPU: the drag is computed by
// the server). Exits 0 with "SKIPPED: no chromium" only when Chromium is not installed.
import { cpSync, readFileSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, getJson, launchBrowser, readNpy, runTest, sameValues, startServer, tm, watchErrors } from "./harness.mjs";

const chromiumPath = chromiumOrSkip();
const ALLOW_NO_WEBGPU = process.env.TM_ALLOW_NO_WEBGPU === "1";
let step = "setup";
const { log, check } = checker("[e2e stem prepared]", () => step);

async function main() {
  const started = Date.now();
  const { chromium, tmp, env } = e2eSetup("stem-prepared", check);
  let server = null;
  let context = null;
  try {
    step = "prepare";
    const acq = join(tmp, "stem");
    tm(["stem", "demo", "--out", acq, "--scan", "12,10", "--detector", "48", "--files", "1"], env);
    const master = join(acq, "demo_master.h5");
    const changed = join(tmp, "changed");
    cpSync(acq, changed, { recursive: true });
    const db = join(tmp, "products.sqlite");
    for (const m of [master, join(changed, "demo_master.h5")]) tm(["stem", "prepare", m, "--cache", db], env);
    const later = new Date(Date.now() + 10_000);
    utimesSync(join(changed, "demo_data_000001.h5"), later, later);
    server = await startServer([master, join(changed, "demo_master.h5"), "--product-cache", db, "--web-root", WEB_DIST], env);
    const base = server.url;
    // The CLI's answers from the same cache, and the server's bytes for them.
    const cli = (name, ...flags) => {
      const out = join(tmp, `${name}${flags.join("")}.npy`);
      tm(["stem", ...name.split(" "), master, ...flags, "--cache", db, "-o", out], env);
      return { ...readNpy(out), bytes: readFileSync(out) };
    };
    const want = { bf: cli("bf"), adf: cli("adf"), mean: cli("mean-dp"), max: cli("mean-dp", "--max"), com: cli("com") };
    for (const [name, kind, query] of [["bf", "bf", ""], ["adf", "adf", ""], ["mean", "mean-dp", ""], ["max", "mean-dp", "&max=1"], ["com", "com", ""]]) {
      const served = Buffer.from(await (await fetch(new URL(`/api/acquisitions/a0/prepared/${kind}?format=npy${query}`, base))).arrayBuffer());
      check(served.equals(want[name].bytes), `GET …/prepared/${kind}?format=npy${query} is the CLI's ${want[name].bytes.length} bytes (stem ${kind} --cache)`);
    }
    const status = await getJson(base, "/api/acquisitions/a0/prepared");
    check(status.hit && status.entry.created, `the server's cache answers a0 (built ${status.entry.created})`);

    step = "page";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    const requests = [];
    page.on("request", (r) => requests.push(new URL(r.url()).pathname));
    await page.goto(new URL("#/acquisition/a0", base).href);
    await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1" && document.querySelector("#stem-image")?.dataset.state === "ready" &&
      !!window.tmStemFields?.com && document.querySelector("#stem-field")?.dataset.state === "ready", null, { timeout: 60_000 });
    const shown = () => page.evaluate(() => ({ image: window.tmStem.image.values, pattern: window.tmStem.pattern.values, computed: window.tmStem.computed.slice(),
      imagePath: document.querySelector("#stem-image").dataset.path, patternPath: document.querySelector("#stem-pattern").dataset.path,
      caption: document.querySelector("#stem-image-caption").textContent, patternCaption: document.querySelector("#stem-pattern-caption").textContent,
      line: document.querySelector("#stem-prepared").textContent, hit: document.querySelector("#stem-prepared").dataset.hit, note: document.querySelector("#stem-compute-note").dataset.path,
      com: window.tmStemFields.shown?.values, comOn: window.tmStemFields.comOn, fieldPath: document.querySelector("#stem-field").dataset.path,
      npy: document.querySelector("#stem-export-npy").href, inner: window.tmStem.inner, outer: window.tmStem.outer }));
    const firstImageMs = () => page.evaluate(() => window.tmStemOpen.firstImageAt - window.tmStemOpen.openedAt);
    let s = await shown();
    const built = status.entry.created.replace("T", " ").replace("Z", " UTC");
    check(s.hit === "1" && s.line.includes(`built ${built}`) && s.line.includes(status.entry.signature), `the page says where its products come from: "${s.line}"`);
    check(s.imagePath === "cache" && sameValues(s.image, want.bf.values) && s.caption.includes(`BF from the prepared product cache (built ${built}`),
      `the first image is the cache's BF, equal to stem bf --cache (${s.image.length} positions): "${s.caption}"`);
    check(s.patternPath === "cache" && sameValues(s.pattern, want.mean.values), `the mean pattern is the cache's, equal to stem mean-dp --cache: "${s.patternCaption}"`);
    check(s.comOn === "cache" && s.fieldPath === "cache" && sameValues(s.com, want.com.values), "the CoM field is the cache's, equal to stem com --cache");
    check(s.npy.includes("/api/acquisitions/a0/prepared/bf"), `the .npy export is the cache's bytes: ${s.npy}`);
    const cal = await getJson(base, "/api/acquisitions/a0/calibration");
    const facts = await page.locator("#stem-calibration").textContent();
    check(cal.placement.length === 0 && facts.includes("detected (prepared)"), "the calibration's disk is the cache's: no pattern pass (empty placement), the table says \"detected (prepared)\"");
    const onPage = s.note === "page";
    if (!onPage && ALLOW_NO_WEBGPU) log("no WebGPU adapter: the drag is computed by the server");
    else check(onPage, "the page's adapter holds the block (for what the user changes)");

    step = "max pattern and the ADF preset";
    await page.selectOption("#stem-pattern-of", "max");
    await page.waitForFunction(() => document.querySelector("#stem-pattern").dataset.showing === "max" && document.querySelector("#stem-pattern").dataset.state === "ready", null, { timeout: 30_000 });
    await page.locator("#stem-preset-adf").click();
    await page.waitForFunction(() => document.querySelector("#stem-image-caption").textContent.includes("ADF from") && document.querySelector("#stem-image").dataset.state === "ready", null, { timeout: 30_000 });
    s = await shown();
    check(s.patternPath === "cache" && sameValues(s.pattern, want.max.values), "the max pattern is the cache's, equal to stem mean-dp --max --cache");
    check(s.imagePath === "cache" && sameValues(s.image, want.adf.values), `the ADF preset draws the cache's ADF, equal to stem adf --cache (annulus ${s.inner.toFixed(3)}–${s.outer.toFixed(3)} px)`);
    const products = requests.filter((p) => p.includes("/products/"));
    check(products.length === 0 && s.computed.length === 0, `nothing was computed for them: no …/products/ request (${products.join(", ") || "none"}), nothing on the page (${s.computed.join(", ") || "none"}); cache requests: ${requests.filter((p) => p.includes("/prepared")).length}`);

    step = "drag the ADF's outer ring";
    const box = await page.locator("#stem-ring").boundingBox();
    const scale = box.width / 48;
    const cx = box.x + (status.entry.disk.col + 0.5) * scale;
    const cy = box.y + (status.entry.disk.row + 0.5) * scale;
    await page.mouse.move(cx + s.outer * scale, cy);
    await page.mouse.down();
    for (let k = 1; k <= 4; k++) await page.mouse.move(cx + (s.outer + 1.5 * k) * scale, cy, { steps: 2 });
    await page.mouse.up();
    await page.waitForFunction((o) => {
      const img = document.querySelector("#stem-image");
      return img.dataset.state === "ready" && img.dataset.path !== "cache" && Number(img.dataset.outer) > o + 3;
    }, s.outer, { timeout: 60_000 });
    const dragged = await page.evaluate(() => ({ values: window.tmStem.image.values, path: document.querySelector("#stem-image").dataset.path, computed: window.tmStem.computed.slice(),
      inner: document.querySelector("#stem-image").dataset.inner, outer: document.querySelector("#stem-image").dataset.outer }));
    const mask = join(tmp, "mask.npy");
    tm(["stem", "mask", master, "--inner", dragged.inner, "--outer", dragged.outer, "-o", mask], env);
    check(dragged.path === (onPage ? "page" : "server") && dragged.computed.length > 0 && sameValues(dragged.values, readNpy(mask).values),
      `the changed annulus ${dragged.inner}–${dragged.outer} px is computed (${dragged.path}: ${[...new Set(dragged.computed)].join(", ")}) and equals stem mask`);

    step = "the cache turned off and on";
    const want2 = onPage ? "page" : "server";
    await page.locator("#stem-use-prepared").uncheck();
    await page.waitForFunction((w) => document.querySelector("#stem-pattern").dataset.path === w && window.tmStemFields.comOn === w &&
      document.querySelector("#stem-pattern").dataset.state === "ready", want2, { timeout: 60_000 });
    const off = await shown();
    check(sameValues(off.pattern, want.max.values) && sameValues(off.com, want.com.values), `unchecked, the max pattern and the CoM are computed (${want2}) and equal the cache's`);
    await page.locator("#stem-use-prepared").check();
    await page.waitForFunction(() => document.querySelector("#stem-pattern").dataset.path === "cache" && window.tmStemFields.comOn === "cache", null, { timeout: 60_000 });
    check((await shown()).imagePath !== "cache", "checked again, the patterns and CoM are the cache's; the dragged annulus stays computed");

    step = "the changed copy";
    await page.goto(new URL("#/acquisition/a1", base).href);
    await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1" && document.querySelector("#stem-image")?.dataset.state === "ready", null, { timeout: 60_000 });
    const computedFirst = await firstImageMs();
    s = await shown();
    check(s.hit === "0" && /none drawn — no entry for the acquisition as it is now: stale: the acquisition's files changed after it was prepared/.test(s.line) &&
      s.imagePath !== "cache" && s.patternPath !== "cache", `a stale entry is not drawn, and the page says why: "${s.line}"`);
    check(!requests.some((p) => p.startsWith("/api/acquisitions/a1/prepared/")), "no cached product of the changed copy was asked for");
    // Back to the prepared acquisition, in the page now warm as it was for the copy: the time to its first image.
    await page.goto(new URL("#/acquisition/a0", base).href);
    await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1" && document.querySelector("#stem-image")?.dataset.path === "cache", null, { timeout: 60_000 });
    const cachedFirst = await firstImageMs();
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join("; ") : ""}`);
    log(`first image after opening (SwiftShader, headless: smoke only): ${cachedFirst.toFixed(1)} ms from the cache, ${computedFirst.toFixed(1)} ms computed (the stale copy; 12 x 10 x 48 x 48, where computing costs little); ${((Date.now() - started) / 1000).toFixed(1)} s in all`);
    console.log("PASS: stem prepared e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 120_000);
