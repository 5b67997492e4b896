//! Where the engine's log goes when geeps is driven from C: slow waits (and
//! who is behind), placement plans, stats at shutdown. Without a call to
//! `geeps_log_init` nothing is printed. It must never install a logger on
//! its own, as the host program may have one.

use std::ffi::c_char;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::guard::guard;
use crate::marshal::string;
use crate::status::{Failure, GeepsStatus};

/// Sends geeps's log to stderr. `filter` selects what, in `RUST_LOG` syntax
/// (`"warn"`, `"info"`, `"geeps_core=debug"`); NULL uses the `GEEPS_LOG`
/// environment variable, or `"warn"` when it is not set. Once per process:
/// a second call returns `GEEPS_STATUS_INVALID_STATE`.
#[no_mangle]
pub extern "C" fn geeps_log_init(filter: *const c_char) -> GeepsStatus {
    guard(|| {
        let filter = if filter.is_null() {
            std::env::var("GEEPS_LOG").unwrap_or_else(|_| "warn".into())
        } else {
            string(filter, "filter")?.to_string()
        };
        let filter =
            EnvFilter::try_new(&filter).map_err(|e| Failure::invalid(format!("log filter `{filter}`: {e}")))?;
        // Colour only for a person at a terminal, and never under NO_COLOR.
        let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let subscriber = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
        subscriber.try_init().map_err(|e| {
            Failure::new(GeepsStatus::InvalidState, format!("a logger is already installed in this process: {e}"))
        })
    })
}
