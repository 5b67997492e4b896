//! The device the bench's workers keep their rows on: the host device (the
//! figures), or a CUDA GPU (`--device cuda`). The choice travels to the rank
//! processes in `GEEPS_BENCH_DEVICE`, which they inherit. Rank r computes on
//! visible GPU r mod the count, one GPU per worker as in the paper where
//! there are enough. Opening a GPU that is not there is an error, never a
//! silent host run.

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
    /// CUDA GPUs, rank r on GPU r mod the visible count: on a real GPU a
    /// measurement, under the emulated driver a functional check only.
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

    /// The device of worker `rank` allowing `budget` bytes; `None`: the
    /// instance's default host device.
    pub fn open(self, budget: usize, rank: usize) -> Result<Option<Arc<dyn Device>>> {
        match self {
            BenchDevice::Host => Ok(None),
            BenchDevice::Cuda => {
                let unusable = |e: geeps::Error| {
                    BenchError::msg(format!(
                        "--device cuda: no usable CUDA device ({e}); on a machine without a GPU, run under \
                         scripts/with-cuda-emu (functional only)"
                    ))
                };
                let ordinal = gpu_of(rank, CudaDevice::probe(0).map_err(unusable)?.devices);
                let gpu = CudaDevice::new(CudaConfig::ordinal(ordinal).with_budget(budget)).map_err(unusable)?;
                Ok(Some(Arc::new(gpu)))
            }
        }
    }

    /// What the summary says about timings taken on this device by
    /// `workers` worker processes.
    pub fn caveat(self, workers: usize) -> Option<String> {
        match self {
            BenchDevice::Host => None,
            BenchDevice::Cuda => Some(match CudaDevice::probe(0) {
                Ok(p) if p.name.contains("emulated") => format!(
                    "device: {} - the emulated driver: timings are NOT meaningful, this run checks function only",
                    p.name
                ),
                Ok(p) if workers > p.devices => format!(
                    "device: {p}\n  WARNING: {workers} workers share {} GPU(s); without MPS a GPU time-slices \
                     between processes, and stalls measured so are the sharing's, not geeps' (docs/gpu.md). \
                     Run one worker per GPU (--workers {}), or start nvidia-cuda-mps-control -d first",
                    p.devices, p.devices
                ),
                Ok(p) => format!("device: {p}"),
                Err(e) => format!("device: CUDA unavailable ({e})"),
            }),
        }
    }
}

/// The visible GPU of worker `rank` when `devices` are visible.
fn gpu_of(rank: usize, devices: usize) -> usize {
    rank % devices.max(1)
}

#[cfg(test)]
mod tests {
    use super::gpu_of;

    #[test]
    fn workers_spread_over_the_visible_gpus_and_share_only_when_outnumbering_them() {
        assert_eq!((0..4).map(|r| gpu_of(r, 4)).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!((0..4).map(|r| gpu_of(r, 2)).collect::<Vec<_>>(), [0, 1, 0, 1]);
        assert_eq!((0..3).map(|r| gpu_of(r, 1)).collect::<Vec<_>>(), [0, 0, 0]);
        assert_eq!(gpu_of(5, 0), 0);
    }
}
