#!/usr/bin/env bash
# Installs Debian's chromium when no `chromium` is on PATH; does nothing
# otherwise. Used by the scripts that check pages in headless Chromium, and
# by .ci/run, which starts it in the background while the tests build (the
# install is network and disk work) and waits for it before the timed gates.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium: $(chromium --version 2>/dev/null || echo present)"
  exit 0
fi
echo "installing chromium (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium >/dev/null
echo "chromium: $(chromium --version 2>/dev/null || echo installed)"
