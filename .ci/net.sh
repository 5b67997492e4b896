#!/usr/bin/env bash
# Network checks beyond the test suite: the BSP clock-exchange benchmark in
# quick mode (it checks that the suite runs; CI never judges timings), then
# geeps across hosts on a namespace cluster (scripts/netns-check).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --workspace --bench exchange -- --quick
# geeps across hosts: 3 network namespaces joined by 1 Gb/s links (needs
# root; fails, never skips, where namespaces are refused). About a minute.
# It runs the tests lane's release binaries (geeps-launch, caffe-geeps,
# examples/mlr), as the examples lane does: building them here with another
# package selection would resolve features differently and rebuild them.
# Open MPI's own mpirun is one of the starts it checks across the hosts.
if ! command -v mpirun >/dev/null; then
  apt-get install -y -qq openmpi-bin >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq openmpi-bin >/dev/null; }
fi
# Loss on a link (netns-cluster loss) is nftables' work.
if ! command -v nft >/dev/null; then
  apt-get install -y -qq nftables >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq nftables >/dev/null; }
fi
scripts/netns-check
