#!/usr/bin/env bash
# Installs Node.js (>= 18) and npm when missing (Debian/Ubuntu; needs root or
# sudo): the TypeScript client (clients/typescript) is built with npm and
# tested with `node --test`, its live suite by e2e/clients_test.go.
set -euo pipefail
missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -ne 0 ]; then
  echo "${missing[*]} not found: installing with apt-get" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "node $(node --version) is too old: the TypeScript client needs Node >= 18 (fetch, node --test)" >&2
  exit 1
fi
