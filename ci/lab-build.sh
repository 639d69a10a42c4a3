#!/usr/bin/env bash
# The lab's one release build: fleet-lab, the instruction-count bench,
# routerd and the embedding examples, in one cargo invocation. One
# invocation resolves one feature set: the bench's dev-dependencies
# (criterion, gungraun) and the examples' turn on features of shared crates
# (syn, serde, zerocopy, num-traits, ...), so built apart each would
# rebuild dependencies the others built (minutes of a cold run). .ci/run
# builds with it, ci/gungraun.sh runs the bench binary it built, and the
# Tracy step adds `--features tracy`.
#
# usage: ci/lab-build.sh [CARGO BUILD ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo build --release \
  -p fleet-bench --bin fleet-lab --bench instructions \
  -p router --bin routerd --example restart_drill \
  -p fleet-bindings --example minimal_host --example keyed_walk --example posture_demo \
  "$@"
