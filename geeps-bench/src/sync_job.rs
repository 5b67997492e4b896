//! The sync scenario's job and result, shared by every system that runs it
//! (the engine, the ring all-reduce, gloo, MPI): per clock each of N ranks
//! contributes a `bytes` table of deltas and ends the clock holding the sum
//! of all ranks' deltas. It owns the schema and the per-clock check; it
//! never measures.

use serde::{Deserialize, Serialize};

/// One sync run, as each rank is told it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncJob {
    /// Bytes of the table (f32 values).
    pub bytes: usize,
    /// Timed clocks (after one untimed).
    pub clocks: usize,
}

impl SyncJob {
    /// Floats in the table.
    pub fn floats(&self) -> usize {
        self.bytes / 4
    }
}

/// What one rank measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClockTimes {
    /// Seconds of each timed clock.
    pub seconds: Vec<f64>,
    /// TCP bytes the rank's process received per clock (every byte sent is
    /// received once, so over all ranks this is also what ranks send), where
    /// the system's runner can count them.
    #[serde(default)]
    pub received_bytes_per_clock: Option<f64>,
}

/// The value every element must hold after `clock` (0-based, counting the
/// untimed one) when rank `r` adds `r + 1` per clock into a table that
/// starts at zero, for systems that accumulate across clocks.
pub fn accumulated(world: usize, clock: usize) -> f32 {
    (world * (world + 1) / 2 * (clock + 1)) as f32
}

/// The value every element must hold after one all-reduce of `r + 1`.
pub fn reduced(world: usize) -> f32 {
    (world * (world + 1) / 2) as f32
}

/// Fails unless `got` holds `want` at its first, middle and last element
/// (the whole table is checked by the systems' own tests; a sample here
/// catches a run that skipped the exchange).
pub fn check(system: &str, got: &[f32], want: f32) -> crate::error::Result<()> {
    let probe = [0, got.len() / 2, got.len().saturating_sub(1)];
    for i in probe {
        if got.get(i) != Some(&want) {
            return Err(crate::error::BenchError::msg(format!(
                "{system}: element {i} holds {:?} after the exchange, expected {want}",
                got.get(i)
            )));
        }
    }
    Ok(())
}
