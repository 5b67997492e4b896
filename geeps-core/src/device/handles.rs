//! The values the device seam passes around: device addresses, stream,
//! event and index handles, row-index pairs and the row kernels. Plain
//! data; it never touches memory.

use std::fmt;

/// An address in device memory, pointing at `f32` data.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The address `floats` values further on.
    pub fn add_floats(self, floats: usize) -> DevicePtr {
        DevicePtr(self.0 + (floats * std::mem::size_of::<f32>()) as u64)
    }
}

impl fmt::Debug for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevicePtr({:#x})", self.0)
    }
}

/// A queue of device work that runs in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamId(pub u32);

/// A marker recorded on a stream; completes when the work before it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId(pub u64);

/// A gather/scatter index resident on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexId(pub u64);

/// One entry of a row index: row `buffer_row` of an access buffer corresponds
/// to row `store_row` of a store (cache or local data region).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowPair {
    /// Row of the access buffer.
    pub buffer_row: u32,
    /// Row of the store (parameter cache or local store).
    pub store_row: u32,
}

/// A row kernel: how [`Device::rows`](crate::device::Device::rows) moves rows between a store (cache,
/// local store) and an access buffer, pair by pair of an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOp {
    /// `buffer[buffer_row] = store[store_row]`
    Gather,
    /// `store[store_row] = buffer[buffer_row]`
    ScatterAssign,
    /// `store[store_row] += buffer[buffer_row]`
    ScatterAdd,
}
