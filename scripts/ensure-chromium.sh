#!/usr/bin/env bash
# Installs headless Chromium (Debian's `chromium` package) when missing: the
# console's browser test (internal/console/browser_test.go) drives it over CDP with
# chromedp. Needs root or sudo. Any of chromium, chromium-browser,
# google-chrome on PATH (or $AGENTQ_CHROMIUM) is good enough.
set -euo pipefail
if [ -n "${AGENTQ_CHROMIUM:-}" ] && [ -x "${AGENTQ_CHROMIUM}" ]; then exit 0; fi
for b in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$b" >/dev/null 2>&1; then exit 0; fi
done
echo "chromium not found: installing with apt-get" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
echo "chromium installed: $(command -v chromium)"
