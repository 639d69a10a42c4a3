#!/usr/bin/env bash
# The routing lab against the service: one scenario run in process and
# against a real routerd over loopback HTTP (SQLite; and PostgreSQL when a
# postgres:// URL is given), each started by the lab on its manual clock.
# Every figure but wall-clock timing must be equal: the lab moves routerd's
# clock to each request's simulated time, so the same seed makes the same
# decisions (docs/routing-lab.md, "The service end to end"). Prints each
# run's wall time and the service's request rate.
# ROUTE_HTTP_DEVICES and ROUTE_HTTP_HOURS size the world (default 60
# devices, 0.5 h). ROUTE_HTTP_SQLITE=0 leaves the SQLite run out (the PostgreSQL step of
# .ci/run: its tests step already runs every scenario over routerd on
# SQLite, route-lab::service).
# Needs target/release/fleet-lab and target/release/routerd (ci/lab-build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
lab=target/release/fleet-lab
routerd=target/release/routerd
for b in "$lab" "$routerd"; do
  [ -x "$b" ] || { echo "$b is missing: run ci/lab-build.sh" >&2; exit 1; }
done
url=${1:-}
if [ "${ROUTE_HTTP_SQLITE:-1}" = 0 ] && [ -z "$url" ]; then
  echo "route-http: nothing to compare (ROUTE_HTTP_SQLITE=0 and no postgres:// URL)" >&2
  exit 2
fi
out=$(mktemp -d /tmp/route-http.XXXXXX)
trap 'rm -rf "$out"' EXIT
args=(route sim --scenario "${ROUTE_HTTP_SCENARIO:-liars}" --devices "${ROUTE_HTTP_DEVICES:-60}"
  --hours "${ROUTE_HTTP_HOURS:-0.5}" --seed 3 --quiet)
"$lab" "${args[@]}" --contenders router --out "$out/in-process" | sed -n 1,4p
runs=()
if [ "${ROUTE_HTTP_SQLITE:-1}" != 0 ]; then
  runs+=(sqlite)
  "$lab" "${args[@]}" --http --routerd "$routerd" --out "$out/sqlite" | sed -n 1,4p
fi
if [ -n "$url" ]; then
  runs+=(postgres)
  "$lab" "${args[@]}" --http --routerd "$routerd" --store "$url" --out "$out/postgres" | sed -n 1,4p
fi
for run in "${runs[@]}"; do
  python3 - "$out/in-process/report.json" "$out/$run/report.json" "$run" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
run = sys.argv[3]
wall = (a["contenders"][0]["timing"]["wall_s"], b["contenders"][0]["timing"]["wall_s"])
for r in (a, b):
    r.pop("transport", None)
    for c in r["contenders"]:
        c.pop("timing", None)
if a != b:
    ca, cb = a["contenders"][0], b["contenders"][0]
    diff = [k for k in ca if ca[k] != cb.get(k)]
    sys.exit(f"over routerd ({run}) the figures differ from in-process: {diff}")
c = a["contenders"][0]
print(f"{run}: the same figures as in-process ({c['attempts']} attempts, {c['settled']} settled rows); "
      f"wall {wall[0]:.1f} s in-process, {wall[1]:.1f} s over routerd "
      f"({a['hours'] * 3600 / wall[1]:.0f}x simulated time)")
PY
done
