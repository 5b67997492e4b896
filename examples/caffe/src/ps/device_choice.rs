//! Which device a worker keeps its parameters, activations and buffer pool
//! on: the host device (device memory emulated in host memory), or a CUDA GPU
//! (Caffe's `--gpu` / `solver_mode: GPU`). Opens the device; never falls
//! back from a GPU that was asked for to the host.

use std::sync::Arc;

use geeps::device::Device;
use geeps::{CudaConfig, CudaDevice};

use crate::error::{Error, Result};

/// Where a worker keeps its rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The host device (the default).
    #[default]
    Host,
    /// CUDA GPUs by ordinal; worker `rank` takes `ordinals[rank % len]`.
    Cuda(Vec<usize>),
}

impl DeviceChoice {
    /// Parses Caffe's `--gpu` value: `0`, `0,1,3`.
    pub fn parse_gpus(text: &str) -> Result<DeviceChoice> {
        let ordinals =
            text.split(',').map(|t| t.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>().map_err(|_| {
                Error::config(format!(
                    "--gpu {text:?}: give GPU ordinals separated by commas, e.g. --gpu 0 or --gpu 0,1"
                ))
            })?;
        if ordinals.is_empty() {
            return Err(Error::config("--gpu needs at least one GPU ordinal"));
        }
        Ok(DeviceChoice::Cuda(ordinals))
    }

    /// The GPU ordinal of worker `rank`; `None` on the host device.
    pub fn ordinal(&self, rank: usize) -> Option<usize> {
        match self {
            DeviceChoice::Host => None,
            DeviceChoice::Cuda(ordinals) => Some(ordinals[rank % ordinals.len()]),
        }
    }

    /// The device of worker `rank`, allowing `budget` bytes; `None` for the
    /// host device (the instance opens it itself).
    pub fn open(&self, rank: usize, budget: usize) -> Result<Option<Arc<dyn Device>>> {
        match self {
            DeviceChoice::Host => Ok(None),
            DeviceChoice::Cuda(ordinals) => {
                let ordinal = ordinals[rank % ordinals.len()];
                let gpu = CudaDevice::new(CudaConfig::ordinal(ordinal).with_budget(budget)).map_err(|e| {
                    Error::config(format!(
                        "--gpu {ordinal} (worker {rank}): no usable CUDA device: {e}. Run without --gpu (and with \
                         solver_mode: CPU) to train on the host device"
                    ))
                })?;
                Ok(Some(Arc::new(gpu)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_lists_parse_and_bad_ones_say_what_to_write() {
        assert_eq!(DeviceChoice::parse_gpus("0").unwrap(), DeviceChoice::Cuda(vec![0]));
        assert_eq!(DeviceChoice::parse_gpus("0, 2,3").unwrap(), DeviceChoice::Cuda(vec![0, 2, 3]));
        let e = DeviceChoice::parse_gpus("zero").unwrap_err().to_string();
        assert!(e.contains("--gpu 0"), "{e}");
        assert!(DeviceChoice::parse_gpus("0,,1").is_err());
    }
}
