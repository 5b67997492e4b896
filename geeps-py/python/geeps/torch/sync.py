"""``ParameterSync``: a model's parameters as one geeps parameter table.

The parameters become views of one flat float32 tensor (padded to whole
rows), so a step's change is one subtraction and the read-back one copy.
One recorded iteration: pre_update, update, table_clock, read, post_read.
Under SSP a read may lack the other workers' last clocks; with
``compensate``, each missing clock is filled with this worker's own step of
that clock (scaled to the others' share) in the local parameters only, so
gradients are taken near where the table is going, and the table still gets
nothing but real updates. It moves parameters only; which optimizer
computes the change is the caller's business.
"""

from __future__ import annotations

from collections import deque
from typing import Optional

import torch

import geeps

from .buffers import settle

_ALIGN = 16  # floats

class ParameterSync:
    """Keeps ``params`` in geeps table ``table``: :meth:`broadcast` or
    :meth:`restore` first, then :meth:`exchange` after every local step."""

    def __init__(self, params, *, slack, cluster, rank, row_width, device_memory, device, table, compensate=True):
        if not params:
            raise geeps.ArgumentError("no parameters to keep in geeps")
        for p in params:
            if p.dtype != torch.float32:
                raise geeps.ArgumentError(
                    f"geeps tables hold float32; a parameter of shape {tuple(p.shape)} is {p.dtype}"
                )
        place = params[0].device
        if any(p.device != place for p in params):
            raise geeps.ArgumentError("every parameter must be on one device")
        # Each parameter starts on a 64-byte boundary: kernels run slower on
        # weights that do not.
        offsets, total = [], 0
        for p in params:
            offsets.append(total)
            total += -(-p.numel() // _ALIGN) * _ALIGN
        rows = -(-total // row_width)
        self.params = params
        self.slack = slack
        # This worker's own full steps of its last `slack` clocks, newest first:
        # what stands in for the others' steps a stale read lacks.
        depth = slack if compensate and isinstance(slack, int) and slack > 0 else 0
        self.own_steps: deque = deque(maxlen=depth)
        self.compensated = 0
        self.steps = 0
        self.flat = torch.zeros(rows * row_width, dtype=torch.float32, device=place)
        with torch.no_grad():
            for p, offset in zip(params, offsets):
                n = p.numel()
                self.flat[offset : offset + n].copy_(p.detach().reshape(-1))
                # The parameter becomes a view of the flat tensor: what the
                # optimizer writes lands there.
                p.data = self.flat[offset : offset + n].view_as(p)
        # What this worker last read of the table (it starts at zeros).
        self.old = torch.zeros_like(self.flat)
        b = geeps.Builder(row_width=row_width, device_memory=device_memory, device=device)
        self.table = b.parameter_table(table, rows)
        self.ps = b.build(cluster, rank)
        self.rows = range(rows)
        with self.ps.virtual_iteration() as v:
            self._pre = v.pre_update(self.table, self.rows, overwrite=True)
            v.update(self._pre)
            v.table_clock(self.table)
            self._read = v.read(self.table, self.rows, slack=slack)
            v.post_read(self._read)

    def _difference(self, delta) -> None:
        """delta = parameters - what was last read, wherever delta lives."""
        if delta.device == self.flat.device:
            torch.sub(self.flat, self.old, out=delta)
        else:  # parameters on a GPU, the table's buffers in host memory (or the reverse)
            delta.copy_(self.flat - self.old)

    def _push(self, fill) -> None:
        buf = self.ps.pre_update(self._pre)
        delta = torch.from_dlpack(buf).view(-1)
        fill(delta)
        settle(delta)
        del delta
        buf.update()
        self.ps.table_clock(self.table)

    def _pull(self, buf) -> None:
        rows = torch.from_dlpack(buf).view(-1)
        self.flat.copy_(rows)
        settle(rows)
        del rows
        missing = self._missing_clocks(buf)
        buf.post()
        if missing and self.own_steps:
            # The others' steps this read lacks, estimated by this worker's
            # own (steps are alike under momentum), in the local copy only:
            # `old` takes them too, so the next change pushed is this
            # worker's own step and nothing else.
            others = (self.ps.num_workers - 1) / self.ps.num_workers
            for own in list(self.own_steps)[:missing]:
                self.flat.add_(own, alpha=others)
            self.compensated += 1
        self.old.copy_(self.flat)

    def _missing_clocks(self, buf) -> int:
        """How many of the others' latest clocks the read lacks."""
        if self.own_steps.maxlen == 0:
            return 0
        age = buf.data_age
        if age is None:
            return 0
        return max(0, self.ps.current_table_clock(self.table) - age)

    def exchange(self) -> None:
        """Pushes the change since the last exchange (divided by the number
        of workers: the sum of all is their mean) and reads back within the
        slack."""
        world = self.ps.num_workers

        def change(delta):
            self._difference(delta)
            if self.own_steps.maxlen:
                self.own_steps.appendleft(delta.to(self.flat.device, copy=True))
            if world > 1:
                delta.mul_(1.0 / world)

        with torch.no_grad():
            self._push(change)
            self._pull(self.ps.read(self._read))
        self.steps += 1

    def broadcast(self, root: int) -> None:
        """Every worker takes rank ``root``'s parameters (one clock): the
        root pushes the difference between its parameters and what it last
        read, the others nothing, and all read back under BSP."""
        world, rank = self.ps.num_workers, self.ps.rank
        if not (isinstance(root, int) and 0 <= root < world):
            raise geeps.ArgumentError(f"root_rank must be in 0..{world - 1}, not {root!r}")

        def initial(delta):
            if rank == root:
                self._difference(delta)
            else:
                delta.zero_()

        with torch.no_grad():
            self._push(initial)
            # BSP whatever the slack: every worker must see the root's rows.
            self._pull(self.ps.read_keys(self.table, self.rows, slack=0))

    def checkpoint(self, directory: str, state: bytes) -> Optional[str]:
        return self.ps.checkpoint(directory, state)

    def restore(self, directory: str) -> dict:
        """Loads the newest checkpoint in ``directory`` into the table and
        the parameters (instead of the first broadcast)."""
        restored = self.ps.restore(directory)
        with torch.no_grad():
            self._pull(self.ps.read_keys(self.table, self.rows, slack=0))
        return restored
