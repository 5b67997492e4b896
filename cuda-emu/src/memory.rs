//! The device address space: a large range of virtual addresses reserved
//! with no access rights (so a device pointer dereferenced on the host
//! faults), from which allocations take 256-byte-aligned addresses with an
//! unmapped gap between neighbours, and the host storage that holds each
//! allocation's bytes. Resolves a device range to its allocation and refuses
//! ranges that are freed, unknown or cross an allocation's end; remembers
//! freed ranges so an access to one names its free. Addresses are handed out
//! upwards and reused only once the reservation is exhausted, so freed
//! memory stays quarantined. Must never
//! hand out an address outside the reservation, nor let the storage be
//! reached through the device address itself.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use crate::result::{Res, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY};

/// Alignment of every device address (the real driver gives at least 256).
pub const ALIGN: u64 = 256;
/// Unmapped bytes between neighbouring allocations, so running one row off
/// the end of a buffer is an error rather than a write into the next one.
const GAP: u64 = 4096;
/// Byte value of fresh device memory (uninitialised reads show as NaN floats).
pub const POISON: u8 = 0xFF;

/// One `cuMemAlloc`: its device range and the bytes behind it.
pub struct Allocation {
    pub base: u64,
    pub size: usize,
    /// Bytes charged against the owning context's capacity.
    pub charged: usize,
    /// The owning context's handle.
    pub context: u64,
    data: Mutex<Vec<u8>>,
}

impl Allocation {
    /// The bytes, locked (operations lock allocations in address order).
    pub fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bytes, if no one else holds them now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, Vec<u8>>> {
        match self.data.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    pub fn end(&self) -> u64 {
        self.base + self.size as u64
    }
}

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "allocation {:#x}..{:#x} ({} bytes)", self.base, self.end(), self.size)
    }
}

/// A device range resolved to its allocation.
#[derive(Clone, Debug)]
pub struct Span {
    pub alloc: Arc<Allocation>,
    pub offset: usize,
    pub len: usize,
}

struct Space {
    next: u64,
    live: BTreeMap<u64, Arc<Allocation>>,
    /// Freed ranges, base → (end, which free), so a later access can name its free.
    freed: BTreeMap<u64, (u64, u64)>,
    frees: u64,
}

/// Freed ranges remembered (the oldest are forgotten beyond this).
const FREED_KEPT: usize = 1 << 16;

/// The reserved range and the live allocations in it.
pub struct AddressSpace {
    start: u64,
    end: u64,
    space: RwLock<Space>,
}

/// The process's device address space (reserved on first use).
pub fn space() -> &'static AddressSpace {
    static SPACE: OnceLock<AddressSpace> = OnceLock::new();
    SPACE.get_or_init(AddressSpace::reserve)
}

impl AddressSpace {
    /// Reserves up to 256 GiB of inaccessible addresses (less where the system refuses).
    fn reserve() -> AddressSpace {
        let mut len: usize = 256 << 30;
        loop {
            // SAFETY: an anonymous PROT_NONE mapping at an address the kernel picks;
            // nothing is ever read or written through it.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                let start = (p as u64).div_ceil(1 << 20) << 20;
                let end = p as u64 + len as u64;
                return AddressSpace { start, end, space: RwLock::new(Space::new(start)) };
            }
            if len <= 1 << 30 {
                // Nothing reservable: an empty space refuses every allocation.
                crate::log::fault("could not reserve a device address range; every allocation will fail");
                return AddressSpace { start: 0, end: 0, space: RwLock::new(Space::new(0)) };
            }
            len /= 2;
        }
    }

    /// Whether `addr` lies in the reserved device range (live or not).
    pub fn is_device_address(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// A new allocation of `size` bytes owned by `context`, poisoned. The
    /// caller has already charged `charged` bytes to the context.
    pub fn alloc(&self, size: usize, charged: usize, context: u64) -> Res<Arc<Allocation>> {
        let span = (size as u64).div_ceil(ALIGN) * ALIGN + GAP;
        let mut data = Vec::new();
        data.try_reserve_exact(size).map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
        data.resize(size, POISON);
        let mut s = self.space.write().unwrap_or_else(|p| p.into_inner());
        let base = match s.next.checked_add(span).filter(|e| *e <= self.end) {
            Some(_) => s.next,
            None => first_gap(&s.live, self.start, self.end, span).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?,
        };
        s.next = base + span;
        let alloc = Arc::new(Allocation { base, size, charged, context, data: Mutex::new(data) });
        s.live.insert(base, alloc.clone());
        Ok(alloc)
    }

    /// Unregisters the allocation starting exactly at `ptr`, remembering its range as freed.
    pub fn free(&self, ptr: u64) -> Res<Arc<Allocation>> {
        let mut s = self.space.write().unwrap_or_else(|p| p.into_inner());
        let alloc = s.live.remove(&ptr).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        s.frees += 1;
        let nth = s.frees;
        s.freed.insert(alloc.base, (alloc.end(), nth));
        if s.freed.len() > FREED_KEPT {
            s.freed.pop_first();
        }
        Ok(alloc)
    }

    /// If `addr` lies in a freed allocation (not reallocated since), which one and when.
    pub fn freed_note(&self, addr: u64) -> Option<String> {
        let s = self.space.read().unwrap_or_else(|p| p.into_inner());
        let (&base, &(end, nth)) = s.freed.range(..=addr).next_back()?;
        let reused = s.live.range(..=addr).next_back().is_some_and(|(_, a)| a.base >= base && addr < a.end());
        (addr < end && !reused).then(|| {
            format!(
                "{addr:#x} lies in allocation {base:#x}..{end:#x}, freed by cuMemFree_v2 (free #{nth} of this process)"
            )
        })
    }

    /// Unregisters every allocation of `context`.
    pub fn free_context(&self, context: u64) -> Vec<Arc<Allocation>> {
        let mut s = self.space.write().unwrap_or_else(|p| p.into_inner());
        let doomed: Vec<u64> = s.live.values().filter(|a| a.context == context).map(|a| a.base).collect();
        doomed.iter().filter_map(|b| s.live.remove(b)).collect()
    }

    /// The live allocation containing `addr`.
    pub fn find(&self, addr: u64) -> Option<Arc<Allocation>> {
        let s = self.space.read().unwrap_or_else(|p| p.into_inner());
        let (_, a) = s.live.range(..=addr).next_back()?;
        (addr < a.end()).then(|| a.clone())
    }

    /// `[addr, addr + len)` resolved to one live allocation, or why not.
    pub fn span(&self, addr: u64, len: usize) -> Result<Span, String> {
        let Some(alloc) = self.find(addr) else {
            if let Some(note) = self.freed_note(addr) {
                return Err(format!("use after free: {note}"));
            }
            return Err(if self.is_device_address(addr) {
                format!("device address {addr:#x} is not in any live allocation (freed, or never allocated)")
            } else {
                format!("{addr:#x} is not a device address")
            });
        };
        let offset = (addr - alloc.base) as usize;
        if len > alloc.size - offset {
            return Err(format!(
                "{len} bytes at {addr:#x} run {} bytes past the end of {alloc:?}",
                len - (alloc.size - offset)
            ));
        }
        Ok(Span { alloc, offset, len })
    }
}

impl Space {
    fn new(start: u64) -> Space {
        Space { next: start, live: BTreeMap::new(), freed: BTreeMap::new(), frees: 0 }
    }
}

/// The first free stretch of `span` bytes between live allocations.
fn first_gap(live: &BTreeMap<u64, Arc<Allocation>>, start: u64, end: u64, span: u64) -> Option<u64> {
    let mut cursor = start;
    for a in live.values() {
        if a.base >= cursor + span {
            return Some(cursor);
        }
        cursor = (a.end() + GAP).div_ceil(ALIGN) * ALIGN;
    }
    (cursor + span <= end).then_some(cursor)
}
