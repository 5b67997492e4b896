//! `caffe-geeps time` (Caffe's `caffe time`): the forward and backward time
//! of every layer of a net, one process, averaged over some iterations, on
//! the CPU or on one GPU. As Caffe's `time` calls every layer's Backward,
//! each layer with a backward runs it whether or not it leads to a loss (a
//! deploy file has none; the gradients nothing writes are zeros), and an
//! Input layer's blobs hold what it writes (zeros). It measures compute
//! only, without geeps, so the trainer's images/s can be read against it.
//! It owns that measurement; it must never print (the command does).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::data::DataCache;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::net::params::ParamLayout;
use crate::net::Net;
use crate::proto::net::NetParam;
use crate::proto::net_state::NetState;
use crate::solvers::solve::DEFAULT_SEED;
use crate::tools::runner::{per_layer, Runner};

/// One layer's mean forward and backward time.
pub struct LayerTime {
    pub name: String,
    pub type_name: &'static str,
    pub forward: Duration,
    pub backward: Duration,
}

/// What `time` measured: per layer, per iteration, and the means.
pub struct Timing {
    pub layers: Vec<LayerTime>,
    pub batch: usize,
    /// Each timed forward + backward.
    pub iterations: Vec<Duration>,
    pub forward: Duration,
    pub backward: Duration,
    pub total: Duration,
}

impl Timing {
    /// The mean forward + backward.
    pub fn mean(&self) -> Duration {
        self.total / self.iterations.len().max(1) as u32
    }
}

/// Times `iterations` forward and backward passes of the net of `state`,
/// its parameters from the fillers; on `gpu` when given.
pub fn time(model: &Path, iterations: u32, state: &NetState, gpu: Option<&Gpu>) -> Result<Timing> {
    let param = NetParam::load(model)?;
    let net = Net::build_all_backward(&param, state, &DataCache::default())?;
    let layout = ParamLayout::of(&net);
    let values = per_layer(&net, &layout, layout.initial(&net, DEFAULT_SEED));
    let mut run = Runner::new(&net, values, gpu)?;
    let n = net.layers.len();
    let (mut fwd, mut bwd) = (vec![Duration::ZERO; n], vec![Duration::ZERO; n]);
    let iterations = iterations.max(1);
    // One untimed pass warms caches, rayon's threads and the GPU's kernels.
    for li in 0..n {
        run.forward_one(li, true, 0)?;
    }
    for li in (0..n).rev() {
        run.backward_one(li)?;
    }
    let mut per_iteration = Vec::with_capacity(iterations as usize);
    let (mut forward, mut backward) = (Duration::ZERO, Duration::ZERO);
    let start = Instant::now();
    for it in 0..iterations {
        let iter_start = Instant::now();
        for (li, f) in fwd.iter_mut().enumerate() {
            let t = Instant::now();
            run.forward_one(li, true, u64::from(it) + 1)?;
            *f += t.elapsed();
        }
        let mid = Instant::now();
        forward += mid - iter_start;
        for li in (0..n).rev() {
            let t = Instant::now();
            run.backward_one(li)?;
            bwd[li] += t.elapsed();
        }
        backward += mid.elapsed();
        per_iteration.push(iter_start.elapsed());
    }
    let total = start.elapsed();
    let layers = net
        .layers
        .iter()
        .enumerate()
        .map(|(i, l)| LayerTime {
            name: l.name.clone(),
            type_name: l.type_name,
            forward: fwd[i] / iterations,
            backward: bwd[i] / iterations,
        })
        .collect();
    Ok(Timing {
        layers,
        batch: net.batch,
        iterations: per_iteration,
        forward: forward / iterations,
        backward: backward / iterations,
        total,
    })
}
