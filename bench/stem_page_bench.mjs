// The 4D-STEM acquisition page in Chromium, timed: from opening the page to its first virtual image, and each
// image while a detector ring is dragged, computed on the page's WebGPU adapter over the resident block (or on the
// server when the page cannot hold it, which it says). Beside it in one run: the server computing each image
// (Compute on: server), the CLI (`tensormorph stem mask`, a fresh process) and numpy (h5py + hdf5plugin) from
// bench/stem_viewer_bench.py. The adapter's name is printed: SwiftShader (a CPU) gives smoke figures only. The
// opening is broken down by the page's progress line (when it appears, each stage it showed).
//
//   TM_BIN=build/tensormorph node bench/stem_page_bench.mjs [--scan 128] [--detector 96] [--steps 24]
//
// Prints a Markdown table; writes bench/last-run-stem-page.md.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { TM_BIN } from "../tests/e2e/harness.mjs";
import { arg, dragOuterRing, median, openPageSession } from "./page_bench_session.mjs";

const SCAN = arg("scan", 128);
const DETECTOR = arg("detector", 96);
const STEPS = arg("steps", 24);


async function main() {
  const session = await openPageSession("stem-page-bench", SCAN, DETECTOR);
  const { server, page } = session;
  const rows = [];
  try {
    const t0 = Date.now();
    await page.goto(new URL("#/acquisition/a0", server.url).href);
    await page.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 600_000 });
    const firstMs = Date.now() - t0;
    const note = await page.locator("#stem-compute-note").textContent();
    const where = await page.evaluate(() => document.querySelector("#stem-image").dataset.path);
    rows.push([`open the page → ready, images computed on the ${where === "page" ? "page's adapter" : "server"}`, firstMs, note]);
    // What the progress line showed on the way (web/src/stem/open_progress.ts), in ms after the route began opening.
    const opening = await page.evaluate(() => window.tmStemOpen ?? { steps: [], openedAt: 0, shownAt: NaN, firstImageAt: NaN });  // absent from a build before it
    const at = (re) => opening.steps.find((x) => re.test(x.text));
    rows.push(["… the progress line in the page", opening.shownAt - opening.openedAt, opening.steps[0]?.text ?? ""]);
    for (const [label, re] of [["… the calibration asked for", /^reading the calibration/], ["… the block's first band asked for", /band 1 of/],
      ["… the whole block received", /decoded block received/], ["… the first patterns and image asked for", /^computing the/]]) {
      const step = at(re);
      if (step) rows.push([label, step.at - opening.openedAt, step.text]);
    }
    if (opening.steps.length) rows.push(["… the first virtual image drawn (the page's own clock)", opening.firstImageAt - opening.openedAt, await page.locator("#stem-progress-text").textContent()]);
    else rows.push(["… (this web build shows no progress line)", NaN, process.env.TM_WEB_DIST ?? ""]);

    const drag = async (label) => {
      const ms = await dragOuterRing(page, DETECTOR, STEPS);
      rows.push([`each image while dragging the outer ring (${label}; ${ms.length} images)`, median(ms), `max ${Math.max(...ms).toFixed(1)} ms`]);
    };
    await drag(where === "page" ? "page adapter, resident block" : "server: the page could not hold the block");
    if (where === "page") {
      await page.selectOption("#stem-compute-on", "server");
      await page.waitForFunction(() => document.querySelector("#stem-image").dataset.path === "server" && document.querySelector("#stem-image").dataset.state === "ready", null, { timeout: 600_000 });
      await drag("Compute on: server");
    }
    const adapter = await page.evaluate(async () => {
      const a = await navigator.gpu?.requestAdapter();
      return a ? `${a.info?.vendor ?? ""} ${a.info?.architecture ?? ""} ${a.info?.description ?? ""}`.trim() || "unnamed" : "none";
    });
    const text = [
      `# 4D-STEM acquisition page (${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC)${process.env.TM_WEB_DIST ? `, web build ${process.env.TM_WEB_DIST}` : ""}\n\n`,
      `\`TM_BIN=${TM_BIN} node bench/stem_page_bench.mjs --scan ${SCAN} --detector ${DETECTOR} --steps ${STEPS}\`; ${SCAN} x ${SCAN} scan of `,
      `${DETECTOR} x ${DETECTOR} uint16 frames (${((SCAN * SCAN * DETECTOR * DETECTOR * 2) / 1e6).toFixed(0)} MB decoded); Chromium headless, `,
      `adapter: ${adapter} (a software adapter gives smoke figures only).\n\n`,
      "| what | ms | note |\n|---|---:|---|\n",
      ...rows.map(([what, ms, n]) => `| ${what} | ${ms.toFixed(1)} | ${n.replace(/\|/g, "/")} |\n`),
    ].join("");
    console.log(text);
    writeFileSync(join(dirname(fileURLToPath(import.meta.url)), "last-run-stem-page.md"), text);
  } finally {
    await session.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
