//! Every problem found in one file, collected so that a user sees them all
//! in one run (up to `LIMIT`), each at its line. It owns the collecting and
//! the turning into one error; it must never decide what is a problem.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// At most this many problems are reported for one file.
pub const LIMIT: usize = 20;

/// The problems of one file, in the order found.
#[derive(Debug)]
pub struct Problems {
    file: PathBuf,
    found: Vec<(usize, String)>,
    /// Problems found past `LIMIT`, counted but not kept.
    more: usize,
}

impl Problems {
    /// An empty list for `file`.
    pub fn new(file: &Path) -> Self {
        Problems { file: file.to_path_buf(), found: Vec::new(), more: 0 }
    }

    /// Records a problem at `line`.
    pub fn push(&mut self, line: usize, msg: impl Into<String>) {
        if self.found.len() < LIMIT {
            self.found.push((line, msg.into()));
        } else {
            self.more += 1;
        }
    }

    /// How many problems were found so far.
    pub fn len(&self) -> usize {
        self.found.len() + self.more
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// `Ok` when nothing was found; otherwise one error listing every problem.
    pub fn finish(mut self) -> Result<()> {
        self.found.sort_by_key(|(line, _)| *line);
        match self.found.len() {
            0 => Ok(()),
            1 => {
                let (line, msg) = self.found.pop().expect("one problem");
                Err(Error::Prototxt { file: self.file, line, msg })
            }
            _ => Err(Error::Problems { file: self.file, problems: self.found, more: self.more }),
        }
    }
}
