"""geeps buffers as torch tensors: the DLPack view and the wait a GPU
buffer needs before its release. It never copies and never releases."""

from __future__ import annotations

import torch


def tensor(buffer) -> torch.Tensor:
    """The rows of a held geeps buffer as a ``(rows, row_width)`` float32
    tensor on the buffer's device, without a copy. Valid while the buffer
    is held: delete it, and on a GPU :func:`settle` it, before releasing
    the buffer."""
    return torch.from_dlpack(buffer)


def settle(t: torch.Tensor) -> None:
    """Waits for the current CUDA stream's work on ``t``'s device (nothing
    on the CPU): geeps' streams do not wait for torch's, so a GPU buffer is
    released only after the kernels that touch it have run."""
    if t.is_cuda:
        torch.cuda.current_stream(t.device).synchronize()
