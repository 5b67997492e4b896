#!/usr/bin/env bash
# Measures, on this machine, the images/s of caffe-geeps next to PyTorch's on
# the same LeNet and data, for docs/caffe.md. Runs alternate, REPEAT times
# each, so that a busy moment on a shared machine hits both sides alike.
#
#   bash examples/caffe/scripts/compare_pytorch.sh            # PYTHON=python3 REPEAT=3
#
# Needs a Python with torch and numpy (pip install torch numpy).
set -euo pipefail
cd "$(dirname "$0")/../../.."
PYTHON="${PYTHON:-python3}"
REPEAT="${REPEAT:-3}"
ITERS="${ITERS:-300}"
cargo build --release -p caffe-geeps --bin caffe-geeps >/dev/null
bin="${CARGO_TARGET_DIR:-target}/release/caffe-geeps"
solver=examples/caffe/models/lenet_solver.prototxt
model=examples/caffe/models/lenet_train_test.prototxt
echo "cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$REPEAT"); do
  echo "--- round $r"
  "$bin" time --model "$model" --iterations 50 | tail -1 | sed 's/^/caffe-geeps time (compute only, 1 process): /'
  "$bin" train --solver "$solver" --workers 1 --max-iter "$ITERS" --no-progress --curve /tmp/compare_pytorch \
    | grep throughput | sed 's/^ */caffe-geeps train, 1 worker: /'
  "$bin" train --solver "$solver" --workers 4 --max-iter "$ITERS" --no-progress --curve /tmp/compare_pytorch \
    | grep throughput | sed 's/^ */caffe-geeps train, 4 workers in 1 process: /'
  "$PYTHON" examples/caffe/scripts/pytorch_lenet.py --iters "$ITERS" --threads "$(nproc)"
  "$PYTHON" examples/caffe/scripts/pytorch_lenet.py --iters "$ITERS" --threads 1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
