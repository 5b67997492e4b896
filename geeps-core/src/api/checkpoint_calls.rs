//! `checkpoint` and `restore`: the whole parameter server saved as of one
//! clock and loaded back, into the same number of workers or another.
//!
//! Every worker calls `checkpoint` at the same clock boundary with its own
//! state (bytes of the application's: momentum, data position). Rank 0
//! reads every parameter table at BSP freshness, so the rows are those of
//! exactly that clock under BSP's deterministic apply, and writes them with
//! the workers' states and a manifest (`checkpoint/layout.rs` makes it
//! atomic). Rank 0 writing alone needs no extra protocol and no folder on
//! the other machines for the tables; the workers' states do need a folder
//! every rank can write. `restore` is the mirror: rank 0 adds the saved
//! rows as its updates of the first clock, every worker ends that clock and
//! waits until the rows are visible. This file must never touch the
//! keepers or the transport directly.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::api::instance::Geeps;
use crate::checkpoint::layout::{self, MANIFEST};
use crate::checkpoint::manifest::{entry_of, verify, Manifest, TableEntry};
use crate::device::DevicePtr;
use crate::error::{Error, Result};
use crate::table::{keys, partition_range, RowKey, Slack, TableId};
use crate::transport::bytes::{bytes_from_floats, floats_from_bytes};

/// Complete checkpoints kept in a folder (older ones are removed once a
/// newer one is published): the newest, and one to fall back on.
const KEEP: usize = 2;

/// Rows moved per buffer while saving or restoring: bounded so a table far
/// larger than the buffer pool still goes through.
const CHUNK_BYTES: usize = 8 << 20;

/// A checkpoint loaded by [`Geeps::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The checkpoint's folder.
    pub folder: PathBuf,
    /// The clock it was taken at: every worker had ended that many clocks.
    /// The application resumes its own count here. The instance's own
    /// clock starts over at 1 (after the clock `restore` ends), and the
    /// checkpoints it writes next count on from this clock.
    pub clock: u64,
    /// Workers of the cluster that wrote it.
    pub workers: usize,
    /// Each of those workers' states, in rank order. With as many workers
    /// as now, worker `r` resumes from `rank_states[r]`; with another
    /// number, the application decides how the states combine.
    pub rank_states: Vec<Vec<u8>>,
}

fn err(path: &Path, reason: impl Into<String>) -> Error {
    Error::Checkpoint { path: path.display().to_string(), reason: reason.into() }
}

impl Geeps {
    /// Saves every parameter table as of this clock into `dir`, with this
    /// worker's `state`. Every worker of the cluster calls it at the same
    /// point of its program, between clocks (each table is saved as of the
    /// clocks every worker ended on it); the call returns once this worker's part is written, and on
    /// rank 0 once the checkpoint is complete: `Some(folder)` there,
    /// `None` elsewhere. The folder must be writable by every rank (one
    /// machine, or a shared filesystem). Exact under BSP (slack 0); with
    /// slack, a checkpoint may hold some updates of workers up to `slack`
    /// clocks ahead. The two newest checkpoints are kept.
    pub fn checkpoint(&self, dir: impl AsRef<Path>, state: &[u8]) -> Result<Option<PathBuf>> {
        let dir = dir.as_ref();
        self.running("checkpoint")?;
        let clock = self.boundary_clock(dir)?;
        let app_clocks: Vec<u64> = {
            let app = self.app.lock();
            app.clocks.clone()
        };
        let stage = layout::prepare(dir, clock)?;
        let rank = self.rank();
        layout::write_atomically(&stage.join(rank_file(rank)), state)?;
        if rank != 0 {
            return Ok(None);
        }
        let written = self.write_checkpoint(dir, &stage, clock, &app_clocks);
        if written.is_err() {
            // A checkpoint that cannot be finished must not keep the disk
            // full: its staging folder goes (a restore never reads one).
            let _ = std::fs::remove_dir_all(&stage);
        }
        written.map(Some)
    }

    /// Rank 0's part of a checkpoint: the tables, the manifest, the publish.
    fn write_checkpoint(&self, dir: &Path, stage: &Path, clock: u64, app_clocks: &[u64]) -> Result<PathBuf> {
        let mut tables = Vec::new();
        for t in self.param_tables() {
            let spec = &self.tables[t.0 as usize];
            let bytes = self.read_table(t, spec.rows)?;
            let file = format!("table-{}.f32", t.0);
            layout::write_atomically(&stage.join(&file), &bytes)?;
            tables.push(TableEntry {
                id: t.0,
                name: spec.name.clone(),
                rows: spec.rows,
                clock: self.logical_clock(app_clocks[t.0 as usize]),
                data: entry_of(&file, &bytes),
            });
        }
        let rank_states = self.collect_rank_states(stage)?;
        let manifest =
            Manifest { clock, workers: self.num_workers(), row_width: self.row_width(), tables, rank_states };
        layout::write_atomically(&stage.join(MANIFEST), manifest.to_text().as_bytes())?;
        let folder = layout::publish(dir, clock, KEEP)?;
        tracing::info!(folder = %folder.display(), clock, "checkpoint written");
        Ok(folder)
    }

    /// Loads the newest complete checkpoint in `dir` (or the checkpoint
    /// folder `dir` itself, one that holds a `MANIFEST`) into this fresh
    /// instance (after `finish_virtual_iteration`, before any update or
    /// clock). Every worker calls it; the saved cluster may have had another
    /// number of workers (rows are re-sharded by the keepers as any update
    /// is). Rank 0 adds the saved rows as its updates of the first clock,
    /// every worker ends that clock on every parameter table and waits
    /// until the rows are visible, so reads at any slack see them.
    pub fn restore(&self, dir: impl AsRef<Path>) -> Result<Restored> {
        let dir = dir.as_ref();
        self.running("restore")?;
        {
            let app = self.app.lock();
            if self.param_tables().iter().any(|t| app.clocks[t.0 as usize] != 0) || !app.live.is_empty() {
                return Err(err(
                    dir,
                    "restore needs a fresh instance: call it after finish_virtual_iteration, before any clock, update or held buffer",
                ));
            }
        }
        let (folder, manifest) = layout::latest(dir)?;
        let matched = self.match_tables(&folder, &manifest)?;
        if self.rank() == 0 {
            // Staging folders of a run that died mid-checkpoint would mix
            // with this run's; nobody else writes before this rank clocks.
            layout::remove_staging(dir);
            for (t, entry) in &matched {
                let bytes = verify(&folder, &entry.data)?;
                self.write_table(*t, &bytes)?;
            }
        }
        for t in self.param_tables() {
            self.table_clock(t)?;
        }
        self.wait_visible()?;
        *self.restored_clock.lock() = Some(manifest.clock);
        let rank_states = manifest.rank_states.iter().map(|f| verify(&folder, f)).collect::<Result<Vec<_>>>()?;
        tracing::info!(folder = %folder.display(), clock = manifest.clock, workers = manifest.workers, "checkpoint restored");
        Ok(Restored { folder, clock: manifest.clock, workers: manifest.workers, rank_states })
    }

    /// The instance's clock (the lowest of its parameter tables'; each
    /// table is saved as of its own clock), counted on from the restored
    /// checkpoint's.
    fn boundary_clock(&self, dir: &Path) -> Result<u64> {
        let app = self.app.lock();
        let Some(first) = self.param_tables().iter().map(|t| app.clocks[t.0 as usize]).min() else {
            return Err(err(dir, "this instance declares no parameter table; there is nothing to checkpoint"));
        };
        drop(app);
        Ok(self.logical_clock(first))
    }

    /// A clock of this instance as the checkpoints count: after a restore,
    /// the instance's clock 1 is the restored checkpoint's clock.
    fn logical_clock(&self, clock: u64) -> u64 {
        match *self.restored_clock.lock() {
            Some(base) => base + clock.saturating_sub(1),
            None => clock,
        }
    }

    /// Pairs each declared parameter table with the saved table of its name.
    fn match_tables<'m>(&self, folder: &Path, m: &'m Manifest) -> Result<Vec<(TableId, &'m TableEntry)>> {
        if m.row_width != self.row_width() {
            return Err(err(
                folder,
                format!("saved with rows of {} floats; this instance has {}", m.row_width, self.row_width()),
            ));
        }
        let mut out = Vec::new();
        for t in self.param_tables() {
            let spec = &self.tables[t.0 as usize];
            let Some(entry) = m.tables.iter().find(|e| e.name == spec.name) else {
                let saved: Vec<&str> = m.tables.iter().map(|e| e.name.as_str()).collect();
                return Err(err(
                    folder,
                    format!(
                        "holds no table `{}` (it holds {}); declare the tables it was saved with",
                        spec.name,
                        saved.join(", ")
                    ),
                ));
            };
            if entry.rows != spec.rows {
                return Err(err(
                    folder,
                    format!(
                        "table `{}` was saved with {} rows; this instance declares {}",
                        spec.name, entry.rows, spec.rows
                    ),
                ));
            }
            out.push((t, entry));
        }
        if let Some(extra) = m.tables.iter().find(|e| !out.iter().any(|(_, o)| o.name == e.name)) {
            return Err(err(
                folder,
                format!("holds table `{}`, which this instance does not declare (as a parameter table)", extra.name),
            ));
        }
        Ok(out)
    }

    fn chunk_rows(&self) -> u32 {
        let row_bytes = self.row_width() * 4;
        let budget = CHUNK_BYTES.min(self.config.device_memory / 8).max(row_bytes);
        (budget / row_bytes).clamp(1, u32::MAX as usize) as u32
    }

    /// All rows of a table at BSP freshness, as little-endian bytes.
    fn read_table(&self, t: TableId, rows: u32) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(rows as usize * self.row_width() * 4);
        let step = self.chunk_rows();
        for start in (0..rows).step_by(step as usize) {
            let buf = self.read_keys(&keys(t, start..rows.min(start + step)), Slack::BSP)?;
            let floats = self.copy_to_host(buf.device_ptr(), buf.len())?;
            buf.post()?;
            out.extend_from_slice(&bytes_from_floats(&floats));
        }
        Ok(out)
    }

    /// Adds saved rows (little-endian bytes of the whole table) as updates.
    fn write_table(&self, t: TableId, bytes: &[u8]) -> Result<()> {
        let width = self.row_width();
        let rows = (bytes.len() / 4 / width) as u32;
        let step = self.chunk_rows();
        for start in (0..rows).step_by(step as usize) {
            let end = rows.min(start + step);
            let mut values = vec![0.0f32; (end - start) as usize * width];
            floats_from_bytes(&bytes[start as usize * width * 4..end as usize * width * 4], &mut values)?;
            let u = self.pre_update_keys(&keys(t, start..end))?;
            self.copy_from_host(&values, u.device_ptr())?;
            u.update()?;
        }
        Ok(())
    }

    /// Waits until every partition of every parameter table has published
    /// the clock `restore` ended: one BSP read of a row of each.
    fn wait_visible(&self) -> Result<()> {
        let parts = self.parts;
        for t in self.param_tables() {
            let rows = self.tables[t.0 as usize].rows;
            let firsts: Vec<RowKey> = (0..parts)
                .map(|p| partition_range(rows, parts, p))
                .filter(|r| !r.is_empty())
                .map(|r| RowKey::new(t, r.start))
                .collect();
            if !firsts.is_empty() {
                self.read_keys(&firsts, Slack::BSP)?.post()?;
            }
        }
        Ok(())
    }

    /// Waits for every other rank's state file and lists them in rank order.
    fn collect_rank_states(&self, stage: &Path) -> Result<Vec<crate::checkpoint::manifest::FileEntry>> {
        let deadline = Instant::now() + self.wait_deadline();
        let mut out = Vec::new();
        for r in 0..self.num_workers() {
            let path = stage.join(rank_file(r));
            let bytes = loop {
                match std::fs::read(&path) {
                    Ok(b) => break b,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        self.running("checkpoint")?;
                        if Instant::now() > deadline {
                            return Err(err(
                                &path,
                                format!(
                                    "rank {r} did not write its state within {:.0} s: every rank must call checkpoint at the same clock, on a folder all ranks share",
                                    self.wait_deadline().as_secs_f64()
                                ),
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => return Err(err(&path, format!("cannot read it: {e}"))),
                }
            };
            out.push(entry_of(&rank_file(r), &bytes));
        }
        Ok(out)
    }
}

impl Geeps {
    /// Copies a buffer's floats to host memory.
    fn copy_to_host(&self, ptr: DevicePtr, floats: usize) -> Result<Vec<f32>> {
        let sh = &self.running("checkpoint")?.shared;
        let mut out = vec![0.0f32; floats];
        if floats > 0 {
            // SAFETY: `ptr` starts a buffer of `floats` floats that the caller
            // holds until this returns; the copy is complete after the sync.
            unsafe { sh.device.copy_d2h(sh.alloc_stream, ptr, out.as_mut_ptr(), floats)? };
            sh.device.synchronize(sh.alloc_stream)?;
        }
        Ok(out)
    }

    /// Copies host floats into a buffer.
    fn copy_from_host(&self, values: &[f32], ptr: DevicePtr) -> Result<()> {
        let sh = &self.running("restore")?.shared;
        if !values.is_empty() {
            // SAFETY: as in `to_host`; `values` outlives the synchronized copy.
            unsafe { sh.device.copy_h2d(sh.alloc_stream, values.as_ptr(), ptr, values.len())? };
            sh.device.synchronize(sh.alloc_stream)?;
        }
        Ok(())
    }
}

fn rank_file(rank: usize) -> String {
    format!("rank-{rank}.state")
}
