"""geeps for PyTorch.

- :func:`DistributedOptimizer`: data-parallel training with the parameters
  in a geeps table and a staleness bound per job (BSP, SSP, async), in the
  shape of Horovod's and BytePS's optimizers; :func:`broadcast_parameters`.
- :func:`offload`: the activations autograd saves, in a geeps local table
  within a device memory budget; :func:`activation_budget`, the same budget
  without offloading.
- :func:`tensor`: a geeps buffer as a tensor, without a copy (DLPack);
  :func:`settle`: the wait a GPU buffer needs before its release.

It re-exports only; the work is in the modules beside it.
"""

from __future__ import annotations

from .buffers import settle, tensor
from .offload import ActivationBudget, Offload, activation_budget, offload
from .optimizer import DistributedOptimizer, broadcast_parameters

__all__ = [
    "ActivationBudget",
    "DistributedOptimizer",
    "Offload",
    "activation_budget",
    "broadcast_parameters",
    "offload",
    "settle",
    "tensor",
]
