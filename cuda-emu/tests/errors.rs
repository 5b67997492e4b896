//! The emulator refuses what a driver refuses, with the driver's codes:
//! copies out of an allocation's bounds or to freed memory, frees of unknown
//! pointers, exhausted capacity, stale handles, calls before `cuInit` or
//! without a current context; a failed kernel is sticky; and a device
//! pointer dereferenced on the host faults.

mod common;

use std::ffi::c_void;
use std::ptr::null_mut;

use common::*;
use geeps_cuda_emu as emu;
use geeps_cuda_emu::result::*;

#[test]
fn out_of_bounds_and_freed_ranges_are_invalid_values() {
    open();
    let p = alloc(1024);
    let host = vec![0u8; 4096];
    let mut back = vec![0u8; 4096];
    let s = stream(1);
    unsafe {
        ok(emu::cuMemcpyHtoDAsync_v2(p, host.as_ptr().cast(), 1024, s));
        code(emu::cuMemcpyHtoDAsync_v2(p, host.as_ptr().cast(), 1025, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemcpyHtoDAsync_v2(p + 1000, host.as_ptr().cast(), 32, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemcpyDtoHAsync_v2(back.as_mut_ptr().cast(), p + 512, 513, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemcpyDtoHAsync_v2(back.as_mut_ptr().cast(), p + 1024, 4, s), CUDA_ERROR_INVALID_VALUE);
        let q = alloc(1024);
        code(emu::cuMemcpyDtoDAsync_v2(q, p, 2048, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemsetD32Async(p, 0, 257, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemsetD32Async(p + 2, 0, 1, s), CUDA_ERROR_INVALID_VALUE);
        // A host pointer that is a device address.
        code(emu::cuMemcpyHtoDAsync_v2(p, q as *const c_void, 16, s), CUDA_ERROR_INVALID_VALUE);
        ok(emu::cuMemFree_v2(q));
        code(emu::cuMemcpyDtoDAsync_v2(q, p, 16, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemcpyHtoDAsync_v2(q, host.as_ptr().cast(), 16, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemsetD8Async(q, 0, 1, s), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemFree_v2(q), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemFree_v2(p + 256), CUDA_ERROR_INVALID_VALUE);
        code(emu::cuMemFree_v2(0x1000), CUDA_ERROR_INVALID_VALUE);
        ok(emu::cuStreamSynchronize(s));
        ok(emu::cuMemFree_v2(p));
    }
}

#[test]
fn capacity_is_enforced_and_reported() {
    let name = "capacity_is_enforced_and_reported";
    if !is_child(name) {
        return child_passes(name, &[("GEEPS_CUDA_EMU_MEMORY", "64M")]);
    }
    open();
    let (mut free, mut total) = (0usize, 0usize);
    let info = |free: &mut usize, total: &mut usize| unsafe { ok(emu::cuMemGetInfo_v2(free, total)) };
    info(&mut free, &mut total);
    assert_eq!((free, total), (64 << 20, 64 << 20));
    let mut t = 0usize;
    unsafe { ok(emu::cuDeviceTotalMem_v2(&mut t, 0)) };
    assert_eq!(t, 64 << 20);
    let big = alloc(48 << 20);
    info(&mut free, &mut total);
    assert_eq!(free, 16 << 20);
    let mut p = 0u64;
    unsafe { code(emu::cuMemAlloc_v2(&mut p, 32 << 20), CUDA_ERROR_OUT_OF_MEMORY) };
    unsafe { code(emu::cuMemAlloc_v2(&mut p, 0), CUDA_ERROR_INVALID_VALUE) };
    let small = alloc(100);
    info(&mut free, &mut total);
    assert_eq!(free, (16 << 20) - 256, "charged in 256-byte units");
    ok(emu::cuMemFree_v2(big));
    let again = alloc(32 << 20);
    ok(emu::cuMemFree_v2(again));
    ok(emu::cuMemFree_v2(small));
    info(&mut free, &mut total);
    assert_eq!(free, 64 << 20);
}

const PTX: &str = include_str!("../../geeps-cuda/kernels/rows.ptx");

fn load(ptx: &str) -> *mut c_void {
    let mut m = null_mut();
    let image = std::ffi::CString::new(ptx).unwrap();
    unsafe { ok(emu::cuModuleLoadData(&mut m, image.as_ptr().cast())) };
    m
}

#[test]
fn stale_handles_are_invalid_handles() {
    open();
    unsafe {
        let s = stream(1);
        ok(emu::cuStreamDestroy_v2(s));
        code(emu::cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
        code(emu::cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
        code(emu::cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
        let p = alloc(64);
        code(emu::cuMemsetD32Async(p, 0, 16, s), CUDA_ERROR_INVALID_HANDLE);
        let e = event();
        ok(emu::cuEventDestroy_v2(e));
        for got in [emu::cuEventQuery(e), emu::cuEventSynchronize(e), emu::cuEventRecord(e, null_mut())] {
            code(got, CUDA_ERROR_INVALID_HANDLE);
        }
        let live = stream(1);
        code(emu::cuStreamWaitEvent(live, e, 0), CUDA_ERROR_INVALID_HANDLE);
        code(emu::cuStreamSynchronize(0xdead_beef_usize as *mut c_void), CUDA_ERROR_INVALID_HANDLE);
        code(emu::cuStreamSynchronize(e), CUDA_ERROR_INVALID_HANDLE);

        // A launch on a destroyed stream, and of a function of an unloaded module.
        let m = load(PTX);
        let mut f = null_mut();
        ok(emu::cuModuleGetFunction(&mut f, m, c"geeps_gather".as_ptr()));
        let mut missing = null_mut();
        code(emu::cuModuleGetFunction(&mut missing, m, c"no_such_kernel".as_ptr()), CUDA_ERROR_NOT_FOUND);
        let (mut a, mut b, mut n, mut d, mut w) = (p, p, 0u32, p, 1u32);
        let mut args = [
            &mut a as *mut u64 as *mut c_void,
            &mut b as *mut u64 as *mut c_void,
            &mut n as *mut u32 as *mut c_void,
            &mut d as *mut u64 as *mut c_void,
            &mut w as *mut u32 as *mut c_void,
        ];
        let params = args.as_mut_ptr();
        let launch = |f, s| emu::cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, null_mut());
        ok(launch(f, live));
        code(launch(f, s), CUDA_ERROR_INVALID_HANDLE);
        code(emu::cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, live, params, null_mut()), CUDA_ERROR_INVALID_VALUE);
        ok(emu::cuModuleUnload(m));
        code(launch(f, live), CUDA_ERROR_INVALID_HANDLE);
        code(emu::cuModuleGetFunction(&mut missing, m, c"geeps_gather".as_ptr()), CUDA_ERROR_INVALID_HANDLE);
        code(emu::cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
        ok(emu::cuStreamSynchronize(live));
    }
}

#[test]
fn calls_need_init_and_a_current_context() {
    let name = "calls_need_init_and_a_current_context";
    if !is_child(name) {
        return child_passes(name, &[]);
    }
    let mut p = 0u64;
    let mut n = 0;
    unsafe {
        code(emu::cuDeviceGetCount(&mut n), CUDA_ERROR_NOT_INITIALIZED);
        code(emu::cuMemAlloc_v2(&mut p, 16), CUDA_ERROR_NOT_INITIALIZED);
        ok(emu::cuInit(0));
        ok(emu::cuDeviceGetCount(&mut n));
        assert_eq!(n, 1);
        code(emu::cuMemAlloc_v2(&mut p, 16), CUDA_ERROR_INVALID_CONTEXT);
        let mut ctx = null_mut();
        ok(emu::cuDevicePrimaryCtxRetain(&mut ctx, 0));
        code(emu::cuMemAlloc_v2(&mut p, 16), CUDA_ERROR_INVALID_CONTEXT);
        ok(emu::cuCtxSetCurrent(ctx));
        ok(emu::cuMemAlloc_v2(&mut p, 16));
        // Another thread has no context until it binds one.
        let ctx_key = ctx as usize;
        std::thread::spawn(move || {
            let mut q = 0u64;
            code(emu::cuMemAlloc_v2(&mut q, 16), CUDA_ERROR_INVALID_CONTEXT);
            ok(emu::cuCtxSetCurrent(ctx_key as *mut c_void));
            ok(emu::cuMemAlloc_v2(&mut q, 16));
        })
        .join()
        .unwrap();
        // The last release destroys the context and all in it.
        ok(emu::cuDevicePrimaryCtxRelease_v2(0));
        code(emu::cuMemAlloc_v2(&mut p, 16), CUDA_ERROR_INVALID_CONTEXT);
        code(emu::cuCtxSetCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
        code(emu::cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
        code(emu::cuDeviceGet(&mut n, 1), CUDA_ERROR_INVALID_DEVICE);
    }
}

/// A kernel reading through an argument that is no device address fails
/// with CUDA_ERROR_ILLEGAL_ADDRESS; the error is sticky, as on a GPU.
#[test]
fn a_failed_kernel_is_sticky() {
    let name = "a_failed_kernel_is_sticky";
    if !is_child(name) {
        return child_passes(name, &[]);
    }
    open();
    let m = load(PTX);
    let idx = alloc(8);
    write_u32(idx, &[0, 0]);
    let dst = alloc(4);
    let s = stream(1);
    unsafe {
        let mut f = null_mut();
        ok(emu::cuModuleGetFunction(&mut f, m, c"geeps_gather".as_ptr()));
        let (mut a, mut b, mut n, mut d, mut w) = (0x40_0000_0000u64, idx, 1u32, dst, 1u32);
        let mut args = [
            &mut a as *mut u64 as *mut c_void,
            &mut b as *mut u64 as *mut c_void,
            &mut n as *mut u32 as *mut c_void,
            &mut d as *mut u64 as *mut c_void,
            &mut w as *mut u32 as *mut c_void,
        ];
        ok(emu::cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args.as_mut_ptr(), null_mut()));
        code(emu::cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
        code(emu::cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
        code(emu::cuMemsetD32Async(dst, 0, 1, s), CUDA_ERROR_ILLEGAL_ADDRESS);
        let mut name_ptr = std::ptr::null();
        ok(emu::cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &mut name_ptr));
        assert_eq!(std::ffi::CStr::from_ptr(name_ptr).to_str().unwrap(), "CUDA_ERROR_ILLEGAL_ADDRESS");
    }
}

/// Malformed PTX is refused with the JIT error log filled in.
#[test]
fn bad_ptx_fills_the_jit_log() {
    open();
    let mut log = vec![0u8; 1024];
    let mut options = [5u32, 6u32];
    let mut values = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
    let mut m = null_mut();
    let code_ = unsafe {
        emu::cuModuleLoadDataEx(
            &mut m,
            c".version 8.0\n.target sm_70\n.entry k(\n{".as_ptr().cast(),
            2,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    code(code_, CUDA_ERROR_INVALID_PTX);
    let end = log.iter().position(|&b| b == 0).unwrap();
    let text = String::from_utf8_lossy(&log[..end]);
    assert!(text.contains("ptxas"), "JIT log: {text:?}");
    assert_eq!(values[1] as usize, end + 1, "the size option reports the bytes written");
}

/// Reading a device pointer on the host faults (SIGSEGV), as on a GPU
/// machine, instead of silently reading host memory.
#[test]
fn dereferencing_a_device_pointer_faults() {
    let name = "dereferencing_a_device_pointer_faults";
    if !is_child(name) {
        use std::os::unix::process::ExitStatusExt;
        let out = run_child(name, &[]);
        assert_eq!(
            out.status.signal(),
            Some(libc_sigsegv()),
            "the child must die of SIGSEGV: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    open();
    let p = alloc(256);
    assert!(emu::is_device_address(p));
    let v = unsafe { std::ptr::read_volatile(p as *const u8) };
    panic!("read {v} through a device pointer without faulting");
}

fn libc_sigsegv() -> i32 {
    11
}
