#!/usr/bin/env bash
# Screenshots a routing-lab report in headless Chromium, to check that its
# plots and axes are readable: builds fleet-lab, runs one small simulation
# (or uses REPORT_DIR when given) and renders its report.html to OUT.png.
# Installs Debian's chromium if it is missing.
#
# usage: ci/route-lab-shot.sh OUT.png [REPORT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
  echo "usage: $0 OUT.png [REPORT_DIR]" >&2
  exit 2
fi
out=$1
dir=${2:-}

ci/install-chromium.sh

if [ -z "$dir" ]; then
  cargo build --release -q --bin fleet-lab
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  dir="$work/liars"
  target/release/fleet-lab route sim --scenario liars --devices 100 --hours 2 --quiet --out "$dir" >/dev/null
fi
ci/screenshot-report.sh "$dir" "$out" 1100,3400
