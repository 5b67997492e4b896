//! The emulator loaded as `libcuda.so` and driven through cudarc 0.19 with
//! geeps-cuda's features and calls: probe, primary context, allocation,
//! non-blocking streams, events without timing, PTX loaded with the JIT log
//! options, a row kernel launch, copies back, error names. The body runs in
//! a child process whose library path holds `libcuda.so` / `libcuda.so.1`
//! links to this crate's cdylib.

mod common;

use std::ffi::{c_uint, c_void, CString};

use cudarc::driver::result::{self, stream::StreamKind};
use cudarc::driver::sys;

const ROWS_PTX: &str = include_str!("../../geeps-cuda/kernels/rows.ptx");

#[test]
fn geeps_calls_through_cudarc_work_on_the_emulator() {
    if common::is_child("geeps_calls_through_cudarc_work_on_the_emulator") {
        return body();
    }
    common::child_passes_with_libraries(
        "geeps_calls_through_cudarc_work_on_the_emulator",
        &["libcuda.so", "libcuda.so.1"],
    );
}

fn body() {
    unsafe {
        assert!(sys::is_culib_present(), "cudarc finds libcuda.so on the library path");
        result::init().unwrap();
        let mut version = 0;
        sys::cuDriverGetVersion(&mut version).result().unwrap();
        assert!(version >= 12000);
        assert_eq!(result::device::get_count().unwrap(), 1);
        let dev = result::device::get(0).unwrap();
        assert_eq!(result::device::get_name(dev).unwrap(), "geeps emulated GPU");
        use sys::CUdevice_attribute::*;
        assert_eq!(result::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).unwrap(), 8);
        assert_eq!(result::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).unwrap(), 0);
        let total = result::device::total_mem(dev).unwrap();
        let ctx = result::primary_ctx::retain(dev).unwrap();
        result::ctx::set_current(ctx).unwrap();
        let (free, total2) = result::mem_get_info().unwrap();
        assert_eq!((free, total2), (total, total));

        // The module, with the JIT log options geeps passes.
        let image = CString::new(ROWS_PTX).unwrap();
        let mut log = vec![0u8; 8192];
        let mut options =
            [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        sys::cuModuleLoadDataEx(&mut module, image.as_ptr().cast(), 2, options.as_mut_ptr(), values.as_mut_ptr())
            .result()
            .unwrap();
        let gather = result::module::get_function(module, CString::new("geeps_gather").unwrap()).unwrap();

        // store: 4 rows of 3 floats; gather rows 3 and 1 into a 2-row buffer.
        let store: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let index: [u32; 4] = [0, 3, 1, 1];
        let (dstore, dindex, dbuf) =
            (result::malloc_sync(48).unwrap(), result::malloc_sync(16).unwrap(), result::malloc_sync(24).unwrap());
        let s = result::stream::create(StreamKind::NonBlocking).unwrap();
        let pinned = result::malloc_host(48, 0).unwrap() as *mut f32;
        std::ptr::copy_nonoverlapping(store.as_ptr(), pinned, 12);
        sys::cuMemcpyHtoDAsync_v2(dstore, pinned.cast(), 48, s).result().unwrap();
        sys::cuMemcpyHtoDAsync_v2(dindex, index.as_ptr().cast(), 16, s).result().unwrap();
        sys::cuMemsetD32Async(dbuf, 0, 6, s).result().unwrap();
        let (mut a, mut b, mut n, mut d, mut w) = (dstore, dindex, 2u32, dbuf, 3u32);
        let mut args = [
            &mut a as *mut u64 as *mut c_void,
            &mut b as *mut u64 as *mut c_void,
            &mut n as *mut u32 as *mut c_void,
            &mut d as *mut u64 as *mut c_void,
            &mut w as *mut u32 as *mut c_void,
        ];
        result::launch_kernel(gather, (1, 1, 1), (4, 64, 1), 0, s, &mut args).unwrap();
        let e = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).unwrap();
        result::event::record(e, s).unwrap();
        let other = result::stream::create(StreamKind::NonBlocking).unwrap();
        result::stream::wait_event(other, e, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT).unwrap();
        sys::cuMemcpyDtoHAsync_v2(pinned.cast(), dbuf, 24, other).result().unwrap();
        result::stream::synchronize(other).unwrap();
        result::event::synchronize(e).unwrap();
        let got = std::slice::from_raw_parts(pinned, 6);
        assert_eq!(got, &[9.0, 10.0, 11.0, 3.0, 4.0, 5.0]);

        // Errors come back with the driver's names.
        let err = result::malloc_sync(0).unwrap_err();
        assert_eq!(err.error_name().unwrap().to_str().unwrap(), "CUDA_ERROR_INVALID_VALUE");
        let err = sys::cuMemcpyDtoHAsync_v2(pinned.cast(), dbuf, 25, other).result().unwrap_err();
        assert_eq!(err.0, sys::CUresult::CUDA_ERROR_INVALID_VALUE);
        let _: c_uint = 0;

        result::event::destroy(e).unwrap();
        result::stream::destroy(other).unwrap();
        result::stream::destroy(s).unwrap();
        for p in [dstore, dindex, dbuf] {
            result::free_sync(p).unwrap();
        }
        result::free_host(pinned.cast()).unwrap();
        sys::cuModuleUnload(module).result().unwrap();
        result::primary_ctx::release(dev).unwrap();
    }
}
