"""geeps for PyTorch.

- :func:`DistributedOptimizer`: data-parallel training with the parameters
  in a geeps table and a staleness bound per job (BSP, SSP, async), in the
  shape of Horovod's and BytePS's optimizers; :func:`broadcast_parameters`.
- :func:`offload`: the activations autograd saves, in a geeps local table
  within a device memory budget; :func:`activation_budget`, the same budget
  without offloading.
- :func:`tensor`: a geeps buffer as a tensor, without a copy (DLPack).
"""

from __future__ import annotations

import torch as _torch

from .offload import ActivationBudget, Offload, activation_budget, offload
from .optimizer import DistributedOptimizer, broadcast_parameters

__all__ = [
    "ActivationBudget",
    "DistributedOptimizer",
    "Offload",
    "activation_budget",
    "broadcast_parameters",
    "offload",
    "tensor",
]


def tensor(buffer) -> _torch.Tensor:
    """The rows of a held geeps buffer as a ``(rows, row_width)`` float32
    tensor on the buffer's device, without a copy. Valid while the buffer
    is held: delete it before releasing the buffer."""
    return _torch.from_dlpack(buffer)
