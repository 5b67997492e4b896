//! A net on one GPU without geeps, for `time -gpu` and `test -gpu`: one
//! device array per blob, gradient, layer state, parameter and parameter
//! gradient. Layers with GPU code run it (`ps::gpu_pass`, the trainer's
//! own); Data layers and layers without GPU code compute on the CPU,
//! staged through host copies, as the trainer stages them. It owns that
//! device storage; it must never train or touch geeps.

use crate::data::Cursor;
use crate::error::Result;
use crate::gpu::{DevSlice, DeviceVec, Gpu};
use crate::net::data_feed::fill_tops;
use crate::net::plain::layer_seed;
use crate::net::{backward_layer, forward_layer, Io, Net};
use crate::ps::gpu_pass::{self, DevIo};

pub struct GpuNet<'g, 'n> {
    gpu: &'g Gpu,
    net: &'n Net,
    data: Vec<DeviceVec<'g>>,
    diff: Vec<Option<DeviceVec<'g>>>,
    aux: Vec<DeviceVec<'g>>,
    params: Vec<DeviceVec<'g>>,
    grads: Vec<DeviceVec<'g>>,
    cursors: Vec<Option<Cursor>>,
}

impl<'g, 'n> GpuNet<'g, 'n> {
    /// Device storage for `net`, its parameters copied from `params[l]`
    /// (empty for layers without).
    pub fn new(gpu: &'g Gpu, net: &'n Net, params: &[&[f32]]) -> Result<Self> {
        let data = net.blobs.iter().map(|b| gpu.alloc(b.count())).collect::<Result<_>>()?;
        let diff =
            net.blobs.iter().map(|b| b.needs_diff.then(|| gpu.alloc(b.count())).transpose()).collect::<Result<_>>()?;
        let aux = net.layers.iter().map(|l| gpu.alloc(l.aux_len)).collect::<Result<_>>()?;
        let params: Vec<DeviceVec<'g>> = (0..net.layers.len())
            .map(|li| gpu.alloc_from(params.get(li).copied().unwrap_or_default()))
            .collect::<Result<_>>()?;
        let grads = params.iter().map(|p| gpu.alloc(p.slice().len)).collect::<Result<_>>()?;
        let cursors = net
            .layers
            .iter()
            .map(|l| l.data.as_ref().map(|d| Cursor::new(d.set.len(), 0, 1)).transpose())
            .collect::<Result<_>>()?;
        Ok(GpuNet { gpu, net, data, diff, aux, params, grads, cursors })
    }

    fn data_of(&self, blobs: &[usize]) -> Vec<(usize, DevSlice)> {
        blobs.iter().map(|&b| (b, self.data[b].slice())).collect()
    }

    fn diff_of(&self, blobs: &[usize]) -> Vec<(usize, DevSlice)> {
        blobs.iter().filter_map(|&b| self.diff[b].as_ref().map(|d| (b, d.slice()))).collect()
    }

    fn download(&self, list: &[(usize, DevSlice)]) -> Result<Vec<(usize, Vec<f32>)>> {
        list.iter().map(|&(b, s)| Ok((b, self.gpu.download(s)?))).collect()
    }

    fn upload(&self, host: &[(usize, Vec<f32>)], list: &[(usize, DevSlice)]) -> Result<()> {
        for ((_, v), (_, s)) in host.iter().zip(list) {
            self.gpu.upload(v, *s)?;
        }
        Ok(())
    }

    /// Forward of layer `li`, finished on the GPU when it returns.
    pub fn forward_one(&mut self, li: usize, train: bool, seed: u64) -> Result<()> {
        let net = self.net;
        let l = &net.layers[li];
        let seed = layer_seed(seed, li);
        if let Some(src) = &l.data {
            let idx = self.cursors[li].as_mut().map(|c| c.take(net.batch)).unwrap_or_default();
            let mut host: Vec<Vec<f32>> = l.tops.iter().map(|&t| vec![0.0; net.blobs[t].count()]).collect();
            let mut tops: Vec<&mut [f32]> = host.iter_mut().map(Vec::as_mut_slice).collect();
            fill_tops(src, &idx, train, seed, &mut tops)?;
            for (&t, v) in l.tops.iter().zip(&host) {
                self.gpu.upload(v, self.data[t].slice())?;
            }
            return self.gpu.sync();
        }
        let outs: Vec<usize> = l.fwd_out.iter().chain(&l.fwd_inout).copied().collect();
        let io = DevIo { data_in: self.data_of(&l.fwd_in), data_out: self.data_of(&outs), ..DevIo::default() };
        if gpu_pass::runs_on_gpu(l) {
            let params = self.params[li].slice().prefix(l.param_len)?;
            gpu_pass::forward(self.gpu, net, li, params, &io, self.aux[li].slice(), train, seed)?;
            return self.gpu.sync();
        }
        let ins = self.download(&io.data_in)?;
        let mut out_host = self.download(&io.data_out)?;
        let params = self.gpu.download(self.params[li].slice())?;
        let mut aux = self.aux[li].to_vec()?;
        let host = Io {
            data_in: ins.iter().map(|(b, v)| (*b, v.as_slice())).collect(),
            data_out: out_host.iter_mut().map(|(b, v)| (*b, v.as_mut_slice())).collect(),
            ..Io::default()
        };
        forward_layer(net, li, &params[..l.param_len], host, &mut aux[..l.aux_len], train, seed);
        self.upload(&out_host, &io.data_out)?;
        self.gpu.upload(&aux, self.aux[li].slice())?;
        self.gpu.sync()
    }

    /// Backward of layer `li` (nothing if it runs none), finished on the GPU
    /// when it returns; its parameter gradient lands in the layer's own array.
    pub fn backward_one(&mut self, li: usize) -> Result<()> {
        let net = self.net;
        let l = &net.layers[li];
        if !l.backward {
            return Ok(());
        }
        let outs: Vec<usize> = l.bwd_diff_out.iter().chain(&l.bwd_diff_inout).copied().collect();
        let io = DevIo {
            data_in: self.data_of(&l.bwd_data_in),
            diff_in: self.diff_of(&l.bwd_diff_in),
            diff_out: self.diff_of(&outs),
            ..DevIo::default()
        };
        let grad = self.grads[li].slice().prefix(l.param_len)?;
        if gpu_pass::runs_on_gpu(l) {
            let params = self.params[li].slice().prefix(l.param_len)?;
            gpu_pass::backward(self.gpu, net, li, params, &io, self.aux[li].slice(), grad)?;
            return self.gpu.sync();
        }
        let data_in = self.download(&io.data_in)?;
        let diff_in = self.download(&io.diff_in)?;
        let mut diff_out = self.download(&io.diff_out)?;
        let params = self.gpu.download(self.params[li].slice())?;
        let aux = self.aux[li].to_vec()?;
        let mut grad_host = vec![0.0; l.param_len];
        let host = Io {
            data_in: data_in.iter().map(|(b, v)| (*b, v.as_slice())).collect(),
            diff_in: diff_in.iter().map(|(b, v)| (*b, v.as_slice())).collect(),
            diff_out: diff_out.iter_mut().map(|(b, v)| (*b, v.as_mut_slice())).collect(),
            ..Io::default()
        };
        backward_layer(net, li, &params[..l.param_len], host, &aux[..l.aux_len], &mut grad_host);
        self.upload(&diff_out, &io.diff_out)?;
        self.gpu.upload(&grad_host, grad)?;
        self.gpu.sync()
    }

    /// Each output blob's values after the last forward, in `net.outputs` order.
    pub fn outputs(&self) -> Result<Vec<Vec<f32>>> {
        self.net.outputs.iter().map(|&b| self.data[b].to_vec()).collect()
    }
}
