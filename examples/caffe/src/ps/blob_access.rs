//! A layer call's local accesses, one per blob slot: recorded in the
//! virtual iteration, then held, viewed and posted together at training
//! time. One access per slot, never one key list over several slots: each
//! slot's rows are one range of one local table, which geeps serves in
//! place, where a list spanning two tables (a blob's data with another's
//! gradient) is gathered into a copy and saved back. It owns that grouping
//! only; which slots a layer needs is the worker's, the math is `net::layer_call`'s.

use std::borrow::Cow;

use geeps::{Geeps, Handle, LocalBuffer, RowKey};

use crate::error::Result;
use crate::gpu::DevSlice;
use crate::ps::host_view::{HostView, Writable};
use crate::ps::layout::Slot;

/// One slot of a recorded access: its handle and how many floats of its
/// rows it holds.
#[derive(Debug, Clone, Copy)]
struct Part {
    slot: Slot,
    floats: usize,
    handle: Handle,
}

/// The recorded accesses of one layer call's group (input, inout, output
/// or history), in order.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    parts: Vec<Part>,
    /// Whether posting saves what the layer wrote.
    save: bool,
}

/// A recorded group, held: one buffer per slot.
pub(crate) struct Held<'p> {
    bufs: Vec<(Part, LocalBuffer<'p>)>,
}

impl Access {
    /// Records one local access per slot (`slots` with their keys and
    /// floats), fetched or not, and their posts, saving or not.
    pub(crate) fn record(
        ps: &Geeps,
        slots: impl IntoIterator<Item = (Slot, Vec<RowKey>, usize)>,
        fetch: bool,
        save: bool,
    ) -> Result<Option<Access>> {
        let mut parts = Vec::new();
        for (slot, keys, floats) in slots {
            parts.push(Part { slot, floats, handle: ps.virtual_local_access(&keys, fetch)? });
        }
        Ok((!parts.is_empty()).then_some(Access { parts, save }))
    }

    /// Records the posts of the group's accesses (in the order training
    /// posts them).
    pub(crate) fn record_post(&self, ps: &Geeps) -> Result<()> {
        for p in &self.parts {
            ps.virtual_post_local_access(p.handle, self.save)?;
        }
        Ok(())
    }

    /// Acquires every slot's buffer.
    pub(crate) fn open<'p>(&self, ps: &'p Geeps) -> Result<Held<'p>> {
        let mut bufs = Vec::with_capacity(self.parts.len());
        for &p in &self.parts {
            bufs.push((p, ps.local_access(p.handle)?));
        }
        Ok(Held { bufs })
    }
}

/// Acquires a recorded group, if the layer has one.
pub(crate) fn open<'p>(ps: &'p Geeps, a: &Option<Access>) -> Result<Option<Held<'p>>> {
    a.as_ref().map(|a| a.open(ps)).transpose()
}

impl<'p> Held<'p> {
    /// Each slot's contents, read only, `floats` long (a staged view moves
    /// only those, not the padding of the slot's last row).
    pub(crate) fn read<'b>(&'b self, hv: &HostView) -> Result<Vec<(Slot, Cow<'b, [f32]>)>> {
        let mut out = Vec::with_capacity(self.bufs.len());
        for (p, b) in &self.bufs {
            let floats = p.floats.min(b.len());
            out.push((p.slot, hv.read(b.device_ptr(), floats, || b.as_slice().map(|s| &s[..floats]))?));
        }
        Ok(out)
    }

    /// Each slot's contents, writable and `floats` long (fetched: the layer
    /// may keep what it does not overwrite); [`commit`] puts them back.
    pub(crate) fn write<'b>(&'b mut self, hv: &HostView) -> Result<Vec<(Slot, Writable<'b>)>> {
        let mut out = Vec::with_capacity(self.bufs.len());
        for (p, b) in &mut self.bufs {
            let (ptr, floats) = (b.device_ptr(), p.floats.min(b.len()));
            out.push((p.slot, hv.write(ptr, floats, true, || b.as_mut_slice().map(|s| &mut s[..floats]))?));
        }
        Ok(out)
    }

    /// Each slot's device range, `floats` long.
    pub(crate) fn device(&self) -> Vec<(Slot, DevSlice)> {
        self.bufs.iter().map(|(p, b)| (p.slot, DevSlice::new(b.device_ptr().0, p.floats))).collect()
    }

    /// The only slot's buffer (a group of one slot: the solver history).
    pub(crate) fn single(&mut self) -> Option<&mut LocalBuffer<'p>> {
        match self.bufs.as_mut_slice() {
            [(_, b)] => Some(b),
            _ => None,
        }
    }

    /// Posts every slot's buffer, saving as recorded.
    pub(crate) fn post(self) -> Result<()> {
        for (_, b) in self.bufs {
            b.post()?;
        }
        Ok(())
    }
}

/// Puts writable views back into their buffers.
pub(crate) fn commit(hv: &HostView, views: Vec<(Slot, Writable<'_>)>) -> Result<()> {
    for (_, v) in views {
        hv.commit(v)?;
    }
    Ok(())
}
