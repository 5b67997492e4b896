//! A worker's part of a checkpoint and of a resume: its own state (every
//! momentum history and layer state row, which live in its local tables
//! and nowhere else, and the iteration it is at) saved beside geeps' tables
//! by `Geeps::checkpoint`, and loaded back by `Geeps::restore`, with the
//! data cursors moved to that iteration. It owns the state's byte layout;
//! it must never decide when to checkpoint (`solvers::solve` does).

use std::path::{Path, PathBuf};

use geeps::{keys, RowKey, TableId};

use crate::error::{Error, Result};
use crate::hdf5::{write_solverstate_h5, SolverStateH5};
use crate::proto::binary;
use crate::proto::caffe::SolverState;
use crate::proto::caffemodel::blob_proto;
use crate::ps::worker::PsWorker;

/// Marks the state layout; a checkpoint of another layout is refused.
const STATE_MAGIC: &[u8; 8] = b"cgeeps01";

impl PsWorker<'_> {
    /// The local tables whose rows outlive an iteration: momentum histories
    /// and layer states (activations and gradients are rewritten each pass).
    fn persistent_tables(&self) -> Vec<TableId> {
        let l = self.layout();
        l.history.iter().copied().chain(l.aux.iter().flatten().copied()).collect()
    }

    fn all_rows(&self, t: TableId) -> Vec<RowKey> {
        keys(t, 0..self.geeps().tables()[t.0 as usize].rows)
    }

    /// Every persistent local row, in table order.
    fn local_state(&self) -> Result<Vec<f32>> {
        let mut out = Vec::new();
        for t in self.persistent_tables() {
            let b = self.geeps().local_access_keys(&self.all_rows(t), true)?;
            out.extend_from_slice(&self.view().read(b.device_ptr(), b.len(), || b.as_slice())?);
            b.discard()?;
        }
        Ok(out)
    }

    fn set_local_state(&self, values: &[f32]) -> Result<()> {
        let mut at = 0;
        for t in self.persistent_tables() {
            let mut b = self.geeps().local_access_keys(&self.all_rows(t), false)?;
            let n = b.len();
            let mut v = self.view().write(b.device_ptr(), n, false, || b.as_mut_slice())?;
            v.copy_from_slice(&values[at..at + n]);
            self.view().commit(v)?;
            b.post_with(true)?;
            at += n;
        }
        Ok(())
    }

    /// Writes Caffe's `.solverstate` (`.solverstate.h5`: Caffe's HDF5 layout) for the snapshot at `iter`: the
    /// iteration, the weights file, and one history blob per parameter blob
    /// (this worker's momentum; with several workers the exact state of
    /// every worker is in the geeps checkpoint beside it, which resume uses).
    pub fn write_solverstate(&self, path: &Path, iter: u64, model: &Path) -> Result<()> {
        let mut history = Vec::new();
        for (lp, &t) in self.params().layers.iter().zip(&self.layout().history) {
            let b = self.geeps().local_access_keys(&self.all_rows(t), true)?;
            let values = self.view().read(b.device_ptr(), b.len(), || b.as_slice())?.to_vec();
            b.discard()?;
            for blob in &lp.blobs {
                history.push((blob.shape.clone(), values[blob.offset..blob.offset + blob.len].to_vec()));
            }
        }
        let iter =
            i32::try_from(iter).map_err(|_| Error::config(format!("iteration {iter} does not fit a solverstate")))?;
        let learned_net = model.display().to_string();
        if crate::net::params::is_h5(path) {
            let state = SolverStateH5 { iter, current_step: 0, learned_net, history };
            return write_solverstate_h5(path, &state);
        }
        let state = SolverState {
            iter: Some(iter),
            learned_net: Some(learned_net),
            history: history.iter().map(|(shape, v)| blob_proto(shape, v)).collect(),
            current_step: None,
        };
        binary::write(path, &state)
    }

    /// Saves the cluster's tables and this worker's state at iteration
    /// `iter` (a clock boundary) into `dir`; every worker calls it there.
    /// `Some(folder)` on rank 0 once the checkpoint is complete.
    pub fn checkpoint(&self, dir: &Path, iter: u64) -> Result<Option<PathBuf>> {
        let state = self.local_state()?;
        let mut bytes = Vec::with_capacity(16 + state.len() * 4);
        bytes.extend_from_slice(STATE_MAGIC);
        bytes.extend_from_slice(&iter.to_le_bytes());
        for v in state {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        Ok(self.geeps().checkpoint(dir, &bytes)?)
    }

    /// Loads the newest checkpoint in `dir` (or the checkpoint folder
    /// `dir` itself) instead of `initialize`, and returns the iteration to
    /// go on from. From a cluster of another size, rank 0 takes the sum of
    /// the saved momentum histories (the momentum step they make together)
    /// and the others start from zero.
    pub fn restore(&mut self, dir: &Path) -> Result<u64> {
        let r = self.geeps().restore(dir)?;
        let bad = |why: String| Error::config(format!("checkpoint {}: {why}", r.folder.display()));
        let mut iters = Vec::new();
        let mut states = Vec::new();
        for (rank, s) in r.rank_states.iter().enumerate() {
            if s.len() < 16 || &s[..8] != STATE_MAGIC || (s.len() - 16) % 4 != 0 {
                return Err(bad(format!("rank {rank}'s state was not written by this trainer")));
            }
            iters.push(u64::from_le_bytes(s[8..16].try_into().unwrap_or_default()));
            states.push(
                s[16..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<_>>(),
            );
        }
        let Some(&iter) = iters.first() else { return Err(bad("it holds no worker state".into())) };
        if iters.iter().any(|&i| i != iter) {
            return Err(bad(format!("its workers were at different iterations {iters:?}")));
        }
        let expected: usize =
            self.persistent_tables().iter().map(|&t| self.all_rows(t).len() * self.layout().row_width).sum();
        if let Some(rank) = states.iter().position(|s| s.len() != expected) {
            return Err(bad(format!(
                "rank {rank} saved {} floats of momentum and layer state; this net has {expected}: was it saved from another net or solver?",
                states[rank].len()
            )));
        }
        let (rank, world) = (self.geeps().rank(), self.geeps().num_workers());
        let mine = if r.workers == world {
            states.swap_remove(rank)
        } else if rank == 0 {
            let history: usize =
                self.layout().history.iter().map(|&t| self.all_rows(t).len() * self.layout().row_width).sum();
            let mut sum = states[0].clone();
            for s in &states[1..] {
                for (a, b) in sum[..history].iter_mut().zip(&s[..history]) {
                    *a += b;
                }
            }
            sum
        } else {
            let history: usize =
                self.layout().history.iter().map(|&t| self.all_rows(t).len() * self.layout().row_width).sum();
            let mut s = states.swap_remove(0);
            s[..history].fill(0.0);
            s
        };
        self.set_local_state(&mine)?;
        self.skip_data(iter);
        self.geeps().reset_stats();
        Ok(iter)
    }
}
