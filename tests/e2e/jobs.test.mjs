// The viewer while `tensormorph serve` is still indexing (tests/e2e/harness.mjs for the shared pieces): a
// checkpoint of ~220 MB written fresh, indexed at a paced read rate (serve --index-max-rate, ~9 s) so the
// pages certainly load while the job runs, opened as soon as the server listens. Checks: the inventory's
// #indexing panel follows the job's event stream (progress events, a bar that grows, the final "done"),
// its numbers equal GET /api/jobs/{id} at the end; a tensor page opened during indexing waits for it (the
// API's 503) and then opens; once indexing ends the inventory is fetched again and its rows carry statistics.
import { join } from "node:path";
import { OUT_DIR, WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, getJson, launchBrowser, runTest, startServing, stopServer, tm } from "./harness.mjs";

const TENSOR = "model.layers.7.mlp.down_proj.weight";
const RATE = "24M";  // bytes per second: indexing the demo below takes ~9 s
const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[e2e jobs]", () => step);

async function main() {
  const { chromium, tmp, env } = e2eSetup("jobs", check);
  let server = null;
  let context = null;
  try {
    step = "demo checkpoint (not indexed)";
    const demo = join(tmp, "demo");
    tm(["demo", "--out", demo, "--layers", "8", "--hidden", "1024", "--intermediate", "2816"], env);

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    // Records every state the inventory's job line shows (attribute changes), since the line goes away.
    await page.addInitScript(() => {
      window.__jobSamples = [];
      new MutationObserver(() => {
        const e = document.querySelector("#indexing .job[data-checkpoint='0']");
        if (!e) return;
        const s = { state: e.dataset.state, events: Number(e.dataset.events), done: Number(e.dataset.tensorsDone ?? 0), value: e.querySelector("progress").value };
        const prev = window.__jobSamples[window.__jobSamples.length - 1];
        if (!prev || prev.events !== s.events || prev.state !== s.state) window.__jobSamples.push(s);
      }).observe(document, { subtree: true, childList: true, attributes: true });
    });
    const tensorPage = await context.newPage();
    // Records whether the tensor page ever showed the indexing panel (it goes away when indexing ends).
    await tensorPage.addInitScript(() => {
      window.__sawIndexing = false;
      new MutationObserver(() => {
        if (document.querySelector("#indexing .job[data-checkpoint='0']")) window.__sawIndexing = true;
      }).observe(document, { subtree: true, childList: true });
    });

    // Should a cold, loaded machine take the whole paced job to load the pages, the stream was never seen
    // running: each attempt indexes afresh (a new cache folder); the browser is warm after the first.
    let base, jobId, samples;
    for (let attempt = 1; ; attempt++) {
      step = `serve, and open the pages at once (attempt ${attempt})`;
      env.XDG_CACHE_HOME = join(tmp, `cache-${attempt}`);
      server = await startServing([demo, "--web-root", WEB_DIST, "--index-max-rate", RATE], env);
      base = server.url;
      await Promise.all([page.goto(base), tensorPage.goto(new URL(`#/tensor/0/${encodeURIComponent(TENSOR)}`, base).href)]);

      step = "the inventory follows the indexing job";
      jobId = (await getJson(base, "/api/checkpoints")).checkpoints[0].index.job;
      check(jobId !== undefined, `checkpoint 0 is indexed by job ${jobId}`);
      // The page redraws the inventory (without the panel) when indexing ends: read what the recorder saw.
      for (;;) {
        const j = await getJson(base, `/api/jobs/${jobId}`);
        if (j.state !== "running") break;
        await page.waitForTimeout(100);
      }
      await page.waitForFunction(() => window.__jobSamples.some((s) => s.state !== "running"), null, { timeout: 60_000 });
      samples = await page.evaluate(() => window.__jobSamples);
      const sawRunning = samples.some((s) => s.state === "running" && s.events > 0);
      const sawWaiting = await tensorPage.evaluate(() => window.__sawIndexing);
      if ((sawRunning && sawWaiting) || attempt === 3) break;
      log(`attempt ${attempt}: the pages loaded as indexing ended (${samples.length} samples); again with a fresh index`);
      await stopServer(server);
      server = null;
    }
    const last = samples[samples.length - 1];
    check(last.state === "done", `the job ended "done" (${samples.length} samples, ${last.events} events)`);
    const values = samples.map((s) => s.value);
    check(values.every((v, i) => i === 0 || v >= values[i - 1]), "the progress bar never went back");
    check(samples.some((s) => s.state === "running" && s.events > 0), "progress events arrived while the job ran");
    const api = await getJson(base, `/api/jobs/${jobId}`);
    check(api.state === "done" && last.done === api.tensors_total, `the panel's tensors (${last.done}) equal the API's (${api.tensors_total})`);
    log(`indexing: ${api.bytes_total} bytes in ${api.seconds.toFixed(2)} s, ${last.events} events on the page`);

    step = "after indexing";
    await page.locator("#indexing").waitFor({ state: "detached", timeout: 60_000 });
    check(true, "the inventory redrew without the panel");
    const rows = await getJson(base, "/api/tensors");
    check(rows.tensors.every((t) => t.stats !== null), "the API's rows all carry statistics now");
    await tensorPage.locator("#tensor-name").waitFor({ timeout: 60_000 });
    check(await tensorPage.evaluate(() => window.__sawIndexing), "the tensor page opened during indexing showed the progress panel (the API's 503)");
    check((await tensorPage.locator("#tensor-name").textContent()) === TENSOR, "the waiting tensor page opened its tensor");
    check((await tensorPage.locator("#stats").count()) === 1, "with its statistics");
    await page.screenshot({ path: join(OUT_DIR, "jobs.png") });
    check(errors.length === 0, `no page errors${errors.length ? ": " + errors.join("; ") : ""}`);
    console.log("PASS: jobs e2e");
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 540_000);
