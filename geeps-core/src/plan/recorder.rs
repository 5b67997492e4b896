//! The operation-sequence recorder of the virtual iteration: every virtual
//! call is checked and appended, and gets a handle naming its position. The
//! recording is a hint for prefetching and placement, never a condition of
//! correctness; it must not execute anything.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::table::{RowKey, Slack, TableId};

/// Names one recorded call of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    pub(crate) instance: u32,
    pub(crate) position: u32,
}

impl Handle {
    /// The position of the call in the recorded sequence.
    pub fn position(&self) -> usize {
        self.position as usize
    }

    /// Rebuilds a handle from its parts (for language bindings that pass
    /// handles as integers). Validity is checked when it is used.
    pub fn from_parts(instance: u32, position: u32) -> Self {
        Handle { instance, position }
    }

    /// The instance that recorded the handle.
    pub fn instance(&self) -> u32 {
        self.instance
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OpKind {
    Read {
        slack: Slack,
    },
    /// `zeroed`: the buffer comes zeroed (else with unspecified contents,
    /// the application overwriting it whole).
    PreUpdate {
        zeroed: bool,
    },
    LocalAccess {
        fetch: bool,
    },
    /// Releases of the acquisition at position `acquire`.
    PostRead {
        acquire: usize,
    },
    Update {
        acquire: usize,
    },
    PostLocalAccess {
        acquire: usize,
        save: bool,
        /// The rows' contents are dead: nothing is saved, not even a
        /// hand-over's carried save.
        discard: bool,
    },
    TableClock {
        table: TableId,
    },
}

impl OpKind {
    pub(crate) fn is_acquire(&self) -> bool {
        matches!(self, OpKind::Read { .. } | OpKind::PreUpdate { .. } | OpKind::LocalAccess { .. })
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            OpKind::Read { .. } => "read",
            OpKind::PreUpdate { .. } => "pre_update",
            OpKind::LocalAccess { .. } => "local_access",
            OpKind::PostRead { .. } => "post_read",
            OpKind::Update { .. } => "update",
            OpKind::PostLocalAccess { .. } => "post_local_access",
            OpKind::TableClock { .. } => "table_clock",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RecordedOp {
    pub(crate) kind: OpKind,
    /// Keys of an acquisition (empty for releases and clocks).
    pub(crate) keys: Arc<[RowKey]>,
    /// For an acquisition, the position of its release once recorded.
    pub(crate) release: Option<usize>,
}

/// Appends virtual calls; validates pairing as it goes.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) ops: Vec<RecordedOp>,
}

impl Recorder {
    pub(crate) fn acquire(&mut self, kind: OpKind, keys: Arc<[RowKey]>) -> usize {
        self.ops.push(RecordedOp { kind, keys, release: None });
        self.ops.len() - 1
    }

    /// Records the release of the acquisition at `acquire`; `expected` names
    /// the acquisition kind this release pairs with.
    pub(crate) fn release(&mut self, acquire: usize, kind: OpKind, expected: &'static str) -> Result<usize> {
        let Some(op) = self.ops.get(acquire) else {
            return Err(Error::InvalidHandle(format!("handle {acquire} was not recorded by this instance")));
        };
        if op.kind.name() != expected {
            return Err(Error::InvalidHandle(format!(
                "{} needs a handle from {expected}, but handle {acquire} is a {}",
                kind.name(),
                op.kind.name()
            )));
        }
        if let Some(r) = op.release {
            return Err(Error::InvalidHandle(format!(
                "handle {acquire} ({expected}) was already released at position {r}"
            )));
        }
        let pos = self.ops.len();
        self.ops.push(RecordedOp { kind, keys: Arc::from(Vec::new()), release: None });
        self.ops[acquire].release = Some(pos);
        Ok(pos)
    }

    pub(crate) fn clock(&mut self, table: TableId) -> usize {
        self.ops.push(RecordedOp { kind: OpKind::TableClock { table }, keys: Arc::from(Vec::new()), release: None });
        self.ops.len() - 1
    }

    /// Checks the finished recording: every acquisition must be released.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some((pos, op)) =
            self.ops.iter().enumerate().find(|(_, op)| op.kind.is_acquire() && op.release.is_none())
        {
            return Err(Error::InvalidHandle(format!(
                "virtual {} at position {pos} was never released in the virtual iteration; record its post_read/update/post_local_access too",
                op.kind.name()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Arc<[RowKey]> {
        Arc::from(vec![RowKey::new(TableId(0), 0)])
    }

    #[test]
    fn pairs_releases_with_acquisitions() {
        let mut r = Recorder::default();
        let a = r.acquire(OpKind::Read { slack: Slack::BSP }, keys());
        let p = r.release(a, OpKind::PostRead { acquire: a }, "read").unwrap();
        assert_eq!(r.ops[a].release, Some(p));
        assert!(r.release(a, OpKind::PostRead { acquire: a }, "read").is_err(), "double release");
        let u = r.acquire(OpKind::PreUpdate { zeroed: true }, keys());
        assert!(r.release(u, OpKind::PostRead { acquire: u }, "read").is_err(), "wrong kind");
        assert!(r.release(99, OpKind::PostRead { acquire: 99 }, "read").is_err(), "unknown");
        assert!(matches!(r.check(), Err(Error::InvalidHandle(m)) if m.contains("never released")));
    }
}
