#!/usr/bin/env bash
# Checks routerd's operator page in headless Chromium: starts routerd on a
# free loopback port with a throwaway data directory, writes facts, runs a
# device through a lease and a deposit, then loads `GET /` in Chromium and
# checks that the page's script rendered the field (source row, prices,
# population, status line). Installs Debian's chromium if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

ci/install-chromium.sh

# ROUTERD names a routerd already built (.ci/run builds it with the lab);
# without it, it is built here.
routerd=${ROUTERD:-}
if [ -z "$routerd" ]; then
  cargo build --release -q -p router --bin routerd
  routerd=target/release/routerd
fi
work=$(mktemp -d)
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$routerd" --data "$work/data" --listen 127.0.0.1:0 --tick-ms 100 \
  --operator-key page-key --registration-token page-token >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
base=$(sed -n 's/^routerd listening on //p' "$work/out")
[ -n "$base" ] || { cat "$work/err"; echo "routerd did not start"; exit 1; }

curl -sf -X PUT "$base/v1/facts" -H 'x-operator-key: page-key' -H 'content-type: application/json' -d '{
  "sources": [{"source": "acme-board", "host": "jobs.acme.example", "binding": "html-v2"}],
  "targets": [{"target": "acme-1", "source": "acme-board"}, {"target": "acme-2", "source": "acme-board"}]}' >/dev/null
secret=$(curl -sf -X POST "$base/v1/register" -H 'content-type: application/json' -d '{"device_id": "tab-1", "archetype": "browser",
  "adapter_version": "1", "registration_token": "page-token"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["device_secret"])')
sleep 0.3
lease=$(curl -sf -X POST "$base/v1/lease" -H 'content-type: application/json' -d "{\"device_id\": \"tab-1\", \"device_secret\": \"$secret\", \"max_items\": 2}")
python3 - "$base" "$secret" "$lease" <<'PY'
import json, sys, urllib.request
base, secret, lease = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
assert lease["items"], lease
for it in lease["items"]:
    body = {"device_id": "tab-1", "device_secret": secret, "lease_id": lease["lease_id"],
            "target": it["target"], "deposit_token": it["deposit_token"], "receipt_revision": 0,
            "adapter_id": "html", "adapter_version": "1",
            "outcome": {"ok": True, "content_hash": "h-" + it["target"], "latency_ms": 700.0}}
    req = urllib.request.Request(base + "/v1/deposit", data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json"})
    assert urllib.request.urlopen(req).status == 200
PY
sleep 0.3

dom="$work/dom.html"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/profile" --virtual-time-budget=5000 --dump-dom "$base/" >"$dom" 2>"$work/chromium.err" || {
  cat "$work/chromium.err"; echo "chromium failed"; exit 1; }
if [ -n "${ROUTER_PAGE_SCREENSHOT:-}" ]; then
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile2" --virtual-time-budget=5000 --window-size=1200,900 \
    --screenshot="$ROUTER_PAGE_SCREENSHOT" "$base/" 2>/dev/null || true
fi
python3 - "$dom" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
checks = {
    "the script ran (data-ready)": 'data-ready="1"' in dom,
    "status line": re.search(r'id="status">revision \d+ · 1 sources · 2 targets', dom) is not None,
    "source row in the evidence table": "<td class=\"l\">acme-board</td>" in dom,
    "a browser estimate with ±": re.search(r"\d\.\d{3} ± \d\.\d{3}", dom) is not None,
    "prices table": "object_store" in dom,
    "population row": "<td class=\"l\">browser</td>" in dom,
}
bad = [k for k, ok in checks.items() if not ok]
for k, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + k)
sys.exit(1 if bad else 0)
PY
echo "operator page: rendered and checked in headless chromium"
