//! Kernels executed by the ptoxide PTX interpreter: every allocation an
//! argument points into is mirrored into the interpreter's memory (and the
//! argument rebased onto the mirror), the kernel runs over the whole grid,
//! and every mirror is copied back. The module's PTX is compiled once and the
//! compiled program reused. ptoxide panics on PTX it does not implement: the
//! panic is caught and becomes CUDA_ERROR_LAUNCH_FAILED. Must never leave an
//! allocation half-written by a failed kernel, nor reuse a program after a
//! panic inside it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use ptoxide::{Argument, Context, LaunchParams};

use crate::launch::{lock_all, Launch};
use crate::result::{CUresult, CUDA_ERROR_LAUNCH_FAILED};

/// Alignment of each mirror inside the interpreter's memory.
const MIRROR_ALIGN: usize = 256;

/// A module's PTX and its compiled program.
pub struct Interpreter {
    ptx: String,
    program: Mutex<Option<Context>>,
    compile_error: Option<String>,
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

fn compile(ptx: &str) -> Result<Context, String> {
    match catch_unwind(AssertUnwindSafe(|| Context::new_with_module(ptx))) {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("the PTX interpreter cannot compile this module: {e}")),
        Err(p) => Err(format!("the PTX interpreter cannot compile this module: {}", panic_text(&*p))),
    }
}

impl Interpreter {
    /// Compiles `ptx` for the interpreter; a failure is kept, not fatal.
    pub fn new(ptx: &str) -> Interpreter {
        let (program, compile_error) = match compile(ptx) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e)),
        };
        Interpreter { ptx: ptx.to_string(), program: Mutex::new(program), compile_error }
    }

    /// Why the interpreter cannot run this module, if it cannot.
    pub fn compile_error(&self) -> Option<&str> {
        self.compile_error.as_deref()
    }

    /// Runs `launch` over its whole grid.
    pub fn run(&self, launch: &Launch) -> Result<(), (CUresult, String)> {
        if let Some(e) = &self.compile_error {
            return Err((CUDA_ERROR_LAUNCH_FAILED, e.clone()));
        }
        let (g, b) = (launch.grid, launch.block);
        if g.2 != 1 || b.2 != 1 {
            return Err((CUDA_ERROR_LAUNCH_FAILED, "the PTX interpreter runs 2-D grids and blocks only".into()));
        }
        let (allocs, slots) = launch.allocations();
        let mut guards = lock_all(&allocs);
        let cached = self.program.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut program = match cached {
            Some(p) => p,
            None => compile(&self.ptx).map_err(|e| (CUDA_ERROR_LAUNCH_FAILED, e))?,
        };
        program.reset_mem();
        // Mirror addresses, computed as ptoxide's bump allocator places them;
        // the first MIRROR_ALIGN bytes stay unused so no mirror sits at 0 (NULL).
        let mut used = 0usize;
        let mut place = |program: &mut Context, bytes: usize| {
            let at = used.div_ceil(MIRROR_ALIGN) * MIRROR_ALIGN;
            used = at + bytes;
            (program.alloc_raw(bytes, MIRROR_ALIGN), at as u64)
        };
        place(&mut program, MIRROR_ALIGN);
        let mirrors: Vec<_> = guards
            .iter()
            .map(|g| {
                let (raw, at) = place(&mut program, g.len());
                program.write_raw(raw, 0, g);
                (raw, at)
            })
            .collect();
        let mut args = launch.args.clone();
        for (p, &slot) in launch.pointers.iter().zip(&slots) {
            args[p.param] = (mirrors[slot].1 + p.offset as u64).to_ne_bytes().to_vec();
        }
        let arguments: Vec<Argument> = args.iter().map(|a| Argument::Bytes(a)).collect();
        let params = LaunchParams::func(launch.name()).grid2d(g.0, g.1).block2d(b.0, b.1);
        match catch_unwind(AssertUnwindSafe(|| program.run(params, &arguments))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                *self.program.lock().unwrap_or_else(|p| p.into_inner()) = Some(program);
                return Err((CUDA_ERROR_LAUNCH_FAILED, format!("the PTX interpreter stopped: {e}")));
            }
            Err(p) => {
                return Err((CUDA_ERROR_LAUNCH_FAILED, format!("the PTX interpreter failed: {}", panic_text(&*p))));
            }
        }
        for (g, (raw, _)) in guards.iter_mut().zip(&mirrors) {
            program.read_raw(*raw, 0, g);
        }
        program.reset_mem();
        *self.program.lock().unwrap_or_else(|p| p.into_inner()) = Some(program);
        Ok(())
    }
}
