#!/usr/bin/env bash
# CUDA checks that need no GPU (run by .ci/run after the release build):
#   1. the checked-in PTX is what NVRTC 12.0 makes of the CUDA C today
#      (geeps-cuda/kernels, and caffe-geeps' kernels, each folder of
#      examples/caffe/src holding a .cu: its layers, solvers and data);
#   2. ptxas assembles it for sm_80 and sm_90;
#   3. the facade builds with `--features cuda` (no CUDA installed);
#   4. the PTX, executed on the CPU by the emulated driver's PTX interpreter,
#      matches the host device's kernels bit for bit.
# NVRTC and ptxas come from PyPI wheels, pinned to the release the PTX was
# generated with, and are kept under the target dir between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n==> cuda: %s\n' "$*"; }
start=$SECONDS

CUDA_TOOLS=12.0.140
TOOLS="${CARGO_TARGET_DIR:-target}/cuda-tools/$CUDA_TOOLS"
NVRTC_LIB="$TOOLS/nvidia/cuda_nvrtc/lib"
PTXAS="$TOOLS/nvidia/cuda_nvcc/bin/ptxas"

step "NVRTC and ptxas $CUDA_TOOLS"
if [ ! -f "$NVRTC_LIB/libnvrtc.so.12" ] || [ ! -x "$PTXAS" ]; then
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$TOOLS" "nvidia-cuda-nvrtc-cu12==$CUDA_TOOLS" "nvidia-cuda-nvcc-cu12==$CUDA_TOOLS"
fi
export LD_LIBRARY_PATH="$NVRTC_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$PTXAS" --version | tail -1

step "PTX up to date with the CUDA C"
python3 geeps-cuda/kernels/build_ptx.py --check
# caffe-geeps keeps each kernel beside the code it serves: every folder with a .cu.
caffe_kernel_dirs=$(find examples/caffe/src -name '*.cu' -printf '%h\n' | sort -u)
for dir in $caffe_kernel_dirs; do
  python3 geeps-cuda/kernels/build_ptx.py --check --kernels "$dir"
done

step "ptxas: sm_80 and sm_90"
cubins=$(mktemp -d)
trap 'rm -rf "$cubins"' EXIT
for ptx in geeps-cuda/kernels/*.ptx $(find examples/caffe/src -name '*.ptx' | sort); do
  for arch in sm_80 sm_90; do
    "$PTXAS" --gpu-name "$arch" --warning-as-error -O3 -o "$cubins/$(basename "$ptx" .ptx).$arch.cubin" "$ptx"
    echo "$ptx: $arch ok"
  done
done

step "geeps builds with --features cuda"
cargo build --release --features cuda

step "PTX executed on the CPU, compared with the host device"
# --workspace: the same feature set as .ci/run's test build, so nothing recompiles.
cargo test --release --workspace --test ptx_interpreter

# The whole CUDA path, run here on the emulated driver (cuda-emu): a
# separate device address space, a capacity, streams that really race,
# page-locked copies that read their source when they run, and a race
# detector that fails any unordered overlapping accesses. Every device
# suite runs on CudaDevice and may not skip it (GEEPS_REQUIRE_CUDA=1).
# Native row kernels for speed, and one pass with the PTX interpreted.
export GEEPS_REQUIRE_CUDA=1
emu=scripts/with-cuda-emu
# The binaries run below (caffe-geeps, geeps-bench), with the test build's features.
cargo build --release --workspace --lib --bins --tests

step "device suites on CudaDevice under the emulated driver (native row kernels)"
GEEPS_CUDA_EMU_KERNELS=native $emu cargo test --release --workspace --exclude geeps-cuda-emu \
  --test device_contract --test basics --test placement --test consistency \
  --test handover --test release_lanes --test mlr --test errors --test network --test checkpoint --test checkpoint_kill

step "the engine's suites with lazy streams (work runs only when waited for), then under other delays and seeds"
engine=(--test device_contract --test basics --test consistency --test handover --test release_lanes)
GEEPS_CUDA_EMU_LAZY=1 GEEPS_CUDA_EMU_KERNELS=native $emu cargo test --release --workspace --exclude geeps-cuda-emu "${engine[@]}"
for setting in 0:1 300:7; do
  GEEPS_CUDA_EMU_DELAY_US=${setting%:*} GEEPS_CUDA_EMU_SEED=${setting#*:} GEEPS_CUDA_EMU_KERNELS=native \
    $emu cargo test --release --workspace --exclude geeps-cuda-emu "${engine[@]}"
done

step "multi-process suites (geeps-launch) with every rank on CudaDevice"
GEEPS_TEST_DEVICE=cuda GEEPS_CUDA_EMU_KERNELS=native $emu cargo test --release --workspace --test processes

step "the engine's semantics (basics, placement) on CudaDevice with the PTX interpreted (the emulator's interpreter)"
GEEPS_CUDA_EMU_KERNELS=interpret $emu cargo test --release --workspace --test basics --test placement

step "caffe-geeps GPU layers (the first set and the standard ones) against the CPU layers, every solver's GPU step, with the PTX interpreted"
GEEPS_CUDA_EMU_KERNELS=interpret $emu cargo test --release --workspace --test gpu_layers --test gpu_standard_layers

step "caffe-geeps training on the GPU: LeNet 200 iterations against the CPU, every layer type, GPU budget, one process per GPU"
GEEPS_CUDA_EMU_KERNELS=native $emu cargo test --release --workspace --test gpu_train

step "caffe-geeps on the GPU: time/test on deploy files, ImageData/DummyData/HDF5Data/MemoryData training, CPU-only layers staged, the standard layers' net"
GEEPS_CUDA_EMU_KERNELS=native $emu cargo test --release --workspace --test deploy_tools --test data_layers \
  --test hdf5_data --test memory_data --test cpu_only_layers --test standard_nets

step "caffe-geeps with rows on the CUDA device and CPU layers: bit for bit as the host device"
GEEPS_CUDA_EMU_KERNELS=native $emu cargo test --release --workspace --test training gpu_device
caffe="${CARGO_TARGET_DIR:-target}/release/caffe-geeps"
work="$(mktemp -d)"
trap 'rm -rf "$cubins" "$work"' EXIT
for device in host gpu; do
  flags=()
  [ "$device" = gpu ] && flags=(--gpu 0 --cpu-layers)
  GEEPS_CUDA_EMU_KERNELS=native $emu "$caffe" train --solver examples/caffe/models/lenet_solver.prototxt \
    --overwrite --workers 1 --max-iter 200 --no-progress --curve "$work/$device" "${flags[@]}" | tee "$work/$device.log"
  cp results/caffe/lenet_iter_200.caffemodel "$work/$device.caffemodel"
  # The curve without its wall-clock column: iteration, lr, loss, test figures.
  cut -d, -f1,3- "$work/${device}_curve.csv" > "$work/$device.curve"
done
cmp "$work/host.caffemodel" "$work/gpu.caffemodel"
diff "$work/host.curve" "$work/gpu.curve"
echo "200 iterations: the same losses and the same weights, bit for bit, on the host and the CUDA device (CPU layers)"
if env -u LD_LIBRARY_PATH "$caffe" train --solver examples/caffe/models/lenet_solver.prototxt --workers 1 \
  --max-iter 1 --gpu 0 --no-progress 2> "$work/nodriver.log"; then
  echo "--gpu 0 without a driver trained anyway"; exit 1
fi
grep -q "no usable CUDA device" "$work/nodriver.log"
echo "without a driver: $(cat "$work/nodriver.log")"

step "geeps-bench quick mode on the CUDA device (functional; timings under the emulator mean nothing)"
GEEPS_CUDA_EMU_KERNELS=native $emu "${CARGO_TARGET_DIR:-target}/release/geeps-bench" all --quick --device cuda \
  --out "$work/bench-cuda" | tee "$work/bench.log"
grep -q "timings are NOT meaningful" "$work/bench.log"
"${CARGO_TARGET_DIR:-target}/release/geeps-bench" check --out "$work/bench-cuda"

step "done in $((SECONDS - start)) s"
