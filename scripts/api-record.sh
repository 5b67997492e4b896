#!/usr/bin/env bash
# The public API of the crates users depend on, as cargo-public-api lists it
# (blanket and auto-trait impls omitted), one file per crate under docs/api/.
# The files are committed: a change to the API shows in review as a diff of
# them. `scripts/api-record.sh` rewrites them; `--check` fails when they are
# out of date. Needs cargo-public-api (`cargo install cargo-public-api
# --locked`); rustdoc's JSON output is unstable, so it runs with
# RUSTC_BOOTSTRAP=1 on the stable toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = "--check" ] && check=1
export RUSTC_BOOTSTRAP=1 RUSTUP_TOOLCHAIN="${RUSTUP_TOOLCHAIN:-stable}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/api"
mkdir -p docs/api
status=0
for crate in geeps geeps-core geeps-net geeps-cuda; do
  out="docs/api/$crate.txt"
  new="$(mktemp)"
  cargo public-api -p "$crate" -ss --all-features >"$new" 2>"$new.log" || { cat "$new.log" >&2; exit 1; }
  if [ "$check" = 1 ]; then
    if ! diff -u "$out" "$new"; then
      echo "$out is out of date: the public API of $crate changed; run scripts/api-record.sh and commit it" >&2
      status=1
    else
      echo "$crate: API record up to date ($(wc -l <"$out") lines)"
    fi
  else
    mv "$new" "$out"
    echo "$out: $(wc -l <"$out") lines"
  fi
  rm -f "$new" "$new.log"
done
exit "$status"
