//! The signals a training run answers, as Caffe's: SIGINT and SIGTERM
//! (`-sigint_effect`, stop by default) and SIGHUP (`-sighup_effect`,
//! snapshot by default). `install` registers flags the training loop takes
//! at each clock; a second SIGINT or SIGTERM while the first is still
//! pending ends the process at once (exit status 130). Only the binary
//! installs them: a library user's signals stay theirs. It owns the flags;
//! it must never decide what a signal does to training (`solvers::solve` does).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};

struct Flags {
    interrupt: Arc<AtomicBool>,
    hangup: Arc<AtomicBool>,
}

static FLAGS: OnceLock<Flags> = OnceLock::new();

/// Registers the handlers (once per process).
pub fn install() -> Result<()> {
    if FLAGS.get().is_some() {
        return Ok(());
    }
    let flags = Flags { interrupt: Arc::new(AtomicBool::new(false)), hangup: Arc::new(AtomicBool::new(false)) };
    let register = || -> std::io::Result<()> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        for sig in [SIGINT, SIGTERM] {
            // Registered first, so it sees the flag as the earlier signal left it.
            signal_hook::flag::register_conditional_shutdown(sig, 130, flags.interrupt.clone())?;
            signal_hook::flag::register(sig, flags.interrupt.clone())?;
        }
        signal_hook::flag::register(SIGHUP, flags.hangup.clone())?;
        Ok(())
    };
    register().map_err(|e| Error::config(format!("cannot install the signal handlers: {e}")))?;
    let _ = FLAGS.set(flags);
    Ok(())
}

/// Whether SIGINT or SIGTERM came since the last call (clears it).
pub fn take_interrupt() -> bool {
    FLAGS.get().is_some_and(|f| f.interrupt.swap(false, Ordering::AcqRel))
}

/// Whether SIGHUP came since the last call (clears it).
pub fn take_hangup() -> bool {
    FLAGS.get().is_some_and(|f| f.hangup.swap(false, Ordering::AcqRel))
}
