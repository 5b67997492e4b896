//! The operations a stream runs: copies between host and device memory,
//! device-to-device copies, memsets, kernel launches, cuBLAS products and waits on another
//! stream. Each holds what it touches (allocations, pinned blocks, the host
//! bytes staged from pageable memory), so freeing either side while the
//! operation is queued cannot make it touch freed storage. Must never be run
//! except by a stream's thread, and never validate anything at run time that
//! the enqueuing call should have refused.

use std::sync::Arc;

use crate::blas::Gemm;
use crate::engine;
use crate::launch::Launch;
use crate::memory::Span;
use crate::pinned::PinnedBlock;
use crate::progress::Progress;
use crate::result::CUresult;

/// Where a host-to-device copy reads.
pub enum HostSource {
    /// Pageable memory, staged at the call (the driver copies it to its own
    /// pinned buffer before returning).
    Staged(Vec<u8>),
    /// Page-locked memory, read when the copy runs (DMA).
    Pinned { block: Arc<PinnedBlock>, addr: usize },
}

/// Where a device-to-host copy writes.
pub struct HostTarget {
    /// The pinned block written into, kept alive; None for pageable memory
    /// (whose caller waits for the copy before returning).
    pub block: Option<Arc<PinnedBlock>>,
    pub addr: usize,
}

pub enum Op {
    HostToDevice {
        dst: Span,
        src: HostSource,
    },
    DeviceToHost {
        src: Span,
        dst: HostTarget,
    },
    DeviceToDevice {
        src: Span,
        dst: Span,
    },
    /// `count` elements of `width` bytes (1 or 4) set to `value`.
    Memset {
        dst: Span,
        value: u32,
        width: usize,
    },
    Launch(Box<Launch>),
    /// A cuBLAS product.
    Gemm(Box<Gemm>),
    /// Waits until another stream has completed operation `seq`.
    Wait {
        progress: Arc<Progress>,
        seq: u64,
    },
}

impl Op {
    /// What the operation is, for fault messages.
    pub fn describe(&self) -> String {
        match self {
            Op::HostToDevice { dst, src } => format!(
                "a {} host-to-device copy of {} bytes to {:#x}",
                if matches!(src, HostSource::Pinned { .. }) { "page-locked" } else { "pageable" },
                dst.len,
                dst.alloc.base + dst.offset as u64
            ),
            Op::DeviceToHost { src, .. } => {
                format!("a device-to-host copy of {} bytes from {:#x}", src.len, src.alloc.base + src.offset as u64)
            }
            Op::DeviceToDevice { src, dst } => format!(
                "a device-to-device copy of {} bytes from {:#x} to {:#x}",
                src.len,
                src.alloc.base + src.offset as u64,
                dst.alloc.base + dst.offset as u64
            ),
            Op::Memset { dst, .. } => {
                format!("a memset of {} bytes at {:#x}", dst.len, dst.alloc.base + dst.offset as u64)
            }
            Op::Launch(l) => format!("kernel `{}`", l.name()),
            Op::Gemm(g) => g.describe(),
            Op::Wait { .. } => "a wait for another stream".into(),
        }
    }

    /// Runs the operation; a failure is (code, why).
    pub fn run(self) -> Result<(), (CUresult, String)> {
        match self {
            Op::HostToDevice { dst, src } => {
                let mut data = dst.alloc.lock();
                let out = &mut data[dst.offset..dst.offset + dst.len];
                match src {
                    HostSource::Staged(bytes) => out.copy_from_slice(&bytes),
                    // SAFETY: `addr..addr + len` was checked to lie in `block`,
                    // which this operation keeps allocated.
                    HostSource::Pinned { block: _block, addr } => unsafe {
                        std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), dst.len)
                    },
                }
            }
            Op::DeviceToHost { src, dst } => {
                let data = src.alloc.lock();
                let from = &data[src.offset..src.offset + src.len];
                // SAFETY: a pinned target was checked to hold the range and is
                // kept allocated by `dst.block`; a pageable target's caller
                // waits for this copy, so its buffer is live (its contract).
                unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), dst.addr as *mut u8, src.len) };
                drop(dst.block);
            }
            Op::DeviceToDevice { src, dst } => {
                if Arc::ptr_eq(&src.alloc, &dst.alloc) {
                    let mut data = src.alloc.lock();
                    data.copy_within(src.offset..src.offset + src.len, dst.offset);
                } else {
                    // Lock in address order, as every multi-allocation operation does.
                    let (first, second) = if src.alloc.base < dst.alloc.base {
                        (&src.alloc, &dst.alloc)
                    } else {
                        (&dst.alloc, &src.alloc)
                    };
                    let mut a = first.lock();
                    let mut b = second.lock();
                    let (from, to) =
                        if src.alloc.base < dst.alloc.base { (&a[..], &mut b[..]) } else { (&b[..], &mut a[..]) };
                    to[dst.offset..dst.offset + dst.len].copy_from_slice(&from[src.offset..src.offset + src.len]);
                }
            }
            Op::Memset { dst, value, width } => {
                let mut data = dst.alloc.lock();
                let out = &mut data[dst.offset..dst.offset + dst.len];
                if width == 4 {
                    for word in out.chunks_exact_mut(4) {
                        word.copy_from_slice(&value.to_ne_bytes());
                    }
                } else {
                    out.fill(value as u8);
                }
            }
            Op::Launch(launch) => engine::run(*launch)?,
            Op::Gemm(gemm) => gemm.run(),
            Op::Wait { progress, seq } => progress.wait_for(seq),
        }
        Ok(())
    }
}
