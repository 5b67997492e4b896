#!/usr/bin/env bash
# The chaos run in CI (docs/reliability.md, "The chaos run"): a 4-rank LeNet
# job under geeps-launch --max-restarts while SIGKILL and SIGSTOP hit random
# ranks for up to a minute and a half, against an undisturbed run's weights,
# bit for bit. About 2 minutes on 2 cores; the 30-minute figures come from
# `scripts/chaos --minutes 30 --iterations 3000`, outside CI.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p caffe-geeps -p geeps-launch --bins
python3 scripts/chaos --iterations 200 --snapshot 20 --every 6 --minutes 1.5
