#!/usr/bin/env bash
# Calibrates a paired gate (docs/gates.md, "Calibration"): how often it
# fails a build measured against itself (false alarms) and how often it
# catches a slowdown injected on the cycle path (power), on a quiet host and
# beside a busy neighbour (`fleet-lab spin --threads 1`), and what a job
# costs. Prints the markdown table of docs/gates.md and keeps every job's
# paired.json.
#
# usage: ci/gate-noise.sh [--profile A|B] [--jobs "1=20 1.1=20 1.2=20 1.5=20"]
#                         [--noise "quiet spinner"] [--out DIR] [--budgets FILE]
#
#   --profile  the budgets profile to calibrate (default A)
#   --jobs     FACTOR=JOBS per condition: factor 1 is the build against
#              itself (`gate --reference self`), any other factor injects
#              that slowdown into the candidate (`--inject-slowdown`)
#   --noise    quiet (nothing else runs) and/or spinner (one busy thread in
#              a separate process for the whole job)
#   --budgets  the budgets file (default ci/budgets.toml; give a copy when
#              the tree may change while the sitting runs)
#
# The jobs are interleaved: round j runs one job of every condition that
# still has jobs to run, in an order rotated by j, so a drift of the host
# over the sitting falls on every condition alike. Run it on a host with
# nothing else running. Needs a release build of fleet-lab; FLEET_LAB
# names another (copy the binary first if you will build while it runs).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=A
jobs_spec="1=20 1.1=20 1.2=20 1.5=20"
noises="quiet spinner"
out=fleet-lab-out/gate-noise
budgets=ci/budgets.toml
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --jobs) jobs_spec=$2; shift 2 ;;
    --noise) noises=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
lab=${FLEET_LAB:-target/release/fleet-lab}
[ -x "$lab" ] || { echo "no $lab: cargo build --release --bin fleet-lab" >&2; exit 2; }
mkdir -p "$out"
log=$out/jobs.tsv
printf 'profile\tnoise\tfactor\tjob\texit\tslowdown_breach\twall_s\tabove\tpairs\tmedian_ratio\tstarted\n' > "$log"
echo "host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), $("$lab" --version 2>/dev/null || echo fleet-lab)"

conds=()
declare -A left
for n in $noises; do
  for fj in $jobs_spec; do
    f=${fj%=*}; j=${fj#*=}
    conds+=("$n:$f"); left["$n:$f"]=$j
  done
done

spinner_pid=
start_spinner() {
  # The spinner runs until its stdin closes: hold a pipe open to it.
  exec 9> >("$lab" spin --threads 1 >/dev/null 2>&1)
  spinner_pid=$!
}
stop_spinner() {
  exec 9>&-
  wait "$spinner_pid" 2>/dev/null || true
  spinner_pid=
}
trap '[ -n "$spinner_pid" ] && stop_spinner' EXIT

round=0
while :; do
  any=false
  n=${#conds[@]}
  for k in $(seq 0 $((n - 1))); do
    c=${conds[$(((k + round) % n))]}
    [ "${left[$c]}" -gt 0 ] || continue
    any=true
    left[$c]=$((left[$c] - 1))
    noise=${c%%:*}; factor=${c#*:}
    job=$((round + 1))
    dir=$out/$profile-$noise-$factor-$job
    inject=()
    [ "$factor" = 1 ] || inject=(--inject-slowdown "$factor")
    [ "$noise" = spinner ] && start_spinner
    started=$(date -u +%T)
    t0=$(date +%s.%N)
    set +e
    "$lab" gate --profile "$profile" --budgets "$budgets" --reference self --quiet --out "$dir" --force "${inject[@]}" > "$dir.txt" 2>&1
    rc=$?
    set -e
    t1=$(date +%s.%N)
    breach=no
    grep -q "FAIL paired_slowdown" "$dir.txt" && breach=yes
    [ "$noise" = spinner ] && stop_spinner
    read -r above pairs median < <(python3 -c '
import json, sys
try:
    v = json.load(open(sys.argv[1]))["verdict"]; print(v["above"], v["pairs"], "%.4f" % v["median_ratio"])
except Exception:
    print("- - -")' "$dir/paired.json")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\n' "$profile" "$noise" "$factor" "$job" "$rc" "$breach" \
      "$(echo "$t1 - $t0" | bc)" "$above" "$pairs" "$median" "$started" >> "$log"
    echo "$started $profile $noise ×$factor job $job: exit $rc, $above of $pairs pairs above, median ratio $median"
  done
  $any || break
  round=$((round + 1))
done

python3 - "$log" <<'PY' | tee "$out/calibration.md"
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("\n| profile | host | injected slowdown | jobs | failed | failed on paired_slowdown | median ratio (median, min–max over jobs) | pairs above the tolerance (min–max) | s per job (median) |")
print("|---|---|---|---|---|---|---|---|---|")
key = lambda r: (r["profile"], r["noise"], float(r["factor"]))
for k in sorted({key(r) for r in rows}):
    g = [r for r in rows if key(r) == k]
    failed = sum(1 for r in g if r["exit"] != "0")
    slow = sum(1 for r in g if r["slowdown_breach"] == "yes")
    med = [float(r["median_ratio"]) for r in g if r["median_ratio"] != "-"]
    above = [int(r["above"]) for r in g if r["above"] != "-"]
    wall = st.median(float(r["wall_s"]) for r in g)
    what = "none (A/A)" if k[2] == 1 else f"{k[2]}×"
    m = f"{st.median(med):.3f} ({min(med):.3f}–{max(med):.3f})" if med else "-"
    a = f"{min(above)}–{max(above)} of {g[0]['pairs']}" if above else "-"
    print(f"| {k[0]} | {k[1]} | {what} | {len(g)} | {failed} | {slow} | {m} | {a} | {wall:.0f} |")
PY
