#!/usr/bin/env bash
# Regenerates include/geeps.h from geeps-ffi with cbindgen. The generator is
# geeps-ffi's header test (tests/header.rs, cbindgen a dev-dependency), built
# with the workspace's test flags so it reuses `cargo test --release
# --workspace`'s artifacts. Check the header in; that test fails when it is
# stale.
set -euo pipefail
cd "$(dirname "$0")/.."
GEEPS_WRITE_HEADER=1 cargo test --release --workspace --test header -- --nocapture
echo "include/geeps.h regenerated"
