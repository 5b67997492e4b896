//! Allocation of the host device's "device memory". Large regions are
//! aligned to 2 MiB and marked for transparent huge pages: the row kernels
//! touch rows scattered across a whole cache, and 4 KiB pages would cost a
//! TLB miss per row.

use std::alloc::{alloc_zeroed as std_alloc_zeroed, dealloc, Layout};

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
