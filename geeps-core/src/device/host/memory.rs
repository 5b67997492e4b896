//! Allocation of the host device's "device memory". Large regions are
//! aligned to 2 MiB and marked for transparent huge pages: the row kernels
//! touch rows scattered across a whole cache, and 4 KiB pages would cost a
//! TLB miss per row. Freed regions are kept for reuse (`Spares`): a GPU's
//! memory is mapped once, so the emulation must not pay the operating
//! system's page faults, zeroing and unmapping each time the buffer pool
//! trades a buffer of one size for another.

use std::alloc::{alloc_zeroed as std_alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;

use parking_lot::Mutex;

const HUGE: usize = 2 << 20;

fn layout(floats: usize) -> Option<Layout> {
    // At least one float so every allocation has a distinct address.
    let bytes = floats.max(1).checked_mul(4)?;
    let align = if bytes >= 2 * HUGE { HUGE } else { 64 };
    Layout::from_size_align(bytes, align).ok()
}

/// Zeroed memory for `floats` floats, or `None` if the system refuses.
pub(crate) fn alloc_zeroed(floats: usize) -> Option<*mut f32> {
    let layout = layout(floats)?;
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std_alloc_zeroed(layout) } as *mut f32;
    if ptr.is_null() {
        return None;
    }
    #[cfg(target_os = "linux")]
    if layout.align() == HUGE {
        // SAFETY: the range is the allocation just made. Advice only: a
        // failure leaves ordinary pages, which is still correct.
        unsafe { libc::madvise(ptr.cast(), layout.size(), libc::MADV_HUGEPAGE) };
    }
    Some(ptr)
}

/// # Safety
/// `ptr` came from `alloc_zeroed(floats)` and is not used afterwards.
pub(crate) unsafe fn free(ptr: *mut f32, floats: usize) {
    if let Some(layout) = layout(floats) {
        dealloc(ptr.cast(), layout);
    }
}

/// Freed regions kept for reuse, by size in floats. Never holds more than
/// `limit` bytes; what does not fit goes back to the system.
pub(crate) struct Spares {
    limit: usize,
    inner: Mutex<(usize, HashMap<usize, Vec<usize>>)>,
}

impl Spares {
    pub(crate) fn new(limit: usize) -> Self {
        Spares { limit, inner: Mutex::new((0, HashMap::new())) }
    }

    /// A kept region of exactly `floats` floats; its contents are stale.
    pub(crate) fn take(&self, floats: usize) -> Option<*mut f32> {
        let mut g = self.inner.lock();
        let addr = g.1.get_mut(&floats)?.pop()?;
        g.0 -= floats * 4;
        Some(addr as *mut f32)
    }

    /// Keeps a freed region; false when over the limit (the caller frees it).
    pub(crate) fn keep(&self, ptr: *mut f32, floats: usize) -> bool {
        let mut g = self.inner.lock();
        if g.0 + floats * 4 > self.limit {
            return false;
        }
        g.0 += floats * 4;
        g.1.entry(floats).or_default().push(ptr as usize);
        true
    }

    /// Every kept region, for the owner to free.
    pub(crate) fn drain(&mut self) -> Vec<(*mut f32, usize)> {
        let g = self.inner.get_mut();
        g.0 = 0;
        g.1.drain().flat_map(|(floats, addrs)| addrs.into_iter().map(move |a| (a as *mut f32, floats))).collect()
    }
}
