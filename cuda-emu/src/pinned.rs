//! Page-locked host memory (`cuMemHostAlloc`, `cuMemAllocHost`): ordinary
//! page-aligned host allocations, registered so that a copy can tell pinned
//! memory (read or written by the stream when the copy runs, as DMA does)
//! from pageable memory (staged by the driver at the call). A block lives
//! until it is freed and no enqueued copy refers to it. Must never treat a
//! range that merely starts in a block but runs past its end as pinned.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use crate::memory::POISON;
use crate::result::{Res, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY};

/// One page-locked allocation.
pub struct PinnedBlock {
    base: usize,
    layout: Layout,
}

impl PinnedBlock {
    pub fn base(&self) -> usize {
        self.base
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc` with this layout, dropped once.
        unsafe { std::alloc::dealloc(self.base as *mut u8, self.layout) };
    }
}

fn blocks() -> &'static RwLock<BTreeMap<usize, Arc<PinnedBlock>>> {
    static BLOCKS: OnceLock<RwLock<BTreeMap<usize, Arc<PinnedBlock>>>> = OnceLock::new();
    BLOCKS.get_or_init(Default::default)
}

/// `bytes` (at least 1) of page-aligned, poisoned host memory, registered as pinned.
pub fn alloc(bytes: usize) -> Res<*mut u8> {
    let layout = Layout::from_size_align(bytes.max(1), 4096).map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return Err(CUDA_ERROR_OUT_OF_MEMORY);
    }
    // SAFETY: `p` is valid for the layout's size.
    unsafe { std::ptr::write_bytes(p, POISON, layout.size()) };
    let block = Arc::new(PinnedBlock { base: p as usize, layout });
    blocks().write().unwrap_or_else(|e| e.into_inner()).insert(p as usize, block);
    Ok(p)
}

/// Unregisters the block at `ptr`; its memory goes once no copy uses it.
/// Returns the block (enqueued copies may still hold it).
pub fn free(ptr: usize) -> Res<Arc<PinnedBlock>> {
    blocks().write().unwrap_or_else(|e| e.into_inner()).remove(&ptr).ok_or(CUDA_ERROR_INVALID_VALUE)
}

/// Whether `[ptr, ptr + len)` is pinned: `Ok(Some)` if inside one block,
/// `Ok(None)` if it touches no block (pageable), an error if it starts in a
/// block and runs past its end.
pub fn lookup(ptr: usize, len: usize) -> Result<Option<Arc<PinnedBlock>>, String> {
    let map = blocks().read().unwrap_or_else(|e| e.into_inner());
    let Some((_, block)) = map.range(..=ptr).next_back() else {
        return Ok(None);
    };
    let end = block.base + block.len();
    if ptr >= end {
        return Ok(None);
    }
    if len > end - ptr {
        return Err(format!(
            "{len} bytes at host address {ptr:#x} run {} bytes past the end of the page-locked buffer at {:#x} ({} bytes)",
            len - (end - ptr),
            block.base,
            block.len()
        ));
    }
    Ok(Some(block.clone()))
}
