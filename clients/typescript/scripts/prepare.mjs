// npm's `prepare` script: builds dist/ (tsc) wherever npm runs it — `npm
// install /path/to/agentq/clients/typescript` (npm links the directory and
// runs its prepare there, without installing its devDependencies), `npm
// pack`, `npm publish`, and `npm install`/`npm ci` in this directory.
//
// Steps:
//  - a copy without tsconfig.json is a packed package (its dist/ is
//    shipped): nothing to build;
//  - when the dev dependency typescript is not installed here, install the
//    dev dependencies first (`npm ci` from the lock file; scripts off, so
//    this script does not run again; from npm's cache when it has them);
//  - run tsc -p tsconfig.json.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const DIR = dirname(dirname(fileURLToPath(import.meta.url)));

// Settings of the npm that runs this script that would misdirect the one it
// runs here (`npm install -g <path>` would make it a global install, an
// --omit=dev would leave typescript out).
const PARENT_SETTINGS = ["global", "location", "prefix", "omit", "include", "production", "only", "also",
  "workspace", "workspaces", "install_links", "dry_run", "package_lock_only", "save", "save_dev"];

function fail(msg) {
  console.error(`agentq prepare: ${msg}`);
  process.exit(1);
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: DIR, stdio: "inherit", env: childEnv(), shell: process.platform === "win32" && cmd === "npm" });
  if (r.error) fail(`${cmd} ${args.join(" ")}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(" ")} exited ${r.status ?? r.signal}`);
}

function childEnv() {
  const env = { ...process.env };
  for (const k of PARENT_SETTINGS) {
    delete env[`npm_config_${k}`];
    delete env[`NPM_CONFIG_${k.toUpperCase()}`];
  }
  return env;
}

function tscPath() {
  try {
    return createRequire(join(DIR, "package.json")).resolve("typescript/bin/tsc");
  } catch {
    return undefined;
  }
}

function npm(args) {
  const cli = process.env.npm_execpath;
  if (cli && /\.c?js$/.test(cli)) run(process.execPath, [cli, ...args]);
  else run("npm", args);
}

if (!existsSync(join(DIR, "tsconfig.json"))) {
  if (!existsSync(join(DIR, "dist", "index.js"))) fail("neither tsconfig.json (a source tree) nor dist/ (a packed package)");
  process.exit(0);
}
if (!tscPath()) {
  console.error("agentq prepare: installing the dev dependencies (typescript) to build dist/");
  const how = existsSync(join(DIR, "package-lock.json")) ? ["ci"] : ["install", "--no-save"];
  npm([...how, "--include=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]);
}
const tsc = tscPath();
if (!tsc) fail("typescript is still not installed");
run(process.execPath, [tsc, "-p", "tsconfig.json"]);
