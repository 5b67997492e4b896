//! Native kernels a program registers with the emulator, through the C entry
//! point `geeps_cuda_emu_register_native_kernels` (a program finds it with
//! `dlsym` on the loaded `libcuda.so.1`; a real driver has no such symbol,
//! so nothing registers there). Each registered kernel is a name, its
//! parameter sizes and two callbacks: `claims`, whether its native code
//! gives the PTX's bits for a launch's geometry and arguments, and `run`,
//! which gets the launch with each pointer argument resolved to the host
//! bytes of its allocation (from where it points to the allocation's end,
//! the allocations locked for the call) and reports a fault as a driver
//! code and a message. The callbacks must not unwind. Must never hand a
//! callback memory outside the launch's locked allocations, nor call it
//! for a launch whose name or parameter sizes differ.

use std::ffi::CStr;
use std::sync::{Arc, RwLock};

pub use super::abi::{ClaimsFn, NativeArg, NativeKernel, NativeLaunch, RunFn, NATIVE_KERNELS_ABI};
use crate::launch::{lock_all, Launch};
use crate::result::{CUresult, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_LAUNCH_FAILED, CUDA_SUCCESS};

struct Registered {
    name: String,
    params: Vec<usize>,
    claims: ClaimsFn,
    run: RunFn,
}

static REGISTERED: RwLock<Vec<Arc<Registered>>> = RwLock::new(Vec::new());

/// Registers `count` native kernels from `kernels` (copied; a kernel of the
/// same name registered before is replaced). INVALID_VALUE for another ABI
/// or a malformed entry, and then nothing is registered.
///
/// # Safety
/// `kernels` points at `count` entries whose names are NUL-terminated and
/// whose `params` point at `param_count` sizes; the callbacks stay callable
/// for the life of the process and never unwind.
#[no_mangle]
pub unsafe extern "C" fn geeps_cuda_emu_register_native_kernels(
    abi: u32,
    kernels: *const NativeKernel,
    count: usize,
) -> CUresult {
    if abi != NATIVE_KERNELS_ABI || (kernels.is_null() && count > 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let mut table = Vec::with_capacity(count);
    for k in (0..count).map(|i| &*kernels.add(i)) {
        if k.name.is_null() || (k.params.is_null() && k.param_count > 0) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let Ok(name) = CStr::from_ptr(k.name).to_str() else { return CUDA_ERROR_INVALID_VALUE };
        let params =
            if k.param_count == 0 { Vec::new() } else { std::slice::from_raw_parts(k.params, k.param_count).to_vec() };
        table.push(Registered { name: name.to_string(), params, claims: k.claims, run: k.run });
    }
    let mut registered = REGISTERED.write().unwrap_or_else(|p| p.into_inner());
    for k in table {
        registered.retain(|r| r.name != k.name);
        registered.push(Arc::new(k));
    }
    CUDA_SUCCESS
}

fn kernel(index: usize) -> Option<Arc<Registered>> {
    REGISTERED.read().unwrap_or_else(|p| p.into_inner()).get(index).cloned()
}

/// The launch as the callbacks see it, over `args` (which it points into).
fn view(launch: &Launch, args: &[NativeArg]) -> NativeLaunch {
    let name = launch.name();
    let (g, b) = (launch.grid, launch.block);
    NativeLaunch {
        name: name.as_ptr(),
        name_len: name.len(),
        grid: [g.0, g.1, g.2],
        block: [b.0, b.1, b.2],
        args: args.as_ptr(),
        arg_count: args.len(),
    }
}

/// Each argument's bytes and, for a pointer, its offset; no host memory.
fn bare_args(launch: &Launch) -> Vec<NativeArg> {
    let mut args: Vec<NativeArg> = launch
        .args
        .iter()
        .map(|a| NativeArg {
            bytes: a.as_ptr(),
            size: a.len(),
            pointer: 0,
            offset: 0,
            host: std::ptr::null_mut(),
            reach: 0,
        })
        .collect();
    for p in &launch.pointers {
        args[p.param].pointer = 1;
        args[p.param].offset = p.offset;
    }
    args
}

/// The registered kernel that claims `launch`, if one does.
pub(crate) fn detect(launch: &Launch) -> Option<usize> {
    let registered = REGISTERED.read().unwrap_or_else(|p| p.into_inner());
    let index = registered.iter().position(|k| k.name == launch.name())?;
    let k = &registered[index];
    if !launch.entry().params.iter().map(|p| p.size).eq(k.params.iter().copied()) {
        return None;
    }
    let args = bare_args(launch);
    let v = view(launch, &args);
    // SAFETY: `v` and what it points at live across the call.
    (unsafe { (k.claims)(&v) } != 0).then_some(index)
}

/// Runs registered kernel `index` over `launch`'s locked allocations.
pub(crate) fn run(index: usize, launch: &Launch) -> Result<(), (CUresult, String)> {
    let Some(k) = kernel(index) else {
        return Err((
            CUDA_ERROR_LAUNCH_FAILED,
            format!("kernel `{}`: its native code was unregistered", launch.name()),
        ));
    };
    let (allocs, slots) = launch.allocations();
    let mut guards = lock_all(&allocs);
    let mut args = bare_args(launch);
    for (p, &slot) in launch.pointers.iter().zip(&slots) {
        let data: &mut Vec<u8> = &mut guards[slot];
        if p.offset <= data.len() {
            // SAFETY: `offset` is within the allocation's bytes.
            args[p.param].host = unsafe { data.as_mut_ptr().add(p.offset) };
            // Guard mode: only the bytes the caller declared the argument covers.
            args[p.param].reach = p.bytes().min(data.len() - p.offset);
        }
    }
    let v = view(launch, &args);
    let mut message = vec![0u8; 1024];
    let mut length = 0usize;
    // SAFETY: the allocations stay locked, and `v`, `args` and `message` alive, across the call.
    let code = unsafe { (k.run)(&v, message.as_mut_ptr(), message.len(), &mut length) };
    drop(guards);
    if code == CUDA_SUCCESS {
        return Ok(());
    }
    message.truncate(length.min(1024));
    Err((code, String::from_utf8_lossy(&message).into_owned()))
}
