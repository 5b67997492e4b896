//! The suite's error: a message saying what failed, with the geeps or I/O
//! error behind it. It never decides whether a failure is fatal.

use std::fmt;

#[derive(Debug)]
pub struct BenchError(String);

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

impl BenchError {
    pub fn msg(m: impl Into<String>) -> Self {
        BenchError(m.into())
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl From<geeps::Error> for BenchError {
    fn from(e: geeps::Error) -> Self {
        BenchError(format!("geeps: {e}"))
    }
}

impl From<std::io::Error> for BenchError {
    fn from(e: std::io::Error) -> Self {
        BenchError(format!("I/O: {e}"))
    }
}
