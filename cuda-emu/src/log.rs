//! The emulator's messages on stderr: refused calls when
//! `GEEPS_CUDA_EMU_LOG=1`, and, always, faults that become sticky errors
//! (a failed kernel or copy on a stream surfaces far from its cause) and
//! kernels the PTX interpreter cannot run (the code alone cannot say
//! which instruction is missing). Must
//! never write anywhere but stderr, nor fail.

use crate::config::config;

/// Whether refused calls are logged.
pub fn enabled() -> bool {
    config().log
}

/// A debug line, printed when logging is on.
pub fn debug(message: impl FnOnce() -> String) {
    if enabled() {
        eprintln!("geeps-cuda-emu: {}", message());
    }
}

/// A fault (a sticky error, or a kernel that cannot run): always printed.
pub fn fault(message: &str) {
    eprintln!("geeps-cuda-emu: {message}");
}
