//! The trainer's kernels in native Rust for the emulated CUDA driver
//! (`cuda-emu`, test equipment): registered with it at start-up when it is
//! the driver, run there under `GEEPS_CUDA_EMU_KERNELS=native` in place of
//! the PTX interpreter, with the same bits (`tests/native_kernels.rs`
//! proves it), and told each launch's argument extents (`extents`). Must
//! never run on a real driver, where nothing registers.

// The emulator's own definition of the interface, one file for both sides.
#[path = "../../../../../cuda-emu/src/native_kernels/abi.rs"]
mod abi;
mod callbacks;
mod conv;
mod elementwise;
mod extents;
mod pool;
mod reduce;
mod register;
mod solver;
mod table;
mod transform;
mod view;

pub use abi::{NativeKernel, RegisterFn, NATIVE_KERNELS_ABI};
pub(crate) use extents::declare_extents;
pub(crate) use register::register_if_emulated;
pub use register::{register_with, with_table};
