//! Device queries: count, handle, name, total memory and attributes of an
//! emulated compute capability 8.0 GPU (A100-like limits). Must never answer
//! before `cuInit`, nor for an ordinal that is not visible.

use std::ffi::{c_char, c_int};

use super::guard::{guard, put, refuse};
use crate::config::config;
use crate::context;
use crate::result::{CUresult, Res, CUDA_ERROR_INVALID_VALUE};

/// The name every emulated device reports.
pub const DEVICE_NAME: &str = "geeps emulated GPU";

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    guard("cuDeviceGetCount", || {
        context::require_init()?;
        put(count, config().devices)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CUresult {
    guard("cuDeviceGet", || {
        context::check_device(ordinal)?;
        put(device, ordinal)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, device: c_int) -> CUresult {
    guard("cuDeviceGetName", || {
        context::check_device(device)?;
        if name.is_null() || len <= 0 {
            return refuse(CUDA_ERROR_INVALID_VALUE, || "cuDeviceGetName: no buffer".into());
        }
        let bytes = DEVICE_NAME.as_bytes();
        let n = bytes.len().min(len as usize - 1);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), name as *mut u8, n);
        *name.add(n) = 0;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, device: c_int) -> CUresult {
    guard("cuDeviceTotalMem_v2", || {
        context::check_device(device)?;
        put(bytes, config().memory)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(value: *mut c_int, attribute: u32, device: c_int) -> CUresult {
    guard("cuDeviceGetAttribute", || {
        context::check_device(device)?;
        put(value, attribute_value(attribute)?)
    })
}

/// The value of `CUdevice_attribute` `attribute`.
pub fn attribute_value(attribute: u32) -> Res<c_int> {
    let (major, minor) = config().compute_capability;
    Ok(match attribute {
        1 => 1024,              // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,          // MAX_BLOCK_DIM_X, _Y
        4 => 64,                // MAX_BLOCK_DIM_Z
        5 => i32::MAX,          // MAX_GRID_DIM_X
        6 | 7 => 65535,         // MAX_GRID_DIM_Y, _Z
        8 => 48 << 10,          // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 64 << 10,          // TOTAL_CONSTANT_MEMORY
        10 => 32,               // WARP_SIZE
        11 => i32::MAX,         // MAX_PITCH
        12 => 65536,            // MAX_REGISTERS_PER_BLOCK
        13 => 1_410_000,        // CLOCK_RATE (kHz)
        14 => 512,              // TEXTURE_ALIGNMENT
        15 => 1,                // GPU_OVERLAP
        16 => 108,              // MULTIPROCESSOR_COUNT
        17 | 18 => 0,           // KERNEL_EXEC_TIMEOUT, INTEGRATED
        19 => 1,                // CAN_MAP_HOST_MEMORY
        20 => 0,                // COMPUTE_MODE (default)
        31 => 1,                // CONCURRENT_KERNELS
        32 => 0,                // ECC_ENABLED
        33..=35 => 0,           // PCI_BUS_ID, PCI_DEVICE_ID, TCC_DRIVER
        36 => 1_215_000,        // MEMORY_CLOCK_RATE (kHz)
        37 => 5120,             // GLOBAL_MEMORY_BUS_WIDTH
        38 => 40 << 20,         // L2_CACHE_SIZE
        39 => 2048,             // MAX_THREADS_PER_MULTIPROCESSOR
        40 => 2,                // ASYNC_ENGINE_COUNT
        41 => 1,                // UNIFIED_ADDRESSING
        50 => 0,                // PCI_DOMAIN_ID
        75 => major,            // COMPUTE_CAPABILITY_MAJOR
        76 => minor,            // COMPUTE_CAPABILITY_MINOR
        78..=80 => 1,           // STREAM_PRIORITIES, GLOBAL_L1, LOCAL_L1
        81 => 164 << 10,        // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        82 => 65536,            // MAX_REGISTERS_PER_MULTIPROCESSOR
        83 | 84 | 88 | 89 => 0, // MANAGED_MEMORY, MULTI_GPU_BOARD, PAGEABLE_/CONCURRENT_MANAGED_ACCESS
        97 => 163 << 10,        // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        106 => 32,              // MAX_BLOCKS_PER_MULTIPROCESSOR
        115 => 0,               // MEMORY_POOLS_SUPPORTED
        _ => {
            return refuse(CUDA_ERROR_INVALID_VALUE, || {
                format!("cuDeviceGetAttribute: attribute {attribute} is not emulated")
            })
        }
    })
}
