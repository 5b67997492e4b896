//! geeps-cuda: the CUDA [`Device`](geeps_core::Device) of geeps.
//!
//! Parameter cache, local data and the access buffer pool live in GPU memory;
//! host-resident rows move through page-locked staging; gathers and scatters
//! are batched kernels over indexes that stay on the GPU; work is enqueued on
//! streams and ordered with events, with no device-wide synchronisation on
//! the hot path.
//!
//! The driver is loaded at run time, so this crate builds and its tests run
//! on machines without CUDA: [`CudaDevice::probe`] and [`CudaDevice::new`]
//! return an error (never panic) where there is no driver or no GPU.
//! The kernels ship as PTX (see `kernels/`), so NVRTC is not needed to run.

mod index;
mod launch;
mod ptx;

pub use index::encode_index;
pub use launch::{launch_shape, LaunchShape, BLOCK_THREADS};
pub use ptx::{RowKernel, MIN_COMPUTE_CAPABILITY, MIN_DRIVER_VERSION, ROWS_PTX};
