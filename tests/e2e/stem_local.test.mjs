// End-to-end test of the local-files page (#/local: web/src/stem/local/) in Debian's Chromium (headless, SwiftShader's
// WebGPU adapter), with NO server data endpoint: the built web app is served by a static file server in this test
// (web/dist only; every other path answers 404 and is logged), and a `stem demo` acquisition (12 × 10 scan, 48 × 48
// uint16 frames, bitshuffle+LZ4, two data files) is given to the page through its file input (setInputFiles):
//   - the page reads the HDF5 containers, decodes every chunk in WGSL, and its mean pattern equals the CLI's
//     `stem mean-dp` .npy exactly, and its virtual image of an annulus equals `stem mask --center --inner --outer`;
//   - an unfiltered set (`--encoder none`, uint8) opens too, its mean pattern the CLI's, and so does a copy of it in
//     HDF5 1.10's format (h5py libver="latest": an extensible-array chunk index);
//   - no request went to /api/acquisitions/… (nor to any /api path but the viewer's own health and adapter report);
//   - the files dropped on the page (a drop event with their DataTransfer) open the same;
//   - a truncated data file, a missing data file and a non-HDF5 master are refused, naming the file.
// TM_LOCAL_SCAN=R,C and TM_LOCAL_DETECTOR=K run it on another size (the decode report's numbers are logged).
// Environment: TM_BIN, TM_E2E_OUT, CHROMIUM (harness.mjs). Exits 0 with "SKIPPED: no chromium" only without Chromium.
import { createServer } from "node:http";
import { copyFileSync, mkdirSync, readFileSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { extname, join, normalize } from "node:path";
import { spawnSync } from "node:child_process";
import { OUT_DIR, WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, launchBrowser, readNpy, runTest, sameValues, tm, watchErrors } from "./harness.mjs";

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[e2e stem_local]", () => step);
// The main set's size: TM_LOCAL_SCAN=R,C and TM_LOCAL_DETECTOR=K run the same checks on another (a measurement).
const SCAN = (process.env.TM_LOCAL_SCAN || "12,10").split(",").map(Number);
const DETECTOR = Number(process.env.TM_LOCAL_DETECTOR || 48);
const FRAMES = SCAN[0] * SCAN[1];

/** A static server of WEB_DIST only: GET of its files; anything else 404. Every request path is pushed to `seen`. */
function staticServer(seen) {
  const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".map": "application/json" };
  const server = createServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    seen.push(`${req.method} ${path}`);
    const file = normalize(join(WEB_DIST, path === "/" ? "index.html" : path));
    if (req.method === "GET" && file.startsWith(WEB_DIST) && !path.startsWith("/api/")) {
      try {
        if (statSync(file).isFile()) {
          res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" });
          return res.end(readFileSync(file));
        }
      } catch {
        /* 404 below */
      }
    }
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: "no server here: a static web root" }));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, url: `http://127.0.0.1:${server.address().port}/` })));
}

async function main() {
  const { chromium, tmp, env } = e2eSetup("stem_local", check);
  let context = null;
  let web = null;
  try {
    step = "acquisitions";
    const acq = join(tmp, "acq");
    tm(["stem", "demo", "--out", acq, "--scan", SCAN.join(","), "--detector", String(DETECTOR), "--files", "2"], env);
    const raw = join(tmp, "raw");
    tm(["stem", "demo", "--out", raw, "--scan", "6,5", "--detector", "33", "--dtype", "uint8", "--files", "2", "--encoder", "none"], env);
    const files = (dir) => ["demo_master.h5", "demo_data_000001.h5", "demo_data_000002.h5"].map((f) => join(dir, f));
    // Damaged sets: data file 2 cut in half; the master alone with data file 1; a text file named as a master.
    const cut = join(tmp, "cut");
    mkdirSync(cut);
    for (const f of files(acq)) copyFileSync(f, join(cut, f.split("/").pop()));
    const cutSize = Math.floor(statSync(join(cut, "demo_data_000002.h5")).size / 2);
    truncateSync(join(cut, "demo_data_000002.h5"), cutSize);
    // The unfiltered set rewritten in HDF5 1.10's format (h5py libver="latest": superblock 3, v2 object headers,
    // link-message groups; the frames' chunk index an extensible array, maxshape unlimited): the same frames.
    const latest = join(tmp, "latest");
    const py = spawnSync("/usr/bin/python3", ["-c", `
import h5py, sys, os
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
for n in ("demo_data_000001.h5", "demo_data_000002.h5"):
    with h5py.File(os.path.join(src, n), "r") as f, h5py.File(os.path.join(dst, n), "w", libver="latest") as g:
        d = f["entry/data/data"]
        g.create_dataset("entry/data/data", data=d[()], chunks=(1,) + d.shape[1:], maxshape=(None,) + d.shape[1:])
with h5py.File(os.path.join(src, "demo_master.h5"), "r") as f, h5py.File(os.path.join(dst, "demo_master.h5"), "w", libver="latest") as g:
    f.copy(f["entry"], g)
`, raw, latest], { encoding: "utf8" });
    if (py.status !== 0) throw new Error(`writing the latest-format copy: ${py.stderr}`);
    const notHdf5 = join(tmp, "text_master.h5");
    writeFileSync(notHdf5, "this is not an HDF5 file\n".repeat(40));

    step = "static web root";
    const seen = [];
    web = await staticServer(seen);
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    const requests = [];
    page.on("request", (r) => requests.push(new URL(r.url()).pathname));
    await page.goto(new URL("#/local", web.url).href);
    await page.waitForSelector("#stem-local-files", { state: "attached", timeout: 30_000 });

    /** Gives `paths` to the file input and waits for the page to be ready or to refuse; returns its state. */
    const settled = async () => {
      await page.waitForFunction(() => ["ready", "refused"].includes(window.tmStemLocal?.state), null, { timeout: 300_000 });
      return page.evaluate(() => ({ state: window.tmStemLocal.state, error: window.tmStemLocal.error, center: window.tmStemLocal.center, frames: window.tmStemLocal.frames,
        mean: window.tmStemLocal.mean, report: window.tmStemLocal.report, calibration: document.querySelector("#stem-calibration")?.textContent ?? "" }));
    };
    const open = async (paths) => {
      await page.evaluate(() => window.tmStemLocal && (window.tmStemLocal.state = "idle"));
      await page.setInputFiles("#stem-local-files", paths);
      return settled();
    };

    step = "open the uint16 bitshuffle+LZ4 set";
    const t0 = Date.now();
    const got = await open(files(acq));
    check(got.state === "ready", `the page opened the three files and decoded them (${got.state}${got.error ? `: ${got.error}` : ""}) in ${Date.now() - t0} ms`);
    check(got.frames === FRAMES && got.report.chunks === FRAMES && got.report.decodedBytes === FRAMES * DETECTOR * DETECTOR * 2,
      `every chunk decoded on the adapter: ${got.report.chunks} chunks, ${got.report.wireBytes} bytes read from the files for ${got.report.decodedBytes} decoded, ` +
      `${got.report.windows} windows, ${got.report.fetchMs.toFixed(0)} ms reading, ${got.report.decodeMs.toFixed(0)} ms decoding (SwiftShader: smoke only)`);
    check(/300000 eV/.test(got.calibration) && /20 mrad/.test(got.calibration) && (DETECTOR !== 48 || /3\.333 mrad/.test(got.calibration)),
      `the calibration table reads the file's beam energy, semi-angle and detector angle per pixel`);
    await page.screenshot({ path: join(OUT_DIR, "stem_local.png"), fullPage: true });
    const meanNpy = join(tmp, "mean.npy");
    tm(["stem", "mean-dp", acq, "-o", meanNpy], env);
    const mean = readNpy(meanNpy);
    check(mean.descr === "<f8" && sameValues(got.mean, mean.values), `the mean pattern (${got.mean.length} pixels) equals the CLI's stem mean-dp .npy exactly`);
    for (const [inner, outer] of [[0, 6.5], [3, 20]]) {
      const image = await page.evaluate(async ([i, o]) => {
        await window.tmStemLocal.setAnnulus(i, o);
        return window.tmStemLocal.image;
      }, [inner, outer]);
      const out = join(tmp, `mask-${inner}-${outer}.npy`);
      tm(["stem", "mask", acq, "--center", `${got.center[0]},${got.center[1]}`, "--inner", String(inner), "--outer", String(outer), "-o", out], env);
      const cli = readNpy(out);
      check(sameValues(cli.shape, SCAN) && sameValues(image.values, cli.values),
        `the virtual image of the annulus ${inner}–${outer} px around (${got.center.map((x) => x.toFixed(3)).join(", ")}) equals stem mask's .npy exactly`);
    }
    const com = await page.waitForFunction((rows) => window.tmStemFields?.com?.rows === rows && window.tmStemFields.shown, SCAN[0], { timeout: 30_000 }).then(() => page.evaluate(() => window.tmStemFields.comOn));
    check(com === "page", "the CoM panel computed on the page's adapter");

    step = "open the unfiltered uint8 set";
    const plain = await open(files(raw));
    const plainNpy = join(tmp, "raw-mean.npy");
    tm(["stem", "mean-dp", raw, "-o", plainNpy], env);
    check(plain.state === "ready" && sameValues(plain.mean, readNpy(plainNpy).values), `an unfiltered (--encoder none) uint8 set opens, its mean pattern the CLI's (${plain.error || "ok"})`);

    step = "open the unfiltered set in HDF5 1.10's format";
    const newer = await open(files(latest));
    check(newer.state === "ready" && sameValues(newer.mean, readNpy(plainNpy).values),
      `the same frames in HDF5 1.10's format (superblock 3, an extensible-array chunk index) open, the mean pattern the CLI's (${newer.error || "ok"})`);

    step = "refusals";
    const cutGot = await open(files(cut));
    check(cutGot.state === "refused" && cutGot.error.includes("demo_data_000002.h5") && /truncated/.test(cutGot.error),
      `a data file cut to ${cutSize} bytes is refused naming it: "${cutGot.error}"`);
    const shownError = await page.evaluate(() => document.querySelector("#stem-local-error").textContent);
    check(shownError.includes("demo_data_000002.h5"), `the page shows it: "${shownError}"`);
    const missing = await open(files(acq).slice(0, 2));
    check(missing.state === "refused" && missing.error.includes("demo_data_000002.h5") && /not among the chosen files/.test(missing.error),
      `a missing data file is refused naming it: "${missing.error}"`);
    const text = await open([notHdf5]);
    check(text.state === "refused" && text.error.includes("text_master.h5") && /not an HDF5 file/.test(text.error), `a non-HDF5 master is refused naming it: "${text.error}"`);

    step = "drag and drop";
    await page.evaluate(() => (window.tmStemLocal.state = "idle"));
    await page.evaluate((payload) => {
      const dt = new DataTransfer();
      for (const f of payload) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name));
      document.querySelector("#stem-local-drop").dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, files(raw).map((p) => ({ name: p.split("/").pop(), b64: readFileSync(p).toString("base64") })));
    const dropped = await settled();
    check(dropped.state === "ready" && sameValues(dropped.mean, readNpy(plainNpy).values), `the files dropped on the page open the same (${dropped.error || "ok"})`);

    step = "no server data endpoint";
    const api = requests.filter((p) => p.startsWith("/api/"));
    log(`the page's requests: ${requests.length} (${[...new Set(requests)].join(", ")})`);
    check(!api.some((p) => p.startsWith("/api/acquisitions")), `no request to /api/acquisitions/… (the /api requests: ${JSON.stringify([...new Set(api)])})`);
    check(api.every((p) => p === "/api/health" || p === "/api/compute/webgpu"), "the only /api requests are the viewer's health and adapter report (404 here: no server)");
    const other = errors.filter((e) => !/^404 (GET|PUT|POST) \/api\/(health|compute\/webgpu)$/.test(e) && !/status of 404/.test(e));
    check(other.length === 0, `no page errors but those 404s: ${JSON.stringify(other.slice(0, 5))}`);
  } finally {
    if (web) web.server.close();
    await e2eTeardown(tmp, null, context);
  }
}

runTest(main, () => step, process.env.TM_LOCAL_SCAN ? 900_000 : 120_000);
