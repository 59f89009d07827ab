#!/usr/bin/env bash
# Installs redis-server and redis-cli (and python3, which the HTTP API end-to-end test's
# client runs on) when they are missing (Debian/Ubuntu; needs root or sudo).
# The tests start their own redis-server processes on free ports; this script
# only makes sure the binaries exist. It never starts or uses a shared server.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# redis-cli (Debian's redis-tools, a dependency of redis-server) builds the
# test Clusters; redis-server itself runs Sentinel mode (--sentinel).
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
echo "${missing[*]} not found: installing with apt-get" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
# Debian's package starts a system service on 6379; the tests do not use it.
if [[ " ${missing[*]} " == *" redis-server "* ]] && command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl stop redis-server >/dev/null 2>&1 || true
fi
command -v redis-server >/dev/null
command -v redis-cli >/dev/null
command -v python3 >/dev/null
redis-server --version
