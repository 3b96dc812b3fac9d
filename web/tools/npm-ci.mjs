// `npm ci` for web/, skipped when node_modules already holds exactly what package-lock.json pins (a hash
// of the lock file is kept in node_modules), and serialized by a lock directory so that two build trees
// (build/, build-asan/) never run it at once in the shared source tree.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const web = join(dirname(fileURLToPath(import.meta.url)), "..");
const npm = process.argv[2] || "npm";
const lockFile = join(web, "package-lock.json");
const stampFile = join(web, "node_modules", ".tm-lock-sha256");
const mutex = join(web, ".npm-ci.lock");
const want = createHash("sha256").update(readFileSync(lockFile)).digest("hex");
const current = () => (existsSync(stampFile) ? readFileSync(stampFile, "utf8").trim() : "");

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

if (current() !== want) {
  const deadline = Date.now() + 600_000;
  for (;;) {
    try {
      mkdirSync(mutex);
      break;
    } catch {
      // Another build holds it; a lock older than 15 minutes is stale.
      try {
        if (Date.now() - statSync(mutex).mtimeMs > 900_000) rmSync(mutex, { recursive: true, force: true });
      } catch {}
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${mutex}`);
      sleep(500);
    }
  }
  try {
    if (current() !== want) {
      console.log("web: npm ci");
      execFileSync(npm, ["ci", "--no-audit", "--no-fund"], { cwd: web, stdio: "inherit" });
      writeFileSync(stampFile, want + "\n");
    }
  } finally {
    rmSync(mutex, { recursive: true, force: true });
  }
}
