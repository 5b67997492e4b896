#!/usr/bin/env bash
# The GPU check's network step (called by run.py, not directly):
#   bash scripts/gpu-check.d/net.sh BUNDLE WORKDIR RUNS [RATE]
# Brings up 4 hosts as network namespaces with RATE links (default
# 10gbit, scripts/netns-cluster), then runs `geeps-bench sync --sync-ranks 4`
# across them RUNS times with the send window at its default and RUNS times
# with none (GEEPS_SEND_WINDOW=0), interleaved, every run with cubic and 32
# stripes (the setting docs/network.md gives for link-bound clusters); gloo
# runs beside geeps in each when PyTorch is there. Prints each run's
# per-clock lines under a `net: window W, run I` header. Exit 3: the machine
# cannot host the cluster (not root, no `ip`, namespaces refused), said in
# one line.
set -euo pipefail

bundle="$1"
work="$2"
runs="$3"
rate="${4:-10gbit}"
[ "$(id -u)" = 0 ] || { echo "net: needs root for network namespaces"; exit 3; }
# A machine without iproute2 uses the copies the bundle carries
# (tools/bin: wrappers that load them with their own libraries), as does
# GEEPS_GPU_CHECK_TOOLS=bundle (the emulated CI run, proving them).
if [ "${GEEPS_GPU_CHECK_TOOLS:-}" = bundle ] || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  [ -x "$bundle/tools/bin/ip" ] || { echo "net: no ip (iproute2) here and none in the bundle"; exit 3; }
  export PATH="$bundle/tools/bin:$PATH"
  echo "net: ip and tc from the bundle ($bundle/tools)"
fi
cluster="$bundle/scripts/netns-cluster"
bench="$bundle/target/release/geeps-bench"
python="${PYTHON:-python3}"

down() { "$cluster" down >/dev/null 2>&1 || true; }
trap down EXIT
if ! "$cluster" up 4 --rate "$rate"; then
  echo "net: the namespace cluster could not be brought up (see above)"
  exit 3
fi
for i in $(seq 1 "$runs"); do
  for window in 2 0; do
    echo "net: window $window, run $i"
    log="$work/net-w$window-$i.log"
    if ! "$cluster" exec h0 env GEEPS_TCP_CONGESTION=cubic GEEPS_STRIPES=32 GEEPS_SEND_WINDOW=$window \
      GEEPS_BENCH_RANK_EXEC='ip netns exec geeps-h{rank}' GEEPS_BENCH_RENDEZVOUS_HOST=10.77.0.1 \
      GLOO_SOCKET_IFNAME=eth0 PYTHON="$python" \
      "$bench" sync --repeats 1 --sync-ranks 4 --out "$work/net-w$window-$i" >"$log" 2>&1; then
      echo "net: the bench failed (window $window, run $i); the end of $log:"
      tail -20 "$log"
      exit 1
    fi
    grep -E '^sync: 4 ranks|^  sync connections' "$log" || true
  done
done
