//! geeps-cuda: the CUDA [`Device`](geeps_core::Device) of geeps.
//!
//! Parameter cache, local data and the access buffer pool live in GPU memory;
//! host-resident rows move through page-locked staging; gathers and scatters
//! are batched kernels over indexes that stay on the GPU; copies and kernels
//! are enqueued on non-blocking streams, with no device-wide synchronisation
//! on the hot path.
//!
//! The driver is loaded at run time, so this crate builds and its tests run
//! on machines without CUDA: [`CudaDevice::probe`] and [`CudaDevice::new`]
//! return an error (never panic) where there is no driver or no GPU. The
//! kernels ship as PTX generated from `kernels/rows.cu`, so running geeps
//! needs the NVIDIA driver only, not NVRTC. See `docs/gpu.md`.
//!
//! ```no_run
//! # fn main() -> Result<(), geeps_core::Error> {
//! use std::sync::Arc;
//! use geeps_core::{Config, Geeps};
//! use geeps_cuda::{CudaConfig, CudaDevice};
//!
//! let gpu = CudaDevice::new(CudaConfig::ordinal(0))?;
//! let mut b = Geeps::builder(Config::default().with_device_memory(8 << 30));
//! b.device(Arc::new(gpu));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod allocations;
mod config;
mod device;
mod driver;
mod index_layout;
mod kernels;
mod launch;
mod probe;
mod ptx;
mod stream_registry;
mod uploaded_indexes;

pub use config::{CudaConfig, DEFAULT_RESERVE_BYTES, DEFAULT_RESERVE_FRACTION};
pub use device::CudaDevice;
pub use index_layout::encode_index;
pub use launch::{launch_shape, LaunchShape, BLOCK_THREADS};
pub use probe::CudaProbe;
pub use ptx::{RowKernel, MIN_COMPUTE_CAPABILITY, MIN_DRIVER_VERSION, ROWS_PTX};
