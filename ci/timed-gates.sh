#!/usr/bin/env bash
# The timed gate steps of .ci/run (docs/gates.md): profile A in a real
# 2-core cgroup quota and profile B, each paired against the reference
# build, then the comparison in rotated rounds. .ci/run calls it once;
# --repeat runs the steps again and again, as CI runs them, and tabulates
# each run's exit code and wall time (docs/gates.md "Repeated runs").
#
# usage: ci/timed-gates.sh REFERENCE [--inject-slowdown F] [--repeat N] [--out DIR]
#
#   REFERENCE          the reference fleet-lab (ci/reference-lab.sh prints it)
#   --inject-slowdown  slows the candidate's cycle path F× in every step
#                      (the power check: the steps must fail)
#   --repeat           run the steps N times; print a table of the N runs
#                      (each run's log under DIR/run-K.log) and exit 1
#                      unless every run passed (or, with a slowdown
#                      injected, unless every run failed)
#   --out              where the reports and logs go (default fleet-lab-out)
#
# FLEET_LAB names the candidate (default target/release/fleet-lab).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: ci/timed-gates.sh REFERENCE [--inject-slowdown F] [--repeat N] [--out DIR]" >&2; exit 2; }
reference=$1; shift
slowdown=
repeat=
out=fleet-lab-out
while [ $# -gt 0 ]; do
  case $1 in
    --inject-slowdown) slowdown=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
lab=${FLEET_LAB:-target/release/fleet-lab}
[ -x "$lab" ] || { echo "no $lab: build the lab first" >&2; exit 2; }
[ -x "$reference" ] || { echo "no reference $reference: ci/reference-lab.sh builds it" >&2; exit 2; }

if [ -n "$repeat" ]; then
  mkdir -p "$out"
  again=("$0" "$reference" --out "$out")
  [ -z "$slowdown" ] || again+=(--inject-slowdown "$slowdown")
  printf 'run\texit\twall_s\tfailed_step\n'
  passed=0
  for k in $(seq 1 "$repeat"); do
    t0=$(date +%s%N)
    rc=0
    "${again[@]}" >"$out/run-$k.log" 2>&1 || rc=$?
    wall_ms=$((($(date +%s%N) - t0) / 1000000))
    failed=$(grep -o 'gate [AB]: FAIL\|compare gate: FAIL' "$out/run-$k.log" | head -1 || true)
    printf '%s\t%s\t%d.%d\t%s\n' "$k" "$rc" $((wall_ms / 1000)) $((wall_ms % 1000 / 100)) "${failed:--}"
    [ "$rc" -ne 0 ] || passed=$((passed + 1))
  done
  echo "passed $passed of $repeat${slowdown:+ (candidate slowed ${slowdown}×)}"
  if [ -z "$slowdown" ]; then [ "$passed" -eq "$repeat" ]; else [ "$passed" -eq 0 ]; fi
  exit
fi

step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
gate_inject=()
cmp_inject=()
if [ -n "$slowdown" ]; then
  gate_inject=(--inject-slowdown "$slowdown")
  cmp_inject=(--inject-fleet-slowdown "$slowdown")
fi

step "profile A: auto on the runner, paired against the reference, in a real 2-core cgroup quota"
# The gate makes the cgroup itself and fails where it cannot, unless
# FLEET_GATE_ALLOW_NO_CGROUP=1 allows running without the throttle gate (a
# runner that silently lost the cpu controller is noticed).
if [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  echo "cgroup v1 cpu controller writable: every block runs inside a 2-core quota the lab makes"
elif [ "${FLEET_GATE_ALLOW_NO_CGROUP:-}" = 1 ]; then
  echo "cgroup v1 cpu controller not writable here; FLEET_GATE_ALLOW_NO_CGROUP=1: the throttle gate is SKIPPED"
fi
"$lab" gate --profile A --reference "$reference" --quiet --out "$out/gate-A" "${gate_inject[@]}"

step "profile B: forced pinned, paired against the reference"
"$lab" gate --profile B --reference "$reference" --quiet --out "$out/gate-B" "${gate_inject[@]}"

step "comparison: fleet auto against the designs it replaces, in rotated rounds, and paired with the reference (ci/budgets.toml [compare])"
read -r cmp_scale cmp_cycles cmp_rate < <(python3 -c '
import tomllib; c = tomllib.load(open("ci/budgets.toml", "rb"))["compare"]; print(c["scale"], c["cycles"], c["rate"])')
# Rounds and the sign test's level come from the [compare] table; a host
# stall in one round does not decide it (docs/gates.md "The comparison").
# Each round's fleet auto is also paired with the reference's
# ([compare.reference]): the timed figure CI gates is the fleet against its
# own previous build, not against the baselines. The host floor (the
# co-tenant alone, one more run a round) is left out: no limit judges it.
"$lab" compare --gate --quiet --no-host-floor --scale "$cmp_scale" --cycles "$cmp_cycles" --rate "$cmp_rate" \
  --reference "$reference" --out "$out/ci-compare" --force "${cmp_inject[@]}"
