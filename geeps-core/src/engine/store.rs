//! Row storage split between device and host: the parameter cache (one
//! region per table partition, with its data age, outgoing deltas and
//! in-flight clocks) and the local store (one region per local table).
//! It owns memory and the lock of each region; it never blocks or waits.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::device::{Device, DevicePtr, PinnedBuf};
use crate::engine::accumulators::Accumulators;
use crate::engine::outgoing::DeltaRange;
use crate::error::Result;

const HOST_BIT: u32 = 1 << 31;

/// Where each row of a region lives. Immutable once planned.
#[derive(Debug)]
pub(crate) struct Layout {
    /// First global row of the region.
    pub(crate) first_row: u32,
    /// Per region row: device slot, or host slot with `HOST_BIT` set.
    slots: Vec<u32>,
    /// Region rows in device-slot order.
    pub(crate) device_order: Vec<u32>,
    /// Region rows in host-slot order.
    pub(crate) host_order: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Device(u32),
    Host(u32),
}

impl Layout {
    /// `device_order` lists the region rows kept on the device, in slot order;
    /// every other row goes to the host in row order.
    pub(crate) fn new(first_row: u32, rows: u32, device_order: Vec<u32>) -> Self {
        let mut slots = vec![u32::MAX; rows as usize];
        for (slot, r) in device_order.iter().enumerate() {
            slots[*r as usize] = slot as u32;
        }
        let mut host_order = Vec::new();
        for (r, s) in slots.iter_mut().enumerate() {
            if *s == u32::MAX {
                *s = host_order.len() as u32 | HOST_BIT;
                host_order.push(r as u32);
            }
        }
        Layout { first_row, slots, device_order, host_order }
    }

    pub(crate) fn rows(&self) -> usize {
        self.slots.len()
    }

    /// Slot of a region-relative row.
    pub(crate) fn slot(&self, row: u32) -> Slot {
        let s = self.slots[row as usize];
        if s & HOST_BIT != 0 {
            Slot::Host(s & !HOST_BIT)
        } else {
            Slot::Device(s)
        }
    }
}

/// Device memory of a region; freed with it.
pub(crate) struct DeviceRegion {
    device: Arc<dyn Device>,
    pub(crate) ptr: Option<DevicePtr>,
}

impl DeviceRegion {
    pub(crate) fn new(device: &Arc<dyn Device>, floats: usize) -> Result<Self> {
        let ptr = if floats == 0 { None } else { Some(device.alloc(floats)?) };
        Ok(DeviceRegion { device: device.clone(), ptr })
    }
}

impl Drop for DeviceRegion {
    fn drop(&mut self) {
        if let Some(ptr) = self.ptr.take() {
            // SAFETY: the region owns this allocation, and the engine stops
            // every thread using it before dropping the stores.
            unsafe { self.device.free(ptr) };
        }
    }
}

/// Mutable state of one parameter partition, under its lock.
pub(crate) struct ParamState {
    /// Host part of the cached rows, in host-slot order.
    pub(crate) host: PinnedBuf,
    /// Data age of the cached rows.
    pub(crate) age: u64,
    /// The keepers' vector clock at the last publication (diagnostics).
    pub(crate) included: Vec<u64>,
    /// Deltas of the current clock, dense over the partition.
    pub(crate) accum: Vec<f32>,
    /// `accum` holds an earlier clock's deltas (recycled, not zeroed): the
    /// clock's first update assigns or zeroes it. Set while `dirty` only when the
    /// deltas are `borrowed` (`accum` then untouched).
    pub(crate) accum_stale: bool,
    pub(crate) dirty: bool,
    /// Every delta in `accum` is also in the cached rows. Updates go into
    /// `accum` only and the cache catches up when a read needs it
    /// (read-my-writes), so under BSP, where the publication brings the
    /// deltas back before the read, nothing is added to the cache twice.
    pub(crate) accum_in_cache: bool,
    /// Deltas already pushed but not yet seen in a publication (read-my-writes);
    /// the same bytes the pusher sent.
    pub(crate) inflight: VecDeque<Inflight>,
    /// Scratch for merging publications.
    pub(crate) scratch: Vec<f32>,
    /// The last publication's rows (partition-row order, aligned `f32`s)
    /// while they have not been copied into the cached rows: until then they
    /// are the partition's content, and reads gather from them. Kept only
    /// where the host addresses the cache; copied in before anything adds
    /// to the cached rows, dropped when a newer publication replaces them.
    pub(crate) published: Option<Bytes>,
    /// This clock's deltas when the application wrote them whole into an
    /// outgoing buffer (see `engine/outgoing.rs`): taken as they are, with
    /// `accum` left untouched. Moved into `accum` before more are added.
    pub(crate) borrowed: Option<DeltaRange>,
}

impl ParamState {
    /// This clock's deltas (meaningful while `dirty`).
    pub(crate) fn deltas(&self) -> &[f32] {
        self.borrowed.as_ref().map_or(&self.accum, |d| d.floats())
    }

    /// Moves borrowed deltas into `accum`, before more are added to them.
    pub(crate) fn own_deltas(&mut self) {
        if let Some(d) = self.borrowed.take() {
            self.accum.copy_from_slice(d.floats());
            self.accum_stale = false;
        }
    }
}

/// One clock's deltas of this worker, pushed and not yet published back.
pub(crate) struct Inflight {
    pub(crate) clock: u64,
    pub(crate) deltas: Bytes,
    /// Already added to the cached rows (by a read that caught up).
    pub(crate) in_cache: bool,
}

/// One partition of a parameter table in the parameter cache.
pub(crate) struct ParamPartition {
    pub(crate) layout: Layout,
    pub(crate) device: DeviceRegion,
    pub(crate) state: Mutex<ParamState>,
    pub(crate) cond: Condvar,
    /// Spare accumulators, recycled from sent messages.
    pub(crate) accumulators: Accumulators,
}

impl ParamPartition {
    pub(crate) fn new(device: &Arc<dyn Device>, layout: Layout, width: usize, workers: usize) -> Result<Self> {
        let region = DeviceRegion::new(device, layout.device_order.len() * width)?;
        let host = device.alloc_pinned(layout.host_order.len() * width)?;
        let rows = layout.rows();
        Ok(ParamPartition {
            layout,
            device: region,
            state: Mutex::new(ParamState {
                host,
                age: 0,
                included: vec![0; workers],
                accum: vec![0.0; rows * width],
                accum_stale: false,
                dirty: false,
                accum_in_cache: true,
                inflight: VecDeque::new(),
                scratch: Vec::new(),
                published: None,
                borrowed: None,
            }),
            cond: Condvar::new(),
            accumulators: Accumulators::default(),
        })
    }
}

/// The local store of one local table.
pub(crate) struct LocalRegion {
    pub(crate) layout: Layout,
    pub(crate) device: DeviceRegion,
    pub(crate) host: Mutex<PinnedBuf>,
}

impl LocalRegion {
    pub(crate) fn new(device: &Arc<dyn Device>, layout: Layout, width: usize) -> Result<Self> {
        let region = DeviceRegion::new(device, layout.device_order.len() * width)?;
        let host = device.alloc_pinned(layout.host_order.len() * width)?;
        Ok(LocalRegion { layout, device: region, host: Mutex::new(host) })
    }
}

/// Every region of an instance.
pub(crate) struct Stores {
    /// Per table: its partitions if it is a parameter table.
    pub(crate) params: Vec<Option<Vec<ParamPartition>>>,
    /// Per table: its region if it is a local table.
    pub(crate) locals: Vec<Option<LocalRegion>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_assigns_device_then_host_slots() {
        let l = Layout::new(10, 5, vec![3, 1]);
        assert_eq!(l.slot(3), Slot::Device(0));
        assert_eq!(l.slot(1), Slot::Device(1));
        assert_eq!(l.slot(0), Slot::Host(0));
        assert_eq!(l.slot(4), Slot::Host(2));
        assert_eq!(l.host_order, vec![0, 2, 4]);
    }
}
