//! geeps: a GPU-specialized parameter server.
//!
//! The whole API in one loop (the README's example, compiled and run as a doctest):
//!
//! ```
//! # fn main() -> Result<(), geeps::Error> {
//! use geeps::{keys, Config, Geeps, Slack};
//!
//! let mut b = Geeps::builder(Config::default().with_device_memory(256 << 20));
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

#![warn(missing_docs)]

pub use geeps_core::{
    keys, CallKind, CallStats, Config, Device, DeviceInfo, DevicePtr, Error, Geeps, GeepsBuilder, Handle, HostDevice,
    InProcessCluster, LocalBuffer, Plan, RawBuffer, ReadBuffer, ReleaseAs, Restored, Result, RowKey, Slack, Stats,
    TableId, TableKind, TablePlacement, TableSpec, Transport, UpdateBuffer, DEFAULT_ROW_WIDTH, DEFAULT_WAIT_DEADLINE,
};

/// The device seam, for writing a backend: the [`Device`] trait and its types.
pub use geeps_core::device;
/// The keeper shard, for a transport that hosts keepers: [`keeper::KeeperShard`].
pub use geeps_core::keeper;
/// The transport seam, for writing a transport: the [`Transport`] trait and its messages.
pub use geeps_core::transport;

/// Geeps across processes and machines (feature `net`, on by default):
/// keepers over TCP, bootstrap from hosts files, Slurm, MPI or torchrun.
#[cfg(feature = "net")]
pub use geeps_net as net;

/// The CUDA device (feature `cuda`): see `docs/gpu.md`.
#[cfg(feature = "cuda")]
pub use geeps_cuda::{CudaConfig, CudaDevice, CudaProbe};
