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
# git archive stamps every file with the commit's time, older than this
# tree's build: cargo would take the seeded workspace artifacts below for
# fresh and the "reference" would be this build. Stamped now, the sources
# are newer than any artifact.
find "$src" -exec touch -h {} +
echo "reference-lab: building fleet-lab of $commit ($(git log -1 --format=%s "$commit"))" >&2
target=$(pwd)/target
if [ -d "$target/release" ] && [ ! -d "$target/reference-build/release" ]; then
  mkdir -p "$target/reference-build"
  cp -al "$target/release" "$target/reference-build/release"
  # Only the dependencies are shared: the workspace's own units (their
  # artifacts, fingerprints and build-script outputs) are unlinked, so the
  # reference's crates compile into new files and this tree's are never
  # written through a shared link.
  names=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
print("|".join(sorted({n for p in json.load(sys.stdin)["packages"] for n in (p["name"], p["name"].replace("-", "_"))})))')
  rel=$target/reference-build/release
  find "$rel" -maxdepth 2 \( -path "$rel/.fingerprint/*" -o -path "$rel/build/*" -o -path "$rel/deps/*" \) \
    -regextype posix-extended -regex ".*/(lib)?($names)-[0-9a-f]{16}([.-].*)?" -prune -exec rm -rf {} +
  find "$rel" -maxdepth 1 -type f -delete
fi
# --workspace and a bench, as ci/lab-build.sh builds: cargo resolves the
# same features (the whole workspace selected, dev-dependencies on), so the
# dependencies as built are reused. Only fleet-lab is needed (the
# reference commit may predate the lab build's other targets).
(cd "$src" && CARGO_TARGET_DIR="$target/reference-build" cargo build --release -q --workspace --bin fleet-lab --bench instructions >&2) || {
  echo "reference-lab: the build of $commit failed" >&2
  exit 1
}
# A binary shared (hard-linked) with this tree's build is this build, not
# the reference: refuse it rather than gate a change against itself.
built=$target/reference-build/release/fleet-lab
if [ -e "$target/release/fleet-lab" ] && [ "$(stat -c %d:%i "$built")" = "$(stat -c %d:%i "$target/release/fleet-lab")" ]; then
  echo "reference-lab: the reference build reused this tree's fleet-lab instead of compiling $commit" >&2
  exit 1
fi
mkdir -p "$out"
cp "$built" "$bin"
rm -rf "$src"
echo "$bin"
