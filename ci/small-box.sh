#!/usr/bin/env bash
# routerd in a small box: one routerd inside a real cgroup (CPU quota 1
# core, memory limit 256 MiB, no swap for the group), on CPU 0; the load
# generator (router's `lease_load` example) outside it, on CPU 1. Prints
# the load's figures, the group's own figures (throttling, peak memory,
# OOM events) and a pass/fail line against the targets of docs/router.md
# ("The small box"). A benchmark, not a timed test: the pass/fail line
# reports, it does not gate.
#
# usage: ci/small-box.sh [--devices N] [--targets N] [--sources N]
#                        [--threads T] [--seconds S] [--cpus C] [--mem-mib M]
#                        [--out DIR] [--store postgres://… SCHEMA | --postgres]
#                        [--bin DIR] [--check] [--fleet] [-- ROUTERD ARGS…]
#   defaults: 100,000 devices, 1,000,000 targets on 10,000 sources,
#   8 client threads, 60 s, a 1-core quota, 256 MiB; the report goes to
#   fleet-lab-out/small-box (report.json from the load generator, group.txt
#   with the cgroup's figures, summary.txt). --bin DIR takes `routerd` and
#   `examples/lease_load` from DIR instead of building them (a before/after
#   comparison alternates two such directories in one sitting).
#   --postgres: routerd's store is a PostgreSQL server this script starts
#   (a throwaway cluster, ci/pg-cluster.sh) outside the box, in a cgroup of
#   its own whose CPU time over the run is reported; --store uses a server
#   of yours instead (its CPU is not measured).
#   After --, arguments for routerd itself (--max-connections N,
#   --max-held-polls N: a connection kept alive holds about 23 KB, one
#   holding a long poll 26 KB; ci/conn-census.py).
#   --fleet: the devices behave as a crawling fleet's do (one task each,
#   long polls, the routing lab's latency per item, refusals waited out;
#   THREADS is then the load's runtime workers), instead of client threads
#   asking as fast as answers come.
#   At the end routerd is killed with SIGKILL and every deposit it
#   acknowledged is looked for in its store. --check (CI) exits 1 when
#   the load failed, routerd was OOM-killed, the group's anonymous memory
#   reached the limit or an acknowledged deposit is missing; it asserts
#   no timing.
#
# Needs root and a writable cgroup (v1 `cpu` and `memory` controllers, or
# v2 with the cpu and memory controllers enabled); without one it says so
# and exits 77 (bad arguments exit 2). Builds routerd and the load
# generator (release, the workspace's selection, so the test build's
# dependencies are reused) first, unless --bin is given.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

devices=100000 targets=1000000 sources=10000 threads=8 seconds=60
cpus=1 mem_mib=256 out=fleet-lab-out/small-box store=() bin= check=0 fleet=() routerd_args=() postgres=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --devices) devices=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --sources) sources=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --mem-mib) mem_mib=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --store) store=("$2" "$3"); shift 3 ;;
    --postgres) postgres=1; shift ;;
    --bin) bin=$(cd "$2" && pwd); shift 2 ;;
    --check) check=1; shift ;;
    --fleet) fleet=(--fleet); shift ;;
    --) shift; routerd_args=(-- "$@"); break ;;
    *) echo "small-box: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ $postgres == 0 || ${#store[@]} == 0 ]] || { echo "small-box: --postgres starts its own server; --store names yours: give one" >&2; exit 2; }
for n in "$devices" "$targets" "$sources" "$threads" "$mem_mib"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "small-box: '$n' is not a whole number" >&2; exit 2; }
done
[[ "$cpus" =~ ^[0-9]+(\.[0-9]+)?$ && "$seconds" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  { echo "small-box: --cpus and --seconds take numbers" >&2; exit 2; }

# The group: v1 (cpu and memory hierarchies) or v2 (one unified one).
name="small-box-$$"
if [[ -w /sys/fs/cgroup/cpu && -w /sys/fs/cgroup/memory && -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
  kind=v1
  cpu_dir=/sys/fs/cgroup/cpu/$name
  mem_dir=/sys/fs/cgroup/memory/$name
elif [[ -e /sys/fs/cgroup/cgroup.subtree_control ]] && grep -qw memory /sys/fs/cgroup/cgroup.subtree_control &&
  grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control && [[ -w /sys/fs/cgroup ]]; then
  kind=v2
  cpu_dir=/sys/fs/cgroup/$name
  mem_dir=$cpu_dir
else
  echo "small-box: no writable cgroup (v1 cpu+memory or v2 with both controllers): cannot build the box here" >&2
  exit 77
fi

if [[ -z "$bin" ]]; then
  echo "== building routerd and the load generator (release)"
  cargo build --release -q --workspace --bin routerd --example lease_load
  bin=$repo/target/release
fi
[[ -x "$bin/routerd" && -x "$bin/examples/lease_load" ]] ||
  { echo "small-box: no routerd and examples/lease_load in $bin" >&2; exit 2; }

mkdir -p "$out"
work=$(mktemp -d)
cleanup() {
  # Processes still in the group (a routerd left behind) are killed first.
  for d in "$cpu_dir" "$mem_dir"; do
    [[ -e "$d/cgroup.procs" ]] && xargs -r kill -9 <"$d/cgroup.procs" 2>/dev/null || true
  done
  sleep 0.2
  rmdir "$cpu_dir" 2>/dev/null || true
  [[ "$mem_dir" != "$cpu_dir" ]] && rmdir "$mem_dir" 2>/dev/null || true
  if [[ $postgres == 1 ]]; then
    pg_cluster_stop
    rmdir "$pg_group" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

period=100000
quota=$(awk -v c="$cpus" -v p="$period" 'BEGIN { printf "%d", c * p }')
limit=$((mem_mib * 1024 * 1024))
if [[ $kind == v1 ]]; then
  mkdir "$cpu_dir" "$mem_dir"
  echo "$period" >"$cpu_dir/cpu.cfs_period_us"
  echo "$quota" >"$cpu_dir/cpu.cfs_quota_us"
  echo "$limit" >"$mem_dir/memory.limit_in_bytes"
  # No swap for the group: memory plus swap limited to the memory limit.
  if [[ -e "$mem_dir/memory.memsw.limit_in_bytes" ]]; then
    echo "$limit" >"$mem_dir/memory.memsw.limit_in_bytes"
  fi
  echo 0 >"$mem_dir/memory.swappiness"
else
  mkdir "$cpu_dir"
  echo "$quota $period" >"$cpu_dir/cpu.max"
  echo "$limit" >"$cpu_dir/memory.max"
  [[ -e "$cpu_dir/memory.swap.max" ]] && echo 0 >"$cpu_dir/memory.swap.max"
fi

# --postgres: the server outside the box, in a group of its own (no
# quota, no limit: only its CPU time is read), on whichever CPU is free.
cpu_groups=()
if [[ $postgres == 1 ]]; then
  . ci/pg-cluster.sh
  pg_group=$([[ $kind == v1 ]] && echo /sys/fs/cgroup/cpuacct || echo /sys/fs/cgroup)/small-box-pg-$$
  mkdir "$pg_group"
  pg_cluster_init small-box-pg || exit 1
  pg_cluster_start "" "$pg_group"
  store=("postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable" small_box)
  cpu_groups=(--cpu-group "$pg_group")
  echo "== store: PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$pg_port, outside the box (its CPU measured in $pg_group)"
fi

# routerd enters the group before it execs, on CPU 0; the load generator
# starts it through $ROUTERD and runs on CPU 1 (where there is one).
last_cpu=$(($(nproc) - 1))
load_cpu=$((last_cpu >= 1 ? 1 : 0))
cat >"$work/routerd" <<EOF
#!/bin/sh
echo \$\$ >"$cpu_dir/cgroup.procs"
[ "$mem_dir" = "$cpu_dir" ] || echo \$\$ >"$mem_dir/cgroup.procs"
exec taskset -c 0 "$bin/routerd" "\$@"
EOF
chmod +x "$work/routerd"

echo "== box: $kind cgroup, CPU quota $cpus core(s), memory $mem_mib MiB, no swap; routerd on CPU 0, load on CPU $load_cpu"
echo "== load: $devices devices, $targets targets on $sources sources, $threads threads, $seconds s${store:+, store ${store[0]}}"
# The kernel keeps the group's peak of all its memory, page cache
# included (the store's writes); its anonymous memory (the heap: what an
# OOM kill is about) has no peak counter, so it is sampled every 0.25 s.
anon_key=$([[ $kind == v1 ]] && echo total_rss || echo anon)
(
  peak_anon=0
  while :; do
    a=$(awk -v k="$anon_key" '$1 == k { print $2 }' "$mem_dir/memory.stat" 2>/dev/null || echo 0)
    ((${a:-0} > peak_anon)) && peak_anon=$a && echo "$peak_anon" >"$work/peak_anon"
    sleep 0.25
  done
) &
sampler=$!
# A fleet holds a connection per waiting device, on both ends.
if [[ ${#fleet[@]} -gt 0 ]]; then
  want=$((devices * 2 + 4096))
  (( $(ulimit -n) >= want )) || ulimit -n "$want" 2>/dev/null ||
    echo "small-box: could not raise the open-file limit to $want (it is $(ulimit -n))" >&2
fi
ROUTERD="$work/routerd" taskset -c "$load_cpu" "$bin/examples/lease_load" \
  --targets "$targets" --sources "$sources" "${fleet[@]}" "${cpu_groups[@]}" "$devices" "$threads" "$seconds" "${store[@]}" "${routerd_args[@]}" \
  >"$out/report.json" 2>"$out/load.err" || {
  echo "small-box: the load failed:" >&2
  tail -5 "$out/load.err" >&2
  load_failed=1
}

kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true

# The group's own figures.
if [[ $kind == v1 ]]; then
  read_stat() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
  periods=$(read_stat "$cpu_dir/cpu.stat" nr_periods)
  throttled=$(read_stat "$cpu_dir/cpu.stat" nr_throttled)
  throttled_ms=$(($(read_stat "$cpu_dir/cpu.stat" throttled_time) / 1000000))
  peak=$(cat "$mem_dir/memory.max_usage_in_bytes")
  oom=$(read_stat "$mem_dir/memory.oom_control" oom_kill)
  failcnt=$(cat "$mem_dir/memory.failcnt")
else
  read_stat() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
  periods=$(read_stat "$cpu_dir/cpu.stat" nr_periods)
  throttled=$(read_stat "$cpu_dir/cpu.stat" nr_throttled)
  throttled_ms=$(($(read_stat "$cpu_dir/cpu.stat" throttled_usec) / 1000))
  peak=$(cat "$cpu_dir/memory.peak" 2>/dev/null || echo 0)
  oom=$(read_stat "$cpu_dir/memory.events" oom_kill)
  failcnt=$(read_stat "$cpu_dir/memory.events" max)
fi
{
  echo "cgroup $kind"
  echo "cpu_quota_cores $cpus"
  echo "memory_limit_bytes $limit"
  echo "nr_periods ${periods:-0}"
  echo "nr_throttled ${throttled:-0}"
  echo "throttled_ms ${throttled_ms:-0}"
  echo "memory_peak_bytes ${peak:-0}"
  echo "anon_peak_bytes_sampled $(cat "$work/peak_anon" 2>/dev/null || echo 0)"
  echo "memory_limit_hits ${failcnt:-0}"
  echo "oom_kills ${oom:-0}"
} >"$out/group.txt"

python3 - "$out" "$devices" "$mem_mib" "${load_failed:-0}" "$check" <<'PY' | tee "$out/summary.txt"
import json, sys
out, devices, mem_mib, failed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
check = sys.argv[5] == "1"
g = dict(l.split(None, 1) for l in open(f"{out}/group.txt").read().splitlines())
g = {k: v.strip() for k, v in g.items()}
peak = int(g["memory_peak_bytes"]) / 2**20
anon = int(g["anon_peak_bytes_sampled"]) / 2**20
print(f"group: peak memory {peak:.1f} MiB of {mem_mib} (page cache included), anonymous {anon:.1f} MiB at most (sampled); "
      f"{g['nr_throttled']} of {g['nr_periods']} periods throttled ({g['throttled_ms']} ms); "
      f"limit hits {g['memory_limit_hits']}; OOM kills {g['oom_kills']}")
if failed:
    print("FAIL: the load did not finish (routerd refused the setup, or was killed: see load.err)")
    sys.exit(1)
r = json.load(open(f"{out}/report.json"))
ms = lambda us: us / 1000
print(f"registration: {r['devices']} devices in {r['registration_s']:.1f} s ({r['registrations_per_s']:.0f}/s); "
      f"registered again during the run, their liveness lapsed: {r.get('registered_again', 0)}")
print(f"routerd CPU: {r['routerd_cpu_s']:.1f} s over {r['seconds']:.0f} s ({r['routerd_cpu_s'] / r['seconds']:.2f} cores); "
      f"load generator CPU: {r.get('load_cpu_s', 0.0):.1f} s ({r.get('load_cpu_s', 0.0) / r['seconds']:.2f} cores)")
for pg_cpu in r.get("group_cpu_s", []):
    print(f"PostgreSQL CPU (outside the box, every backend): {pg_cpu:.1f} s over {r['seconds']:.0f} s ({pg_cpu / r['seconds']:.2f} cores)")
if r["fleet"]:
    print(f"fleet: every device long-polls, works each item for the world's latency, waits out refusals; "
          f"{r['empty_leases']} leases answered empty (held to the end of their wait); the figures below are leases with items")
print(f"leases: {r['leases_per_s']:.0f}/s; p50 {ms(r['lease_us'][0]):.2f} ms, p99 {ms(r['lease_us'][2]):.2f} ms, "
      f"p99.9 {ms(r['lease_p999_us']):.2f} ms, max {ms(r['lease_us'][3]):.1f} ms")
print(f"deposits: {r['deposits_per_s']:.0f}/s; p50 {ms(r['deposit_us'][0]):.2f} ms, p99 {ms(r['deposit_us'][2]):.2f} ms, "
      f"p99.9 {ms(r['deposit_p999_us']):.2f} ms, max {ms(r['deposit_us'][3]):.1f} ms; errors {r['errors']}"
      + "".join(f"; {n} {k}" for k, n in r.get("errors_by_kind", {}).items()))
print(f"routerd RSS {r['rss_kib'][0] / 1024:.0f} → {r['rss_kib'][1] / 1024:.0f} MiB; data {r['store_bytes'][0] / 2**20:.0f} → {r['store_bytes'][1] / 2**20:.0f} MiB; "
      f"largest snapshot {r['snapshot_bytes'] / 2**20:.1f} MiB")
if r.get("connections"):
    most, least = r["connections"]
    print(f"connections (routerd's /metrics every 50 ms): at most {most} open; cap as low as {least}")
held = r.get("store_max_us", {})
if held:
    ops = sorted({k.split(" ", 1)[1] for k in held})
    print("store, longest over routerd's life (wait / hold, ms): "
          + "; ".join(f"{op} {ms(held.get('wait ' + op, 0)):.1f} / {ms(held.get('hold ' + op, 0)):.1f}" for op in ops))
durable = r["acknowledged_checked"] == r["deposits"] and r["acknowledged_lost"] == 0
print(f"durability: routerd killed with SIGKILL; {r['acknowledged_checked']} of {r['deposits']} acknowledged deposits "
      f"looked for in the store, {r['acknowledged_lost']} missing")
checks = [
    ("leases/s ≥ 10,000", r["leases_per_s"] >= 10_000),
    ("lease p99 ≤ 5 ms", r["lease_us"][2] <= 5_000),
    (f"anonymous memory < {mem_mib} MiB", anon < mem_mib),
    ("no OOM kill", int(g["oom_kills"] or 0) == 0),
    ("no request refused", r["errors"] == 0),
    ("every acknowledged deposit in the store", durable),
]
print("targets: " + "; ".join(f"{name} {'pass' if ok else 'FAIL'}" for name, ok in checks))
if check:
    # CI: memory and durability only, never a timing.
    gate = [checks[2], checks[3], checks[5]]
    bad = [name for name, ok in gate if not ok]
    print("check: " + ("FAIL: " + "; ".join(bad) if bad else "pass (memory under the limit, no OOM kill, no acknowledged deposit lost)"))
    sys.exit(1 if bad else 0)
PY
