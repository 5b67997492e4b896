//! The emulator's messages on stderr: refused calls when
//! `GEEPS_CUDA_EMU_LOG=1`, and, always, faults that become sticky errors
//! (a failed kernel or copy on a stream surfaces far from its cause) and
//! kernels the PTX interpreter cannot run (the code alone cannot say
//! which instruction is missing), and counts the faults for
//! `geeps_cuda_emu_fault_count`. Must
//! never write anywhere but stderr, nor fail.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::config;

static FAULTS: AtomicU64 = AtomicU64::new(0);

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
    FAULTS.fetch_add(1, Ordering::Relaxed);
    eprintln!("geeps-cuda-emu: {message}");
}

/// How many faults have been reported in this process.
pub fn faults() -> u64 {
    FAULTS.load(Ordering::Relaxed)
}
