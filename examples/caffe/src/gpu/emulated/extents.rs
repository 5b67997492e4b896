//! Telling the emulated driver which bytes each pointer argument of a
//! launch covers (its guard mode: a kernel that strays out of a blob into
//! a neighbouring one in the same allocation faults there, naming it):
//! `geeps_cuda_emu_declare_extents`, found once with `dlsym` on the loaded
//! `libcuda.so.1` when `GEEPS_CUDA_EMU` is set. Must never do anything on a
//! real driver: without that symbol a declaration is a no-op.

use std::sync::OnceLock;

type DeclareFn = unsafe extern "C" fn(ranges: *const u64, count: usize) -> u32;

fn entry() -> Option<DeclareFn> {
    static ENTRY: OnceLock<Option<(libloading::Library, DeclareFn)>> = OnceLock::new();
    ENTRY
        .get_or_init(|| {
            std::env::var_os("GEEPS_CUDA_EMU")?;
            // SAFETY: loads the driver cudarc has loaded already; the emulator's
            // entry point has the signature of `DeclareFn`.
            unsafe {
                let lib = libloading::Library::new("libcuda.so.1").ok()?;
                let f = *lib.get::<DeclareFn>(b"geeps_cuda_emu_declare_extents\0").ok()?;
                Some((lib, f))
            }
        })
        .as_ref()
        .map(|(_, f)| *f)
}

/// Declares (address, bytes) for the calling thread's next launch.
pub fn declare_extents(ranges: &[(u64, u64)]) {
    let Some(declare) = entry() else { return };
    let words: Vec<u64> = ranges.iter().flat_map(|&(at, bytes)| [at, bytes]).collect();
    // SAFETY: `words` holds 2 × ranges.len() values for the call; the emulator copies them.
    // A refusal only leaves the launch held to its allocations' bounds.
    let _ = unsafe { declare(words.as_ptr(), ranges.len()) };
}
