#!/usr/bin/env bash
# Regenerates include/geeps.h from geeps-ffi with cbindgen (a build
# dependency behind the `header` feature), in the release profile that CI
# builds anyway. Check it in; CI fails when it is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p geeps-ffi --features header
echo "include/geeps.h regenerated"
