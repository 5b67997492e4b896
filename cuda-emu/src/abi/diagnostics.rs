//! The emulator's own entry point for tests of programs that run on it:
//! `geeps_cuda_emu_fault_count`, how many faults (sticky errors, races,
//! frees of memory in use) it has reported on stderr in this process, so a
//! test can require that none happened where no call returns one (a device
//! torn down in `Drop`). A real driver has no such symbol. Must never
//! change the emulator's state.

use crate::log;

/// Faults reported so far in this process.
#[no_mangle]
pub extern "C" fn geeps_cuda_emu_fault_count() -> u64 {
    log::faults()
}
