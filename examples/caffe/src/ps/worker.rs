//! One worker training through geeps, shaped like the paper's Algorithm 1:
//! a virtual iteration records, layer by layer, the forward pass (read the
//! layer's parameters, access its input blobs with fetch and its outputs
//! without, post them back saving only what was written) and the backward
//! pass (read and pre-update the parameters, access the solver history,
//! the data and gradients the layer needs, update, and clock each table right
//! after its last update). When the solver needs the whole gradient before
//! any step (clip_gradients, iter_size > 1), backward instead adds each
//! layer's gradient into a copy kept in its history rows, and an update pass
//! after the iteration's last mini-batch steps and clocks every layer.
//! Training then replays exactly that order, so every call takes the fast
//! path. It owns the geeps instance and the order of calls; the math is
//! `net::layer_call` and `solvers`.

use std::sync::Arc;

use geeps::{Config, Geeps, Handle, ReadBuffer, RowKey, Slack, Stats, TableId, Transport};

use crate::data::{Cursor, Source};
use crate::error::{Error, Result};
use crate::gpu::{DevSlice, Gpu};
use crate::net::data_feed::fill_tops;
use crate::net::params::ParamLayout;
use crate::net::{backward_layer, forward_layer, Io, Net};
use crate::ps::blob_access::{self, open, Access, Held};
use crate::ps::gpu_pass::{self, DevIo};
use crate::ps::host_view::HostView;
use crate::ps::layout::{rows_for, LayoutSizes, PsLayout, Slot};
use crate::ps::PsOptions;
use crate::solvers::{clip_factor, layer_delta, sumsq, Rule, Step};

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
    /// The first and the last mini-batch of an iteration (iter_size).
    first: bool,
    last: bool,
    /// When the solver accumulates: the update pass after the last
    /// mini-batch, per parameter layer (top first, as backward).
    apply: Vec<(usize, Calls)>,
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
    /// The GPU the layers compute on, when the rows live on one (and the
    /// layers were not asked to stay on the CPU).
    gpu: Option<Gpu>,
    rule: Rule,
    /// Backward adds each gradient into the history rows and an update pass
    /// steps every layer: the solver needs the whole gradient first, or a
    /// parameter is shared by several layers whose gradients must meet.
    accumulate: bool,
    control: ControlCalls,
}

/// The recorded calls of the control table, made at the start of every clock.
#[derive(Debug, Clone, Copy)]
struct ControlCalls {
    read: Handle,
    update: Handle,
    table: TableId,
    rows: u32,
}

impl ControlCalls {
    fn record(ps: &Geeps, layout: &PsLayout, slack: Slack) -> Result<ControlCalls> {
        let table = layout.control_table;
        let rows = ps.tables()[table.0 as usize].rows;
        let keys = geeps::keys(table, 0..rows);
        let read = ps.virtual_read(&keys, slack)?;
        ps.virtual_post_read(read)?;
        let update = ps.virtual_pre_update(&keys)?;
        ps.virtual_update(update)?;
        ps.virtual_table_clock(table)?;
        Ok(ControlCalls { read, update, table, rows })
    }
}

/// The device ranges of a layer call's held buffers (input, inout,
/// output), slot by slot, as the CPU path views them: forward reads
/// data and writes data and its backward state; backward reads data,
/// gradients and that state, and writes gradients.
fn device_io(buffers: [Option<&Held<'_>>; 3], backward: bool) -> (DevIo, DevSlice) {
    let mut io = DevIo::default();
    let mut aux = DevSlice::EMPTY;
    if let Some(b) = buffers[0] {
        for (slot, s) in b.device() {
            match slot {
                Slot::Data(x) => io.data_in.push((x, s)),
                Slot::Diff(x) if backward => io.diff_in.push((x, s)),
                Slot::Aux(_) if backward => aux = s,
                _ => {}
            }
        }
    }
    for b in [buffers[1], buffers[2]].into_iter().flatten() {
        for (slot, s) in b.device() {
            match slot {
                Slot::Data(x) if !backward => io.data_out.push((x, s)),
                Slot::Aux(_) if !backward => aux = s,
                Slot::Diff(x) if backward => io.diff_out.push((x, s)),
                _ => {}
            }
        }
    }
    (io, aux)
}

impl<'a> PsWorker<'a> {
    /// Joins the cluster through `transport`, records the virtual iteration
    /// (`batches_per_clock` iterations of `rule.iter_size` mini-batches)
    /// and lets geeps plan memory and start its threads.
    pub fn new(
        net: &'a Net,
        params: &'a ParamLayout,
        opts: &PsOptions,
        rule: Rule,
        test_outputs: usize,
        transport: Arc<dyn Transport>,
    ) -> Result<PsWorker<'a>> {
        // The solver's histories, then (when it accumulates) the gradient sum.
        let accumulate = accumulates(&rule, params);
        let copies = rule.history_slots() + usize::from(accumulate);
        let budget = crate::ps::budget::for_worker(net, params, opts, copies)?;
        let config = Config::default()
            .with_row_width(opts.row_width)
            .with_device_memory(budget)
            .with_wait_deadline(opts.wait_deadline);
        let mut b = Geeps::builder(config);
        let layout = PsLayout::declare(
            &mut b,
            net,
            params,
            LayoutSizes {
                per_table: opts.layers_per_table,
                width: opts.row_width,
                history_copies: copies,
                world: transport.num_workers(),
                test_outputs,
            },
        );
        let rank = transport.rank();
        let device = opts.device.open(rank, budget)?;
        b.transport(transport);
        if let Some(d) = &device {
            b.device(d.clone());
        }
        let gpu = match (&device, opts.device.ordinal(rank)) {
            (Some(_), Some(ordinal)) if !opts.layers_on_cpu => Some(Gpu::open(ordinal)?),
            _ => None,
        };
        let view = HostView::new(device)?;
        let ps = b.build()?;
        let (rank, world) = (ps.rank(), ps.num_workers());
        let cursors = net
            .layers
            .iter()
            .map(|l| l.data.as_ref().map(|d| Cursor::new(d.set.len(), rank, world)).transpose())
            .collect::<Result<_>>()?;
        let slack = Slack::Bounded(opts.slack);
        let control = ControlCalls::record(&ps, &layout, slack)?;
        let mut w =
            PsWorker { ps, net, params, layout, passes: Vec::new(), cursors, view, gpu, rule, accumulate, control };
        let iter_size = rule.iter_size.max(1) as usize;
        let total = opts.batches_per_clock * iter_size;
        for pass in 0..total {
            let sub = pass % iter_size;
            let p = w.record_pass(slack, sub == 0, sub + 1 == iter_size, pass + 1 == total)?;
            w.passes.push(p);
        }
        w.ps.finish_virtual_iteration()?;
        Ok(w)
    }

    pub fn geeps(&self) -> &Geeps {
        &self.ps
    }

    /// The control table's exchange at the start of a clock (before the
    /// clock's first mini-batch): reads every worker's slot, adds what
    /// `delta` makes of the read to this worker's, and ends the table's
    /// clock. Returns what it read.
    pub fn exchange_control(&self, delta: impl FnOnce(&[f32]) -> [f32; 2]) -> Result<Vec<f32>> {
        let c = self.control;
        let r = self.ps.read(c.read)?;
        let read = self.view.read(r.device_ptr(), r.len(), || r.as_slice())?.to_vec();
        r.post()?;
        let mut u = self.ps.pre_update(c.update)?;
        let mut v = self.view.write(u.device_ptr(), u.len(), false, || u.as_mut_slice())?;
        v.fill(0.0);
        let at = 2 * self.ps.rank();
        v[at..at + 2].copy_from_slice(&delta(&read));
        self.view.commit(v)?;
        u.update()?;
        self.ps.table_clock(c.table)?;
        debug_assert_eq!(read.len(), c.rows as usize * self.layout.row_width);
        Ok(read)
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

    /// Moves every data cursor to where it is after `iterations`
    /// iterations (of `iter_size` mini-batches each).
    pub(crate) fn skip_data(&mut self, iterations: u64) {
        let images = iterations.saturating_mul(self.rule.iter_size.max(1)).saturating_mul(self.net.batch as u64);
        for c in self.cursors.iter_mut().flatten() {
            c.skip(images);
        }
    }

    /// Records the local accesses of `slots` (one each), fetched or not,
    /// whose posts save or not.
    fn access(&self, slots: Vec<Slot>, fetch: bool, save: bool) -> Result<Option<Access>> {
        let parts = slots.into_iter().map(|s| {
            let floats = match s {
                Slot::Data(b) | Slot::Diff(b) => self.net.blobs[b].count(),
                Slot::Aux(l) => self.net.layers[l].aux_len,
                Slot::History(p) => self.layout.history_copies * self.params.layers[p].len,
            };
            (s, self.layout.slot_keys(self.net, self.params, s), floats)
        });
        Access::record(&self.ps, parts, fetch, save)
    }

    fn post_virtual(&self, a: &Option<Access>) -> Result<()> {
        a.as_ref().map_or(Ok(()), |a| a.record_post(&self.ps))
    }

    /// Records one mini-batch: forward then backward (then the update pass
    /// on the `last` mini-batch of an iteration when the solver
    /// accumulates); `clock` on the last mini-batch of a clock.
    fn record_pass(&self, slack: Slack, first: bool, last: bool, clock: bool) -> Result<Pass> {
        let net = self.net;
        let accumulate = self.accumulate;
        let mut pass = Pass { first, last, ..Pass::default() };
        for (li, l) in net.layers.iter().enumerate() {
            let p = self.params.index_of_layer(li);
            let mut c = Calls::default();
            if let Some(p) = p {
                c.read = Some(self.ps.virtual_read(&self.layout.param_keys[p], slack)?);
            }
            c.input = self.access(l.fwd_in.iter().map(|&b| Slot::Data(b)).collect(), true, false)?;
            c.inout = self.access(l.fwd_inout.iter().map(|&b| Slot::Data(b)).collect(), true, true)?;
            let mut out: Vec<Slot> = l.fwd_out.iter().map(|&b| Slot::Data(b)).collect();
            if l.aux_len > 0 {
                out.push(Slot::Aux(li));
            }
            // Outputs are overwritten whole: no fetch, but saved.
            c.output = self.access(out, false, true)?;
            self.post_virtual(&c.output)?;
            self.post_virtual(&c.inout)?;
            self.post_virtual(&c.input)?;
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
                    if !accumulate || is_statistics(l) {
                        c.update = Some(self.ps.virtual_pre_update(&self.layout.param_keys[p])?);
                    }
                    c.history = self.access(vec![Slot::History(p)], true, true)?;
                }
                let mut input: Vec<Slot> = l.bwd_data_in.iter().map(|&b| Slot::Data(b)).collect();
                input.extend(l.bwd_diff_in.iter().map(|&b| Slot::Diff(b)));
                if l.aux_len > 0 {
                    input.push(Slot::Aux(li));
                }
                // Read only: nothing to save.
                c.input = self.access(input, true, false)?;
                c.inout = self.access(l.bwd_diff_inout.iter().map(|&b| Slot::Diff(b)).collect(), true, true)?;
                c.output = self.access(l.bwd_diff_out.iter().map(|&b| Slot::Diff(b)).collect(), false, true)?;
                if let Some(u) = c.update {
                    self.ps.virtual_update(u)?;
                }
                self.post_virtual(&c.history)?;
                self.post_virtual(&c.output)?;
                self.post_virtual(&c.inout)?;
                self.post_virtual(&c.input)?;
                if let Some(r) = c.read {
                    self.ps.virtual_post_read(r)?;
                }
            }
            if let (Some(p), true) = (p, clock && !accumulate) {
                c.clocks = self.record_clocks(p)?;
            }
            pass.backward[li] = c;
        }
        if accumulate && last {
            for p in (0..self.params.layers.len()).rev() {
                let lp = &self.params.layers[p];
                let l = &net.layers[lp.layer];
                let mut c = Calls::default();
                if lp.users.iter().any(|&u| net.layers[u].backward) && !is_statistics(l) {
                    let keys = &self.layout.param_keys[p];
                    let (r, u) = (self.ps.virtual_read(keys, slack)?, self.ps.virtual_pre_update(keys)?);
                    c.history = self.access(vec![Slot::History(p)], true, true)?;
                    self.ps.virtual_update(u)?;
                    self.post_virtual(&c.history)?;
                    self.ps.virtual_post_read(r)?;
                    (c.read, c.update) = (Some(r), Some(u));
                }
                if clock {
                    c.clocks = self.record_clocks(p)?;
                }
                pass.apply.push((p, c));
            }
        }
        Ok(pass)
    }

    /// Records the clocks of the tables whose last update is parameter layer `p`'s.
    fn record_clocks(&self, p: usize) -> Result<Vec<TableId>> {
        let mut clocks = Vec::new();
        for (g, &after) in self.layout.clock_after.iter().enumerate() {
            if after == p {
                let t = self.layout.param_tables[g];
                self.ps.virtual_table_clock(t)?;
                clocks.push(t);
            }
        }
        Ok(clocks)
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
        geeps::keys(self.layout.test_table, 0..rows_for(self.layout.test_outputs + 1, self.layout.row_width))
    }

    /// Adds this worker's test output sums and batch count to the shared
    /// totals and ends its test clock.
    pub fn add_test_outputs(&self, sums: &[f32], batches: f32) -> Result<()> {
        let mut u = self.ps.pre_update_keys(&self.test_keys())?;
        let mut s = self.view.write(u.device_ptr(), u.len(), false, || u.as_mut_slice())?;
        let slots = self.layout.test_outputs;
        if sums.len() > slots {
            return Err(Error::config(format!("{} test outputs, but the test table holds {slots}", sums.len())));
        }
        s.fill(0.0);
        s[..sums.len()].copy_from_slice(sums);
        s[slots] = batches;
        self.view.commit(s)?;
        u.update()?;
        self.ps.table_clock(self.layout.test_table)?;
        Ok(())
    }

    /// Running totals of every worker's test outputs, `test_outputs` of
    /// them, then the test batches.
    pub fn test_totals(&self) -> Result<Vec<f32>> {
        let buf = self.ps.read_keys(&self.test_keys(), Slack::BSP)?;
        let v = self.view.read(buf.device_ptr(), buf.len(), || buf.as_slice())?[..=self.layout.test_outputs].to_vec();
        buf.post()?;
        Ok(v)
    }

    pub fn stats(&self) -> Stats {
        self.ps.stats()
    }

    pub fn shutdown(&self) -> Result<()> {
        Ok(self.ps.shutdown()?)
    }

    /// Runs iteration `pass` of its clock: iter_size mini-batches (one
    /// seed each), forward and backward, and the solver's step. Returns the
    /// net's scalar outputs (the loss) averaged over the mini-batches, as
    /// Caffe reports them.
    pub fn iteration(&mut self, pass: usize, step: Step, seeds: &[u64]) -> Result<Vec<f32>> {
        let k = self.rule.iter_size.max(1) as usize;
        if seeds.len() != k {
            return Err(crate::error::Error::config(format!(
                "an iteration takes {k} seeds (iter_size), got {}",
                seeds.len()
            )));
        }
        let mut outputs = vec![0.0; self.net.outputs.len()];
        let mut sum_squares = 0.0;
        let mut index = 0;
        for (sub, &seed) in seeds.iter().enumerate() {
            index = (pass * k + sub) % self.passes.len();
            let out = self.mini_batch(index, step, seed, &mut sum_squares)?;
            for (o, v) in outputs.iter_mut().zip(out) {
                *o += v / k as f32;
            }
        }
        let clip = clip_factor(self.rule.clip_gradients, sum_squares);
        self.apply(index, Step { clip, ..step })?;
        Ok(outputs)
    }

    /// The update pass of an accumulating solver: each layer's summed
    /// gradient becomes its step; tables are clocked as recorded.
    fn apply(&self, index: usize, step: Step) -> Result<()> {
        let (ps, hv, slots) = (&self.ps, &self.view, self.rule.history_slots());
        for (p, c) in &self.passes[index].apply {
            let lp = &self.params.layers[*p];
            let read = c.read.map(|h| ps.read(h)).transpose()?;
            let mut update = c.update.map(|h| ps.pre_update(h)).transpose()?;
            let mut history = open(ps, &c.history)?;
            if let (Some(r), Some(u), Some(h)) =
                (read.as_ref(), update.as_mut(), history.as_mut().and_then(Held::single))
            {
                let w = hv.read(r.device_ptr(), r.len(), || r.as_slice())?;
                let mut g = hv.write(u.device_ptr(), u.len(), false, || u.as_mut_slice())?;
                let mut hist = hv.write(h.device_ptr(), h.len(), true, || h.as_mut_slice())?;
                let (states, sum) = hist[..(slots + 1) * lp.len].split_at_mut(slots * lp.len);
                g[..lp.len].copy_from_slice(sum);
                layer_delta(lp, &self.rule, step, &w[..lp.len], &mut g[..lp.len], states);
                hv.commit(g)?;
                hv.commit(hist)?;
            }
            if let Some(u) = update {
                u.update()?;
            }
            if let Some(h) = history {
                h.post()?;
            }
            if let Some(r) = read {
                r.post()?;
            }
            for &t in &c.clocks {
                ps.table_clock(t)?;
            }
        }
        Ok(())
    }

    /// Whether backward's solver step for layer `l` can run on the GPU:
    /// nothing to step, running statistics (scaled to this worker's share),
    /// or any solver stepping as each gradient is known (not one that
    /// accumulates the whole iteration's gradient first).
    fn solver_on_gpu(&self, l: &crate::net::NetLayer, _calls: &Pass) -> bool {
        l.param_len == 0 || is_statistics(l) || !self.accumulate
    }

    /// A Data layer's batch on the GPU: uploaded as stored and transformed
    /// there into the data top; labels into the label top.
    fn data_on_gpu(
        &self,
        li: usize,
        output: Option<&Held<'_>>,
        batch: &crate::data::transform::RawBatch,
    ) -> Result<()> {
        let (Some(gpu), Some(src)) = (self.gpu.as_ref(), &self.net.layers[li].data) else { return Ok(()) };
        let l = &self.net.layers[li];
        let (mut data, mut label) = (DevSlice::EMPTY, DevSlice::EMPTY);
        if let Some(b) = output {
            for (slot, s) in b.device() {
                match slot {
                    Slot::Data(x) if x == l.tops[0] => data = s,
                    Slot::Data(x) if l.tops.get(1) == Some(&x) => label = s,
                    _ => {}
                }
            }
        }
        gpu.transform(&src.transform, batch, data, label)?;
        gpu.sync()
    }

    /// An HDF5Data layer's batch on the GPU: its tops filled on the host as
    /// stored (no transform) and uploaded into the held top buffers.
    fn stored_on_gpu(&self, gpu: &Gpu, li: usize, output: Option<&Held<'_>>, idx: &[usize]) -> Result<()> {
        let l = &self.net.layers[li];
        let Some(src) = &l.data else { return Ok(()) };
        let mut host: Vec<Vec<f32>> = l.tops.iter().map(|&t| vec![0.0; self.net.blobs[t].count()]).collect();
        let mut tops: Vec<&mut [f32]> = host.iter_mut().map(Vec::as_mut_slice).collect();
        fill_tops(src, idx, true, 0, &mut tops)?;
        if let Some(b) = output {
            for (slot, s) in b.device() {
                let top = l.tops.iter().position(|&t| matches!(slot, Slot::Data(x) if x == t));
                if let Some(k) = top {
                    gpu.upload(&host[k], s)?;
                }
            }
        }
        gpu.sync()
    }

    /// Forward of layer `li` on the GPU over the held buffers (input,
    /// inout, output); the net outputs it writes go to `outputs`.
    #[allow(clippy::too_many_arguments)]
    fn forward_on_gpu(
        &self,
        gpu: &Gpu,
        li: usize,
        read: Option<&ReadBuffer<'_>>,
        buffers: [Option<&Held<'_>>; 3],
        seed: u64,
        outputs: &mut [f32],
    ) -> Result<()> {
        let net = self.net;
        let l = &net.layers[li];
        let w = read.map_or(DevSlice::EMPTY, |r| DevSlice::new(r.device_ptr().0, r.len()));
        let (io, aux) = device_io(buffers, false);
        gpu_pass::forward(gpu, net, li, w.prefix(l.param_len)?, &io, aux, true, seed)?;
        for &(x, s) in &io.data_out {
            if let Some(k) = net.outputs.iter().position(|&o| o == x) {
                outputs[k] = gpu.download(s.prefix(1)?)?[0];
            }
        }
        gpu.sync()
    }

    /// Backward of layer `li` on the GPU, then its solver step where the
    /// gradient lies (`grad`: the pre-update buffer; `history`: the
    /// solver's rows).
    #[allow(clippy::too_many_arguments)]
    fn backward_on_gpu(
        &self,
        gpu: &Gpu,
        li: usize,
        read: Option<&ReadBuffer<'_>>,
        buffers: [Option<&Held<'_>>; 3],
        grad: Option<DevSlice>,
        history: Option<DevSlice>,
        step: Step,
    ) -> Result<()> {
        let net = self.net;
        let l = &net.layers[li];
        let w = read.map_or(DevSlice::EMPTY, |r| DevSlice::new(r.device_ptr().0, r.len())).prefix(l.param_len)?;
        let (io, aux) = device_io(buffers, true);
        let grad = grad.map(|g| g.prefix(l.param_len)).transpose()?.unwrap_or(DevSlice::EMPTY);
        gpu_pass::backward(gpu, net, li, w, &io, aux, grad)?;
        if is_statistics(l) {
            // Running statistics: this worker's share of their change.
            gpu_pass::scale(gpu, grad, step.scale)?;
        } else if let (Some(p), Some(h)) = (self.params.index_of_layer(li), history) {
            gpu.solver_step(&self.params.layers[p], &self.rule, step, w, grad, h)?;
        }
        if !grad.is_empty() {
            let bad = gpu_pass::count_nonfinite(gpu, grad)?;
            if bad > 0 {
                return Err(Error::Diverged(format!(
                    "the update of layer `{}` ({}) has {bad} NaN or infinite value(s)",
                    l.name, l.type_name
                )));
            }
        }
        gpu.sync()
    }

    /// Forward and backward of recorded mini-batch `index`. A solver that
    /// accumulates adds the gradients into the history rows (and their sum
    /// of squares, on the iteration's last mini-batch, into `sum_squares`);
    /// otherwise each layer steps as its gradient is known.
    fn mini_batch(&mut self, index: usize, step: Step, seed: u64, sum_squares: &mut f64) -> Result<Vec<f32>> {
        let (ps, net, params) = (&self.ps, self.net, self.params);
        let (hv, rule, accumulate) = (&self.view, &self.rule, self.accumulate);
        let calls = &self.passes[index];
        let mut outputs = vec![0.0; net.outputs.len()];
        let open = |a: &Option<Access>| open(ps, a);
        for (li, l) in net.layers.iter().enumerate() {
            let c = &calls.forward[li];
            let read = c.read.map(|h| ps.read(h)).transpose()?;
            let input = open(&c.input)?;
            let mut inout = open(&c.inout)?;
            let mut output = open(&c.output)?;
            if let (Some(gpu), Some(src)) = (self.gpu.as_ref(), &l.data) {
                let idx = self.cursors[li].as_mut().map(|c| c.take(net.batch)).unwrap_or_default();
                let seed = crate::net::plain::layer_seed(seed, li);
                if matches!(*src.set, Source::Hdf5(_)) {
                    self.stored_on_gpu(gpu, li, output.as_ref(), &idx)?;
                } else {
                    let batch = src.set.raw_batch(&idx, &src.transform, true, seed, src.label_limit.get())?;
                    self.data_on_gpu(li, output.as_ref(), &batch)?;
                }
            } else if let Some(gpu) = self.gpu.as_ref().filter(|_| gpu_pass::runs_on_gpu(l)) {
                let buffers = [input.as_ref(), inout.as_ref(), output.as_ref()];
                let seed = crate::net::plain::layer_seed(seed, li);
                self.forward_on_gpu(gpu, li, read.as_ref(), buffers, seed, &mut outputs)?;
            } else {
                let w_view = read.as_ref().map(|r| hv.read(r.device_ptr(), r.len(), || r.as_slice())).transpose()?;
                let w: &[f32] = w_view.as_deref().map_or(&[], |v| &v[..l.param_len]);
                let in_view = input.as_ref().map(|b| b.read(hv)).transpose()?.unwrap_or_default();
                let mut inout_view = inout.as_mut().map(|b| b.write(hv)).transpose()?.unwrap_or_default();
                let mut out_view = output.as_mut().map(|b| b.write(hv)).transpose()?.unwrap_or_default();
                {
                    let mut io = Io::default();
                    let mut aux: &mut [f32] = &mut [];
                    for (slot, s) in &in_view {
                        if let Slot::Data(b) = *slot {
                            io.data_in.push((b, &s[..]));
                        }
                    }
                    for (slot, s) in inout_view.iter_mut().chain(out_view.iter_mut()) {
                        let s = &mut s[..];
                        match *slot {
                            Slot::Data(b) => io.data_out.push((b, s)),
                            Slot::Aux(_) => aux = s,
                            Slot::Diff(_) | Slot::History(_) => {}
                        }
                    }
                    if let Some(src) = &l.data {
                        let idx = self.cursors[li].as_mut().map(|c| c.take(net.batch)).unwrap_or_default();
                        let mut tops: Vec<&mut [f32]> = l.tops.iter().map(|_| Default::default()).collect();
                        for (b, s) in io.data_out {
                            if let Some(k) = l.tops.iter().position(|&t| t == b) {
                                tops[k] = s;
                            }
                        }
                        let seed = crate::net::plain::layer_seed(seed, li);
                        fill_tops(src, &idx, true, seed, &mut tops)?;
                    } else {
                        forward_layer(net, li, w, io, aux, true, crate::net::plain::layer_seed(seed, li));
                    }
                }
                for (slot, v) in out_view.iter().chain(inout_view.iter()) {
                    if let Slot::Data(b) = *slot {
                        if let Some(k) = net.outputs.iter().position(|&o| o == b) {
                            outputs[k] = v[0];
                        }
                    }
                }
                blob_access::commit(hv, out_view)?;
                blob_access::commit(hv, inout_view)?;
            }
            if let Some(gpu) = &self.gpu {
                gpu.ensure_idle(|| format!("forward of layer `{}`", l.name))?;
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
                let on_gpu = self.gpu.as_ref().filter(|_| gpu_pass::runs_on_gpu(l) && self.solver_on_gpu(l, calls));
                if let Some(gpu) = on_gpu {
                    let buffers = [input.as_ref(), inout.as_ref(), output.as_ref()];
                    let grad = update.as_ref().map(|u| DevSlice::new(u.device_ptr().0, u.len()));
                    let history =
                        history.as_mut().and_then(Held::single).map(|h| DevSlice::new(h.device_ptr().0, h.len()));
                    self.backward_on_gpu(gpu, li, read.as_ref(), buffers, grad, history, step)?;
                } else {
                    let w_view =
                        read.as_ref().map(|r| hv.read(r.device_ptr(), r.len(), || r.as_slice())).transpose()?;
                    let w: &[f32] = w_view.as_deref().map_or(&[], |v| &v[..l.param_len]);
                    let in_view = input.as_ref().map(|b| b.read(hv)).transpose()?.unwrap_or_default();
                    let mut inout_view = inout.as_mut().map(|b| b.write(hv)).transpose()?.unwrap_or_default();
                    let mut out_view = output.as_mut().map(|b| b.write(hv)).transpose()?.unwrap_or_default();
                    // pre_update buffers come zeroed: nothing to fetch.
                    let mut grad_view = update
                        .as_mut()
                        .map(|u| hv.write(u.device_ptr(), u.len(), false, || u.as_mut_slice()))
                        .transpose()?;
                    let mut history_view = history
                        .as_mut()
                        .and_then(Held::single)
                        .map(|h| hv.write(h.device_ptr(), h.len(), true, || h.as_mut_slice()))
                        .transpose()?;
                    {
                        let mut io = Io::default();
                        let mut aux: &[f32] = &[];
                        for (slot, s) in &in_view {
                            match *slot {
                                Slot::Data(b) => io.data_in.push((b, &s[..])),
                                Slot::Diff(b) => io.diff_in.push((b, &s[..])),
                                Slot::Aux(_) => aux = s,
                                Slot::History(_) => {}
                            }
                        }
                        for (slot, v) in inout_view.iter_mut().chain(out_view.iter_mut()) {
                            if let Slot::Diff(b) = *slot {
                                io.diff_out.push((b, &mut v[..]));
                            }
                        }
                        let mut scratch = Vec::new();
                        let grad: &mut [f32] = match grad_view.as_mut() {
                            Some(g) => &mut g[..l.param_len],
                            // Accumulating: the gradient goes to the history rows.
                            None if history_view.is_some() => {
                                scratch.resize(l.param_len, 0.0);
                                &mut scratch
                            }
                            None => &mut [],
                        };
                        backward_layer(net, li, w, io, aux, grad);
                        if is_statistics(l) {
                            // Running statistics: this worker's share of their change.
                            grad.iter_mut().for_each(|g| *g *= step.scale);
                        } else if let (Some(p), Some(h)) = (params.index_of_layer(li), history_view.as_mut()) {
                            let lp = &params.layers[p];
                            let states = rule.history_slots() * lp.len;
                            if accumulate {
                                let sum = &mut h[states..states + lp.len];
                                // The first of the blob's users that backward reaches starts the sum.
                                let (first_user, last_user) = backward_users(net, lp);
                                if calls.first && li == first_user {
                                    sum.copy_from_slice(grad);
                                } else {
                                    sum.iter_mut().zip(grad.iter()).for_each(|(s, g)| *s += g);
                                }
                                if calls.last && li == last_user && rule.clip_gradients.is_some() {
                                    *sum_squares += sumsq(lp, sum);
                                }
                            } else {
                                layer_delta(lp, rule, step, w, grad, &mut h[..states]);
                            }
                        }
                        if let Some(bad) = grad.iter().find(|v| !v.is_finite()) {
                            return Err(Error::Diverged(format!(
                                "the update of layer `{}` ({}) is {bad}",
                                l.name, l.type_name
                            )));
                        }
                    }
                    for v in [grad_view, history_view].into_iter().flatten() {
                        hv.commit(v)?;
                    }
                    blob_access::commit(hv, out_view)?;
                    blob_access::commit(hv, inout_view)?;
                }
                if let Some(gpu) = &self.gpu {
                    gpu.ensure_idle(|| format!("backward of layer `{}`", l.name))?;
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

/// Whether backward adds gradients into the history rows before one update
/// pass: the solver needs the whole gradient, or parameters are shared.
fn accumulates(rule: &Rule, params: &ParamLayout) -> bool {
    rule.accumulates() || params.has_sharing()
}

/// Of the layers using `lp`'s parameters and running backward, the one
/// backward reaches first (the highest) and last (the lowest).
fn backward_users(net: &Net, lp: &crate::net::params::LayerParams) -> (usize, usize) {
    let users = lp.users.iter().copied().filter(|&u| net.layers[u].backward);
    let lowest = users.clone().min().unwrap_or(lp.layer);
    (users.max().unwrap_or(lp.layer), lowest)
}

/// Whether a layer's parameters are running statistics that no solver
/// touches (BatchNorm's): they always update as their change is known.
fn is_statistics(l: &crate::net::NetLayer) -> bool {
    l.compute.as_ref().is_some_and(|c| c.param_grad_is_update())
}
