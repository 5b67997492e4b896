//! The C layout of the native-kernel interface (`NATIVE_KERNELS_ABI`): what
//! `geeps_cuda_emu_register_native_kernels` reads and what its callbacks get.
//! The one definition of both sides: a program that registers kernels
//! includes this file (`#[path]`) rather than restating it. Names nothing
//! outside `std`, so it compiles in either crate; must never change a layout
//! without the ABI number.

use std::ffi::c_char;

/// The layout of the structures below; a registration of another is refused.
pub const NATIVE_KERNELS_ABI: u32 = 1;

/// One argument of a launch as a native kernel sees it.
#[repr(C)]
pub struct NativeArg {
    /// The argument's bytes, `size` of them (its parameter's size).
    pub bytes: *const u8,
    pub size: usize,
    /// 1 when the argument held a device address inside a live allocation.
    pub pointer: u8,
    /// Where in its allocation it points, in bytes (0 when not a pointer).
    pub offset: usize,
    /// The host bytes it points at, `reach` of them up to the allocation's
    /// end; null in `claims`, and for an argument that points into none.
    pub host: *mut u8,
    pub reach: usize,
}

/// A launch as a native kernel sees it; valid during the callback only.
#[repr(C)]
pub struct NativeLaunch {
    /// The kernel's name, `name_len` bytes of UTF-8 (no NUL).
    pub name: *const u8,
    pub name_len: usize,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub args: *const NativeArg,
    pub arg_count: usize,
}

/// Whether the native code gives the PTX's bits for this launch (memory not resolved).
pub type ClaimsFn = unsafe extern "C" fn(launch: *const NativeLaunch) -> u8;
/// Runs the launch: CUDA_SUCCESS, or a driver code with up to `capacity`
/// bytes of UTF-8 message written at `message` and their count at `length`.
pub type RunFn =
    unsafe extern "C" fn(launch: *const NativeLaunch, message: *mut u8, capacity: usize, length: *mut usize) -> u32;

/// One kernel of a registration table.
#[repr(C)]
pub struct NativeKernel {
    /// The `.entry` name, NUL-terminated.
    pub name: *const c_char,
    /// Its parameters' sizes in bytes, `param_count` of them.
    pub params: *const usize,
    pub param_count: usize,
    pub claims: ClaimsFn,
    pub run: RunFn,
}

/// `geeps_cuda_emu_register_native_kernels(abi, kernels, count)`, as a
/// program looks it up with `dlsym`.
pub type RegisterFn = unsafe extern "C" fn(abi: u32, kernels: *const NativeKernel, count: usize) -> u32;
