// End-to-end test of the WebGPU line of `tensormorph backends` (issue 51): WebGPU runs in the viewer's page, so the
// CLI can only name the adapter a page last reported. In a private environment (its own cache folder):
//   - before any page has been opened, `backends` says none was seen (text) and `in_page[].last_reported_adapter` is
//     null (--json);
//   - a real page, opened in Debian's headless Chromium (--enable-unsafe-webgpu: SwiftShader here), PUTs its adapter
//     report to /api/compute/webgpu by itself (the request is watched, not made by the test) and the server keeps it;
//   - `backends` then names that very adapter (the PUT body's name; "(software adapter)" when the page said so, or
//     "none available in the page (REASON)" when the page found none) and --json gives the report the page sent.
//
// Environment: TM_BIN (default build/tensormorph), CHROMIUM. Exits 0 with "SKIPPED: no chromium" only when Chromium is
// not installed.
import { join } from "node:path";
import { WEB_DIST, checker, chromiumOrSkip, demoCheckpoint, e2eSetup, e2eTeardown, launchBrowser, runTest, startServer, tm, watchErrors } from "./harness.mjs";

const chromiumPath = chromiumOrSkip();

let step = "setup";
const { log, check } = checker("[adapter-report]", () => step);

/** The webgpu entry of `backends --json` and the webgpu line of the text output, in environment env. */
function backendsWebgpu(env) {
  const doc = JSON.parse(tm(["backends", "--json"], env).stdout);
  const entry = (doc.in_page || []).find((b) => b.name === "webgpu");
  const line = tm(["backends"], env).stdout.split("\n").find((l) => l.startsWith("webgpu  "));
  return { entry, line };
}

async function main() {
  const t0 = Date.now();
  const { chromium, tmp, env } = e2eSetup("adapter-report", check);
  let server = null;
  let context = null;
  try {
    step = "before any page";
    const before = backendsWebgpu(env);
    check(before.entry !== undefined, "backends --json lists webgpu in in_page");
    check(before.entry.last_reported_adapter === null, "no adapter recorded before any page was opened");
    check(before.line !== undefined && before.line.includes("last adapter a page reported: none seen"), `the text says none was seen: "${before.line}"`);

    step = "serve and open the page";
    const demo = demoCheckpoint(tmp, env);
    server = await startServer([demo, "--web-root", WEB_DIST], env);
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "chromium-profile"));
    const page = await context.newPage();
    const errors = watchErrors(page);
    const put = page.waitForRequest((r) => r.method() === "PUT" && new URL(r.url()).pathname === "/api/compute/webgpu", { timeout: 60_000 });
    const putDone = page.waitForResponse((r) => r.request().method() === "PUT" && new URL(r.url()).pathname === "/api/compute/webgpu", { timeout: 60_000 });
    await page.goto(server.url, { waitUntil: "domcontentloaded" });
    const request = await put;
    const sent = request.postDataJSON();
    const response = await putDone;
    check(response.status() === 200, `the server kept the page's report (PUT /api/compute/webgpu ${response.status()})`);
    log(`the page reported: ${JSON.stringify(sent)}`);
    check(typeof sent.available === "boolean", "the report says whether an adapter was available");
    const kept = (await response.json()).last_reported_adapter;
    check(kept.name === sent.name && kept.available === sent.available && typeof kept.reported_at === "string",
      `the server answered with the kept record (${kept.name}, reported_at ${kept.reported_at})`);

    step = "backends after the page";
    const after = backendsWebgpu(env);
    const recorded = after.entry.last_reported_adapter;
    check(recorded !== null, "backends --json now holds the page's report");
    for (const field of ["available", "name", "vendor", "architecture", "description", "software", "fallback", "reason"])
      if (field in sent) check(recorded[field] === sent[field], `--json ${field} is what the page sent (${JSON.stringify(sent[field])})`);
    if (sent.available) {
      const named = `last adapter a page reported: ${sent.name}${sent.software ? " (software adapter)" : ""}, reported `;
      check(after.line.includes(named), `the text names the page's adapter: "${after.line}"`);
    } else {
      check(after.line.includes("last adapter a page reported: none available in the page"), `the text says the page had none: "${after.line}"`);
    }
    check(after.line.includes(recorded.reported_at), "the text gives when it was reported");
    check(errors.length === 0, `no page errors (${errors.join("; ")})`);
    console.log(`PASS: adapter report e2e (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 240000);
