#!/usr/bin/env bash
# The lab's one release build: fleet-lab, the instruction-count bench,
# routerd and the embedding examples, in one cargo invocation over the
# whole workspace. Cargo resolves one feature set per invocation, from the
# packages it selects and whether any target needs dev-dependencies:
# selected with `--workspace` and building a bench, it resolves the same
# set as the release test build (`cargo nextest run --workspace
# --release`), so after the tests nothing but the bench compiles (4 s
# against 47 s with `-p fleet-bench -p router -p fleet-bindings`, which
# resolved other features of metrics-util, proptest and criterion and
# recompiled them and every workspace crate above them). The binaries are
# the ones the tests ran. .ci/run builds with it, ci/gungraun.sh runs the
# bench binary it built, ci/reference-lab.sh builds the reference the same
# way (--workspace and the bench), and the Tracy step adds `--features
# fleet-bench/tracy`.
#
# usage: ci/lab-build.sh [CARGO BUILD ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--release --workspace
  --bin fleet-lab --bench instructions
  --bin routerd --example lease_load --example restart_drill --example outage_drill --example failover_drill
  --example minimal_host --example keyed_walk --example posture_demo)
exec cargo build "${args[@]}" "$@"
