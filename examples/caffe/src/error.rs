//! The trainer's one error type. Every variant says what to fix and where:
//! a file and line for bad prototxt, a path for bad data, the worker for a
//! failure inside a training thread. It must never carry a bare message
//! without the context the user needs to act on it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A prototxt file that does not parse or does not fit the schema.
    #[error("{}:{line}: {msg}", file.display())]
    Prototxt { file: PathBuf, line: usize, msg: String },
    /// Several problems in one prototxt file, by line (more: how many past
    /// the reporting limit were left out).
    #[error("{}", list_problems(file, problems, *more))]
    Problems { file: PathBuf, problems: Vec<(usize, String)>, more: usize },
    /// A net or solver that parses but cannot be built or run.
    #[error("{0}")]
    Config(String),
    /// A data or weights file that cannot be used.
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    #[error("geeps: {0}")]
    Geeps(#[from] geeps::Error),
    #[error("worker {rank}: {source}")]
    Worker { rank: usize, source: Box<Error> },
    /// The GPU compute path: no driver or cuBLAS, a failed kernel or copy.
    #[error("GPU: {0}")]
    Gpu(String),
    /// A loss, an output or a parameter update turned NaN or infinite.
    #[error("{0}: training diverged; lower base_lr, clip gradients (clip_gradients) or check the input data")]
    Diverged(String),
}

fn list_problems(file: &std::path::Path, problems: &[(usize, String)], more: usize) -> String {
    let mut out: Vec<String> = problems.iter().map(|(line, msg)| format!("{}:{line}: {msg}", file.display())).collect();
    if more > 0 {
        out.push(format!("{}: and {more} more problem(s) past these", file.display()));
    }
    out.join("\n")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn file(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::File { path: path.into(), msg: msg.into() }
    }

    pub fn config(msg: impl Into<String>) -> Self {
        Error::Config(msg.into())
    }
}
