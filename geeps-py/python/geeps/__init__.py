"""geeps: a GPU-specialized parameter server for data-parallel training.

The classes come from the extension module (``geeps._geeps``); this file
adds the process-wide cluster (:func:`init`, :func:`shutdown`) that
:class:`Builder` joins by default. ``geeps.torch`` holds the PyTorch
integration. It must not import torch.
"""

from __future__ import annotations

import atexit
from typing import Optional

from . import _geeps
from ._geeps import (
    ArgumentError,
    Buffer,
    BufferReleasedError,
    CheckpointError,
    Cluster,
    ConfigError,
    DeviceError,
    Geeps,
    GeepsError,
    GeepsIoError,
    GeepsPanic,
    Handle,
    LocalCluster,
    MemoryBudgetError,
    PeerError,
    ShutDownError,
    StateError,
    Table,
    TimeoutError,
    UnknownKeyError,
    VirtualIteration,
    cuda_probe,
    init_logging,
)

__version__ = _geeps.__version__
DEFAULT_ROW_WIDTH = _geeps.DEFAULT_ROW_WIDTH

__all__ = [
    "ArgumentError",
    "Buffer",
    "BufferReleasedError",
    "Builder",
    "CheckpointError",
    "Cluster",
    "ConfigError",
    "DeviceError",
    "Geeps",
    "GeepsError",
    "GeepsIoError",
    "GeepsPanic",
    "Handle",
    "LocalCluster",
    "MemoryBudgetError",
    "PeerError",
    "ShutDownError",
    "StateError",
    "Table",
    "TimeoutError",
    "UnknownKeyError",
    "VirtualIteration",
    "cluster",
    "cuda_probe",
    "init",
    "init_logging",
    "shutdown",
]

_cluster: Optional[Cluster] = None


def init(*, shutdown_timeout: Optional[float] = None) -> Cluster:
    """Joins the cluster the environment describes, once per process.

    Reads what geeps-launch, torchrun, Slurm (srun) or mpirun set, or
    ``GEEPS_RANK``/``GEEPS_WORLD_SIZE`` with ``GEEPS_HOSTS`` or
    ``GEEPS_HOSTFILE``. Builders then join it by default. Raises
    :class:`ConfigError` naming what is missing when nothing describes a
    cluster. A second call returns the same cluster.
    """
    global _cluster
    if _cluster is None:
        from . import _torchrun

        if _torchrun.under_torchrun():
            rank, addresses = _torchrun.addresses()
            _cluster = Cluster.connect(rank, addresses, shutdown_timeout=shutdown_timeout)
        else:
            _cluster = Cluster.from_env(shutdown_timeout=shutdown_timeout)
    return _cluster


def cluster() -> Optional[Cluster]:
    """The cluster :func:`init` joined, or None."""
    return _cluster


def shutdown() -> None:
    """Shuts down the instances built on the cluster of :func:`init`, then
    the cluster itself. Also runs at exit."""
    global _cluster
    if _cluster is not None:
        c, _cluster = _cluster, None
        c.shutdown()


atexit.register(shutdown)


class Builder(_geeps.Builder):
    """Declares an instance: ``row_width`` floats per row, ``device_memory``
    bytes of budget, ``device`` ``"host"`` or ``"cuda:N"``; then tables
    (:meth:`parameter_table`, :meth:`local_table`) and :meth:`build`."""

    def build(self, cluster=None, rank: Optional[int] = None) -> Geeps:
        """Joins ``cluster`` (default: the one :func:`init` joined, else a
        single worker) and returns the instance."""
        if cluster is None and rank is None:
            cluster = _cluster
        return super().build(cluster, rank)
