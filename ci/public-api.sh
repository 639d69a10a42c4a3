#!/usr/bin/env bash
# The public API of the crates a program links (fleet, fleet-bindings),
# guarded: lists every public item from rustdoc's JSON output and diffs the
# listing against the committed one in api/. A change to the public surface
# fails here until the listing is updated on purpose:
#
#   ci/public-api.sh            # check (CI)
#   ci/public-api.sh --bless    # accept the current surface (commit api/*.txt with the change)
#
# rustdoc's JSON output is unstable: RUSTC_BOOTSTRAP=1 enables it on the
# stable toolchain; it builds into target/apidoc so the normal build is not
# disturbed.
set -euo pipefail
cd "$(dirname "$0")/.."
bless=0
[ "${1:-}" = "--bless" ] && bless=1
mkdir -p api
status=0
for crate in fleet fleet-bindings; do
  file=${crate//-/_}
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=target/apidoc \
    cargo rustdoc -q -p "$crate" --lib -- -Z unstable-options --output-format json
  python3 ci/public_api.py "target/apidoc/doc/$file.json" > "target/apidoc/$crate.txt"
  if [ $bless = 1 ]; then
    cp "target/apidoc/$crate.txt" "api/$crate.txt"
    echo "$crate: $(wc -l < "api/$crate.txt") public items written to api/$crate.txt"
  elif ! diff -u "api/$crate.txt" "target/apidoc/$crate.txt" > "target/apidoc/$crate.diff"; then
    echo "$crate: the public API changed (- removed, + added):"
    grep -E '^[-+][^-+]' "target/apidoc/$crate.diff" | head -50
    status=1
  else
    echo "$crate: public API unchanged ($(wc -l < "api/$crate.txt") items)"
  fi
done
if [ $status != 0 ]; then
  echo "If the change is deliberate, run ci/public-api.sh --bless and commit api/*.txt with it."
fi
exit $status
