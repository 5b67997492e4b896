//! Device and page-locked allocation: `cuMemAlloc_v2` within the context's
//! capacity, `cuMemFree_v2`, `cuMemGetInfo_v2`, and the pinned host
//! allocations. Must never charge or release capacity twice for one
//! allocation.

use std::ffi::{c_uint, c_void};

use super::guard::{guard, put, refuse};
use crate::memory::{space, ALIGN, POISON};
use crate::racecheck::{self, Resource};
use crate::result::{CUresult, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY};
use crate::{context, pinned};

#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    guard("cuMemGetInfo_v2", || {
        let ctx = context::current()?;
        put(free, ctx.capacity.saturating_sub(ctx.used()))?;
        put(total, ctx.capacity)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut u64, bytes: usize) -> CUresult {
    guard("cuMemAlloc_v2", || {
        let ctx = context::current()?;
        if dptr.is_null() || bytes == 0 {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("cuMemAlloc_v2 of {bytes} bytes"));
        }
        let charged = (bytes as u64).div_ceil(ALIGN).saturating_mul(ALIGN) as usize;
        if ctx.charge(charged).is_err() {
            return refuse(CUDA_ERROR_OUT_OF_MEMORY, || {
                format!(
                    "cuMemAlloc_v2 of {bytes} bytes: {} of {} bytes free",
                    ctx.capacity.saturating_sub(ctx.used()),
                    ctx.capacity
                )
            });
        }
        match space().alloc(bytes, charged, ctx.handle) {
            Ok(a) => put(dptr, a.base),
            Err(code) => {
                ctx.release(charged);
                refuse(code, || format!("cuMemAlloc_v2 of {bytes} bytes: no host memory or address range left"))
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn cuMemFree_v2(dptr: u64) -> CUresult {
    guard("cuMemFree_v2", || {
        context::current()?;
        let alloc = match space().free(dptr) {
            Ok(a) => a,
            Err(code) => {
                return refuse(code, || {
                    format!("cuMemFree_v2({dptr:#x}): not the start of a live allocation (freed already, or never allocated)")
                })
            }
        };
        let owner = context::by_handle(alloc.context);
        if let Ok(owner) = &owner {
            owner.release(alloc.charged);
        }
        // Queued work still holding it reads poison from here on, as a GPU would read garbage.
        alloc.lock().fill(POISON);
        let resource = Resource { base: alloc.base, size: alloc.size as u64, pinned: false };
        match (racecheck::free(resource, "cuMemFree_v2"), owner) {
            (Err(why), Ok(owner)) => {
                owner.fail(CUDA_ERROR_ILLEGAL_ADDRESS, &why);
                Err(CUDA_ERROR_ILLEGAL_ADDRESS)
            }
            _ => Ok(()),
        }
    })
}

unsafe fn host_alloc(name: &'static str, out: *mut *mut c_void, bytes: usize, flags: c_uint) -> CUresult {
    guard(name, || {
        context::current()?;
        // PORTABLE | DEVICEMAP | WRITECOMBINED
        if flags & !0x7 != 0 || out.is_null() {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("{name}: flags {flags:#x}"));
        }
        let p = pinned::alloc(bytes)?;
        put(out, p as *mut c_void)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(out: *mut *mut c_void, bytes: usize, flags: c_uint) -> CUresult {
    host_alloc("cuMemHostAlloc", out, bytes, flags)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(out: *mut *mut c_void, bytes: usize) -> CUresult {
    host_alloc("cuMemAllocHost_v2", out, bytes, 0)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    guard("cuMemFreeHost", || {
        context::current()?;
        match pinned::free(p as usize) {
            Ok(block) => {
                let resource = Resource { base: block.base() as u64, size: block.len() as u64, pinned: true };
                racecheck::free(resource, "cuMemFreeHost").or_else(|why| {
                    context::current()?.fail(CUDA_ERROR_ILLEGAL_ADDRESS, &why);
                    Err(CUDA_ERROR_ILLEGAL_ADDRESS)
                })
            }
            Err(code) => refuse(code, || format!("cuMemFreeHost({p:?}): not a live page-locked allocation")),
        }
    })
}
