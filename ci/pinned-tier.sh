#!/usr/bin/env bash
# The fleet's pinned tier at a real 8-core quota: the comparison of
# docs/lab.md ("The pinned tier at an 8-core quota") on a host with at
# least 9 cores, where `auto` plans the pinned binding (a 2-core host only
# ever plans serial).
#
# usage: ci/pinned-tier.sh [FLEET_LAB] [OUT_DIR]
#   FLEET_LAB  a release fleet-lab binary (default target/release/fleet-lab)
#   OUT_DIR    where the host state, the log and the reports go
#              (default fleet-lab-out/pinned-tier)
#
# Each comparison runs inside a child cgroup with an 8-core CPU quota
# (`--cgroup-quota 8`, needs root and a writable cpu controller). Where the
# controller is not writable it says so and runs on 8 CPUs of an affinity
# mask with `--quota 8` instead (the plan is the same; the kernel's
# throttling is then not in the figures). Every step has its own time
# limit, and the reports are packed after each step, so a cut-short run
# still leaves what finished.
set -uo pipefail
cd "$(dirname "$0")/.."
lab=${1:-target/release/fleet-lab}
out=${2:-fleet-lab-out/pinned-tier}
# PINNED_TIER_QUOTA (default 8) and PINNED_TIER_STEPS (a space-separated
# subset of the step names below) shrink the run for a smaller host.
quota=${PINNED_TIER_QUOTA:-8}
steps=${PINNED_TIER_STEPS:-scale0.1-stress scale0.1-live scale1-stress}
mkdir -p "$out/reports"
log="$out/log.txt"
: >"$log"
say() { printf '%s\n' "$*" | tee -a "$log"; }

say "== host state ($(date -u +%FT%TZ))"
{
  echo "cpus: $(nproc) online of $(nproc --all)"
  grep -m1 'model name' /proc/cpuinfo
  echo "kernel: $(uname -r)"
  for f in /sys/devices/system/cpu/cpuidle/current_driver /sys/devices/system/cpu/cpuidle/current_governor \
    /sys/devices/system/clocksource/clocksource0/current_clocksource /sys/kernel/mm/transparent_hugepage/enabled; do
    printf '%s: %s\n' "$f" "$(cat "$f" 2>/dev/null || echo unreadable)"
  done
  echo "cgroup mounts:"; grep cgroup /proc/mounts || echo "  none"
  echo "loadavg: $(cat /proc/loadavg)"
  echo "cpu line of /proc/stat (user nice system idle iowait irq softirq steal): $(head -1 /proc/stat)"
} 2>&1 | tee -a "$log"

if [ "$(nproc)" -le "${quota%.*}" ]; then
  say "this host has $(nproc) CPUs: a ${quota}-core quota needs at least one more (left to the host)"
  exit 2
fi

say "== plans"
"$lab" plan 2>&1 | tee -a "$log"
"$lab" plan --quota "$quota" 2>&1 | tee -a "$log"

# Whether a child cgroup can be made under the cpu controller (v1 or v2).
cpu_writable() {
  local base d
  for base in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup; do
    [ -e "$base/cpu.cfs_quota_us" ] || [ -e "$base/cgroup.subtree_control" ] || continue
    d="$base/fleet-lab-probe-$$"
    if mkdir "$d" 2>/dev/null; then rmdir "$d"; return 0; fi
  done
  return 1
}
quota_args=(--cgroup-quota "$quota")
wrap=()
if cpu_writable; then
  say "comparisons run in a child cgroup with a ${quota}-core quota"
else
  say "the cpu controller is not writable here: ${quota} CPUs of an affinity mask and --quota ${quota} instead of a cgroup quota"
  quota_args=(--quota "$quota")
  wrap=(taskset -c "0-$((${quota%.*} - 1))")
fi

pack() { tar -C "$out" -czf "$out/reports.tar.gz" reports 2>/dev/null; }

# compare NAME SECONDS ARGS...
compare() {
  local name=$1 secs=$2
  shift 2
  case " $steps " in *" $name "*) ;; *) return 0 ;; esac
  say "== $name: compare $* (limit ${secs}s, $(date -u +%T))"
  local t0=$SECONDS
  timeout --signal=INT "$secs" "${wrap[@]}" "$lab" compare "${quota_args[@]}" --quiet --force \
    --out "$out/reports/$name" "$@" 2>&1 | tee -a "$log"
  say "-- $name: exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s; /proc/stat: $(head -1 /proc/stat)"
  pack
}

compare scale0.1-stress 190 --scale 0.1 --cycles 50 --rounds 5 --rate stress
compare scale0.1-live 170 --scale 0.1 --cycles 25 --rounds 3 --rate live
compare scale1-stress 190 --scale 1 --cycles 8 --rounds 3 --rate stress
say "== done ($(date -u +%T))"
