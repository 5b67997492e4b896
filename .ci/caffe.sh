#!/usr/bin/env bash
# CI for the Caffe-style trainer (examples/caffe): a short 4-worker training
# run of the shipped LeNet on the bundled data, then `test --weights` on the
# snapshot it wrote, `time`, a 4-process run through geeps-launch, and a
# broken solver's error. Builds on the release artifacts of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

cargo build --release -p caffe-geeps --bin caffe-geeps
bin="${CARGO_TARGET_DIR:-target}/release/caffe-geeps"

# 60 iterations of 4 workers x 64 images; the curve and the weights go to $out.
"$bin" train --solver examples/caffe/models/lenet_solver.prototxt --workers 4 --max-iter 60 --overwrite \
  --curve "$out/lenet" --no-progress | tee "$out/train.log"
grep -q "Test net output #0: accuracy" "$out/train.log"
test -s "$out/lenet_curve.csv"
test -s "$out/lenet_curve.png"

weights="results/caffe/lenet_iter_60.caffemodel"
test -s "$weights"
"$bin" test --model examples/caffe/models/lenet_train_test.prototxt --weights "$weights" | tee "$out/test.log"
# Above chance (0.1) after 60 iterations: the weights were written and read back.
awk '/Test net output #0: accuracy/ { if ($NF + 0 < 0.5) { print "accuracy too low: " $NF; exit 1 } found = 1 }
     END { if (!found) { print "no accuracy line"; exit 1 } }' "$out/test.log"

"$bin" time --model examples/caffe/models/lenet_train_test.prototxt --iterations 5

# The same trainer as 4 processes over the network transport, started by geeps-launch.
cargo build --release -p geeps-launch
"${CARGO_TARGET_DIR:-target}/release/geeps-launch" -n 4 -- "$bin" train \
  --solver examples/caffe/models/lenet_solver.prototxt --max-iter 30 --curve "$out/net" --no-progress | tee "$out/net.log"
grep -q "on 4 worker(s) x batch 64" "$out/net.log"
grep -q "Test net output #0: accuracy" "$out/net.log"

# Bad input is an error that names the problem, not a panic.
printf 'net: "lenet_train_test.prototxt"\nbase_lr: 0.01\nmax_iter: 10\nlr_polcy: "fixed"\n' > "$out/bad.prototxt"
if "$bin" train --solver "$out/bad.prototxt" 2> "$out/bad.log"; then
  echo "a broken solver was accepted"; exit 1
fi
grep -q "bad.prototxt:4: unknown field \`lr_polcy\`" "$out/bad.log"
echo "caffe checks passed"
