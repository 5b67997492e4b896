//! A model scaled to this machine: rows per table and emulated compute time
//! per layer. Two stated factors do the scaling, the same for every layer:
//!
//! - `bytes`: every size (parameters, blobs) is multiplied by it;
//! - time: a layer's compute is its paper time (multiply-adds × batch at the
//!   K20's rate, forward one third, backward two thirds) × `bytes` × `host`,
//!   where `host` = the paper's network bytes/s per machine ÷ this machine's
//!   raw TCP bytes/s per rank, measured in the same run. So each emulated
//!   worker has the paper's ratio of compute time to network time.
//!
//! It owns that arithmetic; it never runs a model.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::profile::{Model, FLOAT, PAPER_CONNECTIONS_PER_SECOND};

/// Floats per row (the paper's setting and geeps' default).
pub const ROW_WIDTH: usize = 128;
const ROW_BYTES: f64 = (ROW_WIDTH as u64 * FLOAT) as f64;

/// One layer as the emulated trainer runs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkLayer {
    pub name: String,
    /// Rows of its parameter table (0: no parameters).
    pub param_rows: u32,
    /// Rows of the blob it writes (data and diff).
    pub blob_rows: u32,
    pub forward_us: u64,
    pub backward_us: u64,
}

/// A scaled model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    pub model: String,
    /// Rows of the input blob (input of layer 0).
    pub input_rows: u32,
    pub layers: Vec<WorkLayer>,
    /// Connections (multiply-adds) trained per iteration, full scale: batch × per image.
    pub connections_per_iteration: f64,
}

/// Scale factors, stated in every result.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Scale {
    /// Multiplies every size.
    pub bytes: f64,
    /// Paper network bytes/s per machine over this machine's raw TCP bytes/s per rank.
    pub host: f64,
}

fn rows(bytes: f64, scale: f64) -> u32 {
    ((bytes * scale / ROW_BYTES).round() as u32).max(1)
}

impl Workload {
    pub fn new(model: &Model, scale: Scale) -> Self {
        let batch = model.batch as f64;
        let per_second = PAPER_CONNECTIONS_PER_SECOND;
        let layers = model
            .layers
            .iter()
            .map(|l| {
                let seconds = l.macs as f64 * batch / per_second * scale.bytes * scale.host;
                WorkLayer {
                    name: l.name.clone(),
                    param_rows: if l.params == 0 { 0 } else { rows((l.params * FLOAT) as f64, scale.bytes) },
                    blob_rows: rows((2 * l.blob * FLOAT) as f64 * batch, scale.bytes),
                    forward_us: (seconds / 3.0 * 1e6).round() as u64,
                    backward_us: (seconds * 2.0 / 3.0 * 1e6).round() as u64,
                }
            })
            .collect();
        Workload {
            model: model.name.clone(),
            input_rows: rows((model.input * FLOAT) as f64 * batch, scale.bytes),
            layers,
            connections_per_iteration: model.macs_per_image() as f64 * batch,
        }
    }

    pub fn param_bytes(&self) -> usize {
        self.layers.iter().map(|l| l.param_rows as usize).sum::<usize>() * ROW_BYTES as usize
    }

    pub fn local_bytes(&self) -> usize {
        (self.input_rows as usize + self.layers.iter().map(|l| l.blob_rows as usize).sum::<usize>())
            * ROW_BYTES as usize
    }

    /// Emulated compute per iteration.
    pub fn compute(&self) -> Duration {
        Duration::from_micros(self.layers.iter().map(|l| l.forward_us + l.backward_us).sum())
    }

    /// Bytes of the largest parameter layer.
    pub fn largest_param_bytes(&self) -> usize {
        self.layers.iter().map(|l| l.param_rows as usize).max().unwrap_or(0) * ROW_BYTES as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile;

    #[test]
    fn scaling_divides_sizes_and_time_alike() {
        let m = profile::adamlike();
        let w = Workload::new(&m, Scale { bytes: 1.0 / 32.0, host: 1.0 });
        let p = w.param_bytes() as f64;
        assert!((p - m.param_bytes() as f64 / 32.0).abs() / p < 0.01);
        let t = w.compute().as_secs_f64();
        assert!((t - m.paper_seconds_per_batch() / 32.0).abs() / t < 0.01, "{t}");
        let slower = Workload::new(&m, Scale { bytes: 1.0 / 32.0, host: 2.0 });
        assert!((slower.compute().as_secs_f64() / t - 2.0).abs() < 0.01);
        assert_eq!(slower.param_bytes(), w.param_bytes());
    }
}
