//! A loaded module: its kernels parsed and decoded once, its module
//! variables kept between launches, and running a decoded kernel over a
//! grid. Must never decode at launch time (a launch finds its code here).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::error::Error;
use super::exec::{self, Geometry, Stop};
use super::inst::Code;
use super::memory::Memory;
use super::{decode, parse};

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
