#!/usr/bin/env bash
# Fuzzing in CI: every decoder of bytes a peer sends (geeps-net/fuzz) runs for
# a short while from the checked-in seeds, and must neither crash nor hang.
# The long runs and their figures are in docs/reliability.md ("Fuzzing").
# cargo-fuzz drives libFuzzer; it needs nightly flags, which the stable
# toolchain accepts under RUSTC_BOOTSTRAP=1. CI builds without a sanitizer
# (safe Rust, and a third of the build time); long runs use AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${GEEPS_FUZZ_SECONDS:-10}"

cargo clippy -p geeps-net --all-targets --features fuzzing -- -D warnings
# The entry points run every seed once, and the checked-in seeds are current.
cargo test --release -p geeps-net --features fuzzing --lib fuzzing

tools="${CARGO_TARGET_DIR:-target}/fuzz/tools"
case "$tools" in /*) ;; *) tools="$PWD/$tools" ;; esac
if [ ! -x "$tools/bin/cargo-fuzz" ]; then
  cargo install --quiet --locked cargo-fuzz --version 0.13.2 --root "$tools"
fi
export PATH="$tools/bin:$PATH" RUSTC_BOOTSTRAP=1

cd geeps-net
targets=$(cargo fuzz list)
cargo fuzz build --sanitizer none
corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
for target in $targets; do
  mkdir -p "$corpus/$target"
  cp fuzz/seeds/"$target"/* "$corpus/$target/"
  # -timeout: one input running over 10 s is a hang and fails the run.
  log="$corpus/$target.log"
  if ! cargo fuzz run --sanitizer none "$target" "$corpus/$target" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $target failed: the input is under geeps-net/fuzz/artifacts/$target/" >&2
    exit 1
  fi
  echo "fuzz $target: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1), no crash"
done
