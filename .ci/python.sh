#!/usr/bin/env bash
# The python lane: the geeps Python package (geeps-py/) built as a wheel
# from the release profile, installed into a venv under the target folder
# with what it needs (maturin, numpy, pytest, torch), its pytest suite
# with torch, geeps-launch and the emulated CUDA driver required, and the
# LeNet example over 4 processes, briefly. torch is PyPI's wheel (no
# CPU-only build is reachable): about 3 GB of downloads and 5.5 GB
# installed, once per venv.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
venv="$target/python-venv"
py="$venv/bin/python"

step() { printf '\n--> %s  [%d s]\n' "$*" "$SECONDS"; }

step "venv ($venv): maturin, numpy, pytest, torch"
[ -x "$py" ] || python3 -m venv "$venv"
"$py" -m pip install --quiet --disable-pip-version-check "maturin>=1.5,<2" "numpy>=1.22" "pytest>=7"
if ! "$py" -c "import torch" 2>/dev/null; then
  "$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir "torch>=2.1"
fi
"$py" -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"

step "geeps-launch (release; the tests lane's build when there is one)"
[ -x "$target/release/geeps-launch" ] || cargo build --release --quiet -p geeps-launch

step "wheel (maturin, release profile)"
rm -rf "$target/wheels/python"
"$venv/bin/maturin" build --release --quiet -m geeps-py/Cargo.toml -i "$py" -o "$target/wheels/python"
"$py" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$target"/wheels/python/geeps-*.whl

step "pytest (geeps-py/tests)"
GEEPS_TEST_TORCH=1 GEEPS_TEST_LAUNCH=1 GEEPS_TEST_CUDA_EMU=1 GEEPS_LAUNCH="$target/release/geeps-launch" \
  "$py" -m pytest geeps-py/tests -q -p no:cacheprovider

step "example: LeNet over 4 processes under geeps-launch, one short epoch"
PATH="$venv/bin:$PATH" "$target/release/geeps-launch" -n 4 -- \
  python examples/python/train_lenet.py --backend geeps --epochs 1 --train-images 2048
