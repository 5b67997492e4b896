//! geeps-core: the engine of geeps, a GPU-specialized parameter server.
//!
//! The public surface is small: declare tables with [`GeepsBuilder`], record
//! one virtual iteration, then call [`Geeps::read`], [`Geeps::pre_update`],
//! [`Geeps::local_access`] and [`Geeps::table_clock`] every iteration. Buffers
//! are RAII guards. [`Device`] is the hardware seam and [`Transport`] the
//! network seam; [`HostDevice`] and [`InProcessCluster`] implement them here.

#![warn(missing_docs)]

mod apply_order;
mod buffer_pool;
mod checkpoint;

mod config;
pub mod device;
mod engine;
mod error;
mod geeps;
mod handover;
mod index;
mod keeper;
mod keeper_rows;
mod planner;
mod range_max;
mod recorder;
mod stats;
mod store;
mod table;
pub mod transport;
mod vector_clock;

pub use config::{Config, DEFAULT_ROW_WIDTH, DEFAULT_WAIT_DEADLINE};
pub use device::HostDevice;
pub use device::{Device, DeviceInfo, DevicePtr};
pub use error::{Error, Result};
pub use geeps::{Geeps, GeepsBuilder, ReleaseAs, Restored};
pub use geeps::{LocalBuffer, RawBuffer, ReadBuffer, UpdateBuffer};
pub use planner::{Plan, TablePlacement};
pub use recorder::Handle;
pub use stats::{CallKind, CallStats, Stats};
pub use table::{keys, RowKey, Slack, TableId, TableKind, TableSpec};
pub use transport::InProcessCluster;
pub use transport::Transport;
