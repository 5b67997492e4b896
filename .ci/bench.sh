#!/usr/bin/env bash
# The benchmark suite (geeps-bench) in quick mode: every figure end to end on
# a small scale, then a check that the results folder holds well-formed JSON
# and PNG plots. Quick-mode timings are not figures and are never judged.
set -euo pipefail
cd "$(dirname "$0")/.."

out="results/quick"
rm -rf "$out"
cargo build --release -p geeps-bench
start=$(date +%s)
cargo run --release -q -p geeps-bench -- all --quick --out "$out"
echo "quick mode took $(( $(date +%s) - start )) s"
cargo run --release -q -p geeps-bench -- check --out "$out"
