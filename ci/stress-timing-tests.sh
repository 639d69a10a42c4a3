#!/usr/bin/env bash
# Runs the tests that once depended on wall-clock timing COUNT times each
# (default 50) with `fleet-lab spin --threads 2` keeping both cores busy
# beside them, and prints nextest's count of passes and failures. A test
# that reads the clock for its verdict fails here; one that waits on its
# event passes every run.
#
# usage: ci/stress-timing-tests.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-50}
lab=${FLEET_LAB:-target/release/fleet-lab}
[ -x "$lab" ] || { echo "no $lab: cargo build --release --bin fleet-lab" >&2; exit 2; }
filter='(package(router) & test(/^http::/)) | (package(fleet-bindings) & test(/^cooperative::/)) | (package(fleet-workloads) & test(an_earlier_deadline_registered_later)) | test(an_unwritable_out_is_refused_before_the_run_starts) | (package(fleet-workloads) & test(/^math_props::/))'
exec 9> >("$lab" spin --threads 2 >/dev/null 2>&1)
spinner=$!
trap 'exec 9>&-; wait "$spinner" 2>/dev/null || true' EXIT
echo "== $(date -u +%T) two busy threads beside the tests (pid $spinner); $count runs of each"
cargo nextest run --workspace --release --no-fail-fast -E "$filter" --stress-count "$count"
