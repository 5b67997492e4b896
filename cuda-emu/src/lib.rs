//! geeps-cuda-emu: an emulated CUDA driver, test equipment for geeps-cuda.
//!
//! Built as `libgeeps_cuda_emu.so` and loaded as `libcuda.so.1` (see
//! `scripts/with-cuda-emu`), it exports the driver API entry points geeps
//! calls through cudarc, with their C signatures and `CUresult` codes, and
//! is faithful where a GPU would expose bugs that the host device hides:
//!
//! - device pointers live in a reserved, inaccessible address range: a
//!   device pointer dereferenced on the host faults;
//! - a capacity (`GEEPS_CUDA_EMU_MEMORY`, default 2 GiB) reported by
//!   `cuMemGetInfo_v2` and enforced by `cuMemAlloc_v2`;
//! - each stream is a queue served by its own thread with a random, seeded
//!   delay per operation, so unsynchronised streams really race; events,
//!   `cuStreamWaitEvent` and synchronisation follow the driver;
//! - copies from page-locked memory read it when they run (DMA); pageable
//!   sources are staged at the call;
//! - kernels run in the emulator's own PTX interpreter (`ptx`: the integer,
//!   float, conversion, memory, atomic and control instructions NVRTC emits,
//!   shared and local arrays, barriers, 3-D grids; SIMT over each block's
//!   threads), or natively for geeps' row kernels and for the kernels a
//!   program registers through `geeps_cuda_emu_register_native_kernels`
//!   (`GEEPS_CUDA_EMU_KERNELS=native`, `native_kernels`, same bits); an
//!   instruction it lacks is a launch error naming it and its PTX line;
//! - cuBLAS's sgemm, strided-batched sgemm and sgemv (the same library
//!   answers as `libcublas.so`), computed on the CPU as stream operations;
//! - stale handles, freed pointers and out-of-bounds copies are refused with
//!   the driver's codes; faults of queued work are sticky;
//! - a race detector (`racecheck`, on unless `GEEPS_CUDA_EMU_RACECHECK=0`):
//!   overlapping accesses of two streams with no ordering edge, and frees of
//!   memory enqueued work still uses, fail the context whatever the timing;
//!   an access after a free names the free; `GEEPS_CUDA_EMU_LAZY=1` runs
//!   stream work only when something waits for it.
//!
//! The exports are plain Rust functions too, so tests can call them
//! directly. See `docs/gpu.md`, "The emulated driver".

pub mod abi;
mod blas;
pub mod config;
mod context;
mod engine;
mod event;
mod extents;
mod handles;
mod interpret;
mod launch;
mod log;
mod memory;
mod module;
pub mod native_kernels;
mod ops;
mod pinned;
mod primary;
mod progress;
pub mod ptx;
mod racecheck;
pub mod result;
mod stream;
mod stream_table;

pub use abi::*;
pub use module::{parse as parse_ptx, Entry, Param};

/// Whether `addr` lies in the emulator's device address range.
pub fn is_device_address(addr: u64) -> bool {
    memory::space().is_device_address(addr)
}
