//! geeps-core: the engine of geeps, a GPU-specialized parameter server.
//!
//! The public surface is small: declare tables with [`GeepsBuilder`], record
//! one virtual iteration, then call [`Geeps::read`], [`Geeps::pre_update`],
//! [`Geeps::local_access`] and [`Geeps::table_clock`] every iteration. Buffers
//! are RAII guards. [`Device`] is the hardware seam and [`Transport`] the
//! network seam; [`HostDevice`] and [`InProcessCluster`] implement them here.

#![warn(missing_docs)]

mod api;
mod checkpoint;
mod config;
pub mod device;
mod engine;
mod error;
pub mod keeper;
mod plan;
mod stats;
mod table;
pub mod transport;

pub use api::{Geeps, GeepsBuilder, ReleaseAs, Restored};
pub use api::{LocalBuffer, RawBuffer, ReadBuffer, UpdateBuffer};
pub use config::{Config, DEFAULT_ROW_WIDTH, DEFAULT_WAIT_DEADLINE};
pub use device::HostDevice;
pub use device::{Device, DeviceInfo, DevicePtr};
pub use error::{Error, Result};
pub use plan::{Handle, Plan, TablePlacement};
pub use stats::{CallKind, CallStats, Stats};
pub use table::{keys, RowKey, Slack, TableId, TableKind, TableSpec};
pub use transport::InProcessCluster;
pub use transport::Transport;
