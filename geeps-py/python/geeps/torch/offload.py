"""Activations past device memory: the tensors autograd saves for backward
kept in a geeps local table, through ``torch.autograd.graph.saved_tensors_hooks``.

``offload(model, budget)`` hooks the model's forward. The first training
iteration keeps saved tensors as they are and records what is saved and in
which order it is used; from the second on, each saved tensor goes into
its rows of a geeps local table (one recorded access to save it, one to
fetch it in backward), and geeps' planner keeps what fits in ``budget``
bytes of device memory and the rest in host memory, prefetching ahead of
backward. ``activation_budget(model, budget)`` is the same accounting
without geeps: it fails when the saved tensors exceed the budget, as a
device of that size would. Parameters and tensors under ``min_bytes`` stay
where autograd put them. It must never change a value autograd gets back:
a tensor it cannot place as recorded stays in memory.
"""

from __future__ import annotations

from typing import List, Optional

import torch

import geeps

from .buffers import settle

__all__ = ["offload", "activation_budget", "Offload", "ActivationBudget"]


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _offloadable(t: torch.Tensor, min_bytes: int, params: set) -> bool:
    # A parameter, or a view of one (a transposed weight): the model keeps it anyway.
    if (t.requires_grad and t.is_leaf) or _storage(t) in params:
        return False
    nbytes = t.numel() * t.element_size()
    return nbytes >= min_bytes and nbytes % 4 == 0


def _as_floats(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as float32 values (no copy when contiguous)."""
    return t.detach().contiguous().view(-1).view(torch.uint8).view(torch.float32)


class _ForwardHooks:
    """Enters a saved-tensors-hooks context around each forward of a model."""

    def __init__(self, model: torch.nn.Module, pack, unpack, on_forward):
        self._ctx: Optional[torch.autograd.graph.saved_tensors_hooks] = None

        self.params: set = set()

        def pre(_module, _inputs):
            # Where the parameters are now (an optimizer may have moved them).
            self.params = {_storage(p) for p in model.parameters()}
            on_forward()
            self._ctx = torch.autograd.graph.saved_tensors_hooks(pack, unpack)
            self._ctx.__enter__()

        def post(_module, _inputs, _outputs):
            if self._ctx is not None:
                ctx, self._ctx = self._ctx, None
                ctx.__exit__(None, None, None)

        # always_call: a forward that raises must not leave the hooks on.
        self._handles = [model.register_forward_pre_hook(pre), model.register_forward_hook(post, always_call=True)]
        self._post = post

    def remove(self) -> None:
        self._post(None, None, None)
        for h in self._handles:
            h.remove()


class _Held:
    """A saved tensor kept in memory, counted while it lives."""

    __slots__ = ("tensor", "owner", "nbytes")

    def __init__(self, tensor, owner, nbytes):
        self.tensor, self.owner, self.nbytes = tensor, owner, nbytes
        owner._add(nbytes)

    def __del__(self):
        self.owner._add(-self.nbytes)


class ActivationBudget:
    """Counts the bytes of saved activations alive at once and raises
    :class:`geeps.MemoryBudgetError` past ``budget`` (see :func:`activation_budget`)."""

    def __init__(self, model: torch.nn.Module, budget: int, *, min_bytes: int = 4096):
        self.budget, self.min_bytes = int(budget), int(min_bytes)
        self.live = 0
        self.peak = 0
        self._hooks = _ForwardHooks(model, self._pack, self._unpack, lambda: None)

    def _add(self, n: int) -> None:
        self.live += n
        self.peak = max(self.peak, self.live)

    def _pack(self, t):
        if not _offloadable(t, self.min_bytes, self._hooks.params):
            return t
        nbytes = t.numel() * t.element_size()
        if self.live + nbytes > self.budget:
            raise geeps.MemoryBudgetError(
                f"saved activations need more than the {self.budget} bytes of device memory "
                f"({self.live + nbytes} bytes at this point): use geeps.torch.offload"
            )
        return _Held(t, self, nbytes)

    @staticmethod
    def _unpack(h):
        return h.tensor if isinstance(h, _Held) else h

    def remove(self) -> None:
        self._hooks.remove()


def activation_budget(model: torch.nn.Module, budget: int, *, min_bytes: int = 4096) -> ActivationBudget:
    """Holds ``model``'s saved activations to ``budget`` bytes without
    offloading them: the behaviour of a device of that size."""
    return ActivationBudget(model, budget, min_bytes=min_bytes)


class _Slot:
    """Where one saved tensor of the recorded iteration lives."""

    __slots__ = ("rows", "floats", "shape", "dtype", "unpacks", "store", "fetch")

    def __init__(self, t: torch.Tensor, rows: range, floats: int):
        self.rows, self.floats = rows, floats
        self.shape, self.dtype = t.shape, t.dtype
        self.unpacks = 0
        self.store = None
        self.fetch: List[geeps.Handle] = []

    def fits(self, t: torch.Tensor) -> bool:
        return t.shape == self.shape and t.dtype == self.dtype


class _Saved:
    """What autograd keeps for a tensor saved in geeps."""

    __slots__ = ("slot", "index", "device", "uses")

    def __init__(self, slot, index, device):
        self.slot, self.index, self.device, self.uses = slot, index, device, 0


class Offload:
    """The saved tensors of ``model`` in a geeps local table within
    ``budget`` bytes of device memory (see :func:`offload`)."""

    def __init__(
        self,
        model: torch.nn.Module,
        budget: int,
        *,
        row_width: int = 1024,
        min_bytes: int = 4096,
        device: str = "host",
    ):
        self.budget, self.row_width, self.min_bytes, self.device = int(budget), row_width, int(min_bytes), device
        self.ps: Optional[geeps.Geeps] = None
        self.table: Optional[geeps.Table] = None
        self.needed_bytes = 0  # peak bytes of saved activations alive at once (first iteration)
        self.unplanned = 0  # saved tensors that matched no recorded slot (kept in memory)
        self._slots: List[_Slot] = []
        self._packs = 0  # saved tensors packed in this iteration
        self._unpack_order: List[int] = []  # recorded: slot of each fetch in backward
        self._fetches = 0  # fetches in this iteration
        self._live = 0
        self._recording = True
        self._hooks = _ForwardHooks(model, self._pack, self._unpack, self._iteration_starts)

    # The first iteration: tensors stay in memory, their sizes and uses are recorded.

    def _add(self, n: int) -> None:
        self._live += n
        self.needed_bytes = max(self.needed_bytes, self._live)

    def _iteration_starts(self) -> None:
        if self._packs == 0:
            return  # the last forward saved nothing (eval, no_grad): not an iteration
        if self._recording:
            self._plan()
        self._packs, self._fetches = 0, 0

    def _plan(self) -> None:
        self._recording = False
        if not self._slots:
            return
        total = self._slots[-1].rows.stop
        b = geeps.Builder(row_width=self.row_width, device_memory=self.budget, device=self.device)
        self.table = b.local_table("geeps.torch.activations", total)
        # Its own single worker: activations are this worker's alone.
        self.ps = b.build(geeps.LocalCluster(1), rank=0)
        remaining = [s.unpacks for s in self._slots]
        with self.ps.virtual_iteration() as v:
            for s in self._slots:
                s.store = v.local_access(self.table, s.rows, fetch=False)
                v.post_local_access(s.store, save=True)
            for i in self._unpack_order:
                s = self._slots[i]
                h = v.local_access(self.table, s.rows, fetch=True)
                remaining[i] -= 1
                if remaining[i] == 0:
                    v.discard_local_access(h)  # its last use: the rows are dead
                else:
                    v.post_local_access(h, save=False)
                s.fetch.append(h)

    def _pack(self, t: torch.Tensor):
        if not _offloadable(t, self.min_bytes, self._hooks.params):
            return t
        index = self._packs
        self._packs += 1
        if self._recording:
            floats = t.numel() * t.element_size() // 4
            start = self._slots[-1].rows.stop if self._slots else 0
            rows = range(start, start + -(-floats // self.row_width))
            self._slots.append(_Slot(t, rows, floats))
            return (_Held(t, self, floats * 4), index)
        slot = self._slots[index] if index < len(self._slots) else None
        if slot is None or not slot.fits(t):
            self.unplanned += 1
            return t
        buf = self.ps.local_access(slot.store)
        rows = torch.from_dlpack(buf).view(-1)
        rows[: slot.floats].copy_(_as_floats(t))
        settle(rows)
        del rows
        buf.post()
        return _Saved(slot, index, t.device)

    def _unpack(self, packed):
        if isinstance(packed, tuple):  # recorded iteration
            held, index = packed
            self._slots[index].unpacks += 1
            self._unpack_order.append(index)
            return held.tensor
        if not isinstance(packed, _Saved):
            return packed
        slot = packed.slot
        packed.uses += 1
        # The recorded fetch for this use, if it still is; else by keys.
        use = packed.uses - 1
        if use < len(slot.fetch):
            buf = self.ps.local_access(slot.fetch[use])
        else:
            buf = self.ps.local_access_keys(self.table, slot.rows, fetch=True)
        out = torch.empty(slot.shape, dtype=slot.dtype, device=packed.device)
        rows = torch.from_dlpack(buf).view(-1)
        _as_floats(out).copy_(rows[: slot.floats])
        settle(rows)
        del rows
        if use + 1 == slot.unpacks:
            buf.discard()
        else:
            buf.post(save=False)
        self._fetches += 1
        return out

    def plan(self) -> dict:
        """geeps' placement of the activations (after the first iteration)."""
        if self.ps is None:
            raise geeps.StateError("offload plans after the first training iteration")
        return self.ps.plan()

    def stats(self) -> dict:
        """geeps' counters for the activation table."""
        if self.ps is None:
            raise geeps.StateError("offload plans after the first training iteration")
        return self.ps.stats()

    def remove(self) -> None:
        """Unhooks the model and shuts the activation table down."""
        self._hooks.remove()
        if self.ps is not None:
            self.ps.shutdown()


def offload(
    model: torch.nn.Module,
    budget: int,
    *,
    row_width: int = 1024,
    min_bytes: int = 4096,
    device: str = "host",
) -> Offload:
    """Keeps the activations ``model`` saves for backward in geeps within
    ``budget`` bytes of device memory (``device``: ``"host"``, whose
    capacity geeps enforces, or ``"cuda:N"``). Planned from the first
    training iteration; nothing changes in the training loop."""
    if budget <= 0:
        raise geeps.ArgumentError(f"budget is a number of bytes > 0, not {budget}")
    return Offload(model, budget, row_width=row_width, min_bytes=min_bytes, device=device)
