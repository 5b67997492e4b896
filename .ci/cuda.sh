#!/usr/bin/env bash
# CUDA checks that need no GPU (run by .ci/run after the release build):
#   1. the checked-in PTX is what NVRTC 12.0 makes of kernels/*.cu today;
#   2. ptxas assembles it for sm_80 and sm_90;
#   3. the facade builds with `--features cuda` (no CUDA installed);
#   4. the PTX, executed on the CPU by the ptoxide interpreter, matches the
#      host device's kernels bit for bit.
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

step "ptxas: sm_80 and sm_90"
cubins=$(mktemp -d)
trap 'rm -rf "$cubins"' EXIT
for ptx in geeps-cuda/kernels/*.ptx; do
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

step "done in $((SECONDS - start)) s"
