#!/usr/bin/env bash
# Network checks beyond the test suite: the BSP clock-exchange benchmark in
# quick mode (it checks that the suite runs; CI never judges timings).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --workspace --bench exchange -- --quick
