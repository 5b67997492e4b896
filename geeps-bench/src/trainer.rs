//! The emulated trainer: paper Algorithm 1 over a scaled workload. Forward,
//! layer by layer: read the layer's parameters, access its input blob and
//! (without fetching) its output blob, compute, post. Backward, top down:
//! read and pre-update the parameters, access the output blob (data and the
//! diff from above) and the input blob (whose diff it writes), compute,
//! update, post (the output as dead: the next forward pass overwrites it),
//! and clock the layer's table right after its update.
//!
//! Compute is a sleep of the layer's emulated time on an emulated GPU
//! (`emulated_gpu.rs`): a GPU computes without the CPU, so the host's cores
//! stay free for geeps, as they would be.
//! Every geeps mechanism runs for real on the host device.
//!
//! Three modes:
//! - `PerLayer`: geeps as in the paper, one parameter table per layer.
//! - `SingleTable`: every layer's parameters in one table, clocked once at
//!   the end of the backward pass (the paper's GeePS-single-table).
//! - `CpuPs`: the paper's CPU-PS built from the same code. Nothing is
//!   recorded, so the planner pins nothing: the parameter cache lives in host
//!   memory, and parameters are read and pre-updated with keyed (slow-path)
//!   calls, served on the trainer's thread: no prefetch, copies in the
//!   foreground. Activations stay in the application's own device memory, as
//!   in the paper's Figure 5, so blobs make no geeps calls. Updates are still
//!   applied by geeps' reclaimer thread.
//!
//! It owns the call sequence and the timing of one worker, down to the time
//! spent in each acquiring call site; it never decides budgets or
//! aggregates ranks.

use std::collections::HashMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use geeps::{keys, Geeps, Handle, RowKey, Slack, TableId};
use serde::{Deserialize, Serialize};

use geeps::Result;

use crate::emulated_gpu::EmulatedGpu;
use crate::workload::Workload;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    PerLayer,
    SingleTable,
    CpuPs,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::PerLayer, Mode::SingleTable, Mode::CpuPs];

    pub fn label(self) -> &'static str {
        match self {
            Mode::PerLayer => "GeePS",
            Mode::SingleTable => "GeePS-single-table",
            Mode::CpuPs => "CPU-PS",
        }
    }
}

/// Staleness bound: `None` is unbounded (asynchronous).
pub fn slack_of(slack: Option<u32>) -> Slack {
    match slack {
        Some(s) => Slack::Bounded(s),
        None => Slack::Unbounded,
    }
}

pub fn slack_label(slack: Option<u32>) -> String {
    match slack {
        Some(s) => format!("slack {s}"),
        None => "slack inf".into(),
    }
}

/// Declared tables and their keys.
struct Tables {
    /// Per layer: parameter keys (empty when the layer has none).
    params: Vec<Vec<RowKey>>,
    /// Per layer: the table to clock after its update, in per-layer mode.
    layer_clock: Vec<Option<TableId>>,
    /// The single table, clocked after the backward pass.
    single: Option<TableId>,
    /// Blob 0 is the input; blob `i + 1` is written by layer `i`.
    blobs: Vec<Blob>,
}

/// A blob's rows, data and diff apart, as Caffe keeps them: the forward
/// pass touches only the data, and a diff is written whole by the backward
/// pass before it is read.
struct Blob {
    data: Vec<RowKey>,
    /// Empty for the input blob: nothing computes the data layer's diff.
    diff: Vec<RowKey>,
}

fn declare(b: &mut geeps::GeepsBuilder, w: &Workload, mode: Mode) -> Tables {
    let mut params = Vec::new();
    let mut layer_clock = Vec::new();
    let mut single = None;
    if mode == Mode::SingleTable {
        let total: u32 = w.layers.iter().map(|l| l.param_rows).sum();
        let t = b.parameter_table("params", total);
        single = Some(t);
        let mut at = 0;
        for l in &w.layers {
            let range: Range<u32> = at..at + l.param_rows;
            at = range.end;
            params.push(keys(t, range));
            layer_clock.push(None);
        }
    } else {
        for l in &w.layers {
            if l.param_rows == 0 {
                params.push(Vec::new());
                layer_clock.push(None);
            } else {
                let t = b.parameter_table(&l.name, l.param_rows);
                params.push(keys(t, 0..l.param_rows));
                layer_clock.push(Some(t));
            }
        }
    }
    let mut blobs = Vec::new();
    if mode != Mode::CpuPs {
        let input = b.local_table("input", w.input_rows);
        blobs.push(Blob { data: keys(input, 0..w.input_rows), diff: Vec::new() });
        for l in &w.layers {
            let t = b.local_table(&format!("{}.blob", l.name), l.blob_rows);
            let half = l.blob_rows / 2;
            blobs.push(Blob { data: keys(t, 0..half), diff: keys(t, half..l.blob_rows) });
        }
    }
    Tables { params, layer_clock, single, blobs }
}

struct Forward {
    read: Option<Handle>,
    input: Handle,
    output: Handle,
}

struct Backward {
    read: Option<Handle>,
    update: Option<Handle>,
    output_data: Handle,
    output_diff: Handle,
    input_data: Handle,
    /// `None` for the first layer: the input blob has no diff.
    input_diff: Option<Handle>,
}

/// The recorded virtual iteration (per-layer and single-table modes).
struct Recorded {
    forward: Vec<Forward>,
    backward: Vec<Backward>,
}

fn record(ps: &Geeps, t: &Tables, slack: Slack) -> Result<Recorded> {
    let n = t.params.len();
    let mut forward = Vec::with_capacity(n);
    for i in 0..n {
        let read = if t.params[i].is_empty() { None } else { Some(ps.virtual_read(&t.params[i], slack)?) };
        let input = ps.virtual_local_access(&t.blobs[i].data, true)?;
        let output = ps.virtual_local_access(&t.blobs[i + 1].data, false)?;
        ps.virtual_post_local_access(output, true)?;
        ps.virtual_post_local_access(input, false)?;
        if let Some(r) = read {
            ps.virtual_post_read(r)?;
        }
        forward.push(Forward { read, input, output });
    }
    let mut backward = Vec::with_capacity(n);
    for i in (0..n).rev() {
        let has = !t.params[i].is_empty();
        let read = if has { Some(ps.virtual_read(&t.params[i], slack)?) } else { None };
        let update = if has { Some(ps.virtual_pre_update(&t.params[i])?) } else { None };
        let output_data = ps.virtual_local_access(&t.blobs[i + 1].data, true)?;
        let output_diff = ps.virtual_local_access(&t.blobs[i + 1].diff, true)?;
        let input_data = ps.virtual_local_access(&t.blobs[i].data, true)?;
        let input_diff = match &t.blobs[i].diff {
            d if d.is_empty() => None,
            d => Some(ps.virtual_local_access(d, false)?),
        };
        if let Some(u) = update {
            ps.virtual_update(u)?;
        }
        // The output (data, and the diff from above) is dead until the next
        // forward pass writes it: nothing to save, not even its diff.
        ps.virtual_discard_local_access(output_data)?;
        ps.virtual_discard_local_access(output_diff)?;
        ps.virtual_post_local_access(input_data, false)?;
        if let Some(d) = input_diff {
            ps.virtual_post_local_access(d, true)?;
        }
        if let Some(r) = read {
            ps.virtual_post_read(r)?;
        }
        if let Some(table) = t.layer_clock[i] {
            ps.virtual_table_clock(table)?;
        }
        backward.push(Backward { read, update, output_data, output_diff, input_data, input_diff });
    }
    if let Some(table) = t.single {
        ps.virtual_table_clock(table)?;
    }
    Ok(Recorded { forward, backward })
}

/// One trainer: a geeps instance with its tables and recording.
pub struct Trainer<'a> {
    ps: &'a Geeps,
    w: &'a Workload,
    tables: Tables,
    recorded: Option<Recorded>,
    slack: Slack,
    waits: Waits,
    gpu: EmulatedGpu,
}

/// Declares the tables of `w` on `b`; `Trainer::start` then records and starts.
pub fn prepare(b: &mut geeps::GeepsBuilder, w: &Workload, mode: Mode) -> PreparedTables {
    PreparedTables(declare(b, w, mode), mode)
}

/// Tables declared on a builder, waiting for the instance.
pub struct PreparedTables(Tables, Mode);

impl<'a> Trainer<'a> {
    /// Records the virtual iteration (except for CPU-PS) and starts the engine.
    pub fn start(ps: &'a Geeps, w: &'a Workload, prepared: PreparedTables, slack: Slack) -> Result<Self> {
        let PreparedTables(tables, mode) = prepared;
        let recorded = if mode == Mode::CpuPs { None } else { Some(record(ps, &tables, slack)?) };
        ps.finish_virtual_iteration()?;
        Ok(Trainer { ps, w, tables, recorded, slack, waits: Waits::default(), gpu: EmulatedGpu::default() })
    }

    /// One training iteration; returns its compute time.
    pub fn iteration(&mut self) -> Result<Duration> {
        let ps = self.ps;
        let mut waits = std::mem::take(&mut self.waits);
        let mut gpu = std::mem::take(&mut self.gpu);
        let busy = match &self.recorded {
            Some(r) => self.recorded_iteration(ps, r, &mut waits, &mut gpu),
            None => self.keyed_iteration(ps, &mut waits, &mut gpu),
        };
        self.waits = waits;
        self.gpu = gpu;
        busy
    }

    /// Time spent in each call site since the last `take_waits`, longest first.
    pub fn take_waits(&mut self) -> Vec<(String, Duration)> {
        let mut v: Vec<(String, Duration)> = std::mem::take(&mut self.waits)
            .into_iter()
            .map(|((pass, layer, call), d)| (format!("{pass} {} {call}", self.w.layers[layer].name), d))
            .collect();
        v.sort_by_key(|w| std::cmp::Reverse(w.1));
        v
    }

    fn recorded_iteration(
        &self,
        ps: &Geeps,
        r: &Recorded,
        waits: &mut Waits,
        gpu: &mut EmulatedGpu,
    ) -> Result<Duration> {
        let mut busy = Duration::ZERO;
        for (i, (l, f)) in self.w.layers.iter().zip(&r.forward).enumerate() {
            let params = f.read.map(|h| waits.time(("forward", i, "read"), || ps.read(h))).transpose()?;
            let input = waits.time(("forward", i, "local_access input"), || ps.local_access(f.input))?;
            let output = waits.time(("forward", i, "local_access output"), || ps.local_access(f.output))?;
            busy += gpu.compute(l.forward_us);
            output.post()?;
            input.post()?;
            if let Some(p) = params {
                p.post()?;
            }
        }
        let n = self.w.layers.len();
        for (k, b) in r.backward.iter().enumerate() {
            let i = n - 1 - k;
            let params = b.read.map(|h| waits.time(("backward", i, "read"), || ps.read(h))).transpose()?;
            let delta = b.update.map(|h| waits.time(("backward", i, "pre_update"), || ps.pre_update(h))).transpose()?;
            let output_data = waits.time(("backward", i, "local_access output"), || ps.local_access(b.output_data))?;
            let output_diff =
                waits.time(("backward", i, "local_access output diff"), || ps.local_access(b.output_diff))?;
            let input_data = waits.time(("backward", i, "local_access input"), || ps.local_access(b.input_data))?;
            let input_diff = b
                .input_diff
                .map(|h| waits.time(("backward", i, "local_access input diff"), || ps.local_access(h)))
                .transpose()?;
            busy += gpu.compute(self.w.layers[i].backward_us);
            if let Some(d) = delta {
                d.update()?;
            }
            output_data.discard()?;
            output_diff.discard()?;
            input_data.post()?;
            if let Some(d) = input_diff {
                d.post()?;
            }
            if let Some(p) = params {
                p.post()?;
            }
            if let Some(table) = self.tables.layer_clock[i] {
                ps.table_clock(table)?;
            }
        }
        if let Some(table) = self.tables.single {
            ps.table_clock(table)?;
        }
        Ok(busy)
    }

    fn keyed_iteration(&self, ps: &Geeps, waits: &mut Waits, gpu: &mut EmulatedGpu) -> Result<Duration> {
        let mut busy = Duration::ZERO;
        for (i, (l, k)) in self.w.layers.iter().zip(&self.tables.params).enumerate() {
            let params = if k.is_empty() {
                None
            } else {
                Some(waits.time(("forward", i, "read"), || ps.read_keys(k, self.slack))?)
            };
            busy += gpu.compute(l.forward_us);
            if let Some(p) = params {
                p.post()?;
            }
        }
        for i in (0..self.w.layers.len()).rev() {
            let k = &self.tables.params[i];
            let (params, delta) = if k.is_empty() {
                (None, None)
            } else {
                let p = waits.time(("backward", i, "read"), || ps.read_keys(k, self.slack))?;
                (Some(p), Some(waits.time(("backward", i, "pre_update"), || ps.pre_update_keys(k))?))
            };
            busy += gpu.compute(self.w.layers[i].backward_us);
            if let Some(d) = delta {
                d.update()?;
            }
            if let Some(p) = params {
                p.post()?;
            }
            if let Some(table) = self.tables.layer_clock[i] {
                ps.table_clock(table)?;
            }
        }
        Ok(busy)
    }
}

/// Time the application spent in each acquiring call site: (pass, layer, call).
#[derive(Default)]
struct Waits(HashMap<(&'static str, usize, &'static str), Duration>);

impl Waits {
    fn time<T>(&mut self, site: (&'static str, usize, &'static str), f: impl FnOnce() -> Result<T>) -> Result<T> {
        let start = Instant::now();
        let r = f();
        *self.0.entry(site).or_default() += start.elapsed();
        r
    }

    fn into_iter(self) -> impl Iterator<Item = ((&'static str, usize, &'static str), Duration)> {
        self.0.into_iter()
    }
}
