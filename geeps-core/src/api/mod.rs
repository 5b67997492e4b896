//! The application's API: [`Geeps`], one instance per worker, and the
//! paper's Table 1 calls, one concern a file: `builder` declares tables and
//! connects, `virtual_iteration` records and plans, `acquire` hands out
//! buffers (fast path from the allocator's prefetches, slow path on the
//! application's thread), `release` takes them back and clocks, `buffers`
//! wraps them as RAII guards, `checkpoint_calls` saves and restores,
//! `accessors` and `lifecycle` report and shut down. Nothing here moves data
//! itself; that is the engine's `fill`, `push` and `pull`.

mod accessors;
mod acquire;
mod buffers;
mod builder;
mod checkpoint_calls;
#[cfg(test)]
mod failure_tests;
mod instance;
mod lifecycle;
mod release;
mod virtual_iteration;

pub use buffers::{LocalBuffer, RawBuffer, ReadBuffer, UpdateBuffer};
pub use builder::GeepsBuilder;
pub use checkpoint_calls::Restored;
pub use instance::Geeps;
pub use release::ReleaseAs;
