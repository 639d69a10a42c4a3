#!/usr/bin/env bash
# The second lane of .ci/run's untimed steps: every cargo-fuzz target for
# SECONDS (default 15; ci/fuzz.sh), then the instruction-count benches
# against their baseline (ci/gungraun.sh). Neither verdict depends on the
# host's load (a crash is a crash; callgrind counts instructions, not
# time), so .ci/run runs this in the background beside the routing lab,
# the PostgreSQL suite and the operator page. Needs the lab build
# (ci/lab-build.sh: the bench binary) and cargo-fuzz (ci/install-tools.sh).
#
# usage: ci/untimed-lane.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "fuzz: every cargo-fuzz target for $secs s (a crash fails the run)"
# cargo-fuzz 0.13.2 builds on stable. The fuzz build itself is one shared
# build of all targets (see ci/fuzz.sh and fuzz/Cargo.toml for what keeps
# it short).
cargo fuzz --version
ci/fuzz.sh "$secs"
# The instrumented fuzz build is used by this step only.
rm -rf fuzz/target

step "instruction-count benches"
ci/gungraun.sh
