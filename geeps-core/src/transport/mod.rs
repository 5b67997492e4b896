//! The transport seam: the [`Transport`] trait, the messages it carries, and
//! the in-process transport; the network one lives in geeps-net.
//!
//! Messages carry rows as raw little-endian `f32` bytes, dense over one
//! partition: no per-row messages, no per-value encoding (update deltas may
//! instead be bf16, [`DeltaEncoding`], for a compressed wire).

pub(crate) mod bytes;
pub(crate) mod delta_encoding;
pub(crate) mod in_process;
pub(crate) mod landing;
pub(crate) mod messages;
pub(crate) mod transport_trait;

pub use delta_encoding::DeltaEncoding;
pub use in_process::InProcessCluster;
pub use landing::{Landing, LandingSlot};
pub use messages::{Inbound, Inbox, Publish, UpdateBatch};
pub use transport_trait::{StatsSource, Transport};
