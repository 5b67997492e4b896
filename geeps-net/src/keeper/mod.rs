//! The keeper service of one process: accepts worker connections, admits
//! each worker by its handshake, settles the connection on TCP, TLS or
//! shared memory, applies update batches through the core keeper logic and
//! publishes fresh rows to every connected worker when a data age advances,
//! and answers operator requests. Bad input is rejected with a log line and
//! a `Failure` frame; it never panics and never stops the keeper. A worker
//! that vanishes without leaving is reported to every other worker as lost.
//! The worker of this same process may be attached: its publications then
//! go to its inbox in process, not through its socket (its updates come
//! through `apply`, in order, likewise).

mod accept;
mod admin_requests;
mod admission;
mod apply;
mod liveness;
mod offers;
mod publish;
mod service;
mod session;
mod stripes;

#[cfg(feature = "fuzzing")]
pub(crate) use apply::batch_of;
pub(crate) use liveness::silence;
pub(crate) use service::KeeperService;

#[cfg(test)]
#[path = "../../tests/unit/hardening_tests.rs"]
mod hardening_tests;
#[cfg(test)]
#[path = "../../tests/unit/wire_errors_tests.rs"]
mod wire_errors_tests;
