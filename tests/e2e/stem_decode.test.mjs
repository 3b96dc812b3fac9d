// End-to-end test of the page's decode in WGSL (web/src/stem/webgpu/decode.ts, bitshuffle_lz4.wgsl.ts) in Debian's
// Chromium (headless, SwiftShader's WebGPU adapter): `stem demo` acquisitions of uint8 (33 x 33 frames: 1089
// elements, one raw tail element, frames not on u32 words), uint16 (45 x 45: a tail, frames of 2 mod 4 bytes) and
// uint32 (60 x 60: two LZ4 blocks per chunk) pixels are served, each opened on the acquisition page with windows of
// 4 frames (localStorage tm.stem.decodeWindowBytes), and a uint8 set written unfiltered (`--encoder none`: filter
// "none" in the manifest), and:
//   - the page's block, decoded on the adapter from GET …/chunks, is byte-identical to GET …/block (the server's CPU
//     decoder, masked as the products see the frames) and to the CLI's `stem export` .npy: every chunk of the
//     acquisition;
//   - the page asked for …/chunks (one request per window, each answer's bytes counted) and never for …/block; the
//     decode report says which path ran, the bytes over the wire (fewer than the decoded ones) and a decode rate;
//   - "Decode: block from the server" fetches …/block (no …/chunks) and holds the same bytes;
//   - 16 seeded single-byte corruptions of the uint16 set (anywhere in one chunk): the page's decoder refuses exactly
//     where the CPU's …/block does, naming the same frame, and where both accept, its bytes are the CPU's;
//   - two damaged copies of the uint16 acquisition (one chunk's first LZ4 length past the chunk's end; another
//     chunk's first LZ4 match offset before the block's start): the page's decoder (window.tmStemDecodeCheck: the page
//     itself stops earlier, at the server's calibration, which reads every frame and names the frame) refuses them
//     naming the frame and its data file, the same frame the server's CPU decoder names in …/block's refusal.
// Environment: TM_BIN, TM_E2E_OUT, CHROMIUM (harness.mjs). Exits 0 with "SKIPPED: no chromium" only without Chromium.
import { cpSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { WEB_DIST, checker, chromiumOrSkip, e2eSetup, e2eTeardown, launchBrowser, runTest, startServer, tm, watchErrors } from "./harness.mjs";

const chromiumPath = chromiumOrSkip();
let step = "setup";
const { log, check } = checker("[e2e stem_decode]", () => step);

const SETS = [
  { dtype: "uint8", detector: 33 },
  { dtype: "uint16", detector: 45 },
  { dtype: "uint32", detector: 60 },
  { dtype: "uint8", detector: 33, encoder: "none" },  // unfiltered chunks: the manifest's filter "none", copied and masked
];

/** The data bytes of a .npy file (whatever its dtype). */
function npyData(path) {
  const b = readFileSync(path);
  return b.subarray(10 + b.readUInt16LE(8));
}

/** Overwrites bytes of frame `frame`'s stored chunk (in the data file holding it) through h5py's chunk index:
 *  `at` bytes into the chunk. Returns the data file's name. */
function corruptChunk(master, frame, at, bytes) {
  const script = `
import h5py, sys, os
master, frame, at, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
folder = os.path.dirname(master)
with h5py.File(master, "r") as f:
    links = sorted(f["entry/data"].keys())
    first = 0
    for name in links:
        link = f["entry/data"].get(name, getlink=True)
        path = os.path.join(folder, link.filename)
        with h5py.File(path, "r") as d:
            ds = d[link.path]
            n = ds.shape[0]
            if frame < first + n:
                info = ds.id.get_chunk_info_by_coord((frame - first, 0, 0))
                offset = info.byte_offset
                break
        first += n
with open(path, "r+b") as out:
    out.seek(offset + at)
    out.write(data)
print(os.path.basename(path))
`;
  const r = spawnSync("/usr/bin/python3", ["-c", script, master, String(frame), String(at), bytes], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`corrupting frame ${frame}: ${r.stderr}`);
  return r.stdout.trim();
}

/** Copies `folder` `n` times (tmp/fuzzK), each with one byte of one frame's stored chunk set to another value
 *  (seeded: frame, offset within the chunk, value); returns [{master, frame, at}]. */
function corruptCopies(tmp, folder, n, frames) {
  const script = `
import h5py, os, random, shutil, sys, json
tmp, folder, n, frames = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = []
for k in range(n):
    rnd = random.Random(4700 + k)
    copy = os.path.join(tmp, "fuzz%d" % k)
    shutil.copytree(folder, copy)
    master = os.path.join(copy, "demo_master.h5")
    frame = rnd.randrange(frames)
    with h5py.File(master, "r") as f:
        first = 0
        for name in sorted(f["entry/data"].keys()):
            link = f["entry/data"].get(name, getlink=True)
            path = os.path.join(copy, link.filename)
            with h5py.File(path, "r") as d:
                ds = d[link.path]
                if frame < first + ds.shape[0]:
                    info = ds.id.get_chunk_info_by_coord((frame - first, 0, 0))
                    break
                first += ds.shape[0]
    at = rnd.randrange(info.size)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + at)
        old = fh.read(1)[0]
        fh.seek(info.byte_offset + at)
        fh.write(bytes([(old + rnd.randrange(1, 256)) % 256]))
    out.append({"master": master, "frame": frame, "at": at, "size": info.size})
print(json.dumps(out))
`;
  const r = spawnSync("/usr/bin/python3", ["-c", script, tmp, folder, String(n), String(frames)], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`corrupting copies: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function main() {
  const { chromium, tmp, env } = e2eSetup("stem_decode", check);
  let server = null;
  let context = null;
  try {
    step = "acquisitions";
    const masters = SETS.map(({ dtype, detector, encoder }) => {
      const out = join(tmp, encoder ? `${dtype}-${encoder}` : dtype);
      tm(["stem", "demo", "--out", out, "--scan", "6,5", "--detector", String(detector), "--dtype", dtype, "--files", "2", ...(encoder ? ["--encoder", encoder] : [])], env);
      return join(out, "demo_master.h5");
    });
    // Two damaged copies of the uint16 set: frame 7's first LZ4 length (chunk byte 12) says 2^31 - 1 bytes; frame 13's
    // first LZ4 sequence (chunk byte 16) is no literals and a match 65535 bytes back, before the block's start.
    const damaged = [[7, 12, "7fffffff"], [13, 16, "00ffff"]].map(([frame, at, bytes], k) => {
      const copy = join(tmp, `damaged${k}`);
      cpSync(join(tmp, "uint16"), copy, { recursive: true });
      const file = corruptChunk(join(copy, "demo_master.h5"), frame, at, bytes);
      return { master: join(copy, "demo_master.h5"), frame, file };
    });
    // Seeded single-byte corruptions of the uint16 set, anywhere in one chunk (header, size prefixes, LZ4 tokens,
    // literals): the page's decoder must refuse exactly where the CPU's does, and decode to its bytes where it accepts.
    const fuzz = corruptCopies(tmp, join(tmp, "uint16"), 16, 30);
    server = await startServer([...masters, ...damaged.map((d) => d.master), ...fuzz.map((f) => f.master), "--web-root", WEB_DIST], env);
    const base = server.url;

    step = "browser";
    context = await launchBrowser(chromium, chromiumPath, join(tmp, "profile"));
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = watchErrors(page);
    const requests = [];
    page.on("request", (r) => requests.push(new URL(r.url()).pathname));
    await page.addInitScript(() => {
      try {
        localStorage.setItem("tm.stem.decodeWindowBytes", "1");  // windows of 4 frames
      } catch {
        /* about:blank has no storage */
      }
    });

    /** Opens acquisition `id` and waits for the page path to settle (its decode report set). */
    const open = async (id) => {
      await page.goto("about:blank");  // a fresh document: nothing resident from the previous acquisition
      requests.length = 0;
      await page.goto(new URL(`#/acquisition/${id}`, base).href);
      await page.waitForFunction(() => document.querySelector("#stem-decode-report")?.dataset.path && window.tmStemPageBlock !== undefined || document.querySelector("#stem-decode-report")?.dataset.path === "refused", null, { timeout: 120_000 });
      await page.waitForFunction(() => document.querySelector("#stem-compute-on")?.dataset.ready === "1" || document.querySelector("#stem-decode-report")?.dataset.path === "refused", null, { timeout: 120_000 });
      return page.evaluate(() => { const e = document.querySelector("#stem-decode-report"); return { text: e.textContent, ...e.dataset }; });
    };
    /** The page's block against GET …/block and the CLI's .npy (bytes): mismatches and the first one. */
    const compare = async (id, npy) => page.evaluate(async ([id, npyB64]) => {
      const held = window.tmStemPageBlock;
      const words = held.block.words;
      const server = new Uint32Array(await (await fetch(`/api/acquisitions/${id}/block`)).arrayBuffer());
      const cli = Uint8Array.from(atob(npyB64), (c) => c.charCodeAt(0));
      const bytes = new Uint8Array(words.buffer, words.byteOffset, words.byteLength);
      let serverBad = 0, cliBad = 0, first = -1;
      for (let i = 0; i < Math.max(words.length, server.length); i++) if (words[i] !== server[i]) serverBad++, first < 0 && (first = i);
      for (let i = 0; i < cli.length; i++) if (bytes[i] !== cli[i]) cliBad++;
      const padding = bytes.subarray(cli.length).some((x) => x !== 0);
      return { path: held.path, decode: held.decode, words: words.length, serverWords: server.length, serverBad, cliBad, cliBytes: cli.length, first, padding };
    }, [id, npy.toString("base64")]);

    for (const [k, { dtype, detector, encoder }] of SETS.entries()) {
      step = `decode ${dtype}${encoder ? ` (encoder ${encoder})` : ""}`;
      const id = `a${k}`;
      const report = await open(id);
      const asked = [...requests];
      const out = join(tmp, `${dtype}${encoder ? `-${encoder}` : ""}.npy`);
      tm(["stem", "export", masters[k], "-o", out], env);
      const npy = npyData(out);
      const frames = 30, frameBytes = detector * detector * { uint8: 1, uint16: 2, uint32: 4 }[dtype];
      check(report.path === "chunks" && /compressed chunks decoded on the page's adapter \(WGSL/.test(report.text) && /MiB\/s/.test(report.text),
        `the decode report says the chunks were decoded on the adapter: "${report.text}"`);
      const r = await compare(id, npy);
      check(r.decode === "chunks" && r.path === `/api/acquisitions/${id}`, `the page holds the block it decoded (${r.words} words)`);
      check(r.serverBad === 0 && r.words === r.serverWords, `its ${frames} frames (${frames * frameBytes} bytes, every chunk) are byte-identical to GET …/block (${r.serverBad} words differ, first ${r.first})`);
      check(r.cliBad === 0 && r.cliBytes === frames * frameBytes && !r.padding, `and to the CLI's stem export .npy (${r.cliBad} bytes differ)`);
      const chunkAsks = asked.filter((p) => p === `/api/acquisitions/${id}/chunks`).length;
      check(chunkAsks === Math.ceil(frames / 4) && !asked.includes(`/api/acquisitions/${id}/block`),
        `the page asked for …/chunks ${chunkAsks} times (windows of 4 frames) and never for …/block`);
      const filter = await page.evaluate(async (id) => {
        const res = await fetch(`/api/acquisitions/${id}/chunks?start=0&count=1`);
        const m = Number(res.headers.get("X-Chunks-Manifest-Bytes"));
        return JSON.parse(new TextDecoder().decode(new Uint8Array(await res.arrayBuffer(), 0, m))).chunks[0].filter;
      }, id);
      check(filter === (encoder === "none" ? "none" : "bitshuffle_lz4"), `its chunks are stored ${filter}`);
      const wire = Number(report.wireBytes), decoded = Number(report.decodedBytes);
      check(decoded === frames * frameBytes && wire > 0 && Number(report.chunks) === frames && Number(report.decodeMs) > 0,
        `it reports ${wire} bytes over the wire for ${decoded} decoded, ${report.chunks} chunks, ${Number(report.decodeMs).toFixed(1)} ms decoding (SwiftShader: smoke only)`);
    }

    step = "block path";
    await page.evaluate(() => localStorage.setItem("tm.stem.decode", "block"));
    const report = await open("a1");
    const asked = [...requests];
    const viaBlock = await compare("a1", npyData(join(tmp, "uint16.npy")));
    check(report.path === "block" && viaBlock.decode === "block" && asked.includes("/api/acquisitions/a1/block") && !asked.includes("/api/acquisitions/a1/chunks"),
      `"Decode: block from the server" fetches …/block only: "${report.text}"`);
    check(viaBlock.serverBad === 0 && viaBlock.cliBad === 0, "and holds the same bytes");
    await page.evaluate(() => localStorage.setItem("tm.stem.decode", "chunks"));

    for (const [k, d] of damaged.entries()) {
      step = `damaged chunk ${k}`;
      const id = `a${SETS.length + k}`;
      await page.goto("about:blank");
      requests.length = 0;
      await page.goto(new URL(`#/acquisition/${id}`, base).href);
      // The page: the server's calibration (the disk found from every frame) already refuses the file naming the frame.
      await page.waitForFunction((f) => document.body.textContent.includes(`frame ${f}`), d.frame, { timeout: 120_000 });
      const shownText = await page.evaluate(() => document.body.textContent);
      check(shownText.includes(d.file), `the page shows the server's refusal naming frame ${d.frame} of ${d.file}`);
      // The page's decoder on the same file: refused, naming the same frame, never a block.
      const dec = await page.evaluate(async ([id, detector]) => window.tmStemDecodeCheck(`/api/acquisitions/${id}`, [6, 5, detector, detector], "u16"), [id, SETS[1].detector]);
      check(!dec.ok && dec.frame === d.frame && dec.message.includes(`${d.file}, frame ${d.frame}`) && /damaged chunk/.test(dec.message),
        `the page's decoder refuses the damaged chunk naming the frame: "${dec.message}"`);
      check(requests.some((p) => p === `/api/acquisitions/${id}/chunks`), "having fetched its chunks");
      const cpu = await page.evaluate(async (id) => { const res = await fetch(`/api/acquisitions/${id}/block`); return { status: res.status, text: await res.text() }; }, id);
      check(cpu.status >= 400 && cpu.text.includes(`frame ${d.frame}`), `the server's CPU decoder refuses the same frame: ${cpu.status} ${cpu.text.slice(0, 200)}`);
    }
    step = "single-byte corruptions: the page's verdict and bytes are the CPU's";
    let accepted = 0;
    for (const [k, f] of fuzz.entries()) {
      const id = `a${SETS.length + damaged.length + k}`;
      const r = await page.evaluate(async ([id, detector]) => {
        const dec = await window.tmStemDecodeCheck(`/api/acquisitions/${id}`, [6, 5, detector, detector], "u16");
        const res = await fetch(`/api/acquisitions/${id}/block`);
        const cpu = { status: res.status, body: res.ok ? new Uint32Array(await res.arrayBuffer()) : await res.text() };
        let differ = -1;
        if (dec.ok && res.ok) for (let i = 0; i < Math.max(cpu.body.length, dec.block.words.length); i++) if (cpu.body[i] !== dec.block.words[i]) { differ = i; break; }
        return { pageOk: dec.ok, message: dec.ok ? "" : dec.message, frame: dec.ok ? null : dec.frame, cpuStatus: cpu.status, cpuText: res.ok ? "" : cpu.body, differ };
      }, [id, SETS[1].detector]);
      const what = `frame ${f.frame}, chunk byte ${f.at} of ${f.size}`;
      check(r.pageOk === (r.cpuStatus === 200), `${what}: the page ${r.pageOk ? "decodes" : "refuses"} as the CPU does (${r.cpuStatus}${r.pageOk ? "" : `; page: ${r.message}`})`);
      if (r.pageOk) {
        accepted++;
        check(r.differ === -1, `${what}: and to the CPU's bytes (first differing word ${r.differ})`);
      } else {
        check(r.message.includes(`frame ${f.frame}`) && r.cpuText.includes(`frame ${f.frame}`), `${what}: both name frame ${f.frame}: ${r.cpuText.slice(0, 160)}`);
      }
    }
    log(`single-byte corruptions: ${accepted} of ${fuzz.length} decodable (a literal changed), ${fuzz.length - accepted} refused by both`);

    step = "healthy acquisition through the same check";
    const healthy = await page.evaluate(async (detector) => window.tmStemDecodeCheck("/api/acquisitions/a1", [6, 5, detector, detector], "u16"), SETS[1].detector);
    check(healthy.ok && healthy.words === Math.ceil((30 * SETS[1].detector ** 2 * 2) / 4), `the same check decodes the healthy uint16 acquisition (${healthy.ok ? healthy.words + " words" : healthy.message})`);
    // The damaged acquisitions' server products fail too (their 500s name the frame); nothing else may.
    const damagedIds = [...damaged, ...fuzz].map((_, k) => `a${SETS.length + k}`);
    const other = errors.filter((e) => !damagedIds.some((id) => e.startsWith(`500 GET /api/acquisitions/${id}/`)) && !/status of 500/.test(e) && !/frame \d+\b/.test(e));
    check(other.length === 0, `no other page errors: ${JSON.stringify(other.slice(0, 5))}`);
    log(`page errors from the damaged acquisitions (expected): ${errors.length - other.length}`);
  } finally {
    await e2eTeardown(tmp, server, context);
  }
}

runTest(main, () => step, 540_000);
