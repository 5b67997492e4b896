//! Everything geeps: the options that mirror GeePS's `ps_config`, how the
//! net's parameters and blobs map onto tables and rows (`layout`), and the
//! worker that records one virtual iteration and then trains through geeps
//! calls (`worker`). Nothing outside this module calls geeps.

pub(crate) mod blob_access;
pub mod budget;
pub mod control;
pub mod device_choice;
pub(crate) mod gpu_pass;
pub mod host_view;
pub mod layout;
pub mod resume;
pub mod worker;

pub use device_choice::DeviceChoice;

use std::time::Duration;

use crate::error::{Error, Result};

/// GeePS's `ps_config`, as command-line options.
#[derive(Debug, Clone, PartialEq)]
pub struct PsOptions {
    /// Staleness bound of parameter reads, in clocks (0 = BSP).
    pub slack: u32,
    /// Device memory budget per worker, in bytes.
    pub device_memory: usize,
    /// On the host device, fit the budget to the net (`ps::budget`)
    /// instead of `device_memory` (the command line without `--device-memory-mb`).
    pub budget_from_net: bool,
    /// Consecutive parameter layers sharing one table (and one clock).
    pub layers_per_table: usize,
    /// Iterations (each of the solver's iter_size mini-batches) per clock:
    /// updates accumulate locally in between.
    pub batches_per_clock: usize,
    /// Floats per row.
    pub row_width: usize,
    /// How long a blocked geeps call may wait for a slow worker.
    pub wait_deadline: Duration,
    /// The device each worker keeps its rows on.
    pub device: DeviceChoice,
    /// With rows on a GPU: compute the layers on the CPU anyway (staged
    /// through host copies) instead of on that GPU.
    pub layers_on_cpu: bool,
}

impl Default for PsOptions {
    fn default() -> Self {
        PsOptions {
            slack: 0,
            device_memory: 512 << 20,
            budget_from_net: false,
            layers_per_table: 1,
            batches_per_clock: 1,
            row_width: geeps::DEFAULT_ROW_WIDTH,
            wait_deadline: Duration::from_secs(600),
            device: DeviceChoice::Host,
            layers_on_cpu: false,
        }
    }
}

impl PsOptions {
    pub fn validate(&self) -> Result<()> {
        if self.layers_per_table == 0 {
            return Err(Error::config("layers_per_table must be at least 1"));
        }
        if self.batches_per_clock == 0 {
            return Err(Error::config("batches_per_clock must be at least 1"));
        }
        Ok(())
    }
}
