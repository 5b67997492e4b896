//! The emulated driver's native-kernel interface as C structures, laid out
//! as `geeps_cuda_emu_register_native_kernels` reads them (its
//! `NATIVE_KERNELS_ABI` 1): a kernel's name, parameter sizes and two
//! callbacks, and the launch the callbacks get. Must never change a layout
//! without the ABI number.

use std::ffi::c_char;

/// The layout below; the emulator refuses a registration of another.
pub const NATIVE_KERNELS_ABI: u32 = 1;

/// One argument of a launch: its bytes, and for a device pointer where its
/// allocation lies on the host (during `run` only).
#[repr(C)]
pub struct NativeArg {
    pub bytes: *const u8,
    pub size: usize,
    /// 1 when the argument held a device address inside a live allocation.
    pub pointer: u8,
    /// Where in its allocation it points, in bytes.
    pub offset: usize,
    /// The host bytes it points at, `reach` of them to the allocation's end; null in `claims`.
    pub host: *mut u8,
    pub reach: usize,
}

/// A launch, valid during the callback only.
#[repr(C)]
pub struct NativeLaunch {
    pub name: *const u8,
    pub name_len: usize,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub args: *const NativeArg,
    pub arg_count: usize,
}

pub type ClaimsFn = unsafe extern "C" fn(launch: *const NativeLaunch) -> u8;
pub type RunFn =
    unsafe extern "C" fn(launch: *const NativeLaunch, message: *mut u8, capacity: usize, length: *mut usize) -> u32;

/// One kernel of a registration table.
#[repr(C)]
pub struct NativeKernel {
    pub name: *const c_char,
    pub params: *const usize,
    pub param_count: usize,
    pub claims: ClaimsFn,
    pub run: RunFn,
}

/// `geeps_cuda_emu_register_native_kernels(abi, kernels, count)`.
pub type RegisterFn = unsafe extern "C" fn(abi: u32, kernels: *const NativeKernel, count: usize) -> u32;
