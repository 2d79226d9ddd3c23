// Builds the playground into dist/ (app.js, app.css, index.html), which the agentic-api crate
// embeds. `--check` builds into a temporary directory and fails when dist/ differs: the
// committed files must be what this lockfile and these sources build.
import { build } from "esbuild";
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { gzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const check = process.argv.includes("--check");
const out = check ? mkdtempSync(join(tmpdir(), "agentic-web-")) : join(here, "dist");

await build({
  entryPoints: { app: join(here, "src/main.jsx"), "app-style": join(here, "src/style.css") },
  outdir: out,
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "eof",
  sourcemap: false,
  charset: "utf8",
  logLevel: "warning",
  entryNames: "[name]",
});
// esbuild names the stylesheet after its entry; the page asks for app.css.
copyFileSync(join(out, "app-style.css"), join(out, "app.css"));
rmSync(join(out, "app-style.css"));
rmSync(join(out, "app-style.js"), { force: true });
copyFileSync(join(here, "index.html"), join(out, "index.html"));

// The page's whole weight, gzipped, against its budget.
const BUDGET = 300 * 1024;
let weight = 0;
for (const name of readdirSync(out)) weight += gzipSync(readFileSync(join(out, name)), { level: 9 }).length;
console.log(`playground assets: ${(weight / 1024).toFixed(1)} KB gzipped (budget ${BUDGET / 1024} KB)`);
if (weight > BUDGET) {
  console.error("the playground's assets are over their budget");
  process.exit(1);
}

if (check) {
  const committed = join(here, "dist");
  const names = (dir) => readdirSync(dir).sort();
  const stale = [];
  const built = names(out);
  let present = [];
  try {
    present = names(committed);
  } catch {
    // No dist/ at all: everything is stale.
  }
  for (const name of new Set([...built, ...present])) {
    let same = false;
    try {
      same = readFileSync(join(out, name)).equals(readFileSync(join(committed, name)));
    } catch {
      same = false;
    }
    if (!same) stale.push(name);
  }
  rmSync(out, { recursive: true, force: true });
  if (stale.length) {
    console.error(`crates/api/web/dist is not what the sources build (${stale.join(", ")}): run \`cargo xtask web\` and commit dist/`);
    process.exit(1);
  }
  console.log("crates/api/web/dist is current");
}
