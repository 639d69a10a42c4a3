#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 30): the
# corpus text parser, the pool file, the fleet config loader with the lab's
# bounds, the cgroup and procfs readers, and the operator channel's JSON.
# A crash fails the run (exit 1); its input is kept under
# fuzz/artifacts/TARGET/ — turn it into a regression test next to the
# parser before fixing it. A build failure exits 2 before any fuzzing.
#
# usage: ci/fuzz.sh [SECONDS] [TARGET ...]
#        ci/fuzz.sh --build-only   (builds the targets and fuzzes nothing:
#                                   .ci/run builds them in the background
#                                   while the tests run)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`); skips, saying so, when it
# is missing. Uses the nightly toolchain when one is installed, else the
# stable one with RUSTC_BOOTSTRAP=1; FUZZ_TOOLCHAIN=stable forces stable.
# Builds without a sanitizer (the targets are safe Rust; a panic or an
# abort is what they look for), which keeps the build short on a small
# runner.
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
secs=${1:-30}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(corpus_text pool_file fleet_config cgroup_files operator_patch)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "skip: cargo-fuzz is not installed; install it with 'cargo install cargo-fuzz' to run ${targets[*]}"
  exit 0
fi
# FUZZ_TOOLCHAIN=stable (or any installed toolchain) overrides the choice.
toolchain=${FUZZ_TOOLCHAIN:-}
if [ -z "$toolchain" ] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  toolchain=nightly
fi
if [ "$toolchain" = nightly ]; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo ${toolchain:++$toolchain} fuzz)
fi

# Seeds: small valid and near-valid inputs for each target, written fresh
# each run beside whatever libFuzzer kept from earlier runs.
seed() { # TARGET NAME — content on stdin
  mkdir -p "fuzz/corpus/$1"
  cat > "fuzz/corpus/$1/seed-$2"
}
empty_corpus=$'fleet-corpus 1\nseed 1\ncycles 0\ncycle_interval_us 1000000\nprofit_threshold 10\npool_source p.txt\npools 0\n'
sum=$(printf '%s' "$empty_corpus" | sha256sum | cut -d' ' -f1)
printf '%schecksum %s\n' "$empty_corpus" "$sum" | seed corpus_text empty
head -c 6000 corpus/golden-v1.txt | seed corpus_text golden-head
awk '/^cycle 0 /{p=1} /^cycle 1 /{exit} p' corpus/golden-v1.txt | head -c 6000 | seed corpus_text golden-cycle
head -c 3000 corpus/pools-2020-09.txt | seed pool_file head
printf 'profile = "auto"\n[budget]\nambient_cpus = 2\nsim_slot_cap = 8\n[posture]\ncordon_enter_events = 2\ncordon_enter_window_ms = 1000\ncordon_duty_percent = 2.0\ncordon_duty_window_ms = 5000\ncordon_exit_clean_ms = 10000\ncordon_sim_intake_floor = 3\n[pump]\nbackstop_interval_ms = 250\nstall_ticks = 8\n\0DEGENBOT_STALL_TICKS=3\nDEGENBOT_CORDON_SIM_INTAKE_FLOOR=unset\n' | seed fleet_config full
printf '\x00max 100000\n' | seed cgroup_files cpu-max
printf '\x0150000\n100000\n' | seed cgroup_files cfs
printf '\x0212:cpu,cpuacct:/user.slice\n0::/init.scope\n' | seed cgroup_files proc-cgroup
printf '\x0335 24 0:31 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n36 24 0:32 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n' | seed cgroup_files mountinfo
printf '\x04usage_usec 100\nnr_periods 10\nnr_throttled 2\nthrottled_usec 500\nthrottled_time 500000\n' | seed cgroup_files cpu-stat
printf '\x05Name:\tx\nCpus_allowed_list:\t0-3,5\n' | seed cgroup_files cpu-list
printf '\x06cpu  9 0 3 50 5 0 1 0 0 0\ncpu0 1 0 5 20 2 0 5 0 0 0\ncpu1 2 1 6 10 3 5 5 7 0 0\n' | seed cgroup_files proc-stat
printf '\x0742 (fleet lab) R 1 2 3 4 5 6 7 8 9 10 321 123 0 0 20 0 9 0\n' | seed cgroup_files self-stat
printf '{"cordon_duty_percent": 3, "cordon_sim_intake_floor": null}' | seed operator_patch patch
printf '{"cordon_enter_events": 0}' | seed operator_patch invalid

# One build serves every target: `run` must get the same options, or it
# rebuilds. 16 codegen units instead of cargo-fuzz's 1 shorten the
# cold build on 2 cores for a slightly slower fuzz loop; fuzz/Cargo.toml
# builds the dependencies no target exercises without optimization.
opts=(--sanitizer none --codegen-units 16)

printf '\n== build the fuzz targets (%s)\n' "$(date -u +%H:%M:%S)"
if ! "${fuzz[@]}" build "${opts[@]}"; then
  echo "fuzz: the targets do not build (see above); nothing was fuzzed" >&2
  exit 2
fi
if [ "$build_only" = 1 ]; then
  echo "fuzz: the targets are built; nothing fuzzed (--build-only)"
  exit 0
fi

# The targets run side by side, as many at once as the host has CPUs (each
# gets a whole CPU for its SECONDS); each one's output goes to
# fuzz/logs/TARGET.log and is printed when it ends.
jobs=$(nproc 2>/dev/null || echo 1)
mkdir -p fuzz/logs
run_one() { # TARGET
  "${fuzz[@]}" run "${opts[@]}" "$1" -- \
    -max_total_time="$secs" -max_len=8192 -rss_limit_mb=1024 -malloc_limit_mb=512 \
    -print_final_stats=1 >"fuzz/logs/$1.log" 2>&1
}
failed=()
pending=("${targets[@]}")
while [ ${#pending[@]} -gt 0 ]; do
  batch=("${pending[@]:0:$jobs}")
  pending=("${pending[@]:$jobs}")
  pids=()
  for t in "${batch[@]}"; do
    printf '\n== fuzz %s for %s s (%s)\n' "$t" "$secs" "$(date -u +%H:%M:%S)"
    run_one "$t" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    t=${batch[$i]}
    if ! wait "${pids[$i]}"; then
      failed+=("$t")
    fi
    printf '\n-- %s --\n' "$t"
    tail -n 25 "fuzz/logs/$t.log"
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${failed[*]} crashed; the inputs are under fuzz/artifacts/, the logs in fuzz/logs/" >&2
  exit 1
fi
echo "fuzz: ${targets[*]}: no crash in ${secs} s each"
