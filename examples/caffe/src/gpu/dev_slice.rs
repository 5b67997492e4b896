//! The trainer's handle on device memory: `len` floats at a device address,
//! with checked sub-ranges. It owns only the bounds arithmetic; it must never
//! dereference the address (it is not a host pointer).

use crate::error::{Error, Result};

/// `len` floats of device memory at device address `ptr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevSlice {
    pub ptr: u64,
    pub len: usize,
}

impl DevSlice {
    pub const EMPTY: DevSlice = DevSlice { ptr: 0, len: 0 };

    pub fn new(ptr: u64, len: usize) -> DevSlice {
        DevSlice { ptr, len }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `len` floats from float `offset` on; errors past the end.
    pub fn slice(&self, offset: usize, len: usize) -> Result<DevSlice> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Error::Gpu(format!(
                "a device range of {len} floats at {offset} lies outside a buffer of {} floats",
                self.len
            )));
        }
        Ok(DevSlice { ptr: self.ptr + 4 * offset as u64, len })
    }

    /// The first `len` floats; errors when shorter.
    pub fn prefix(&self, len: usize) -> Result<DevSlice> {
        self.slice(0, len)
    }
}
