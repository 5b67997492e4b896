//! geeps-testkit: what geeps' test suites share, so that the host device, the
//! CUDA device and the network transport run the very same scenarios.
//!
//! - [`backends`] lists the devices a suite runs on, [`Backend::device`] opens
//!   one, and [`device_test!`] writes one `#[test]` per backend;
//! - [`Fixture`] holds a device and reads and writes the buffers of an
//!   instance on it ([`Fixture::get`], [`Fixture::set`], [`Fixture::fill`])
//!   through the device's own copies ([`Io`]): a GPU buffer is not a host
//!   slice;
//! - [`assert_same_bits`] compares a CUDA run's numbers with the host
//!   device's, bit for bit;
//! - [`consistency`] is the consistency property (random workers, clocks,
//!   slack and deltas) run in process and across processes;
//! - [`harness::run`] runs the tests of a `harness = false` target, one
//!   that is also its own child process.
//!
//! Dev-only: never a dependency of a shipped crate.

mod backend;
pub mod consistency;
mod fixture;
pub mod harness;
mod io;
pub mod kernel_inputs;

pub use backend::{backends, Backend};
pub use fixture::{assert_same_bits, DeviceBuffer, Fixture};
pub use io::Io;

/// One `#[test]` per backend, in a module named after the test:
///
/// - `device_test!(name, |backend| { ... })` runs the body on the host
///   device as `name::host` and on the CUDA device as `name::cuda`;
/// - `device_test!(name, |backend| -> Vec<f32> { ... })` does the same with
///   a body that returns the numbers it computed, and `name::cuda` also runs
///   the body on the host device and requires the same numbers bit for bit
///   ([`assert_same_bits`]).
///
/// The CUDA variant runs when a driver answers, is skipped (with the reason
/// on stderr) when none does, and fails instead under
/// `GEEPS_REQUIRE_CUDA=1` (see [`Backend::cuda_for`]).
///
/// ```
/// use geeps_testkit::{device_test, Backend};
///
/// device_test!(opens, |backend| {
///     assert!(backend.device(1 << 10).info().capacity <= 1 << 10);
/// });
/// device_test!(computes, |backend| -> Vec<f32> {
///     let _ = backend;
///     vec![1.0, 2.0]
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! device_test {
    ($(#[$meta:meta])* $name:ident, |$backend:ident| -> Vec<f32> $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($backend: $crate::Backend) -> Vec<f32> $body

            #[test]
            pub fn host() {
                run($crate::Backend::Host);
            }

            #[test]
            pub fn cuda() {
                let test = module_path!();
                if let Some(b) = $crate::Backend::cuda_for(test) {
                    let got = run(b);
                    let want = run($crate::Backend::Host);
                    $crate::assert_same_bits(&got, &want, test);
                }
            }
        }
    };
    ($(#[$meta:meta])* $name:ident, |$backend:ident| $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($backend: $crate::Backend) $body

            #[test]
            pub fn host() {
                run($crate::Backend::Host);
            }

            #[test]
            pub fn cuda() {
                if let Some(b) = $crate::Backend::cuda_for(module_path!()) {
                    run(b);
                }
            }
        }
    };
}
