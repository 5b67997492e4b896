//! One worker training through geeps, shaped like the paper's Algorithm 1:
//! a virtual iteration records, layer by layer, the forward pass (read the
//! layer's parameters, access its input blobs with fetch and its outputs
//! without, post them back saving only what was written) and the backward
//! pass (read and pre-update the parameters, access the momentum history,
//! the data and gradients the layer needs, update, and clock each table right
//! after its last update). Training then replays exactly that order, so
//! every call takes the fast path. It owns the geeps instance and the
//! order of calls; the math is `net.rs` and `solver.rs`.

use std::sync::Arc;

use geeps::{Config, Geeps, Handle, LocalBuffer, RowKey, Slack, Stats, TableId, Transport};

use crate::data::Cursor;
use crate::error::{Error, Result};
use crate::net::{backward_layer, forward_layer, Io, Net};
use crate::params::ParamLayout;
use crate::ps::host_view::{HostView, Writable};
use crate::ps::layout::{rows_for, PsLayout, Slot};
use crate::ps::PsOptions;
use crate::solver::{sgd_delta, Step};

/// A recorded local access: its handle and what its buffer holds, in order.
#[derive(Debug, Clone)]
struct Access {
    handle: Handle,
    /// (slot, floats); each slot starts on a row boundary.
    parts: Vec<(Slot, usize)>,
}

#[derive(Debug, Clone, Default)]
struct Calls {
    read: Option<Handle>,
    update: Option<Handle>,
    history: Option<Access>,
    input: Option<Access>,
    inout: Option<Access>,
    output: Option<Access>,
    /// Tables clocked after this layer's step.
    clocks: Vec<TableId>,
}

/// The recorded calls of one mini-batch.
#[derive(Debug, Clone, Default)]
struct Pass {
    forward: Vec<Calls>,
    backward: Vec<Calls>,
}

pub struct PsWorker<'a> {
    ps: Geeps,
    net: &'a Net,
    params: &'a ParamLayout,
    layout: PsLayout,
    passes: Vec<Pass>,
    cursors: Vec<Option<Cursor>>,
    /// How the CPU layers reach the buffers (in place, or staged from a GPU).
    view: HostView,
}

fn split<'s>(mut buf: &'s [f32], parts: &[(Slot, usize)], width: usize) -> Vec<(Slot, &'s [f32])> {
    let mut out = Vec::with_capacity(parts.len());
    for &(slot, floats) in parts {
        let (head, rest) = buf.split_at(rows_for(floats, width) as usize * width);
        out.push((slot, &head[..floats]));
        buf = rest;
    }
    out
}

fn split_mut<'s>(mut buf: &'s mut [f32], parts: &[(Slot, usize)], width: usize) -> Vec<(Slot, &'s mut [f32])> {
    let mut out = Vec::with_capacity(parts.len());
    for &(slot, floats) in parts {
        let (head, rest) = buf.split_at_mut(rows_for(floats, width) as usize * width);
        out.push((slot, &mut head[..floats]));
        buf = rest;
    }
    out
}

/// A writable view of a held local buffer (fetched: the layer may keep
/// what it does not overwrite).
fn writable<'b>(hv: &HostView, buf: Option<&'b mut LocalBuffer<'_>>) -> Result<Option<Writable<'b>>> {
    buf.map(|b| hv.write(b.device_ptr(), b.len(), true, || b.as_mut_slice())).transpose()
}

/// Acquires a recorded local access, if the layer has one.
fn open<'p>(ps: &'p Geeps, a: &Option<Access>) -> Result<Option<LocalBuffer<'p>>> {
    Ok(a.as_ref().map(|a| ps.local_access(a.handle)).transpose()?)
}

impl<'a> PsWorker<'a> {
    /// Joins the cluster through `transport`, records the virtual iteration
    /// and lets geeps plan memory and start its threads.
    pub fn new(
        net: &'a Net,
        params: &'a ParamLayout,
        opts: &PsOptions,
        transport: Arc<dyn Transport>,
    ) -> Result<PsWorker<'a>> {
        let config = Config::default()
            .with_row_width(opts.row_width)
            .with_device_memory(opts.device_memory)
            .with_wait_deadline(opts.wait_deadline);
        let mut b = Geeps::builder(config);
        let layout = PsLayout::declare(&mut b, net, params, opts.layers_per_table, opts.row_width);
        let device = opts.device.open(transport.rank(), opts.device_memory)?;
        b.transport(transport);
        if let Some(d) = &device {
            b.device(d.clone());
        }
        let view = HostView::new(device)?;
        let ps = b.build()?;
        let (rank, world) = (ps.rank(), ps.num_workers());
        let cursors = net
            .layers
            .iter()
            .map(|l| l.data.as_ref().map(|d| Cursor::new(d.set.len(), rank, world)).transpose())
            .collect::<Result<_>>()?;
        let mut w = PsWorker { ps, net, params, layout, passes: Vec::new(), cursors, view };
        let slack = Slack::Bounded(opts.slack);
        for pass in 0..opts.batches_per_clock {
            let last = pass + 1 == opts.batches_per_clock;
            let p = w.record_pass(slack, last)?;
            w.passes.push(p);
        }
        w.ps.finish_virtual_iteration()?;
        Ok(w)
    }

    pub fn geeps(&self) -> &Geeps {
        &self.ps
    }

    pub(crate) fn layout(&self) -> &PsLayout {
        &self.layout
    }

    pub(crate) fn params(&self) -> &ParamLayout {
        self.params
    }

    pub(crate) fn view(&self) -> &HostView {
        &self.view
    }

    /// Moves every data cursor to where it is after `iterations` mini-batches.
    pub(crate) fn skip_data(&mut self, iterations: u64) {
        let batch = self.net.batch;
        for c in self.cursors.iter_mut().flatten() {
            c.skip(iterations.saturating_mul(batch as u64));
        }
    }

    fn access(&self, slots: Vec<Slot>, fetch: bool) -> Result<Option<Access>> {
        if slots.is_empty() {
            return Ok(None);
        }
        let mut keys: Vec<RowKey> = Vec::new();
        let mut parts = Vec::new();
        for s in slots {
            let floats = match s {
                Slot::Data(b) | Slot::Diff(b) => self.net.blobs[b].count(),
                Slot::Aux(l) => self.net.layers[l].aux_len,
                Slot::History(p) => self.params.layers[p].len,
            };
            keys.extend(self.layout.slot_keys(self.net, self.params, s));
            parts.push((s, floats));
        }
        Ok(Some(Access { handle: self.ps.virtual_local_access(&keys, fetch)?, parts }))
    }

    fn post_virtual(&self, a: &Option<Access>, save: bool) -> Result<()> {
        if let Some(a) = a {
            self.ps.virtual_post_local_access(a.handle, save)?;
        }
        Ok(())
    }

    /// Records one mini-batch: forward then backward; `clock` on the last
    /// mini-batch of a clock.
    fn record_pass(&self, slack: Slack, clock: bool) -> Result<Pass> {
        let net = self.net;
        let mut pass = Pass::default();
        for (li, l) in net.layers.iter().enumerate() {
            let p = self.params.index_of_layer(li);
            let mut c = Calls::default();
            if let Some(p) = p {
                c.read = Some(self.ps.virtual_read(&self.layout.param_keys[p], slack)?);
            }
            c.input = self.access(l.fwd_in.iter().map(|&b| Slot::Data(b)).collect(), true)?;
            c.inout = self.access(l.fwd_inout.iter().map(|&b| Slot::Data(b)).collect(), true)?;
            let mut out: Vec<Slot> = l.fwd_out.iter().map(|&b| Slot::Data(b)).collect();
            if l.aux_len > 0 {
                out.push(Slot::Aux(li));
            }
            // Outputs are overwritten whole: no fetch, but saved.
            c.output = self.access(out, false)?;
            self.post_virtual(&c.output, true)?;
            self.post_virtual(&c.inout, true)?;
            self.post_virtual(&c.input, false)?;
            if let Some(r) = c.read {
                self.ps.virtual_post_read(r)?;
            }
            pass.forward.push(c);
        }
        pass.backward = vec![Calls::default(); net.layers.len()];
        for li in (0..net.layers.len()).rev() {
            let l = &net.layers[li];
            let p = self.params.index_of_layer(li);
            let mut c = Calls::default();
            if l.backward {
                if let Some(p) = p {
                    c.read = Some(self.ps.virtual_read(&self.layout.param_keys[p], slack)?);
                    c.update = Some(self.ps.virtual_pre_update(&self.layout.param_keys[p])?);
                    c.history = self.access(vec![Slot::History(p)], true)?;
                }
                let mut input: Vec<Slot> = l.bwd_data_in.iter().map(|&b| Slot::Data(b)).collect();
                input.extend(l.bwd_diff_in.iter().map(|&b| Slot::Diff(b)));
                if l.aux_len > 0 {
                    input.push(Slot::Aux(li));
                }
                // Read only: nothing to save.
                c.input = self.access(input, true)?;
                c.inout = self.access(l.bwd_diff_inout.iter().map(|&b| Slot::Diff(b)).collect(), true)?;
                c.output = self.access(l.bwd_diff_out.iter().map(|&b| Slot::Diff(b)).collect(), false)?;
                if let Some(u) = c.update {
                    self.ps.virtual_update(u)?;
                }
                self.post_virtual(&c.history, true)?;
                self.post_virtual(&c.output, true)?;
                self.post_virtual(&c.inout, true)?;
                self.post_virtual(&c.input, false)?;
                if let Some(r) = c.read {
                    self.ps.virtual_post_read(r)?;
                }
            }
            if let (Some(p), true) = (p, clock) {
                for (g, &after) in self.layout.clock_after.iter().enumerate() {
                    if after == p {
                        let t = self.layout.param_tables[g];
                        self.ps.virtual_table_clock(t)?;
                        c.clocks.push(t);
                    }
                }
            }
            pass.backward[li] = c;
        }
        Ok(pass)
    }

    fn all_param_keys(&self) -> Vec<RowKey> {
        self.layout.param_keys.iter().flatten().copied().collect()
    }

    /// Before training: the worker given `initial` publishes the starting
    /// parameters, every worker zeroes its momentum history, ends an
    /// initial clock, and waits until the starting parameters are visible.
    pub fn initialize(&self, initial: Option<&[Vec<f32>]>) -> Result<()> {
        if let Some(values) = initial {
            for (p, v) in values.iter().enumerate() {
                let mut u = self.ps.pre_update_keys(&self.layout.param_keys[p])?;
                let mut view = self.view.write(u.device_ptr(), u.len(), false, || u.as_mut_slice())?;
                view[..v.len()].copy_from_slice(v);
                self.view.commit(view)?;
                u.update()?;
            }
        }
        for p in 0..self.params.layers.len() {
            let keys = self.layout.slot_keys(self.net, self.params, Slot::History(p));
            let mut h = self.ps.local_access_keys(&keys, false)?;
            let mut view = self.view.write(h.device_ptr(), h.len(), false, || h.as_mut_slice())?;
            view.fill(0.0);
            self.view.commit(view)?;
            h.post_with(true)?;
        }
        for &t in &self.layout.param_tables {
            self.ps.table_clock(t)?;
        }
        // A BSP read: with slack the first real read would not wait for them.
        self.ps.read_keys(&self.all_param_keys(), Slack::BSP)?.post()?;
        self.ps.reset_stats();
        Ok(())
    }

    /// The parameters as of every worker's last clock, one vector per layer.
    pub fn current_params(&self) -> Result<Vec<Vec<f32>>> {
        let buf = self.ps.read_keys(&self.all_param_keys(), Slack::BSP)?;
        let all = self.view.read(buf.device_ptr(), buf.len(), || buf.as_slice())?;
        let w = self.layout.row_width;
        let mut out = Vec::new();
        let mut first = 0;
        for (lp, keys) in self.params.layers.iter().zip(&self.layout.param_keys) {
            out.push(all[first..first + lp.len].to_vec());
            first += keys.len() * w;
        }
        buf.post()?;
        Ok(out)
    }

    fn test_keys(&self) -> Vec<RowKey> {
        geeps::keys(self.layout.test_table, 0..rows_for(self.net.outputs.len() + 1, self.layout.row_width))
    }

    /// Adds this worker's test output sums and batch count to the shared
    /// totals and ends its test clock.
    pub fn add_test_outputs(&self, sums: &[f32], batches: f32) -> Result<()> {
        let mut u = self.ps.pre_update_keys(&self.test_keys())?;
        let mut s = self.view.write(u.device_ptr(), u.len(), false, || u.as_mut_slice())?;
        s[..sums.len()].copy_from_slice(sums);
        s[sums.len()] = batches;
        self.view.commit(s)?;
        u.update()?;
        self.ps.table_clock(self.layout.test_table)?;
        Ok(())
    }

    /// Running totals of every worker's test outputs (last entry: batches).
    pub fn test_totals(&self, outputs: usize) -> Result<Vec<f32>> {
        let buf = self.ps.read_keys(&self.test_keys(), Slack::BSP)?;
        let v = self.view.read(buf.device_ptr(), buf.len(), || buf.as_slice())?[..=outputs].to_vec();
        buf.post()?;
        Ok(v)
    }

    pub fn stats(&self) -> Stats {
        self.ps.stats()
    }

    pub fn shutdown(&self) -> Result<()> {
        Ok(self.ps.shutdown()?)
    }

    /// Trains on one mini-batch (`pass` of its clock): forward, backward,
    /// SGD step. Returns the net's scalar outputs (the loss).
    pub fn iteration(&mut self, pass: usize, step: Step, seed: u64) -> Result<Vec<f32>> {
        let (ps, net, params, width) = (&self.ps, self.net, self.params, self.layout.row_width);
        let hv = &self.view;
        let calls = &self.passes[pass % self.passes.len()];
        let mut outputs = vec![0.0; net.outputs.len()];
        let open = |a: &Option<Access>| open(ps, a);
        for (li, l) in net.layers.iter().enumerate() {
            let c = &calls.forward[li];
            let read = c.read.map(|h| ps.read(h)).transpose()?;
            let input = open(&c.input)?;
            let mut inout = open(&c.inout)?;
            let mut output = open(&c.output)?;
            {
                let w_view = read.as_ref().map(|r| hv.read(r.device_ptr(), r.len(), || r.as_slice())).transpose()?;
                let w: &[f32] = w_view.as_deref().map_or(&[], |v| &v[..l.param_len]);
                let in_view = input.as_ref().map(|b| hv.read(b.device_ptr(), b.len(), || b.as_slice())).transpose()?;
                let mut inout_view = writable(hv, inout.as_mut())?;
                let mut out_view = writable(hv, output.as_mut())?;
                {
                    let mut io = Io::default();
                    let mut aux: &mut [f32] = &mut [];
                    if let (Some(v), Some(a)) = (&in_view, &c.input) {
                        for (slot, s) in split(v, &a.parts, width) {
                            if let Slot::Data(b) = slot {
                                io.data_in.push((b, s));
                            }
                        }
                    }
                    for (v, a) in [(&mut inout_view, &c.inout), (&mut out_view, &c.output)] {
                        if let (Some(v), Some(a)) = (v.as_mut(), a) {
                            for (slot, s) in split_mut(v, &a.parts, width) {
                                match slot {
                                    Slot::Data(b) => io.data_out.push((b, s)),
                                    Slot::Aux(_) => aux = s,
                                    Slot::Diff(_) | Slot::History(_) => {}
                                }
                            }
                        }
                    }
                    if let Some(src) = &l.data {
                        let idx = self.cursors[li].as_mut().map(|c| c.take(net.batch)).unwrap_or_default();
                        let mut data: &mut [f32] = &mut [];
                        let mut label: &mut [f32] = &mut [];
                        for (b, s) in io.data_out {
                            if b == l.tops[0] {
                                data = s;
                            } else if b == l.tops[1] {
                                label = s;
                            }
                        }
                        let seed = crate::plain::layer_seed(seed, li);
                        src.set.fill(&idx, &src.transform, true, seed, src.label_limit.get(), data, label)?;
                    } else {
                        forward_layer(net, li, w, io, aux, true, crate::plain::layer_seed(seed, li));
                    }
                }
                for (v, a) in [(&out_view, &c.output), (&inout_view, &c.inout)] {
                    if let (Some(v), Some(a)) = (v, a) {
                        for (slot, s) in split(v, &a.parts, width) {
                            if let Slot::Data(b) = slot {
                                if let Some(k) = net.outputs.iter().position(|&o| o == b) {
                                    outputs[k] = s[0];
                                }
                            }
                        }
                    }
                }
                for v in [out_view, inout_view].into_iter().flatten() {
                    hv.commit(v)?;
                }
            }
            if let Some(b) = output {
                b.post()?;
            }
            if let Some(b) = inout {
                b.post()?;
            }
            if let Some(b) = input {
                b.post()?;
            }
            if let Some(r) = read {
                r.post()?;
            }
        }
        for li in (0..net.layers.len()).rev() {
            let l = &net.layers[li];
            let c = &calls.backward[li];
            if l.backward {
                let read = c.read.map(|h| ps.read(h)).transpose()?;
                let mut update = c.update.map(|h| ps.pre_update(h)).transpose()?;
                let mut history = open(&c.history)?;
                let input = open(&c.input)?;
                let mut inout = open(&c.inout)?;
                let mut output = open(&c.output)?;
                {
                    let w_view =
                        read.as_ref().map(|r| hv.read(r.device_ptr(), r.len(), || r.as_slice())).transpose()?;
                    let w: &[f32] = w_view.as_deref().map_or(&[], |v| &v[..l.param_len]);
                    let in_view =
                        input.as_ref().map(|b| hv.read(b.device_ptr(), b.len(), || b.as_slice())).transpose()?;
                    let mut inout_view = writable(hv, inout.as_mut())?;
                    let mut out_view = writable(hv, output.as_mut())?;
                    // pre_update buffers come zeroed: nothing to fetch.
                    let mut grad_view = update
                        .as_mut()
                        .map(|u| hv.write(u.device_ptr(), u.len(), false, || u.as_mut_slice()))
                        .transpose()?;
                    let mut history_view = writable(hv, history.as_mut())?;
                    {
                        let mut io = Io::default();
                        let mut aux: &[f32] = &[];
                        if let (Some(v), Some(a)) = (&in_view, &c.input) {
                            for (slot, s) in split(v, &a.parts, width) {
                                match slot {
                                    Slot::Data(b) => io.data_in.push((b, s)),
                                    Slot::Diff(b) => io.diff_in.push((b, s)),
                                    Slot::Aux(_) => aux = s,
                                    Slot::History(_) => {}
                                }
                            }
                        }
                        for (v, a) in [(&mut inout_view, &c.inout), (&mut out_view, &c.output)] {
                            if let (Some(v), Some(a)) = (v.as_mut(), a) {
                                for (slot, s) in split_mut(v, &a.parts, width) {
                                    if let Slot::Diff(b) = slot {
                                        io.diff_out.push((b, s));
                                    }
                                }
                            }
                        }
                        let mut none: [f32; 0] = [];
                        let grad: &mut [f32] = match grad_view.as_mut() {
                            Some(g) => &mut g[..l.param_len],
                            None => &mut none,
                        };
                        backward_layer(net, li, w, io, aux, grad);
                        if l.compute.as_ref().is_some_and(|c| c.param_grad_is_update()) {
                            // Running statistics: this worker's share of their change.
                            grad.iter_mut().for_each(|g| *g *= step.scale);
                        } else if let (Some(p), Some(h)) = (params.index_of_layer(li), history_view.as_mut()) {
                            sgd_delta(&params.layers[p], step, w, grad, &mut h[..l.param_len]);
                        }
                        if let Some(bad) = grad.iter().find(|v| !v.is_finite()) {
                            return Err(Error::Diverged(format!(
                                "the update of layer `{}` ({}) is {bad}",
                                l.name, l.type_name
                            )));
                        }
                    }
                    for v in [grad_view, history_view, out_view, inout_view].into_iter().flatten() {
                        hv.commit(v)?;
                    }
                }
                if let Some(u) = update {
                    u.update()?;
                }
                for b in [history, output, inout, input].into_iter().flatten() {
                    b.post()?;
                }
                if let Some(r) = read {
                    r.post()?;
                }
            }
            for &t in &c.clocks {
                ps.table_clock(t)?;
            }
        }
        Ok(outputs)
    }
}
