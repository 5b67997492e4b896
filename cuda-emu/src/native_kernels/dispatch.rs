//! The native kernel that runs a launch, if one claims it, and running it:
//! geeps' row kernels first, then the registered ones. Must never run a
//! launch no native kernel claimed.

use super::counters::count;
use super::{registry, rows};
use crate::launch::Launch;
use crate::result::CUresult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Native {
    Rows(rows::RowOp),
    /// The registered kernel at this index of the registry.
    Registered(usize),
}

/// The native kernel that runs `launch`, if there is one.
pub fn detect(launch: &Launch) -> Option<Native> {
    rows::detect(launch).map(Native::Rows).or_else(|| registry::detect(launch).map(Native::Registered))
}

/// Runs `kernel` as the CUDA kernel would.
pub fn run(kernel: Native, launch: &Launch) -> Result<(), (CUresult, String)> {
    count(launch.name());
    match kernel {
        Native::Rows(op) => rows::run(op, launch),
        Native::Registered(k) => registry::run(k, launch),
    }
}
