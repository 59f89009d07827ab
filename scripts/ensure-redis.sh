#!/usr/bin/env bash
# Installs redis-server when it is missing (Debian/Ubuntu; needs root or sudo).
# The tests start their own redis-server processes on free ports; this script
# only makes sure the binary exists. It never starts or uses a shared server.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server not found: installing it with apt-get" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq redis-server >/dev/null
# Debian's package starts a system service on 6379; the tests do not use it.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl stop redis-server >/dev/null 2>&1 || true; fi
command -v redis-server >/dev/null
redis-server --version
