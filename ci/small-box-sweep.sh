#!/usr/bin/env bash
# The small box by population: runs ci/small-box.sh once per population
# (each its own routerd in its own 1-core, 256 MiB group, the same targets,
# sources, threads and seconds), then `fleet-lab route box-plot` prints one
# row per run and draws leases/s, lease p99 and the group's anonymous
# memory peak against the devices registered (docs/router.md, "The small
# box"). A population the box does not survive (routerd OOM-killed) is a
# row and a cross on the plot, not an error; any other failure of a run
# stops the sweep.
#
# usage: ci/small-box-sweep.sh [--populations "1000 10000 100000"]
#                              [--out DIR] [SMALL-BOX ARGS…]
#   defaults: 1,000, 10,000 and 100,000 devices; the runs go to
#   DIR/devices-N (default fleet-lab-out/small-box-sweep) and the plot to
#   DIR/population.svg. The other arguments go to every ci/small-box.sh
#   run (--targets, --sources, --seconds, --fleet, --postgres, -- …).
#
# Needs root and a writable cgroup, as ci/small-box.sh (exit 77 without);
# builds routerd, the load generator and the lab first (ci/lab-build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

populations="1000 10000 100000" out=fleet-lab-out/small-box-sweep pass=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --populations) populations=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --devices) echo "small-box-sweep: give the populations with --populations" >&2; exit 2 ;;
    *) pass+=("$1"); shift ;;
  esac
done
for n in $populations; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "small-box-sweep: population '$n' is not a whole number" >&2; exit 2; }
done

echo "== building routerd, the load generator and the lab (release)"
ci/lab-build.sh >/dev/null
mkdir -p "$out"
dirs=()
for n in $populations; do
  dir=$out/devices-$n
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$n" >"$dir/devices"
  echo
  echo "=== $n devices"
  rc=0
  ci/small-box.sh --devices "$n" --bin target/release --out "$dir" "${pass[@]}" || rc=$?
  [[ $rc == 77 ]] && exit 77
  if [[ $rc != 0 ]] && ! grep -q '^oom_kills [1-9]' "$dir/group.txt" 2>/dev/null; then
    echo "small-box-sweep: the run at $n devices failed (exit $rc) without an OOM kill: see $dir/load.err" >&2
    exit 1
  fi
  dirs+=("$dir")
done
echo
target/release/fleet-lab route box-plot --out "$out/population.svg" "${dirs[@]}"
