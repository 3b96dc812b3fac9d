// Approximation consent in the viewer (tests/e2e/harness.mjs for the shared pieces). Under a memory budget
// of 2 MiB (settings file), exact float32 quantiles (radix select, ~33 MiB of workspace) cannot run, so
// indexing a float32 tensor is refused with the fallback ladder. Checks: the inventory shows the failure and
// points to the Compute panel; the panel shows the ladder for stats.quantiles and nothing is approximated
// until "Allow" is clicked; consent reaches the server (GET /api/compute) and the preview; "Index again"
// runs a job that computes the quantiles by the consented step (the API says method and exact: false);
// withdrawing clears it. The consent is not written to the settings file.
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { OUT_DIR, WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, getJson, launchBrowser, runTest, startServer, tm, waitIndexed } from "./harness.mjs";

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[e2e consent]", () => step);

/** One float32 tensor `w` (300 × 400) of deterministic values, as safetensors. */
function writeF32(path) {
  const rows = 300, cols = 400, n = rows * cols;
  const data = Buffer.alloc(4 * n);
  for (let i = 0; i < n; i++) data.writeFloatLE(((i * 7919) % 10007) / 10007 - 0.5, 4 * i);
  let header = JSON.stringify({ w: { dtype: "F32", shape: [rows, cols], data_offsets: [0, data.length] } });
  header += " ".repeat((8 - (header.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  writeFileSync(path, Buffer.concat([len, Buffer.from(header), data]));
}

async function main() {
  const { chromium, tmp, env } = e2eSetup("consent", check);
  let server = null;
  let context = null;
  try {
    step = "a float32 tensor under a 2 MiB budget";
    const file = join(tmp, "f32.safetensors");
    writeF32(file);
    tm(["config", "set", "compute.memory_budget", "2M"], env);
    server = await startServer([file, "--web-root", WEB_DIST], env);
    const base = server.url;
    const jobs = (await getJson(base, "/api/jobs")).jobs;
    check(jobs[0].state === "failed" && jobs[0].report?.needs_consent === true, "the first indexing job was refused for want of consent");

    step = "inventory";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(base);
    const failed = page.locator("#indexing-failed .failed-job[data-checkpoint='0']");
    await failed.waitFor({ timeout: 30_000 });
    check((await failed.getAttribute("data-needs-consent")) === "true", "the inventory says indexing failed and needs consent");
    check((await failed.locator("a[href='#/compute']").count()) === 1, "and links to the Compute panel");

    step = "compute panel: the ladder, no consent yet";
    await page.goto(new URL("#/compute", base).href);
    const ladder = page.locator("#consent .ladder[data-op='stats.quantiles']");
    await ladder.waitFor({ timeout: 30_000 });
    const rungs = await ladder.locator("li[data-step]").evaluateAll((lis) => lis.map((li) => li.dataset.step));
    const apiPreview = (await getJson(base, "/api/compute")).placement_preview.find((p) => p.op === "stats.quantiles");
    check(JSON.stringify(rungs) === JSON.stringify(apiPreview.ladder.map((s) => s.step)), `the panel's ladder equals the API's (${rungs.join(", ")})`);
    check((await page.locator("#consent").getAttribute("data-consented")) === "", "nothing is consented to");
    check(apiPreview.placement === null, "and the server places no approximation");

    step = "consent";
    await ladder.locator("li[data-step='quantiles.sampling'] button.allow").click();
    await page.waitForFunction(() => document.querySelector("#consent")?.getAttribute("data-consented") === "quantiles.sampling", null, { timeout: 30_000 });
    const doc = await getJson(base, "/api/compute");
    check(JSON.stringify(doc.consent.allow_approx) === '["quantiles.sampling"]', "the server holds the consent for this session");
    check(doc.placement_preview.find((p) => p.op === "stats.quantiles").placement?.approx_step === "quantiles.sampling", "and the preview now places the consented approximation");
    const settings = join(env.XDG_CONFIG_HOME, "tensormorph", "settings.json");
    const saved = existsSync(settings) ? readFileSync(settings, "utf8") : "";
    check(saved.includes("memory_budget") && !saved.includes("allow_approx"), `the consent is not in the settings file (${settings})`);

    step = "index again";
    const reindex = page.locator("#consent button.reindex[data-checkpoint='0']");
    await reindex.waitFor({ timeout: 30_000 });
    await reindex.click();
    await page.waitForFunction(() => document.querySelector("#consent [data-job]") !== null, null, { timeout: 30_000 });
    await waitIndexed(base);
    const detail = await getJson(base, "/api/tensors/0/w");
    check(detail.stats.quantiles.method === "quantiles.sampling" && detail.stats.quantiles.exact === false, "the re-run computed the quantiles by the consented step, marked not exact");
    await page.goto(new URL("#/tensor/0/w", base).href);
    await page.locator("#stats").waitFor({ timeout: 30_000 });
    check(true, "the tensor page opens with its statistics");

    step = "withdraw";
    await page.goto(new URL("#/compute", base).href);
    await page.locator("#consent button.withdraw[data-step='quantiles.sampling']").click();
    await page.waitForFunction(() => document.querySelector("#consent")?.getAttribute("data-consented") === "", null, { timeout: 30_000 });
    check((await getJson(base, "/api/compute")).consent.allow_approx.length === 0, "withdrawn on the server too");
    await page.screenshot({ path: join(OUT_DIR, "consent.png") });
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join("; ") : ""}`);
    console.log("PASS: consent e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 300_000);
