#!/usr/bin/env bash
# Builds (once) the reference `fleet-lab` the paired gates measure against,
# and prints its path. The reference is the build of the commit recorded in
# ci/gate-reference: the commit the change under test is based on.
#
#   ci/reference-lab.sh             build if not cached; print the binary's path
#   ci/reference-lab.sh --record    record HEAD as the reference (review and
#                                   commit the diff of ci/gate-reference)
#
# The commit's tree is checked out (git archive) under target/reference/
# and built in a target directory of its own, target/reference-build,
# seeded with hard links to this tree's release artifacts: the
# dependencies already built are reused (same versions, features and
# profile: it is built with the same cargo invocation as .ci/run's lab
# build) and only the workspace's own crates compile, without touching
# this tree's target/release. The binary is cached at
# target/reference/<commit>/fleet-lab: a second call builds nothing.
#
# Needs the commit in this clone's history (a shallow clone may lack it:
# fetch it, or record a newer reference).
set -euo pipefail
cd "$(dirname "$0")/.."
record=ci/gate-reference

if [ "${1:-}" = --record ]; then
  head=$(git rev-parse HEAD)
  {
    echo "# The commit whose fleet-lab the paired gates (profiles A and B) measure"
    echo "# the candidate against: the commit a change is based on. Written by"
    echo "# 'ci/reference-lab.sh --record'; built by 'ci/reference-lab.sh'."
    echo "$head"
  } > "$record"
  echo "reference: $head ($(git log -1 --format=%s "$head"))" >&2
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: ci/reference-lab.sh [--record]" >&2; exit 2; }

commit=$(grep -v '^#' "$record" | head -1 | tr -d '[:space:]')
[ -n "$commit" ] || { echo "reference-lab: $record names no commit" >&2; exit 1; }
git cat-file -e "$commit^{commit}" 2>/dev/null || {
  echo "reference-lab: commit $commit of $record is not in this clone's history (fetch it, or record a newer reference)" >&2
  exit 1
}
out=target/reference/$commit
bin=$out/fleet-lab
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
src=target/reference/src-$commit
rm -rf "$src"
mkdir -p "$src"
git archive "$commit" | tar -x -C "$src"
echo "reference-lab: building fleet-lab of $commit ($(git log -1 --format=%s "$commit"))" >&2
target=$(pwd)/target
if [ -d "$target/release" ] && [ ! -d "$target/reference-build/release" ]; then
  mkdir -p "$target/reference-build"
  cp -al "$target/release" "$target/reference-build/release"
fi
(cd "$src" && CARGO_TARGET_DIR="$target/reference-build" cargo build --release -q -p fleet-bench --bin fleet-lab --bench instructions >&2) || {
  echo "reference-lab: the build of $commit failed" >&2
  exit 1
}
mkdir -p "$out"
cp "$target/reference-build/release/fleet-lab" "$bin"
rm -rf "$src"
echo "$bin"
