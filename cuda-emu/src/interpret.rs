//! A module as the emulator's PTX interpreter (`crate::ptx`) holds it: parsed
//! and its kernels decoded at load, or why it cannot be. Running a launch
//! on it is `engine`'s job. Must never let a panic of the parser escape (it
//! would cross the C ABI).

use std::panic::catch_unwind;

use crate::ptx::Program;

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

    /// The decoded module, or why it cannot be read.
    pub fn program(&self) -> Result<&Program, &str> {
        self.program.as_ref().map_err(String::as_str)
    }
}
