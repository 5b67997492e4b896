//! Running a net on plain memory: one vector per blob, gradient and layer
//! state. It is how the test net is evaluated and `test --weights` runs, and
//! the reference the geeps trainer is checked against. It owns that storage
//! and the data cursors; the math is `net::forward_layer`/`backward_layer`.

use crate::data::Cursor;
use crate::error::Result;
use crate::net::data_feed::fill_tops;
use crate::net::{backward_layer, forward_layer, Io, Net};

pub struct Plain<'n> {
    net: &'n Net,
    data: Vec<Vec<f32>>,
    diff: Vec<Vec<f32>>,
    aux: Vec<Vec<f32>>,
    cursors: Vec<Option<Cursor>>,
}

/// A seed per layer and call, mixed so neighbouring inputs differ widely.
pub fn layer_seed(seed: u64, layer: usize) -> u64 {
    let mut z = seed ^ (layer as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    z ^ (z >> 33)
}

impl<'n> Plain<'n> {
    /// Storage for `net`; its Data layers read worker `rank`'s slice of `world`.
    pub fn new(net: &'n Net, rank: usize, world: usize) -> Result<Self> {
        let data = net.blobs.iter().map(|b| vec![0.0; b.count()]).collect();
        let diff = net.blobs.iter().map(|b| if b.needs_diff { vec![0.0; b.count()] } else { Vec::new() }).collect();
        let aux = net.layers.iter().map(|l| vec![0.0; l.aux_len]).collect();
        let cursors = net
            .layers
            .iter()
            .map(|l| l.data.as_ref().map(|d| Cursor::new(d.set.len(), rank, world)).transpose())
            .collect::<Result<_>>()?;
        Ok(Plain { net, data, diff, aux, cursors })
    }

    /// Forward over the whole net. `params[l]` holds layer l's parameters
    /// (empty for layers without). Returns the scalar outputs, in
    /// `net.outputs` order.
    pub fn forward(&mut self, params: &[&[f32]], train: bool, seed: u64) -> Result<Vec<f32>> {
        for (li, p) in params.iter().enumerate().take(self.net.layers.len()) {
            self.forward_one(li, p, train, seed)?;
        }
        Ok(self.outputs())
    }

    /// Forward of layer `li` alone (Data layers read their next batch).
    pub fn forward_one(&mut self, li: usize, params: &[f32], train: bool, seed: u64) -> Result<()> {
        let net = self.net;
        let l = &net.layers[li];
        if let Some(src) = &l.data {
            let idx = self.cursors[li].as_mut().map(|c| c.take(net.batch)).unwrap_or_default();
            let mut taken: Vec<Vec<f32>> = l.tops.iter().map(|&t| std::mem::take(&mut self.data[t])).collect();
            let mut tops: Vec<&mut [f32]> = taken.iter_mut().map(Vec::as_mut_slice).collect();
            let filled = fill_tops(src, &idx, train, layer_seed(seed, li), &mut tops);
            for (&t, v) in l.tops.iter().zip(taken) {
                self.data[t] = v;
            }
            return filled;
        }
        let mut outs: Vec<(usize, Vec<f32>)> =
            l.fwd_out.iter().chain(&l.fwd_inout).map(|&b| (b, std::mem::take(&mut self.data[b]))).collect();
        let io = Io {
            data_in: l.fwd_in.iter().map(|&b| (b, self.data[b].as_slice())).collect(),
            data_out: outs.iter_mut().map(|(b, v)| (*b, v.as_mut_slice())).collect(),
            ..Io::default()
        };
        forward_layer(net, li, params, io, &mut self.aux[li], train, layer_seed(seed, li));
        for (b, v) in outs {
            self.data[b] = v;
        }
        Ok(())
    }

    /// The scalar outputs of the last forward.
    pub fn outputs(&self) -> Vec<f32> {
        self.net.outputs.iter().map(|&b| self.data[b].first().copied().unwrap_or(0.0)).collect()
    }

    /// Every value of each output blob after the last forward, in `net.outputs` order.
    pub fn output_values(&self) -> Vec<Vec<f32>> {
        self.net.outputs.iter().map(|&b| self.data[b].clone()).collect()
    }

    /// The values of blobs `blobs` after the last forward.
    pub fn output_values_of(&self, blobs: &[usize]) -> Vec<Vec<f32>> {
        blobs.iter().map(|&b| self.data[b].clone()).collect()
    }

    /// Backward over the whole net after `forward`; writes each layer's
    /// parameter gradient into `grads[l]` (sized like `params[l]`).
    pub fn backward(&mut self, params: &[&[f32]], grads: &mut [Vec<f32>]) {
        for li in (0..self.net.layers.len()).rev() {
            self.backward_one(li, params[li], &mut grads[li]);
        }
    }

    /// Backward of layer `li` alone (nothing if it runs no backward).
    pub fn backward_one(&mut self, li: usize, params: &[f32], grad: &mut [f32]) {
        let net = self.net;
        let l = &net.layers[li];
        if !l.backward {
            return;
        }
        let mut outs: Vec<(usize, Vec<f32>)> =
            l.bwd_diff_out.iter().chain(&l.bwd_diff_inout).map(|&b| (b, std::mem::take(&mut self.diff[b]))).collect();
        let io = Io {
            data_in: l.bwd_data_in.iter().map(|&b| (b, self.data[b].as_slice())).collect(),
            diff_in: l.bwd_diff_in.iter().map(|&b| (b, self.diff[b].as_slice())).collect(),
            diff_out: outs.iter_mut().map(|(b, v)| (*b, v.as_mut_slice())).collect(),
            ..Io::default()
        };
        backward_layer(net, li, params, io, &self.aux[li], grad);
        for (b, v) in outs {
            self.diff[b] = v;
        }
    }
}

/// Runs `iterations` forward passes of a TEST net and averages each output.
pub fn evaluate(net: &Net, params: &[&[f32]], iterations: u64) -> Result<Vec<(String, f32)>> {
    let mut plain = Plain::new(net, 0, 1)?;
    let mut sums = vec![0.0f64; net.outputs.len()];
    for i in 0..iterations {
        for (s, v) in sums.iter_mut().zip(plain.forward(params, false, i)?) {
            *s += f64::from(v);
        }
    }
    let n = iterations.max(1) as f64;
    Ok(net.outputs.iter().zip(sums).map(|(&b, s)| (net.blobs[b].name.clone(), (s / n) as f32)).collect())
}
