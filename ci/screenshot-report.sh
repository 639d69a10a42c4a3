#!/usr/bin/env bash
# Renders a report directory's report.html in headless Chromium and writes a
# PNG screenshot, to check that the page's plots and axes are readable.
#
# usage: ci/screenshot-report.sh REPORT_DIR OUT.png [WIDTH,HEIGHT]
#
# Skips (exit 0, with a message) when no Chromium is installed; install it
# with `apt-get install -y chromium`. The page is opened from disk with
# networking features off: it must render offline.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT_DIR OUT.png [WIDTH,HEIGHT]" >&2
  exit 2
fi
dir=$1
out=$2
size=${3:-1400,2400}
page="$dir/report.html"
if [ ! -f "$page" ]; then
  echo "error: $page does not exist (write a report first: fleet-lab run --out DIR)" >&2
  exit 1
fi

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -z "$browser" ]; then
  echo "skip: no chromium found; install it with 'apt-get install -y chromium' to screenshot $page"
  exit 0
fi

abs_page=$(cd "$(dirname "$page")" && pwd)/report.html
abs_out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" \
  --screenshot="$abs_out" --window-size="$size" "file://$abs_page" 2>"$profile/stderr.log" || {
  echo "error: chromium failed to render $page:" >&2
  cat "$profile/stderr.log" >&2
  exit 1
}
if [ ! -s "$abs_out" ]; then
  echo "error: chromium wrote no screenshot to $abs_out" >&2
  cat "$profile/stderr.log" >&2
  exit 1
fi
echo "wrote $abs_out ($size) from $abs_page"
