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
    #[error("geeps: {}", geeps_message(.0))]
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

/// geeps' words, but a budget too small names the flag a user sets.
fn geeps_message(e: &geeps::Error) -> String {
    match e {
        geeps::Error::BudgetTooSmall { budget, needed, what } => format!(
            "the device memory budget is too small: {what} needs {needed} bytes, and it has {budget}; raise \
             --device-memory-mb (the budget per worker, in MiB) by at least {} MiB",
            needed.saturating_sub(*budget).div_ceil(1 << 20)
        ),
        other => other.to_string(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geeps_budget_errors_name_the_flag_a_user_sets() {
        let e = Error::from(geeps::Error::BudgetTooSmall {
            budget: 77_070_848,
            needed: 94_297_088,
            what: "one access buffer (the pool's share of the budget)",
        });
        let text = e.to_string();
        assert!(text.contains("raise --device-memory-mb") && text.contains("by at least 17 MiB"), "{text}");
        assert!(!text.contains("`device_memory`"), "{text}");
    }
}
