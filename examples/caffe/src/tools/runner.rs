//! One net run layer by layer on the CPU (plain memory) or on one GPU
//! (`gpu_net`), behind one interface, for `time` and `test`. It owns the
//! parameter values and gradients of the CPU run; it must never train
//! (gradients are computed and left where they are) or touch geeps.

use crate::error::Result;
use crate::gpu::Gpu;
use crate::net::plain::Plain;
use crate::net::Net;
use crate::tools::gpu_net::GpuNet;

pub enum Runner<'g, 'n> {
    Cpu { plain: Plain<'n>, params: Vec<Vec<f32>>, grads: Vec<Vec<f32>> },
    Gpu(GpuNet<'g, 'n>),
}

impl<'g, 'n> Runner<'g, 'n> {
    /// `params[l]` holds layer l's parameters (empty for layers without);
    /// with `gpu` every array lives on that GPU.
    pub fn new(net: &'n Net, params: Vec<Vec<f32>>, gpu: Option<&'g Gpu>) -> Result<Self> {
        match gpu {
            Some(gpu) => {
                let views: Vec<&[f32]> = params.iter().map(Vec::as_slice).collect();
                Ok(Runner::Gpu(GpuNet::new(gpu, net, &views)?))
            }
            None => {
                let grads = params.iter().map(|p| vec![0.0; p.len()]).collect();
                Ok(Runner::Cpu { plain: Plain::new(net, 0, 1)?, params, grads })
            }
        }
    }

    /// Forward of layer `li`, done when it returns (the GPU synchronised).
    pub fn forward_one(&mut self, li: usize, train: bool, seed: u64) -> Result<()> {
        match self {
            Runner::Cpu { plain, params, .. } => plain.forward_one(li, &params[li], train, seed),
            Runner::Gpu(g) => g.forward_one(li, train, seed),
        }
    }

    /// Backward of layer `li`, done when it returns.
    pub fn backward_one(&mut self, li: usize) -> Result<()> {
        match self {
            Runner::Cpu { plain, params, grads } => {
                plain.backward_one(li, &params[li], &mut grads[li]);
                Ok(())
            }
            Runner::Gpu(g) => g.backward_one(li),
        }
    }

    /// Every value of each output blob after the last forward, in `net.outputs` order.
    pub fn outputs(&self) -> Result<Vec<Vec<f32>>> {
        match self {
            Runner::Cpu { plain, .. } => Ok(plain.output_values()),
            Runner::Gpu(g) => g.outputs(),
        }
    }
}

/// Per net layer: its parameter values from `values` (one per parameter
/// layer of `layout`), empty for the others.
pub fn per_layer(net: &Net, layout: &crate::net::params::ParamLayout, values: Vec<Vec<f32>>) -> Vec<Vec<f32>> {
    let mut out = vec![Vec::new(); net.layers.len()];
    for (lp, v) in layout.layers.iter().zip(values) {
        for &u in &lp.users {
            out[u] = v.clone();
        }
    }
    out
}
