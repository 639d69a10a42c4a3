#!/usr/bin/env bash
# Instruction-count benches of the pure cores, gated against a committed
# baseline.
#
#   ci/gungraun.sh                    install the runner if needed, run, gate
#   ci/gungraun.sh --update-baseline  run and rewrite ci/instructions-baseline.tsv
#
# 1. The benches (bench/benches/instructions.rs) use the `gungraun` library;
#    they need the `gungraun-runner` binary of exactly the same version. The
#    version is read from Cargo.lock; when the runner is missing or reports
#    another version it is installed with `cargo install --locked`.
# 2. The benches run under valgrind (callgrind) and print one JSON summary per
#    bench; the instruction count (Ir) of each is kept in
#    target/gungraun/instructions.tsv.
# 3. Gate: a bench whose count grew more than MAX_GROWTH_PERCENT (default 10)
#    over ci/instructions-baseline.tsv fails the run, naming the bench, both
#    counts and the growth. A baseline row with no bench (a bench removed or
#    renamed) and a bench with no baseline row fail too: the set of benches
#    changes only with a reviewed baseline.
# 4. The toolchain: counts depend on rustc, so the baseline records the
#    `rustc --version` it was written with, and a run with another toolchain
#    fails before the benches, naming both (update the baseline with the new
#    toolchain in the same change that moves to it).
#
# Updating the baseline: counts depend on the code, the corpus and the
# toolchain (rustc version, profile). After an intended change (or a
# toolchain bump) run `ci/gungraun.sh --update-baseline` and commit
# ci/instructions-baseline.tsv with the change, saying why the counts moved.
#
# Environment: MAX_GROWTH_PERCENT (default 10); GUNGRAUN_RUNNER (absolute
# path of a runner binary to use instead of the one on PATH; the benches read
# it when they are compiled).
set -euo pipefail
cd "$(dirname "$0")/.."

baseline=ci/instructions-baseline.tsv
max_growth=${MAX_GROWTH_PERCENT:-10}
update=false
case "${1:-}" in
  --update-baseline) update=true ;;
  "") ;;
  *) echo "usage: ci/gungraun.sh [--update-baseline]" >&2; exit 2 ;;
esac

for tool in valgrind jq; do
  command -v "$tool" >/dev/null || { echo "gungraun: '$tool' is not installed; install it (apt-get install $tool)" >&2; exit 1; }
done

# The library version the benches were built against (Cargo.lock is the truth).
want=$(awk '/^name = "gungraun"$/ { getline; gsub(/[^0-9.]/, "", $0); print; exit }' Cargo.lock)
[[ -n "$want" ]] || { echo "gungraun: no gungraun package in Cargo.lock; run 'cargo generate-lockfile'" >&2; exit 1; }

runner=${GUNGRAUN_RUNNER:-gungraun-runner}
have=$("$runner" --version 2>/dev/null | awk '{ print $2 }' || true)
if [[ "$have" != "$want" ]]; then
  echo "== gungraun: runner ${have:-missing}, library $want: installing gungraun-runner $want"
  # A debug build of the runner: it only starts valgrind and reads its
  # output, so its own speed does not matter, and it builds in about 85 s on
  # 2 cores instead of 130 s (the counts are the bench binary's).
  cargo install gungraun-runner --version "$want" --locked --debug
  # The bench binary takes GUNGRAUN_RUNNER at compile time (else it looks on
  # PATH): point it at the runner just installed.
  export GUNGRAUN_RUNNER="${CARGO_HOME:-$HOME/.cargo}/bin/gungraun-runner"
fi

toolchain=$(rustc --version)
if ! $update; then
  [[ -f "$baseline" ]] || { echo "gungraun: no baseline at $baseline; create it with 'ci/gungraun.sh --update-baseline'" >&2; exit 1; }
  recorded=$(sed -n 's/^# toolchain: //p' "$baseline")
  if [[ "$recorded" != "$toolchain" ]]; then
    echo "gungraun: $baseline was written with '${recorded:-an unrecorded toolchain}', this is '$toolchain': instruction counts are not comparable across toolchains; run 'ci/gungraun.sh --update-baseline' with this toolchain and commit the diff with the change that moves to it" >&2
    exit 1
  fi
fi

echo "== gungraun: instruction-count benches (runner $want, $toolchain)"
mkdir -p target/gungraun
summaries=target/gungraun/instructions.jsonl
counts=target/gungraun/instructions.tsv
# The bench binary of the lab's build (ci/lab-build.sh: fresh after .ci/run's
# lab step, so nothing compiles here), run as `cargo bench` runs it. A
# `cargo bench -p fleet-bench` of its own resolved other features of shared
# crates and recompiled 17 of them (about 80 s of a cold run).
bench_exe=$(ci/lab-build.sh --message-format=json |
  jq -r 'select(.reason == "compiler-artifact" and .target.name == "instructions" and (.target.kind | index("bench")) and .executable != null) | .executable' | tail -1)
[[ -x "$bench_exe" ]] || { echo "gungraun: the lab build made no instructions bench binary" >&2; exit 1; }
(cd bench && CARGO_MANIFEST_DIR="$PWD" CARGO_PKG_NAME=fleet-bench CARGO_CRATE_NAME=instructions "$bench_exe" --bench --output-format=json) > "$summaries"
jq -r '"\(.group)/\(.function_name)/\(.id)\t\(.profiles[0].data.total.metrics.Ir.values.new)"' "$summaries" | sort > "$counts"
[[ -s "$counts" ]] || { echo "gungraun: the benches produced no summaries (see $summaries)" >&2; exit 1; }
awk -F'\t' '{ printf "  %-60s %12d\n", $1, $2 }' "$counts"

if $update; then
  {
    echo "# Instruction counts (callgrind Ir) of bench/benches/instructions.rs."
    echo "# Written by 'ci/gungraun.sh --update-baseline' with gungraun $want."
    echo "# ci/gungraun.sh fails when a count grows more than MAX_GROWTH_PERCENT (10) over this file,"
    echo "# when a bench here is gone or a bench is not here, and under another toolchain than:"
    echo "# toolchain: $toolchain"
    echo -e "# bench\tinstructions"
    cat "$counts"
  } > "$baseline"
  echo "== gungraun: baseline rewritten: $baseline ($(wc -l < "$counts") benches)"
  exit 0
fi

echo "== gungraun: gate (fail above +${max_growth}% over $baseline)"
awk -F'\t' -v max="$max_growth" '
  FNR == NR { if ($0 !~ /^#/ && NF == 2) base[$1] = $2; next }
  {
    seen[$1] = 1
    if (!($1 in base)) { printf "  NEW       %-60s %12d (not in the baseline: update it)\n", $1, $2; bad++; next }
    growth = (base[$1] > 0) ? ($2 - base[$1]) * 100.0 / base[$1] : 0
    if (growth > max) {
      printf "  REGRESSED %-60s %12d -> %12d (%+.1f%%, limit +%s%%)\n", $1, base[$1], $2, growth, max
      bad++
    } else if (growth < -max) {
      printf "  faster    %-60s %12d -> %12d (%+.1f%%): update the baseline\n", $1, base[$1], $2, growth
    }
  }
  END {
    for (b in base) if (!(b in seen)) { printf "  GONE      %-60s (in the baseline, not run: removed or renamed)\n", b; bad++ }
    if (bad) { printf "gungraun: %d bench(es) grew more than %s%% in instructions, are gone or are new\n", bad, max; exit 1 }
    print "gungraun: every bench within +" max "% of the baseline"
  }' "$baseline" "$counts"
