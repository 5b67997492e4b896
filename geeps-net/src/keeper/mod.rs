//! The keeper service of one process: admission of workers, the transport
//! each connection settles on, applying update batches, publishing rows and
//! answering operator requests. It never dials a peer: workers come to it.

mod service;

pub(crate) use service::*;

#[cfg(test)]
#[path = "../../tests/unit/hardening_tests.rs"]
mod hardening_tests;
#[cfg(test)]
#[path = "../../tests/unit/wire_errors_tests.rs"]
mod wire_errors_tests;
