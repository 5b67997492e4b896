//! Kernels run in native Rust instead of the PTX interpreter when
//! `GEEPS_CUDA_EMU_KERNELS=native`, for speed: geeps' row kernels (`rows`)
//! and whatever kernels a program registers through `registry`'s C entry
//! point. Each is recognised by its name and parameter sizes (and, for a
//! registered one, its own check of the launch) and must give the PTX's
//! bits, as the tests of whoever ships it prove against the interpreter.
//! Must never claim a launch it cannot reproduce: those go to the
//! interpreter.

pub mod abi;
mod counters;
mod dispatch;
pub mod registry;
pub mod rows;

pub use counters::launches;
pub use dispatch::{detect, run, Native};
