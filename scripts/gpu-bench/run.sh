#!/usr/bin/env bash
# caffe-geeps on GPUs against PyTorch on the same GPU: images/s and geeps'
# stall fraction of Caffe's LeNet (examples/caffe/models), for whoever has a
# GPU machine. caffe-geeps computes its layers on the GPU (cuBLAS GEMMs and
# its PTX kernels); a second single-GPU row keeps the rows on the GPU but
# computes on the CPU (--cpu-layers), to show what the GPU layers bring. No
# figures are asserted; it prints them, the ratio to PyTorch, and the
# paper's beside them.
#
#   scripts/gpu-bench/run.sh                  # GPU 0: caffe-geeps, then PyTorch
#   scripts/gpu-bench/run.sh --gpus 4         # + 1 to 4 workers, one process per GPU
#   scripts/gpu-bench/run.sh --cpu            # the same on the CPU (checks the script)
#
# Options: --iterations N (default 500), --gpus N (default 1), --cpu,
# --skip-pytorch. PyTorch comes from `pip install torch` (a CUDA build for
# the GPU runs); without it that half is skipped with a message.
#
# What to expect, from the GeePS paper (section 5; 16 machines with one
# K20C each, 40 GbE): geeps stalls under 8% of the time on GoogLeNet and
# AdamLike-sized models, and 16 machines train 13x the images per second of
# single-GPU Caffe. LeNet is small: per-layer GPU work is short, so its
# stall fraction is higher and its scaling flatter than a large model's.
set -euo pipefail
cd "$(dirname "$0")/../.."

iterations=500 gpus=1 cpu=0 pytorch=1
while [ $# -gt 0 ]; do
  case "$1" in
    --iterations) iterations="$2"; shift 2 ;;
    --gpus) gpus="$2"; shift 2 ;;
    --cpu) cpu=1; shift ;;
    --skip-pytorch) pytorch=0; shift ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

cargo build --quiet --release -p caffe-geeps -p geeps-launch
bin=target/release/caffe-geeps
solver=examples/caffe/models/lenet_solver.prototxt
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Prints "images/s stall%" from a caffe-geeps summary.
figures() {
  local ips stall
  ips=$(grep -oE 'throughput: [0-9]+ images/s' "$1" | grep -oE '[0-9]+' | head -1)
  stall=$(grep -oE 'geeps stall fraction per worker \[[^]]*\]' "$1" | grep -oE '[0-9.]+%' | tr '\n' ' ')
  if [ -z "$ips" ]; then
    echo "no throughput line in caffe-geeps' output:" >&2
    tail -20 "$1" >&2
    exit 1
  fi
  echo "$ips images/s, stall per worker: ${stall:-n/a}"
}

echo "== caffe-geeps, Caffe's LeNet, $iterations iterations of batch 64"
for n in $(seq 1 "$gpus"); do
  log="$out/caffe-$n.log"
  if [ "$cpu" = 1 ]; then
    device=() ; where="CPU"
  else
    device=(--gpu "$(seq -s, 0 $((n - 1)))") ; where="GPU 0..$((n - 1))"
  fi
  status=0
  if [ "$n" = 1 ]; then
    "$bin" train --solver "$solver" --overwrite --workers 1 --max-iter "$iterations" --no-progress \
      --curve "$out/c1" "${device[@]}" >"$log" 2>&1 || status=$?
  else
    # One process per GPU, as Caffe users run it; rank r takes GPU r.
    target/release/geeps-launch -n "$n" -- "$bin" train --solver "$solver" --overwrite --max-iter "$iterations" \
      --no-progress --curve "$out/c$n" "${device[@]}" >"$log" 2>&1 || status=$?
  fi
  if [ "$status" != 0 ]; then
    echo "  $n worker(s) on $where: caffe-geeps failed (exit $status):" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  echo "  $n worker(s) on $where: $(figures "$log")"
  [ "$n" = 1 ] && ips1=$(grep -oE 'throughput: [0-9]+ images/s' "$log" | grep -oE '[0-9]+' | head -1)
done
if [ "$cpu" = 0 ]; then
  log="$out/caffe-cpu-layers.log"
  "$bin" train --solver "$solver" --overwrite --workers 1 --max-iter "$iterations" --no-progress --gpu 0 --cpu-layers \
    --curve "$out/cl" >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
  echo "  1 worker, rows on GPU 0, layers on the CPU (--cpu-layers): $(figures "$log")"
fi

if [ "$pytorch" = 1 ]; then
  echo "== PyTorch, the same net, solver and data"
  dev=cuda:0
  [ "$cpu" = 1 ] && dev=cpu
  line=$(python3 scripts/gpu-bench/pytorch_lenet.py --device "$dev" --iterations "$iterations" 2>&1 || true)
  echo "  $line"
  torch=$(echo "$line" | grep -oE '^pytorch: [0-9.]+' | grep -oE '[0-9.]+' || true)
  if [ -n "$torch" ] && [ -n "${ips1:-}" ]; then
    python3 -c "print(f'  caffe-geeps on 1 GPU / PyTorch: {$ips1 / $torch:.2f}x the images per second')"
  fi
fi
echo "== the paper (K20C GPUs, 40 GbE; GoogLeNet/AdamLike): stall < 8%, 13x images/s on 16 machines vs 1 GPU"
