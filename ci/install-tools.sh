#!/usr/bin/env bash
# Installs the two cargo tools CI needs and a fresh runner lacks: cargo-fuzz
# 0.13.2 (the fuzz step) and gungraun-runner of exactly the version of the
# gungraun library in Cargo.lock (the instruction-count step). A tool that
# is already there in that version is left alone.
#
# Both are debug builds: they only drive cargo, the fuzzer and valgrind, so
# their own speed does not matter, and a debug build is about a third
# shorter. .ci/run starts this in the background at the idle scheduling
# class (SCHED_IDLE) while the tests build, so the compile fills the cores
# the test build leaves idle; it waits for it before the timed gates, so
# nothing of it runs beside a timed measurement. ci/fuzz.sh and
# ci/gungraun.sh still install what is missing when run on their own.
set -euo pipefail
cd "$(dirname "$0")/.."

if cargo fuzz --version 2>/dev/null | grep -q ' 0\.13\.2$'; then
  echo "cargo-fuzz: $(cargo fuzz --version)"
else
  cargo install cargo-fuzz --locked --version 0.13.2 --debug
fi

want=$(awk '/^name = "gungraun"$/ { getline; gsub(/[^0-9.]/, "", $0); print; exit }' Cargo.lock)
[[ -n "$want" ]] || { echo "no gungraun package in Cargo.lock" >&2; exit 1; }
have=$(gungraun-runner --version 2>/dev/null | awk '{ print $2 }' || true)
if [[ "$have" == "$want" ]]; then
  echo "gungraun-runner: $have"
else
  cargo install gungraun-runner --version "$want" --locked --debug
fi
