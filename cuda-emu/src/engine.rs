//! Which engine runs a launch, and running it there: natively when
//! `GEEPS_CUDA_EMU_KERNELS=native` and a native kernel claims the launch
//! (`native_kernels`), else in the PTX interpreter, which locks the
//! allocations the arguments point into, runs the kernel over them in place,
//! and turns a fault into the driver's code with a message naming the
//! kernel, the PTX line and the address. A kernel that stops midway leaves
//! its earlier writes, as on a GPU. Must never let a panic escape (it would
//! cross the C ABI).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::config::{config, KernelMode};
use crate::launch::{lock_all, Launch};
use crate::native_kernels;
use crate::ptx::{self, Fault, Geometry, Memory};
use crate::result::{CUresult, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_MISALIGNED_ADDRESS};

/// Why the kernel cannot run in the engine that would run it, if it cannot.
pub fn runnable(launch: &Launch) -> Result<(), String> {
    if config().kernels == KernelMode::Native && native_kernels::detect(launch).is_some() {
        return Ok(());
    }
    launch.function.module.interpreter.check(launch.name())
}

/// Runs the kernel (on the stream's thread).
pub fn run(launch: Launch) -> Result<(), (CUresult, String)> {
    // A GPU would fault on the first access through it: fault naming the free instead.
    if let Some((param, note)) = launch.freed.first() {
        return Err((CUDA_ERROR_ILLEGAL_ADDRESS, format!("argument {param}: use after free: {note}")));
    }
    if config().kernels == KernelMode::Native {
        if let Some(native) = native_kernels::detect(&launch) {
            return native_kernels::run(native, &launch);
        }
    }
    interpret(&launch)
}

/// Runs `launch` over its whole grid in the PTX interpreter.
fn interpret(launch: &Launch) -> Result<(), (CUresult, String)> {
    let program =
        launch.function.module.interpreter.program().map_err(|e| (CUDA_ERROR_LAUNCH_FAILED, e.to_string()))?;
    let name = launch.name();
    let code = program.kernel(name).map_err(|e| (CUDA_ERROR_LAUNCH_FAILED, e))?;
    let (allocs, _) = launch.allocations();
    let mut guards = lock_all(&allocs);
    let globals = guards.iter_mut().zip(&allocs).map(|(g, a)| (a.base, g.as_mut_slice())).collect();
    let mut params = vec![0u8; code.param_bytes];
    for (&(at, size), arg) in code.params.iter().zip(&launch.args) {
        let n = size.min(arg.len());
        params[at..at + n].copy_from_slice(&arg[..n]);
    }
    // After the allocations, as every launch of the module locks them: no lock-order cycle.
    let mut data = program.data();
    let mut mem = Memory::new(globals, params, &mut data);
    mem.fence(allocs.iter().map(|a| a.base).zip(launch.fences(&allocs)).collect());
    let geo = Geometry { grid: launch.grid, block: launch.block, dynamic_shared: launch.shared as usize };
    match catch_unwind(AssertUnwindSafe(|| ptx::run(code, geo, &mut mem))) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(stop)) => {
            let (code, what) = match stop.fault {
                Fault::Illegal(m) => (CUDA_ERROR_ILLEGAL_ADDRESS, m),
                Fault::Misaligned(m) => (CUDA_ERROR_MISALIGNED_ADDRESS, m),
            };
            Err((code, format!("PTX line {}: {what}", stop.line)))
        }
        Err(_) => Err((CUDA_ERROR_LAUNCH_FAILED, "the PTX interpreter failed".into())),
    }
}
