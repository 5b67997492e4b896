#!/usr/bin/env bash
# The emulated driver's mutation check (scripts/emu-mutants): each GPU-path
# mistake of docs/gpu.md's mutation table, planted one at a time in this
# checkout (CI's throwaway clone; each file restored after its run), must
# make an emulated device suite fail; the lane fails on a survivor and
# prints the report table (mistake, caught by which test). Reuses the
# release build of the earlier lanes and rebuilds only what each mistake
# touches, so it runs last: it leaves the touched crates to rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
start=$SECONDS
printf '\n==> emu-mutants: planted GPU-path mistakes against the emulated suites\n'
python3 scripts/emu-mutants --in-place "$@"
printf '\n==> emu-mutants: done in %d s\n' "$((SECONDS - start))"
