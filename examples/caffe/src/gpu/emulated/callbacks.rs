//! The two C callbacks every entry of the registration table shares:
//! `claims` asks `table::detect` whether the native code gives the PTX's
//! bits for a launch, `run` runs it over the memory the emulator resolved
//! and reports a fault as a driver code and a message. Must never unwind
//! into the emulator (a panic becomes CUDA_ERROR_LAUNCH_FAILED).

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::abi::NativeLaunch;
use super::table;
use super::view::{Launch, Memory};

const CUDA_SUCCESS: u32 = 0;
const CUDA_ERROR_LAUNCH_FAILED: u32 = 719;

pub(crate) unsafe extern "C" fn claims(raw: *const NativeLaunch) -> u8 {
    let claimed = catch_unwind(|| {
        // SAFETY: the emulator passes a live launch for the call.
        let launch = unsafe { Launch::from_raw(&*raw) };
        table::detect(&launch).is_some()
    });
    claimed.unwrap_or(false) as u8
}

pub(crate) unsafe extern "C" fn run(
    raw: *const NativeLaunch,
    message: *mut u8,
    capacity: usize,
    length: *mut usize,
) -> u32 {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the emulator passes a live launch, its memory locked, for the call.
        let launch = unsafe { Launch::from_raw(&*raw) };
        let Some(k) = table::named(launch.name()) else {
            return Err((CUDA_ERROR_LAUNCH_FAILED, format!("kernel `{}` has no native code", launch.name())));
        };
        let mut memory = Memory::new(&launch);
        table::run(k, &launch, &mut memory)
    }));
    let (code, text) = match outcome {
        Ok(Ok(())) => return CUDA_SUCCESS,
        Ok(Err(fault)) => fault,
        Err(_) => (CUDA_ERROR_LAUNCH_FAILED, "a native kernel panicked".to_string()),
    };
    let n = text.len().min(capacity);
    if !message.is_null() && !length.is_null() {
        // SAFETY: the emulator's buffer holds `capacity` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), message, n);
            *length = n;
        }
    }
    code
}
