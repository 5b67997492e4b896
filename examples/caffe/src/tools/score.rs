//! `caffe-geeps test` (Caffe's `caffe test`): the TEST net of a model with
//! weights from a `.caffemodel` (layers the file lacks keep their fillers'
//! values, as Caffe's `CopyTrainedLayersFrom`), run forward for some
//! batches on the CPU or on one GPU; each output's every value averaged
//! over the batches, and the loss (outputs times their loss weights). It
//! owns that scoring; it must never print (the command does).

use std::path::Path;

use crate::data::DataCache;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::net::params::ParamLayout;
use crate::net::Net;
use crate::proto::net::NetParam;
use crate::proto::net_state::NetState;
use crate::solvers::solve::DEFAULT_SEED;
use crate::tools::runner::{per_layer, Runner};

/// Caffe's `-iterations` default for `test` on a net without a dataset.
pub const DEFAULT_ITERATIONS: u64 = 50;

/// One output blob: its mean values over the batches and its loss weight.
pub struct Output {
    pub name: String,
    pub means: Vec<f32>,
    pub loss_weight: f32,
}

pub struct Scores {
    pub outputs: Vec<Output>,
    /// The mean over batches of the sum of outputs times their loss weights.
    pub loss: f32,
    /// Per batch, per output: its values (what Caffe logs as `Batch i, name = v`).
    pub batches: Vec<Vec<Vec<f32>>>,
    /// Layers of the net the weights file did not have.
    pub missing: Vec<String>,
}

/// Scores `weights` on the TEST net of `state`. `iterations`: batches (by
/// default enough to cover a Data layer's set once, else Caffe's 50).
pub fn score(
    model: &Path,
    weights: &Path,
    iterations: Option<u64>,
    state: &NetState,
    gpu: Option<&Gpu>,
) -> Result<Scores> {
    let param = NetParam::load(model)?;
    let net = Net::build_for(&param, state, &DataCache::default())?;
    net.check_labels()?;
    let layout = ParamLayout::of(&net);
    let fillers = layout.initial(&net, DEFAULT_SEED);
    let (values, missing) = layout.fine_tune(weights, Some(&fillers))?;
    let mut run = Runner::new(&net, per_layer(&net, &layout, values), gpu)?;
    let images = net.layers.iter().find_map(|l| l.data.as_ref().map(|d| d.set.len()));
    let iterations = iterations
        .unwrap_or_else(|| images.map_or(DEFAULT_ITERATIONS, |n| (n as u64).div_ceil(net.batch as u64).max(1)))
        .max(1);
    let loss_weights: Vec<f32> = net
        .outputs
        .iter()
        .map(|&b| net.layers.iter().rev().find(|l| l.tops.contains(&b)).map_or(0.0, |l| l.loss_weight))
        .collect();
    let mut sums: Vec<Vec<f64>> = net.outputs.iter().map(|&b| vec![0.0; net.blobs[b].count()]).collect();
    let (mut loss, mut batches) = (0.0f64, Vec::new());
    for i in 0..iterations {
        for li in 0..net.layers.len() {
            run.forward_one(li, false, i)?;
        }
        let outs = run.outputs()?;
        for ((sum, out), w) in sums.iter_mut().zip(&outs).zip(&loss_weights) {
            for (s, v) in sum.iter_mut().zip(out) {
                *s += f64::from(*v);
            }
            loss += f64::from(*w) * out.iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        batches.push(outs);
    }
    let n = iterations as f64;
    let outputs = net
        .outputs
        .iter()
        .zip(sums)
        .zip(loss_weights)
        .map(|((&b, s), loss_weight)| Output {
            name: net.blobs[b].name.clone(),
            means: s.iter().map(|v| (v / n) as f32).collect(),
            loss_weight,
        })
        .collect();
    Ok(Scores { outputs, loss: (loss / n) as f32, batches, missing })
}
