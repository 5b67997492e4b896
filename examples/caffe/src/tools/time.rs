//! `caffe-geeps time` (Caffe's `caffe time`): the forward and backward time
//! of every layer of the TRAIN net on plain memory, one process, averaged
//! over some iterations. It measures compute only, without geeps, so the
//! trainer's images/s can be read against it. It owns that measurement.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::data::DataCache;
use crate::error::Result;
use crate::net::params::ParamLayout;
use crate::net::plain::Plain;
use crate::net::Net;
use crate::proto::net::NetParam;
use crate::proto::net_state::NetState;
use crate::solvers::solve::DEFAULT_SEED;

/// Per layer: (name, type, mean forward, mean backward); then images/s of a
/// whole forward + backward.
pub struct Timing {
    pub layers: Vec<(String, &'static str, Duration, Duration)>,
    pub batch: usize,
    pub iteration: Duration,
}

pub fn time(model: &Path, iterations: u32, state: &NetState) -> Result<Timing> {
    let param = NetParam::load(model)?;
    let net = Net::build_for(&param, state, &DataCache::default())?;
    let layout = ParamLayout::of(&net);
    let values = layout.initial(&net, DEFAULT_SEED);
    let mut grads: Vec<Vec<f32>> = vec![Vec::new(); net.layers.len()];
    let mut views: Vec<&[f32]> = vec![&[]; net.layers.len()];
    for (lp, v) in layout.layers.iter().zip(&values) {
        views[lp.layer] = v;
        grads[lp.layer] = vec![0.0; lp.len];
    }
    let mut plain = Plain::new(&net, 0, 1)?;
    let n = net.layers.len();
    let (mut fwd, mut bwd) = (vec![Duration::ZERO; n], vec![Duration::ZERO; n]);
    let iterations = iterations.max(1);
    // One untimed pass warms caches and rayon's threads.
    plain.forward(&views, true, 0)?;
    plain.backward(&views, &mut grads);
    let start = Instant::now();
    for it in 0..iterations {
        for li in 0..n {
            let t = Instant::now();
            plain.forward_one(li, views[li], true, u64::from(it))?;
            fwd[li] += t.elapsed();
        }
        for li in (0..n).rev() {
            let t = Instant::now();
            plain.backward_one(li, views[li], &mut grads[li]);
            bwd[li] += t.elapsed();
        }
    }
    let iteration = start.elapsed() / iterations;
    let layers = net
        .layers
        .iter()
        .enumerate()
        .map(|(i, l)| (l.name.clone(), l.type_name, fwd[i] / iterations, bwd[i] / iterations))
        .collect();
    Ok(Timing { layers, batch: net.batch, iteration })
}
