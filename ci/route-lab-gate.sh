#!/usr/bin/env bash
# The routing lab's own targets, checked over several seeds (docs/routing-lab.md):
#
#   - politeness violations 0: no contender is granted more than a host's
#     true limit allows, in every scenario;
#   - budget-saturation: no capped pool's window over its cap (the router);
#   - adapter-bug: the router raises the adapter event, on the bugged source
#     only, and none on the control world without the bug; no device ends
#     with a trust loss the world's truth attributes to the bug (or cannot
#     explain);
#   - liars: every row the router settled is correct (correct-row fraction 1).
#
# usage: ci/route-lab-gate.sh [SEEDS] [OUT]   (default seeds "1 2 3")
#
# ROUTE_LAB_CONTENDERS (default router,flat-thompson,fixed-quorum) names the
# contenders; .ci/run gives `router` alone (one seed with all three took
# 4 min on 2 cores).
#
# Each check prints what it read; any failure fails the script (after every
# seed ran, naming each). Needs a release build of fleet-lab; FLEET_LAB
# names another.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-1 2 3}
out=${2:-fleet-lab-out/route-lab-gate}
lab=${FLEET_LAB:-target/release/fleet-lab}
[ -x "$lab" ] || { echo "no $lab: cargo build --release --bin fleet-lab" >&2; exit 2; }
mkdir -p "$out"
# The simulations are independent and each a pure function of its seed:
# they run ROUTE_LAB_JOBS at a time (default: the CPUs), so the figures do
# not depend on it.
export lab out contenders=${ROUTE_LAB_CONTENDERS:-router,flat-thompson,fixed-quorum}
for seed in $seeds; do
  for scenario in steady liars adapter-bug budget-saturation; do
    echo "$scenario $seed"
  done
done | xargs -P "${ROUTE_LAB_JOBS:-$(nproc)}" -L 1 bash -c '
  "$lab" route sim --scenario "$0" --seed "$1" --contenders "$contenders" \
    --quiet --out "$out/$0-$1" --force > "$out/$0-$1.txt" 2>&1 || { echo "route sim $0 at seed $1 failed:"; cat "$out/$0-$1.txt"; exit 255; }'

python3 - "$out" $seeds <<'PY'
import json, sys
out, seeds = sys.argv[1], sys.argv[2:]
failed = []
def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failed.append(what)
for seed in seeds:
    print(f"seed {seed}:")
    for scenario in ["steady", "liars", "adapter-bug", "budget-saturation"]:
        r = json.load(open(f"{out}/{scenario}-{seed}/report.json"))
        by = {c["name"]: c for c in r["contenders"]}
        for name, c in by.items():
            check(c["politeness_violations"] == 0,
                  f"{scenario}: {name} politeness violations {c['politeness_violations']} (must be 0)")
        router = by["router"]
        if scenario == "budget-saturation":
            over = router["budget"]["over_cap"]
            check(sum(over.values()) == 0 and len(router["budget"]["windows"]) > 0,
                  f"{scenario}: router windows over cap {over} of {len(router['budget']['windows'])} closed windows (must be none)")
        if scenario == "adapter-bug":
            ev = router["event"]["adapter_events"]
            sources = sorted({e[1] for e in ev})
            check(len(ev) > 0 and sources == ["src-1"],
                  f"{scenario}: router adapter events on {sources or 'no source'} (must be src-1 only)")
            lost = [(d["device"], l["cause"]) for d in router["event"].get("lower_devices", [])
                    for l in d["losses"] if l["cause"] in ("bug", "unexplained")]
            check(not lost,
                  f"{scenario}: router trust losses from the bug or unexplained, not won back: {lost or 'none'} (must be none)")
            ctl = (r.get("control") or {}).get("adapter_events")
            check(ctl is not None and len(ctl) == 0,
                  f"{scenario}: adapter events on the control world without the bug: {ctl} (must be none)")
        if scenario == "liars":
            check(router["correct_fraction"] == 1.0 and router["settled"] > 0,
                  f"{scenario}: router correct-row fraction {router['correct_fraction']:.4f} of {router['settled']} settled rows (must be 1)")
if failed:
    print(f"route lab gate: FAIL ({len(failed)} check(s)): " + "; ".join(failed))
    sys.exit(1)
print(f"route lab gate: PASS (seeds {' '.join(seeds)})")
PY
