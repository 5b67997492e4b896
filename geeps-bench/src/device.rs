//! The device the bench's workers keep their rows on: the host device (the
//! figures), or a CUDA GPU (`--device cuda`). The choice travels to the rank
//! processes in `GEEPS_BENCH_DEVICE`, which they inherit. Opening a GPU that
//! is not there is an error, never a silent host run.

use std::sync::Arc;

use geeps::device::Device;
use geeps::{CudaConfig, CudaDevice};

use crate::error::{BenchError, Result};

/// The variable the parent sets for its rank processes.
pub const ENV: &str = "GEEPS_BENCH_DEVICE";

/// Where the workers keep their rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchDevice {
    /// Device memory emulated in host memory (the figures).
    Host,
    /// CUDA GPU 0: on a real GPU a measurement, under the emulated driver a
    /// functional check only.
    Cuda,
}

impl BenchDevice {
    /// Hands the choice to the rank processes started from now on.
    pub fn export(self) {
        std::env::set_var(ENV, if self == BenchDevice::Cuda { "cuda" } else { "host" });
    }

    /// The choice the parent exported (`host` when unset).
    pub fn from_env() -> Result<BenchDevice> {
        match std::env::var(ENV).as_deref() {
            Err(_) | Ok("host") => Ok(BenchDevice::Host),
            Ok("cuda") => Ok(BenchDevice::Cuda),
            Ok(other) => Err(BenchError::msg(format!("{ENV}={other}: use host or cuda"))),
        }
    }

    /// The device of one worker allowing `budget` bytes; `None`: the
    /// instance's default host device.
    pub fn open(self, budget: usize) -> Result<Option<Arc<dyn Device>>> {
        match self {
            BenchDevice::Host => Ok(None),
            BenchDevice::Cuda => {
                let gpu = CudaDevice::new(CudaConfig::ordinal(0).with_budget(budget)).map_err(|e| {
                    BenchError::msg(format!(
                        "--device cuda: no usable CUDA device ({e}); on a machine without a GPU, run under \
                         scripts/with-cuda-emu (functional only)"
                    ))
                })?;
                Ok(Some(Arc::new(gpu)))
            }
        }
    }

    /// What the summary says about timings taken on this device.
    pub fn caveat(self) -> Option<String> {
        match self {
            BenchDevice::Host => None,
            BenchDevice::Cuda => Some(match CudaDevice::probe(0) {
                Ok(p) if p.name.contains("emulated") => format!(
                    "device: {} - the emulated driver: timings are NOT meaningful, this run checks function only",
                    p.name
                ),
                Ok(p) => format!("device: {p}"),
                Err(e) => format!("device: CUDA unavailable ({e})"),
            }),
        }
    }
}
