//! geeps: a GPU-specialized parameter server.
//!
//! The whole API in one loop (the README's example, compiled and run as a doctest):
//!
//! ```
//! # fn main() -> Result<(), geeps::Error> {
//! use geeps::{keys, Config, Geeps, Slack};
//!
//! let mut b = Geeps::builder(Config { device_memory: 256 << 20, ..Config::default() });
//! let weights = b.parameter_table("fc1", 64);   // 64 rows of 128 floats
//! let acts = b.local_table("fc1.out", 8);
//! let ps = b.build()?;
//!
//! // One virtual iteration: recorded, not executed.
//! let w = keys(weights, 0..64);
//! let read = ps.virtual_read(&w, Slack::BSP)?;
//! let out = ps.virtual_local_access(&keys(acts, 0..8), false)?;
//! let grad = ps.virtual_pre_update(&w)?;
//! ps.virtual_update(grad)?;
//! ps.virtual_post_local_access(out, true)?;
//! ps.virtual_post_read(read)?;
//! ps.virtual_table_clock(weights)?;
//! ps.finish_virtual_iteration()?;      // plans memory, builds indexes, starts threads
//!
//! for _ in 0..10 {
//!     let params = ps.read(read)?;                 // prefetched in the background
//!     let mut activations = ps.local_access(out)?;
//!     let mut delta = ps.pre_update(grad)?;        // zeroed
//!     // ... compute with params.as_slice()?, write activations and delta ...
//!     delta.as_mut_slice()?.fill(0.01);
//!     delta.update()?;                             // params += delta, sent at the clock
//!     activations.post()?;
//!     params.post()?;
//!     ps.table_clock(weights)?;
//! }
//! println!("{}", ps.stats());                      // stall fraction, bytes moved, slow-path calls
//! # Ok(())
//! # }
//! ```
//!
//! See `docs/architecture.md` for how the engine works.

pub use geeps_core::*;

/// Geeps across processes and machines: keepers, bootstrap, launcher.
pub use geeps_net as net;

/// The CUDA device (feature `cuda`): see `docs/gpu.md`.
#[cfg(feature = "cuda")]
pub use geeps_cuda::{CudaConfig, CudaDevice, CudaProbe};
