#!/usr/bin/env bash
# Both clients' packages, installed as a team installs them, outside the
# source tree (`make test-clients` runs this; offline once npm's cache holds
# the TypeScript client's dev dependencies, which `make clients` puts there):
#  1. one version: clients/VERSION = package.json = package-lock.json =
#     pyproject.toml = agentq.__version__ = the TypeScript VERSION;
#  2. `npm pack --dry-run`: the tarball holds dist/ (built), the sources,
#     README and package.json, and nothing else (no tests, no node_modules);
#  3. `npm install agentq-X.tgz` (from `npm pack`) into a fresh project and
#     `npm install /path/to/clients/typescript` into another — a copy of the
#     source tree without node_modules or dist/, so that npm's `prepare`
#     must install typescript and build dist/ — each followed by
#     clients/typescript/test/installed.mjs (imports, verifies a webhook,
#     calls a refused port);
#  4. a wheel (`pip wheel`, the standard-library backend) and an sdist (the
#     same backend's build_sdist, as a PEP 517 frontend calls it) of
#     clients/python, each installed with `pip --no-index` into a virtual
#     environment and imported by clients/python/tests/installed.py (with
#     no venv module, pip --target; with no pip, the wheels unpacked).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TS="$ROOT/clients/typescript"
PY="$ROOT/clients/python"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export npm_config_prefer_offline=true npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
say() { echo "test-packages: $*"; }
die() { echo "test-packages: FAIL: $*" >&2; exit 1; }
# quiet DIR CMD...: runs CMD in DIR, printing its output only when it fails.
quiet() { (cd "$1" && shift && "$@") > "$TMP/out" 2>&1 || { cat "$TMP/out" >&2; die "in $1: ${*:2}"; }; }

check_versions() {
  local want got
  want=$(tr -d '[:space:]' < "$ROOT/clients/VERSION")
  [[ "$want" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] || die "clients/VERSION is not a semantic version: $want"
  got=$(node -e '
    const fs = require("fs"), [pkg, lock] = process.argv.slice(1).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
    console.log([pkg.version, lock.version, lock.packages[""].version].join(" "))' "$TS/package.json" "$TS/package-lock.json")
  [ "$got" = "$want $want $want" ] || die "package.json, package-lock.json (twice) say $got; clients/VERSION says $want"
  grep -q "^version = \"$want\"\$" "$PY/pyproject.toml" || die "pyproject.toml's version is not $want"
  grep -q "^__version__ = \"$want\"\$" "$PY/agentq/__init__.py" || die "agentq.__version__ is not $want"
  grep -q "^export const VERSION = \"$want\";\$" "$TS/src/index.ts" || die "the TypeScript VERSION is not $want"
  VERSION=$want
}

# The fields a registry shows and a project resolves by, in both packages.
check_metadata() {
  node -e '
    const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const miss = ["name", "version", "description", "license", "repository", "keywords", "engines", "types", "main", "module", "exports", "files"]
      .filter((k) => p[k] === undefined || p[k] === "");
    if (!p.scripts?.prepare) miss.push("scripts.prepare");
    for (const [k, v] of Object.entries({ main: p.main, module: p.module, types: p.types, ".": p.exports?.["."]?.import, "./agent": p.exports?.["./agent"]?.import }))
      if (!String(v).startsWith("./dist/")) miss.push(`${k} into dist/ (${v})`);
    if (miss.length) { console.error("package.json lacks: " + miss.join(", ")); process.exit(1); }' "$TS/package.json" ||
    die "clients/typescript/package.json is not publishable"
  (cd "$PY" && python3 -c '
import sys; sys.path.insert(0, "_build"); import agentq_build as b
meta = b._metadata()[2].split("\n\n", 1)[0]
miss = [f for f in ("Name", "Version", "Summary", "License", "Keywords", "Classifier", "Project-URL", "Requires-Python")
        if "\n%s: " % f not in "\n" + meta]
sys.exit("the wheel metadata lacks " + ", ".join(miss) if miss else 0)') || die "clients/python/pyproject.toml is not publishable"
}

# The tarball's files: exactly these, besides dist/ and src/ (each .ts in
# src/ compiled into dist/ as .js and .d.ts).
check_pack_list() {
  local files
  files=$(cd "$TS" && npm pack --dry-run --json --ignore-scripts 2>/dev/null | node -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      for (const f of JSON.parse(s)[0].files) console.log(f.path);
    })' | sort)
  local want
  want=$(cd "$TS" && { printf '%s\n' package.json README.md scripts/prepare.mjs;
    for f in src/*.ts; do b=$(basename "$f" .ts); printf '%s\n' "$f" "dist/$b.js" "dist/$b.d.ts"; done; } | sort)
  [ "$files" = "$want" ] || die "npm pack --dry-run lists other files than expected:
$(diff <(echo "$want") <(echo "$files") || true)"
  say "npm pack --dry-run: $(echo "$files" | wc -l) files (dist/, src/, scripts/prepare.mjs, README.md, package.json)"
}

# new_project DIR: an empty ESM project with the smoke script.
new_project() {
  mkdir -p "$1"
  echo '{"name": "agentq-install-check", "private": true, "type": "module"}' > "$1/package.json"
  cp "$TS/test/installed.mjs" "$1/"
}

check_npm_tarball() {
  quiet "$TS" npm pack --pack-destination "$TMP" --loglevel=error
  local tgz="$TMP/agentq-$VERSION.tgz"
  [ -f "$tgz" ] || die "npm pack made no $tgz"
  new_project "$TMP/from-tarball"
  quiet "$TMP/from-tarball" npm install --offline --loglevel=error "$tgz"
  (cd "$TMP/from-tarball" && node installed.mjs "$VERSION") || die "the package installed from $(basename "$tgz") does not work"
}

check_npm_path() {
  local src="$TMP/src/typescript"
  mkdir -p "$src"
  (cd "$TS" && tar cf - --exclude=./node_modules --exclude=./dist .) | (cd "$src" && tar xf -)
  new_project "$TMP/from-path"
  quiet "$TMP/from-path" npm install --loglevel=error "$src"
  [ -f "$src/dist/index.js" ] || die "npm install <path> did not build dist/ (the prepare script)"
  (cd "$TMP/from-path" && node installed.mjs "$VERSION") || die "the package installed from its path does not work"
}

# python_env DIR: a virtual environment with pip (else, as on a Debian
# without python3-venv, a plain directory for pip --target); sets PYBIN,
# SITE, PIP and WHERE.
python_env() {
  if python3 -m venv "$1" > /dev/null 2>&1 && "$1/bin/python" -m pip --version > /dev/null 2>&1; then
    PYBIN="$1/bin/python"
    SITE=$("$PYBIN" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    PIP=("$PYBIN" -m pip install --no-index --no-deps --quiet --disable-pip-version-check)
    WHERE="a virtual environment"
  else
    PYBIN=python3
    SITE="$1/site"
    PIP=(python3 -m pip install --no-index --no-deps --quiet --disable-pip-version-check --target "$SITE")
    WHERE="a pip --target directory (no python3 venv)"
  fi
}

python_smoke() {
  local path=()
  [ "$PYBIN" != python3 ] || path=(PYTHONPATH="$SITE")
  (cd "$TMP" && env -u PYTHONPATH "${path[@]}" "$PYBIN" "$PY/tests/installed.py" "$VERSION" "$SITE") ||
    die "the Python package installed from $1 does not work"
}

# backend DIR HOOK OUT: calls the standard-library build backend of the
# source tree DIR as a PEP 517 frontend does (HOOK: build_wheel or
# build_sdist), printing the file it made in OUT.
backend() {
  (cd "$1" && python3 -c 'import sys; sys.path.insert(0, "_build"); import agentq_build as b; print(getattr(b, sys.argv[1])(sys.argv[2]))' "$2" "$3")
}

# unpacked WHEEL: installs a pure wheel as pip would (unzipped into a fresh
# directory) and runs the smoke script on it.
unpacked() {
  PYBIN=python3
  SITE=$(mktemp -d "$TMP/site.XXXX")
  python3 -m zipfile -e "$1" "$SITE"
}

check_python() {
  mkdir -p "$TMP/py" "$TMP/sdist"
  local sdist whl
  sdist=$(backend "$PY" build_sdist "$TMP/py")
  if python3 -m pip --version > /dev/null 2>&1; then
    quiet "$TMP" python3 -m pip wheel --no-deps --no-index --no-build-isolation --quiet --disable-pip-version-check -w "$TMP/py" "$PY"
    whl="agentq-$VERSION-py3-none-any.whl"
    [ -f "$TMP/py/$whl" ] || die "pip wheel made no $whl"
    python_env "$TMP/venv"
    quiet "$TMP" "${PIP[@]}" "$TMP/py/$whl"
    python_smoke "$whl"
    quiet "$TMP" "${PIP[@]}" --force-reinstall "$TMP/py/$sdist"
    python_smoke "$sdist"
    say "pip install of the wheel and of the sdist into $WHERE: imported and used"
    return
  fi
  # No pip (a Debian without python3-pip): the same artifacts, built by the
  # backend and unpacked.
  whl=$(backend "$PY" build_wheel "$TMP/py")
  unpacked "$TMP/py/$whl"
  python_smoke "$whl"
  tar xzf "$TMP/py/$sdist" -C "$TMP/sdist"
  unpacked "$TMP/sdist/$(backend "$TMP/sdist/${sdist%.tar.gz}" build_wheel "$TMP/sdist")"
  python_smoke "$sdist"
  say "no pip: the wheel, and a wheel built from the sdist, unpacked as pip installs them: imported and used"
}

check_versions
check_metadata
check_pack_list
check_npm_tarball
say "npm install agentq-$VERSION.tgz: imported and used"
check_npm_path
say "npm install <path> (prepare built dist/): imported and used"
check_python
