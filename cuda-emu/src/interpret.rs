//! Kernel launches in the emulator's PTX interpreter (`crate::ptx`): the
//! module is parsed and its kernels decoded at load, and a launch locks
//! the allocations its arguments point into, runs the kernel over them in
//! place, and turns a fault into the driver's code with a message naming
//! the kernel, the PTX line and the address. A kernel that stops midway
//! leaves its earlier writes, as on a GPU. Must never let a panic escape
//! (it would cross the C ABI).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::launch::{lock_all, Launch};
use crate::ptx::{self, Fault, Geometry, Memory, Program};
use crate::result::{CUresult, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_MISALIGNED_ADDRESS};

/// A module's decoded kernels, or why the module cannot be parsed.
pub struct Interpreter {
    program: Result<Program, String>,
}

impl Interpreter {
    pub fn new(ptx: &str) -> Interpreter {
        let program = match catch_unwind(|| Program::load(ptx)) {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(e)) => Err(format!("the PTX interpreter cannot read this module: {e}")),
            Err(_) => Err("the PTX interpreter failed reading this module".into()),
        };
        Interpreter { program }
    }

    /// Why the interpreter cannot run this module, if it cannot.
    pub fn compile_error(&self) -> Option<&str> {
        self.program.as_ref().err().map(String::as_str)
    }

    /// Why kernel `name` cannot run, if it cannot.
    pub fn check(&self, name: &str) -> Result<(), String> {
        let program = self.program.as_ref().map_err(Clone::clone)?;
        program.kernel(name).map(|_| ())
    }

    /// Runs `launch` over its whole grid.
    pub fn run(&self, launch: &Launch) -> Result<(), (CUresult, String)> {
        let program = self.program.as_ref().map_err(|e| (CUDA_ERROR_LAUNCH_FAILED, e.clone()))?;
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
}
