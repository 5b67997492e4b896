//! The emulator's own PTX interpreter: runs the PTX NVRTC 12.x emits for
//! ordinary kernels (integer, float, logic, comparison, conversion, move,
//! memory, atomic, warp-shuffle/vote and control instructions; `.shared`,
//! `.local` and module variables; barriers; 3-D grids and blocks) on the CPU. A module is parsed
//! at load; each kernel is decoded once into a compact instruction list
//! and executed SIMT-style over each block's threads. What it does not
//! implement is an error naming the instruction and its PTX line, never a
//! panic. Must never reach memory other than what the launch hands it.

mod compare;
mod convert;
mod decode;
mod exec;
mod float;
mod inst;
mod int;
mod memory;
mod operand;
mod parse;
mod source;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

pub use exec::{Geometry, Stop};
pub use inst::Code;
pub use memory::{Fault, Memory};

/// Something wrong with PTX text, at a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub line: u32,
    pub message: String,
}

impl Error {
    pub fn at(line: u32, message: impl Into<String>) -> Error {
        Error { line, message: message.into() }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PTX line {}: {}", self.line, self.message)
    }
}

/// A parsed module: each kernel decoded, or why it cannot run.
pub struct Program {
    kernels: HashMap<String, Result<Code, Error>>,
    /// The module's `.global`/`.const` variables, kept between launches as on a GPU.
    data: Mutex<Vec<u8>>,
}

impl Program {
    /// Parses `ptx` and decodes every kernel; a kernel's decode error is
    /// kept for its launches, a malformed module is refused.
    pub fn load(ptx: &str) -> Result<Program, Error> {
        let m = parse::module(ptx)?;
        let kernels = m.kernels.iter().map(|k| (k.name.clone(), decode::kernel(k, &m.vars))).collect();
        let data = Mutex::new(decode::module_data(&m.vars).1);
        Ok(Program { kernels, data })
    }

    /// The module's variables, locked for a launch.
    pub fn data(&self) -> MutexGuard<'_, Vec<u8>> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Kernel `name`, decoded, or why it cannot run.
    pub fn kernel(&self, name: &str) -> Result<&Code, String> {
        match self.kernels.get(name) {
            Some(Ok(c)) => Ok(c),
            Some(Err(e)) => Err(format!("kernel `{name}` cannot run in the PTX interpreter: {e}")),
            None => Err(format!("kernel `{name}` is not in the module")),
        }
    }
}

/// Runs `code` over a grid; the thread-instructions executed.
pub fn run(code: &Code, geo: Geometry, mem: &mut Memory) -> Result<u64, Stop> {
    exec::run(code, geo, mem)
}
