#!/usr/bin/env bash
# The emulated driver's mutation check (scripts/emu-mutants): each GPU-path
# mistake of docs/gpu.md's mutation table, planted one at a time in a scratch copy of
# the tree, must make an emulated device suite fail; the lane fails on a
# survivor and prints the report table (mistake, caught by which test).
# Needs the release build of the workspace (third-party crates are taken
# from the target dir); rebuilds only what each mistake touches.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
start=$SECONDS
printf '\n==> emu-mutants: planted GPU-path mistakes against the emulated suites\n'
python3 scripts/emu-mutants "$@"
printf '\n==> emu-mutants: done in %d s\n' "$((SECONDS - start))"
