#!/usr/bin/env bash
# Installs what geeps-bench's sync scenario compares against, when present:
# PyTorch (CPU build) for gloo's all_reduce, and Open MPI with mpi4py for
# MPI's Allreduce over TCP and shared memory. geeps-bench runs each one it
# finds and says which it skipped and why.
#
#   scripts/bench-baselines.sh            # both
#   scripts/bench-baselines.sh gloo|mpi   # one
#
# PyTorch's CPU-only wheels live on PyTorch's own package index; set
# GEEPS_TORCH_INDEX to that index to avoid the much larger CUDA build.
set -euo pipefail
want="${1:-all}"
py="${PYTHON:-python3}"

if [[ "$want" == all || "$want" == gloo ]]; then
    if "$py" -c "import torch" 2>/dev/null; then
        echo "gloo: PyTorch already installed"
    else
        "$py" -m pip install ${GEEPS_TORCH_INDEX:+--index-url "$GEEPS_TORCH_INDEX"} torch
    fi
fi

if [[ "$want" == all || "$want" == mpi ]]; then
    if ! command -v mpirun >/dev/null; then
        sudo=""
        [[ $(id -u) -ne 0 ]] && sudo="sudo"
        $sudo apt-get update -q
        $sudo apt-get install -y -q openmpi-bin libopenmpi-dev
    fi
    if "$py" -c "import mpi4py, numpy" 2>/dev/null; then
        echo "mpi: mpi4py already installed"
    else
        "$py" -m pip install numpy mpi4py
    fi
fi
