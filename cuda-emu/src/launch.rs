//! Kernel launches: validated and captured at `cuLaunchKernel` (the argument
//! values are copied then, as the driver does, and every 64-bit argument that
//! points into a live allocation is resolved to it), run later on the stream
//! by `engine`. Must never read the caller's argument memory after the
//! launch call returned, nor run anything.

use std::ffi::c_void;
use std::sync::{Arc, MutexGuard};

use crate::config::config;
use crate::extents;
use crate::log;
use crate::memory::{space, Allocation};
use crate::module::{Entry, Function};
use crate::result::{Res, CUDA_ERROR_INVALID_VALUE};

/// An argument that held a device address when the kernel was launched.
pub struct Pointer {
    pub param: usize,
    pub alloc: Arc<Allocation>,
    pub offset: usize,
    /// Bytes from `offset` on that the caller declared the argument covers
    /// (guard mode, `extents`), within the allocation; None: to its end.
    pub reach: Option<usize>,
}

impl Pointer {
    /// Bytes from `offset` the argument may touch.
    pub fn bytes(&self) -> usize {
        let rest = self.alloc.size.saturating_sub(self.offset);
        self.reach.map_or(rest, |r| r.min(rest))
    }
}

pub struct Launch {
    pub function: Arc<Function>,
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    /// Bytes of dynamic shared memory.
    pub shared: u32,
    /// Each parameter's bytes, in order.
    pub args: Vec<Vec<u8>>,
    pub pointers: Vec<Pointer>,
    /// Arguments that held an address in freed device memory: (parameter, which free).
    pub freed: Vec<(usize, String)>,
}

const CU_LAUNCH_PARAM_END: usize = 0x00;
const CU_LAUNCH_PARAM_BUFFER_POINTER: usize = 0x01;
const CU_LAUNCH_PARAM_BUFFER_SIZE: usize = 0x02;

/// Limits of compute capability 7.0 and later.
const MAX_THREADS_PER_BLOCK: u64 = 1024;
const MAX_STATIC_SHARED: u32 = 48 << 10;

fn refuse<T>(why: String) -> Res<T> {
    log::debug(|| format!("cuLaunchKernel refused: {why}"));
    Err(CUDA_ERROR_INVALID_VALUE)
}

impl Launch {
    pub fn entry(&self) -> &Entry {
        self.function.entry()
    }

    pub fn name(&self) -> &str {
        &self.entry().name
    }

    /// Checks the geometry and copies the arguments.
    ///
    /// # Safety
    /// As `cuLaunchKernel`: `params` holds one valid pointer per parameter
    /// (or `extra` describes a packed buffer). `declared` is the caller's
    /// declaration of its arguments' extents (`extents`), used in guard mode.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn capture(
        function: Arc<Function>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared: u32,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
        declared: &[(u64, u64)],
    ) -> Res<Launch> {
        let name = function.entry().name.clone();
        if [grid.0, grid.1, grid.2, block.0, block.1, block.2].contains(&0) {
            return refuse(format!("kernel `{name}`: a zero grid or block dimension"));
        }
        let threads = block.0 as u64 * block.1 as u64 * block.2 as u64;
        if threads > MAX_THREADS_PER_BLOCK
            || block.2 > 64
            || grid.1 > 65535
            || grid.2 > 65535
            || grid.0 > i32::MAX as u32
        {
            return refuse(format!("kernel `{name}`: grid {grid:?} / block {block:?} beyond the device's limits"));
        }
        if shared > MAX_STATIC_SHARED {
            return refuse(format!("kernel `{name}`: {shared} bytes of dynamic shared memory"));
        }
        let entry = function.entry();
        let args = match (params.is_null(), extra.is_null()) {
            (false, true) => entry
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let arg = *params.add(i) as *const u8;
                    if arg.is_null() {
                        return refuse(format!("kernel `{name}`: argument {i} is a null pointer"));
                    }
                    Ok(std::slice::from_raw_parts(arg, p.size).to_vec())
                })
                .collect::<Res<Vec<_>>>()?,
            (true, false) => unpack_extra(entry, extra)?,
            (true, true) if entry.params.is_empty() => Vec::new(),
            _ => return refuse(format!("kernel `{name}`: kernelParams and extra both given, or neither")),
        };
        let pointers = args
            .iter()
            .enumerate()
            .filter(|(_, a)| a.len() == 8)
            .filter_map(|(param, a)| {
                let value = u64::from_ne_bytes(a[..8].try_into().ok()?);
                let alloc = space().find(value)?;
                let reach = if config().guard { extents::reach(declared, value) } else { None };
                Some(Pointer { param, offset: (value - alloc.base) as usize, alloc, reach: reach.map(|r| r as usize) })
            })
            .collect();
        let freed = args
            .iter()
            .enumerate()
            .filter(|(_, a)| a.len() == 8)
            .filter_map(|(param, a)| Some((param, space().freed_note(u64::from_ne_bytes(a[..8].try_into().ok()?))?)))
            .collect();
        Ok(Launch { function, grid, block, shared, args, pointers, freed })
    }

    /// The distinct allocations the arguments point into, in address order
    /// (the order every operation locks them in), and for each pointer
    /// argument the index of its allocation in that list.
    pub fn allocations(&self) -> (Vec<Arc<Allocation>>, Vec<usize>) {
        let mut allocs: Vec<Arc<Allocation>> = self.pointers.iter().map(|p| p.alloc.clone()).collect();
        allocs.sort_by_key(|a| a.base);
        allocs.dedup_by_key(|a| a.base);
        let slots =
            self.pointers.iter().map(|p| allocs.iter().position(|a| a.base == p.alloc.base).unwrap_or(0)).collect();
        (allocs, slots)
    }
}

impl Launch {
    /// For each allocation of `allocations()` whose every pointer argument
    /// was declared (guard mode), the address ranges those arguments cover;
    /// empty for the others (held only to the allocation's bounds).
    pub fn fences(&self, allocs: &[Arc<Allocation>]) -> Vec<Vec<(u64, u64)>> {
        allocs
            .iter()
            .map(|a| {
                let args: Vec<&Pointer> = self.pointers.iter().filter(|p| p.alloc.base == a.base).collect();
                if args.is_empty() || args.iter().any(|p| p.reach.is_none()) {
                    return Vec::new();
                }
                args.iter().map(|p| (a.base + p.offset as u64, a.base + (p.offset + p.bytes()) as u64)).collect()
            })
            .collect()
    }
}

/// Locks `allocs` in the order given (address order).
pub fn lock_all(allocs: &[Arc<Allocation>]) -> Vec<MutexGuard<'_, Vec<u8>>> {
    allocs.iter().map(|a| a.lock()).collect()
}

/// The arguments from a `CU_LAUNCH_PARAM_BUFFER_POINTER` buffer, each at its aligned offset.
unsafe fn unpack_extra(entry: &Entry, extra: *mut *mut c_void) -> Res<Vec<Vec<u8>>> {
    let (mut buffer, mut size): (*const u8, Option<usize>) = (std::ptr::null(), None);
    let mut i = 0;
    loop {
        let key = *extra.add(i) as usize;
        match key {
            CU_LAUNCH_PARAM_END => break,
            CU_LAUNCH_PARAM_BUFFER_POINTER => buffer = *extra.add(i + 1) as *const u8,
            CU_LAUNCH_PARAM_BUFFER_SIZE => {
                let p = *extra.add(i + 1) as *const usize;
                size = (!p.is_null()).then(|| *p);
            }
            other => return refuse(format!("unknown launch option {other:#x} in `extra`")),
        }
        i += 2;
    }
    let (Some(size), false) = (size, buffer.is_null()) else {
        return refuse("`extra` lacks the buffer pointer or its size".into());
    };
    let mut offset = 0usize;
    let mut args = Vec::with_capacity(entry.params.len());
    for p in &entry.params {
        offset = offset.div_ceil(p.align.max(1)) * p.align.max(1);
        if offset + p.size > size {
            return refuse(format!("the `extra` buffer of {size} bytes is too small for kernel `{}`", entry.name));
        }
        args.push(std::slice::from_raw_parts(buffer.add(offset), p.size).to_vec());
        offset += p.size;
    }
    Ok(args)
}
