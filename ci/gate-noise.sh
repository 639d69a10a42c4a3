#!/usr/bin/env bash
# Measures the noise the gate limits are set from: RUNS runs (default 10) of
# each named gate, on a quiet host, printed as the markdown tables of
# docs/gates.md with the worst value of each gated figure.
#
# usage: ci/gate-noise.sh [RUNS] [A] [B] [compare]
#
#   A        fleet-lab gate --profile A (inside a real 2-core cgroup quota
#            where the cpu controller is writable, as .ci/run runs it)
#   B        fleet-lab gate --profile B
#   compare  fleet-lab compare at the [compare] table's scale, cycles and
#            rate: per run, fleet auto's cycle p99 over the best baseline's
#            and the pile of pools', its co-tenant p99 over the worst
#            (largest) ratio to a baseline, its peak runnable above ⌊Q⌋
#
# The runs' own pass/fail is ignored (the limits are what is being set).
# Needs a release build of fleet-lab (cargo build --release --bin fleet-lab).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
shift || true
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(A B compare)
lab=${FLEET_LAB:-target/release/fleet-lab}
[ -x "$lab" ] || { echo "no $lab: cargo build --release --bin fleet-lab" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"

cgroup=()
if [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  cgroup=(--cgroup-quota 2)
fi

for w in "${which[@]}"; do
  case $w in
    A|B)
      extra=()
      [ "$w" = A ] && extra=("${cgroup[@]}")
      for i in $(seq 1 "$runs"); do
        "$lab" gate --profile "$w" --quiet "${extra[@]}" --out "$out/$w-$i" --force >/dev/null 2>&1 || true
      done
      python3 - "$out" "$w" "$runs" <<'EOF'
import json, sys, os
out, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(f"\n## Profile {w}\n")
print("| run | p50 ms | p95 ms | p99 ms | max ms | ÷plan lb p95 | ÷plan lb p99 | ÷process lb p99 | co-tenant p99 µs | threads created | peak runnable | CPU s | saturated | parity |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
worst = [0.0, 0.0]
for i in range(1, n + 1):
    p = os.path.join(out, f"{w}-{i}", "report.json")
    if not os.path.exists(p):
        print(f"| {i} | (no report) |"); continue
    r = json.load(open(p))
    m, lb, pb = r["makespan_ms"], r["makespan_over_lower_bound"], r["makespan_over_process_bound"]
    co = r.get("cotenant_lateness_us") or {}
    worst = [max(worst[0], lb["p95"]), max(worst[1], lb["p99"])]
    print(f"| {i} | {m['p50']:.1f} | {m['p95']:.1f} | {m['p99']:.1f} | {m['max']:.1f} | {lb['p95']:.2f} | {lb['p99']:.2f} | {pb['p99']:.2f} | {co.get('p99', 0):.0f} | {r['threads']['created_during_run']} | {r['threads']['peak_runnable']} | {r['cpu_seconds']:.2f} | {'yes' if r.get('saturation') else 'no'} | {'ok' if r['parity'] else 'FAIL'} |")
print(f"\nWorst ÷plan lb: p95 {worst[0]:.2f}, p99 {worst[1]:.2f}")
EOF
      ;;
    compare)
      read -r scale cycles rate < <(python3 - <<'EOF'
import tomllib
c = tomllib.load(open("ci/budgets.toml", "rb"))["compare"]
print(c["scale"], c["cycles"], c["rate"])
EOF
)
      for i in $(seq 1 "$runs"); do
        "$lab" compare --quiet --scale "$scale" --cycles "$cycles" --rate "$rate" --out "$out/compare-$i" --force >/dev/null 2>&1 || true
      done
      python3 - "$out" "$runs" "$scale" "$cycles" "$rate" <<'EOF'
import json, sys, os, math
out, n = sys.argv[1], int(sys.argv[2])
print(f"\n## Comparison (scale {sys.argv[3]}, {sys.argv[4]} cycles, rate {sys.argv[5]})\n")
print("| run | fleet p99 ms | best baseline (p99 ms) | pile p99 ms | ÷best | ÷pile | fleet co-tenant p99 µs | worst co-tenant ratio (baseline) | peak runnable − ⌊Q⌋ | threads created | saturated | parity |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
worst = {"best": 0.0, "pile": 0.0, "co": 0.0, "run": -99}
for i in range(1, n + 1):
    p = os.path.join(out, f"compare-{i}", "compare.json")
    if not os.path.exists(p):
        print(f"| {i} | (no report) |"); continue
    runs = json.load(open(p))["runs"]
    f = next(r for r in runs if r["label"] == "fleet auto")
    bases = [r for r in runs if r["profile"] == "baseline"]
    best = min(bases, key=lambda r: r["makespan_ms"]["p99"])
    pile = next(r for r in bases if r["label"] == "pile of pools")
    fp = f["makespan_ms"]["p99"]
    rb, rp = fp / best["makespan_ms"]["p99"], fp / pile["makespan_ms"]["p99"]
    fco = (f.get("cotenant_lateness_us") or {}).get("p99", float("nan"))
    cos = [(fco / b["cotenant_lateness_us"]["p99"], b["label"]) for b in bases if b.get("cotenant_lateness_us")]
    co, col = max(cos) if cos else (float("nan"), "-")
    q = f["machine"]["quota"] or f["machine"]["cpus"]
    over = f["threads"]["peak_runnable"] - math.floor(q)
    worst = {"best": max(worst["best"], rb), "pile": max(worst["pile"], rp), "co": max(worst["co"], co), "run": max(worst["run"], over)}
    sat = any(r.get("saturation") for r in runs if r["profile"] != "baseline")
    par = all(r["parity"] for r in runs)
    print(f"| {i} | {fp:.1f} | {best['label']} ({best['makespan_ms']['p99']:.1f}) | {pile['makespan_ms']['p99']:.1f} | {rb:.2f} | {rp:.2f} | {fco:.0f} | {co:.2f} ({col}) | {over} | {f['threads']['created_during_run']} | {'yes' if sat else 'no'} | {'ok' if par else 'FAIL'} |")
print(f"\nWorst: ÷best {worst['best']:.2f}, ÷pile {worst['pile']:.2f}, co-tenant ratio {worst['co']:.2f}, peak runnable − ⌊Q⌋ {worst['run']}")
EOF
      ;;
    *) echo "unknown gate $w: give A, B or compare" >&2; exit 2 ;;
  esac
done
