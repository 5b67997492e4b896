//! geeps-testkit: what geeps' test suites share, so that the host device, the
//! CUDA device and the network transport run the very same scenarios.
//!
//! - [`backends`] lists the devices a suite runs on, [`Backend::device`] opens
//!   one, and [`device_test!`] writes one `#[test]` per backend;
//! - [`Io`] reads and writes device buffers through the device's own copies
//!   (a GPU buffer is not a host slice);
//! - [`consistency`] is the consistency property (random workers, clocks,
//!   slack and deltas) run in process and across processes.
//!
//! Dev-only: never a dependency of a shipped crate.

mod backend;
pub mod consistency;
mod io;

pub use backend::{backends, Backend};
pub use io::Io;

/// One `#[test]` per backend: `device_test!(name, |backend| { ... })` runs the
/// body on the host device as `name_host` and on the CUDA device as
/// `name_cuda` (see [`backends`] for when the CUDA variant runs or fails).
#[macro_export]
macro_rules! device_test {
    ($name:ident, |$backend:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($backend: $crate::Backend) $body

            #[test]
            fn host() {
                run($crate::Backend::Host);
            }

            #[test]
            fn cuda() {
                if let Some(b) = $crate::Backend::cuda_for(concat!(module_path!(), "::", stringify!($name))) {
                    run(b);
                }
            }
        }
    };
}
