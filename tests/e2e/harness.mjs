// What the viewer's browser tests (tests/e2e/*.test.mjs) share: where the binary, the built web app, the
// screenshots and the fixtures are, Debian's Chromium (or a visible SKIPPED exit), step-named checks,
// playwright-core from web/'s node_modules, the setup and teardown every test has (a private environment,
// `tensormorph serve` on a free port — waiting for its indexing jobs or not — and its stopping, the headless
// browser with the flags /work/shared/PLATFORM.md records), page-error collection, PNG statistics, JSON
// GETs, the CLI's .npy outputs read back, and the run-with-a-deadline wrapper.
//
// Environment: TM_BIN (default build/tensormorph), CHROMIUM (default /usr/lib/chromium/chromium or
// /usr/bin/chromium), TM_WEB_DIST (default web/dist).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const TM_BIN = process.env.TM_BIN || join(ROOT, "build", "tensormorph");
/** The built web app served (TM_WEB_DIST overrides: a bench can serve an older build beside this one). */
export const WEB_DIST = process.env.TM_WEB_DIST || join(ROOT, "web", "dist");
/** Where screenshots go: build/e2e for build/tensormorph (TM_E2E_OUT overrides). */
export const OUT_DIR = process.env.TM_E2E_OUT || join(dirname(resolve(TM_BIN)), "e2e");
/** The reference files of ../shared/fixtures (TM_FIXTURES overrides); tests skip what is absent, visibly. */
export const FIXTURES = process.env.TM_FIXTURES || join(ROOT, "..", "shared", "fixtures");

/** GET base + path as JSON; throws naming the path, status and body when it is not 2xx. */
export async function getJson(base, path) {
  const res = await fetch(new URL(path, base));
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** The values of a little-endian .npy file (format 1.0; u2, u4, u8 as Numbers; f4, f8) and its shape, as the CLI's
 * `-o out.npy` writes them. Throws naming the dtype for any other. */
export function readNpy(path) {
  const b = readFileSync(path);
  const headerLen = b.readUInt16LE(8);
  const header = b.subarray(10, 10 + headerLen).toString("latin1");
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(",").filter((s) => s.trim()).map(Number);
  const data = b.subarray(10 + headerLen);
  const width = Number(descr.slice(2));
  const values = [];
  for (let i = 0; i + width <= data.length; i += width) {
    if (descr === "<u2") values.push(data.readUInt16LE(i));
    else if (descr === "<u4") values.push(data.readUInt32LE(i));
    else if (descr === "<u8") values.push(Number(data.readBigUInt64LE(i)));
    else if (descr === "<f8") values.push(data.readDoubleLE(i));
    else if (descr === "<f4") values.push(data.readFloatLE(i));
    else throw new Error(`unexpected dtype ${descr}`);
  }
  return { descr, shape, values };
}

/** Whether two arrays hold the same values (===) in the same order. */
export function sameValues(a, b) {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** What every browser test starts with: playwright, the built binary and web app (checked), OUT_DIR, and a
 * private temporary folder and environment (`tm-e2e-NAME-…`). Pair with e2eTeardown in a finally block. */
export function e2eSetup(name, check) {
  const { chromium } = loadPlaywright();
  checkBuilt(check);
  mkdirSync(OUT_DIR, { recursive: true });
  const tmp = mkdtempSync(join(tmpdir(), `tm-e2e-${name}-`));
  return { chromium, tmp, env: privateEnv(tmp) };
}

/** Collects a page's errors into `errors` (returned): uncaught exceptions, console errors, and responses
 * with status >= 400 ("STATUS METHOD PATH"); `onConsole`, when given, sees every console line. */
export function watchErrors(page, errors = [], onConsole = null) {
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (onConsole) onConsole(m.text());
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("response", (r) => {
    if (r.status() >= 400) errors.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`);
  });
  return errors;
}

/** Colours and variance of a PNG (base64), decoded in the page, without its rightmost trimRight columns. */
export function pngStats(page, png, trimRight = 0) {
  return page.evaluate(async ([png, trimRight]) => {
    const bytes = Uint8Array.from(atob(png), (ch) => ch.charCodeAt(0));
    const bmp = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
    const w = Math.max(1, bmp.width - trimRight);
    const c = new OffscreenCanvas(w, bmp.height);
    const ctx = c.getContext("2d");
    ctx.drawImage(bmp, 0, 0);
    const d = ctx.getImageData(0, 0, w, bmp.height).data;
    const colours = new Set();
    let sum = 0, sum2 = 0;
    for (let i = 0; i < d.length; i += 4) {
      const v = d[i] + d[i + 1] + d[i + 2];
      sum += v;
      sum2 += v * v;
      if (colours.size < 4096) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    }
    const n = d.length / 4, mean = sum / n;
    return { colours: colours.size, variance: sum2 / n - mean * mean };
  }, [png, trimRight]);
}

/** Closes the browser and stops the server (either may be null), then removes tmp. */
export async function e2eTeardown(tmp, server, context) {
  if (context) await context.close().catch(() => {});
  if (server) await stopServer(server);
  rmSync(tmp, { recursive: true, force: true });
}

/** Chromium's path; without one, prints "SKIPPED: no chromium" and exits 0 (the only allowed skip). */
export function chromiumOrSkip() {
  const path = [process.env.CHROMIUM, "/usr/lib/chromium/chromium", "/usr/bin/chromium"].find((p) => p && existsSync(p));
  if (!path) {
    console.log("SKIPPED: no chromium (install Debian's `chromium`; scripts/install-deps does)");
    process.exit(0);
  }
  return path;
}

/** log(msg) with the test's prefix, and check(cond, msg), which throws naming currentStep() when cond fails. */
export function checker(prefix, currentStep) {
  const log = (msg) => console.log(`${prefix} ${msg}`);
  const check = (cond, msg) => {
    if (!cond) throw new Error(`check failed (${currentStep()}): ${msg}`);
    log(`ok: ${msg}`);
  };
  return { log, check };
}

export function loadPlaywright() {
  const require = createRequire(join(ROOT, "web", "package.json"));
  try {
    return require("playwright-core");
  } catch (e) {
    throw new Error(`playwright-core not found in web/node_modules (run \`npm ci\` in web/, or build the \`web\` target): ${e.message}`);
  }
}

/** This process's environment with HOME, XDG_CONFIG_HOME and XDG_CACHE_HOME in fresh folders under tmp and no
 * TENSORMORPH_PLUGIN_DIR: nothing the tests run reads or writes the user's settings or indexes. */
export function privateEnv(tmp) {
  const env = { ...process.env };
  delete env.TENSORMORPH_PLUGIN_DIR;
  for (const [name, sub] of [["HOME", "home"], ["XDG_CONFIG_HOME", "config"], ["XDG_CACHE_HOME", "cache"]]) {
    env[name] = join(tmp, sub);
    mkdirSync(env[name]);
  }
  return env;
}

/** Runs `tensormorph args…` to completion; throws with its output when it fails. */
export function tm(args, env) {
  const r = spawnSync(TM_BIN, args, { env, encoding: "utf8", timeout: 300_000 });
  if (r.status !== 0) throw new Error(`tensormorph ${args.join(" ")}: exit ${r.status}\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** Resolves once no indexing job of the server at `url` (as printed, ?token= included) is running. */
export async function waitIndexed(url, limitMs = 300_000) {
  const jobs = new URL("api/jobs", url);
  jobs.search = new URL(url).search;
  const deadline = Date.now() + limitMs;
  for (;;) {
    const r = await fetch(jobs);
    if (!r.ok) throw new Error(`GET ${jobs.pathname}: ${r.status} ${await r.text()}`);
    const running = (await r.json()).jobs.filter((j) => j.state === "running");
    if (!running.length) return;
    if (Date.now() > deadline) throw new Error(`indexing did not finish: ${JSON.stringify(running)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** Starts `tensormorph serve --port 0 args…`; resolves to {proc, url} once it prints its URL and has indexed
 * every checkpoint (serve answers while its indexing jobs run; the tests want the indexed state). */
export async function startServer(args, env) {
  const server = await startServing(args, env);
  await waitIndexed(server.url);
  return server;
}

/** Starts `tensormorph serve --port 0 args…`; resolves to {proc, url} once it prints its URL. */
export function startServing(args, env) {
  return new Promise((resolvePromise, reject) => {
    const proc = spawn(TM_BIN, ["serve", "--port", "0", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    const timer = setTimeout(() => reject(new Error(`serve printed no URL within 300 s\n${out}\n${err}`)), 300_000);
    proc.stdout.on("data", (d) => {
      out += d;
      const m = /serving \d+ checkpoint\(s\)(?: and \d+ acquisition\(s\))? on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolvePromise({ proc, url: m[1] });
      }
    });
    proc.stderr.on("data", (d) => (err += d));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited early (${code})\n${out}\n${err}`));
    });
  });
}

/** SIGTERM, then SIGKILL after 10 s; resolves once the server has exited. */
export function stopServer(server) {
  return new Promise((r) => {
    if (server.proc.exitCode !== null || server.proc.signalCode !== null) return r();
    const t = setTimeout(() => {
      server.proc.kill("SIGKILL");
      r();
    }, 10_000);
    server.proc.on("exit", () => {
      clearTimeout(t);
      r();
    });
    server.proc.kill("SIGTERM");
  });
}

/** Headless Chromium with a persistent profile in `profile` (Playwright refuses --user-data-dir in args) and
 * WebGPU enabled (a SwiftShader adapter without a GPU). */
export function launchBrowser(chromium, chromiumPath, profile) {
  return chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: [
      "--no-sandbox",
      "--disable-gpu-sandbox",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--enable-unsafe-webgpu",
    ],
  });
}

/** Runs main() and exits 0, or 1 naming currentStep() when it throws or exceeds limitMs. */
export function runTest(main, currentStep, limitMs) {
  const guard = setTimeout(() => {
    console.error(`FAIL: timed out at step "${currentStep()}"`);
    process.exit(1);
  }, limitMs);
  main().then(
    () => {
      clearTimeout(guard);
      process.exit(0);
    },
    (e) => {
      console.error(`FAIL (${currentStep()}): ${e.stack || e}`);
      process.exit(1);
    },
  );
}

/** Checks (with the test's check) that the binary and the built web app exist. */
export function checkBuilt(check) {
  check(existsSync(TM_BIN), `the binary exists (${TM_BIN})`);
  check(existsSync(join(WEB_DIST, "index.html")) && existsSync(join(WEB_DIST, "app.js")), `the web app is built (${WEB_DIST})`);
}

/** Writes the one-layer demo checkpoint into tmp/demo and indexes it; returns its folder. */
export function demoCheckpoint(tmp, env) {
  const demo = join(tmp, "demo");
  for (const args of [["demo", "--out", demo, "--layers", "1", "--no-gguf"], ["index", demo]]) tm(args, env);
  return demo;
}
