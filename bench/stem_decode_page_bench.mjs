// The acquisition page's two ways to fill its block, side by side on one `stem demo` set: the stored chunks
// decoded on the page's WebGPU adapter (GET …/chunks, web/src/stem/webgpu/decode.ts) and the block decoded by the
// server (GET …/block). For each path: bytes over the wire (the answers' bodies, as the page's decode report counts
// them), the page's time to hold the block and to be ready, the adapter's decode time and rate (chunks), and the
// page time per product once the block is resident (the virtual image while the outer ring is dragged). The adapter is named: SwiftShader (a CPU) gives smoke figures only.
//
//   TM_BIN=build/tensormorph node bench/stem_decode_page_bench.mjs [--scan 128] [--detector 96] [--steps 8]
//
// Prints a Markdown table; writes bench/last-run-stem-decode-page.md.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { TM_BIN } from "../tests/e2e/harness.mjs";
import { arg, dragOuterRing, median, openPageSession } from "./page_bench_session.mjs";

const SCAN = arg("scan", 128);
const DETECTOR = arg("detector", 96);
const STEPS = arg("steps", 8);

const mib = (b) => (b / 2 ** 20).toFixed(1);

async function main() {
  const session = await openPageSession("stem-decode-page-bench", SCAN, DETECTOR);
  const { server, page } = session;
  const rows = [];
  try {
    const wire = { chunks: 0, block: 0 };
    // Bytes over the wire: each …/chunks and …/block answer's Content-Length (the server sends bodies as they are,
    // uncompressed), counted by the browser's network events, beside the page's own count in its decode report.
    page.on("response", (r) => {
      const p = new URL(r.url()).pathname;
      const kind = p.endsWith("/chunks") ? "chunks" : p.endsWith("/block") ? "block" : null;
      if (kind) wire[kind] += Number(r.headers()["content-length"] ?? 0);
    });
    for (const path of ["chunks", "block"]) {
      wire.chunks = wire.block = 0;
      await page.goto(new URL("#/", server.url).href);
      await page.evaluate((p) => localStorage.setItem("tm.stem.decode", p), path);
      await page.goto("about:blank");
      const t0 = Date.now();
      await page.goto(new URL("#/acquisition/a0", server.url).href);
      await page.waitForFunction(() => document.querySelector("#stem-image")?.dataset.state === "ready" && document.querySelector("#stem-compute-on")?.dataset.ready === "1", null, { timeout: 900_000 });
      const readyMs = Date.now() - t0;
      const rep = await page.evaluate(() => ({ ...document.querySelector("#stem-decode-report").dataset, text: document.querySelector("#stem-decode-report").textContent }));
      const where = await page.evaluate(() => document.querySelector("#stem-image").dataset.path);
      const label = path === "chunks" ? "chunks decoded on the page" : "block fetched (decoded on the server)";
      rows.push([label, "bytes over the wire (Content-Length of …/chunks, …/block)", `${mib(wire.chunks + wire.block)} MiB`, rep.text]);
      rows.push([label, "page time: open → block held, images on the page (ready)", `${readyMs} ms`, `path ran: ${rep.path}; images on the ${where}`]);
      if (rep.path === "chunks") rows.push([label, "adapter decode (submit → read back), all windows", `${Number(rep.decodeMs).toFixed(0)} ms`, `${(Number(rep.decodedBytes) / 2 ** 20 / (Number(rep.decodeMs) / 1000)).toFixed(1)} MiB/s; ${Number(rep.fetchMs).toFixed(0)} ms waiting for the server`]);
      // Page time per product, the block resident: the virtual image while the outer ring is dragged.
      const ms = await dragOuterRing(page, DETECTOR, STEPS);
      rows.push([label, `virtual image (median of ${ms.length} while dragging)`, `${median(ms).toFixed(1)} ms`, `max ${Math.max(...ms).toFixed(1)} ms`]);
    }
    const adapter = await page.evaluate(async () => {
      const a = await navigator.gpu?.requestAdapter();
      return a ? `${a.info?.vendor ?? ""} ${a.info?.architecture ?? ""} ${a.info?.description ?? ""}`.trim() || "unnamed" : "none";
    });
    const text = [
      `# 4D-STEM page: chunks decoded on the page vs the block fetched (${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC)\n\n`,
      `\`TM_BIN=${TM_BIN} node bench/stem_decode_page_bench.mjs --scan ${SCAN} --detector ${DETECTOR} --steps ${STEPS}\`; ${SCAN} x ${SCAN} scan of `,
      `${DETECTOR} x ${DETECTOR} uint16 frames (${((SCAN * SCAN * DETECTOR * DETECTOR * 2) / 2 ** 20).toFixed(0)} MiB decoded); Chromium headless, `,
      `adapter: ${adapter}${/swiftshader/i.test(adapter) ? " — SwiftShader is a CPU: these times are SMOKE ONLY, never performance claims" : ""}.\n\n`,
      "| path | what | value | note |\n|---|---|---:|---|\n",
      ...rows.map(([p, what, v, n]) => `| ${p} | ${what} | ${v} | ${String(n).replace(/\|/g, "/")} |\n`),
    ].join("");
    console.log(text);
    writeFileSync(join(dirname(fileURLToPath(import.meta.url)), "last-run-stem-decode-page.md"), text);
  } finally {
    await session.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
