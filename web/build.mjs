// Builds the viewer into web/dist: src/main.ts bundled by esbuild into app.js, plus index.html and
// app.css copied as they are. Type checking is `tsc --noEmit` (npm run typecheck), run first by `npm run build`.
// The new dist is written beside the old one and swapped in, so a server reading it never sees it half-written.
import { build } from "esbuild";
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const final = join(here, "dist");
const dist = join(here, `dist.tmp-${process.pid}`);
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.ts")],
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  sourcemap: "linked",
  outfile: join(dist, "app.js"),
  logLevel: "warning",
});
copyFileSync(join(here, "src", "index.html"), join(dist, "index.html"));
copyFileSync(join(here, "src", "app.css"), join(dist, "app.css"));
const old = join(here, `dist.old-${process.pid}`);
if (existsSync(final)) renameSync(final, old);
renameSync(dist, final);
rmSync(old, { recursive: true, force: true });
console.log("web: wrote " + final + " (index.html, app.js, app.css)");
