"""``DistributedOptimizer``: data-parallel training of a PyTorch model with
its parameters in a geeps parameter table.

Each step runs the wrapped optimizer on this worker's gradients, pushes the
change it made (new - old, divided by the number of workers) as a geeps
update, ends the clock, and reads the parameters back within ``slack``
clocks (0: BSP, k: SSP, None: asynchronous). It owns the parameter sync
only; the model, the loss and the data are the caller's.
"""

from __future__ import annotations

import io
from typing import Iterable, Optional, Tuple

import torch

import geeps

from .sync import ParameterSync

__all__ = ["DistributedOptimizer", "broadcast_parameters"]

_TABLE = "geeps.torch.parameters"


class _GeepsOptimizer:
    """Methods mixed into a subclass of the wrapped optimizer's class."""

    def __init__(
        self, params, named_parameters, slack, cluster, rank, row_width, device_memory, device, restore, compensate
    ):
        super(self.__class__, self).__init__(params)
        named = list(named_parameters) if named_parameters is not None else None
        self._geeps_sync = ParameterSync(
            _parameters(self.param_groups, named),
            slack=slack,
            cluster=cluster,
            rank=rank,
            row_width=row_width,
            device_memory=device_memory,
            device=device,
            table=_TABLE,
            compensate=compensate,
        )
        self.restored_steps: Optional[int] = None
        if restore is None:
            self._geeps_sync.broadcast(0)
        else:
            self._restore(restore)

    def step(self, closure=None):
        """Steps the wrapped optimizer on this worker's gradients, then
        exchanges the change with the other workers through geeps."""
        loss = super(self.__class__, self).step(closure)
        self._geeps_sync.exchange()
        return loss

    def broadcast_parameters(self, root_rank: int = 0) -> None:
        """Makes every worker's parameters ``root_rank``'s (construction
        already broadcast rank 0's; one clock)."""
        self._geeps_sync.broadcast(root_rank)

    @property
    def geeps(self) -> geeps.Geeps:
        """The geeps instance that holds the parameters."""
        return self._geeps_sync.ps

    @property
    def slack(self) -> Optional[int]:
        """The staleness bound of the reads (None: asynchronous)."""
        return self._geeps_sync.slack

    @property
    def compensated_steps(self) -> int:
        """Steps whose stale read was filled in with this worker's own
        steps (see ``compensate``)."""
        return self._geeps_sync.compensated

    def geeps_stats(self) -> dict:
        """geeps' counters (stall fraction, bytes moved, calls)."""
        return self._geeps_sync.ps.stats()

    def checkpoint(self, directory: str) -> Optional[str]:
        """Saves the parameters (geeps' checkpoint) and this worker's
        optimizer state. Every worker calls it after the same step; returns
        the checkpoint's folder on rank 0, None elsewhere."""
        state = io.BytesIO()
        torch.save({"optimizer": self.state_dict(), "steps": self._geeps_sync.steps}, state)
        return self._geeps_sync.checkpoint(directory, state.getvalue())

    def _restore(self, directory: str) -> None:
        restored = self._geeps_sync.restore(directory)
        states = restored["rank_states"]
        mine = states[self._geeps_sync.ps.rank % len(states)] if states else b""
        if mine:
            saved = torch.load(io.BytesIO(mine), weights_only=True)  # tensors and plain values only
            self.load_state_dict(saved["optimizer"])
            self._geeps_sync.steps = saved["steps"]
        self.restored_steps = self._geeps_sync.steps

    def shutdown(self) -> None:
        """Stops the geeps instance (also at exit)."""
        self._geeps_sync.ps.shutdown()


def _parameters(param_groups, named) -> list:
    """The parameters to keep in geeps, each once, in a fixed order."""
    if named is not None:
        names = [n for n, _ in named]
        if len(set(names)) != len(names):
            raise geeps.ArgumentError("named_parameters lists a name twice")
        by_id = {id(p): p for _, p in named}
        in_groups = {id(p) for g in param_groups for p in g["params"]}
        missing = [n for n, p in named if id(p) not in in_groups]
        if missing:
            raise geeps.ArgumentError(f"named parameters not in the optimizer: {missing}")
        return list(by_id.values())
    seen, out = set(), []
    for g in param_groups:
        for p in g["params"]:
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


def DistributedOptimizer(
    optimizer: torch.optim.Optimizer,
    named_parameters: Optional[Iterable[Tuple[str, torch.nn.Parameter]]] = None,
    *,
    slack: Optional[int] = 0,
    cluster=None,
    rank: Optional[int] = None,
    row_width: int = 1024,
    device_memory: int = 256 << 20,
    device: str = "host",
    restore: Optional[str] = None,
    compensate: bool = True,
):
    """Wraps ``optimizer`` (any ``torch.optim`` optimizer) for data-parallel
    training through geeps.

    The result is an instance of a subclass of the optimizer's own class
    (``isinstance`` and LR schedulers work); its parameters live in a geeps
    parameter table. ``slack`` bounds the staleness of the parameters each
    step reads back: 0 is BSP, k lets a worker run k clocks ahead of the
    slowest, None never waits. ``cluster``: default the one
    :func:`geeps.init` joined, else a single worker; ``rank`` with a
    :class:`geeps.LocalCluster` of several workers. ``device``: ``"host"``
    or ``"cuda:N"`` (where the table's cache lives).

    Construction syncs the start: every worker takes rank 0's parameters,
    or, with ``restore``, the newest checkpoint in that folder (written by
    :meth:`checkpoint`, possibly by another number of workers: worker r
    takes the optimizer state of saved worker ``r % saved_workers``, and
    ``restored_steps`` says how many steps it had taken).

    ``compensate`` (SSP only): when a step's read lacks the other workers'
    last k clocks, this worker's own steps of those clocks stand in for
    theirs in its local parameters (scaled to their share), so gradients
    are taken near where the table is going; the table itself only ever
    gets the workers' real steps. Stale reads otherwise act as extra
    momentum, which diverges with momentum 0.9 at slack 1.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise geeps.ArgumentError(f"optimizer must be a torch.optim.Optimizer, not {type(optimizer).__name__}")
    if slack is not None and (not isinstance(slack, int) or slack < 0):
        raise geeps.ArgumentError(f"slack must be an int >= 0 or None, not {slack!r}")
    # Horovod's shape: a subclass of the optimizer's own class, so that
    # isinstance checks and LR schedulers work.
    methods = {k: v for k, v in _GeepsOptimizer.__dict__.items() if k not in ("__dict__", "__weakref__")}
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), methods)
    wrapped = cls(
        optimizer.param_groups,
        named_parameters,
        slack,
        cluster,
        rank,
        row_width,
        device_memory,
        device,
        restore,
        bool(compensate),
    )
    if optimizer.state and restore is None:
        wrapped.load_state_dict(optimizer.state_dict())
    return wrapped


def broadcast_parameters(optimizer, root_rank: int = 0) -> None:
    """Makes every worker's parameters ``root_rank``'s (Horovod's
    ``broadcast_parameters``, given the optimizer that holds them)."""
    if not hasattr(optimizer, "_geeps_sync"):
        raise geeps.ArgumentError("broadcast_parameters takes a geeps.torch.DistributedOptimizer")
    optimizer.broadcast_parameters(root_rank)
