//! A net for one phase: the layers of a `NetParameter` that the phase
//! admits, wired by blob name, with shapes, in-place detection, and which
//! layers run backward and which blobs need gradients (Caffe's rules). It
//! must never own blob memory or run a layer (`layer_call` does).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::data::datum::decode_mean;
use crate::data::transform::{Mean, TransformConf};
use crate::data::{DataCache, LabelLimit, Source};
use crate::error::{Error, Result};
use crate::layers::split::Split;
use crate::layers::{self, count, Layer, ParamBlob, Shape};
use crate::net::infogain_source;
use crate::net::insert_splits;
use crate::net::sharing;
use crate::proto::net::{DataConf, LayerKind, LayerParam, NetParam, ParamSpec, Phase};
use crate::proto::net_state::NetState;
use crate::proto::solver::resolve;

#[derive(Debug, Clone)]
pub struct Blob {
    pub name: String,
    pub shape: Shape,
    /// Some layer writes a gradient into it.
    pub needs_diff: bool,
}

impl Blob {
    pub fn count(&self) -> usize {
        count(&self.shape)
    }
}

/// The data source of a Data layer.
pub struct DataSource {
    pub conf: DataConf,
    pub set: Arc<Source>,
    /// Caffe's transform of each image (from `transform_param`).
    pub transform: TransformConf,
    /// The class count labels must stay below, once `Net::check_labels` ran.
    pub label_limit: OnceLock<LabelLimit>,
}

pub struct NetLayer {
    pub name: String,
    pub type_name: &'static str,
    /// None for a Data layer.
    pub compute: Option<Box<dyn Layer>>,
    pub data: Option<DataSource>,
    pub bottoms: Vec<usize>,
    pub tops: Vec<usize>,
    /// An elementwise layer whose top is its bottom.
    pub in_place: bool,
    pub params: Vec<ParamBlob>,
    pub specs: Vec<ParamSpec>,
    /// The earlier layer whose parameters this one shares (`param { name }`).
    pub shares: Option<usize>,
    pub param_len: usize,
    pub aux_len: usize,
    /// Runs backward (needs it and contributes to a loss).
    pub backward: bool,
    /// Per bottom: backward writes its gradient.
    pub propagate: Vec<bool>,
    pub loss_weight: f32,
    /// Blobs read in forward, read and written in place, written.
    pub fwd_in: Vec<usize>,
    pub fwd_inout: Vec<usize>,
    pub fwd_out: Vec<usize>,
    /// Blob data read in backward; gradients read, updated in place, written.
    pub bwd_data_in: Vec<usize>,
    pub bwd_diff_in: Vec<usize>,
    pub bwd_diff_inout: Vec<usize>,
    pub bwd_diff_out: Vec<usize>,
    pub line: usize,
}

impl NetLayer {
    pub fn is_loss(&self) -> bool {
        self.compute.as_ref().is_some_and(|c| c.is_loss())
    }
}

pub struct Net {
    pub name: String,
    pub phase: Phase,
    pub blobs: Vec<Blob>,
    pub layers: Vec<NetLayer>,
    /// Images per forward pass (the Data layer's batch_size).
    pub batch: usize,
    /// Blobs no layer consumes: what the net reports (loss, accuracy).
    pub outputs: Vec<usize>,
}

/// Caffe lets layers share a name; weights are matched by layer name, so
/// two layers holding parameters of their own may not.
fn weights_by_name(param: &NetParam, layers: &[NetLayer]) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for l in layers.iter().filter(|l| !l.params.is_empty() && l.shares.is_none()) {
        if let Some(first) = seen.insert(&l.name, l.line) {
            return Err(at(
                param,
                l.line,
                format!(
                    "two layers named `{}` hold parameters (lines {first} and {}); weights are matched by layer \
                     name: give each its own name",
                    l.name, l.line
                ),
            ));
        }
    }
    Ok(())
}

fn at(param: &NetParam, line: usize, msg: impl Into<String>) -> Error {
    Error::Prototxt { file: param.file.clone(), line, msg: msg.into() }
}

/// Caffe's transform of a Data layer's images, its mean image loaded (a
/// relative `mean_file` against the current directory, else the net file's).
fn transform(conf: &DataConf) -> Result<TransformConf> {
    let mean = match &conf.mean_file {
        Some(file) => {
            let path = resolve(file, &conf.base_dir);
            let bytes =
                std::fs::read(&path).map_err(|e| Error::file(&path, format!("cannot read the mean_file: {e}")))?;
            let (channels, height, width, values) = decode_mean(&bytes, &path)?;
            Mean::Image { channels, height, width, values }
        }
        None if conf.mean_values.is_empty() => Mean::None,
        None => Mean::Values(conf.mean_values.clone()),
    };
    Ok(TransformConf { scale: conf.scale, mirror: conf.mirror, crop_size: conf.crop_size, mean })
}

/// The layer types whose second bottom holds class indices.
const CLASS_INDICES: [&str; 5] =
    ["SoftmaxWithLoss", "Accuracy", "MultinomialLogisticLoss", "InfogainLoss", "HingeLoss"];

/// Records a data layer's batch size: every data layer of a net has one.
fn one_batch(batch: &mut Option<usize>, size: usize) -> std::result::Result<(), &'static str> {
    match *batch {
        None => *batch = Some(size),
        Some(b) if b != size => return Err("two Data layers of one phase with different batch sizes"),
        Some(_) => {}
    }
    Ok(())
}

/// Layers that feed a net from outside it, without a dataset.
fn feeds(type_name: &str) -> bool {
    matches!(type_name, "Input" | "DummyData")
}

fn push_unique(v: &mut Vec<usize>, b: usize) {
    if !v.contains(&b) {
        v.push(b);
    }
}

impl Net {
    /// Builds the `phase` net (level 0, no stage); Data layers load (or
    /// reuse) their datasets.
    pub fn build(param: &NetParam, phase: Phase, cache: &DataCache) -> Result<Net> {
        Net::build_for(param, &NetState::phase(phase), cache)
    }

    /// Builds the net of a state (phase, level, stages), as Caffe's
    /// `NetState` selects layers by their include and exclude rules.
    pub fn build_for(param: &NetParam, state: &NetState, cache: &DataCache) -> Result<Net> {
        Net::build_with(param, state, cache, false)
    }

    /// As [`Net::build_for`], but every layer with a backward runs it,
    /// whether or not it leads to a loss, as Caffe's `time` calls each
    /// layer's Backward (a deploy net has no loss); top gradients nothing
    /// writes are zeros.
    pub fn build_all_backward(param: &NetParam, state: &NetState, cache: &DataCache) -> Result<Net> {
        Net::build_with(param, state, cache, true)
    }

    fn build_with(param: &NetParam, state: &NetState, cache: &DataCache, all_backward: bool) -> Result<Net> {
        let phase = state.phase;
        let mut blobs: Vec<Blob> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut layers: Vec<NetLayer> = Vec::new();
        // Per layer: its `param` blocks' sharing names.
        let mut share_names = Vec::new();
        let mut batch = None;
        // A net without Data layers: the first axis of its Input (or DummyData) layer's first top.
        let mut input_batch = None;
        // Blobs an HDF5Data layer reads from a file: where from, for errors of the layers that consume them.
        let mut origins: HashMap<String, String> = HashMap::new();
        let admitted: Vec<&LayerParam> = param.layers.iter().filter(|l| l.phases.admits_state(state)).collect();
        let wiring: Vec<_> = admitted.iter().map(|l| (l.name.as_str(), &l.bottoms[..], &l.tops[..])).collect();
        for pl in insert_splits::insert(&wiring) {
            let lp = admitted[pl.layer];
            let name = &pl.name;
            let type_name = if pl.split.is_some() { "Split" } else { lp.kind.type_name() };
            // An inserted Split has no settings of its own.
            let (lp_params, lp_loss_weight): (&[ParamSpec], &[f32]) =
                if pl.split.is_some() { (&[], &[]) } else { (&lp.params, &lp.loss_weight) };
            let mut bottoms = Vec::new();
            for b in &pl.bottoms {
                match by_name.get(b) {
                    Some(&i) => bottoms.push(i),
                    None => {
                        return Err(at(
                            param,
                            lp.line,
                            format!(
                                "layer `{name}` reads blob `{b}`, which no earlier {} layer produces",
                                phase.name()
                            ),
                        ))
                    }
                }
            }
            let bottom_shapes: Vec<Shape> = bottoms.iter().map(|&b| blobs[b].shape.clone()).collect();
            let (compute, data, top_shapes) = match (&lp.kind, pl.split) {
                (_, Some(n)) => {
                    if let Some(o) = pl.bottoms.first().and_then(|b| origins.get(b)).cloned() {
                        for t in &pl.tops {
                            origins.insert(t.clone(), o.clone());
                        }
                    }
                    let l: Box<dyn Layer> = Box::new(
                        Split::new(n, &bottom_shapes[0]).map_err(|e| at(param, lp.line, format!("`{name}`: {e}")))?,
                    );
                    let shapes = l.top_shapes();
                    (Some(l), None, shapes)
                }
                (LayerKind::Data(conf), None) if conf.hdf5.is_some() => {
                    if !bottoms.is_empty() {
                        return Err(at(param, lp.line, format!("HDF5Data layer `{name}` takes no bottom")));
                    }
                    let set = cache.get(conf).map_err(|e| at(param, lp.line, format!("layer `{name}`: {e}")))?;
                    let Source::Hdf5(h5) = &*set else {
                        return Err(at(
                            param,
                            lp.line,
                            format!("layer `{name}`: its source is not a list of .h5 files"),
                        ));
                    };
                    let shapes = h5.top_shapes(conf.batch_size);
                    for (k, t) in pl.tops.iter().enumerate() {
                        origins.insert(t.clone(), format!("HDF5Data layer `{name}`'s {}", h5.describe(k)));
                    }
                    one_batch(&mut batch, conf.batch_size).map_err(|e| at(param, lp.line, e))?;
                    let transform = TransformConf::default();
                    (
                        None,
                        Some(DataSource { conf: conf.clone(), set, transform, label_limit: OnceLock::new() }),
                        shapes,
                    )
                }
                (LayerKind::Data(conf), None) => {
                    // Caffe's data layers output the label only when given a second top.
                    if !bottoms.is_empty() || !(1..=2).contains(&pl.tops.len()) {
                        return Err(at(
                            param,
                            lp.line,
                            format!("Data layer `{name}` needs no bottom and one or two tops (data, and the label)"),
                        ));
                    }
                    let set = cache.get(conf).map_err(|e| at(param, lp.line, format!("layer `{name}`: {e}")))?;
                    let transform = transform(conf).map_err(|e| at(param, lp.line, format!("layer `{name}`: {e}")))?;
                    let (c, h, w) =
                        set.image_shape(&transform).map_err(|e| at(param, lp.line, format!("layer `{name}`: {e}")))?;
                    let shapes = [vec![conf.batch_size, c, h, w], vec![conf.batch_size]][..pl.tops.len()].to_vec();
                    one_batch(&mut batch, conf.batch_size).map_err(|e| at(param, lp.line, e))?;
                    (
                        None,
                        Some(DataSource { conf: conf.clone(), set, transform, label_limit: OnceLock::new() }),
                        shapes,
                    )
                }
                (kind, None) => {
                    let loaded = infogain_source::with_matrix(kind).map_err(|e| at(param, lp.line, e))?;
                    let kind = loaded.as_ref().unwrap_or(kind);
                    let l = layers::build(kind, &bottom_shapes, phase == Phase::Train).map_err(|e| {
                        let from: Vec<String> = pl
                            .bottoms
                            .iter()
                            .filter_map(|b| origins.get(b).map(|o| format!("; bottom `{b}` is {o}")))
                            .collect();
                        at(param, lp.line, format!("{} layer `{name}`: {e}{}", kind.type_name(), from.concat()))
                    })?;
                    let shapes = l.top_shapes();
                    if feeds(l.type_name()) && input_batch.is_none() {
                        input_batch = shapes.first().and_then(|s| s.first()).copied();
                    }
                    (Some(l), None, shapes)
                }
            };
            if top_shapes.len() != pl.tops.len() {
                return Err(at(
                    param,
                    lp.line,
                    format!(
                        "layer `{name}` has {} top(s); a {} layer makes {}",
                        pl.tops.len(),
                        type_name,
                        top_shapes.len()
                    ),
                ));
            }
            let elementwise = compute.as_ref().is_some_and(|c| c.elementwise());
            let mut in_place = false;
            let mut tops = Vec::new();
            for (t, shape) in pl.tops.iter().zip(top_shapes) {
                match by_name.get(t) {
                    Some(&i) if pl.bottoms.len() == 1 && &pl.bottoms[0] == t && elementwise => {
                        in_place = true;
                        tops.push(i);
                    }
                    Some(_) if pl.bottoms.contains(t) => {
                        return Err(at(
                            param,
                            lp.line,
                            format!("layer `{name}` ({}) cannot run in place on `{t}`", type_name),
                        ))
                    }
                    Some(_) if lp.bottoms.contains(t) => {
                        return Err(at(
                            param,
                            lp.line,
                            format!(
                                "layer `{name}` works in place on `{t}`, which an earlier layer also reads; \
                                 give its top a new name"
                            ),
                        ))
                    }
                    Some(_) => {
                        return Err(at(
                            param,
                            lp.line,
                            format!("blob `{t}` is produced twice (again by layer `{name}`)"),
                        ))
                    }
                    None => {
                        by_name.insert(t.clone(), blobs.len());
                        tops.push(blobs.len());
                        blobs.push(Blob { name: t.clone(), shape, needs_diff: false });
                    }
                }
            }
            let params = compute.as_ref().map(|c| c.param_blobs()).unwrap_or_default();
            if lp_params.len() > params.len() {
                return Err(at(
                    param,
                    lp.line,
                    format!(
                        "layer `{name}` has {} `param` blocks but only {} parameter blob(s)",
                        lp_params.len(),
                        params.len()
                    ),
                ));
            }
            let specs: Vec<ParamSpec> =
                (0..params.len()).map(|i| lp_params.get(i).copied().unwrap_or_default()).collect();
            let is_loss = compute.as_ref().is_some_and(|c| c.is_loss());
            let loss_weight = match (lp_loss_weight, is_loss) {
                ([], true) => 1.0,
                ([w], true) => *w,
                ([], false) => 0.0,
                (w, false) if w.iter().all(|x| *x == 0.0) => 0.0,
                _ => {
                    return Err(at(
                        param,
                        lp.line,
                        format!("layer `{name}`: loss_weight is supported on one loss top only"),
                    ))
                }
            };
            let param_len = params.iter().map(|p| count(&p.shape)).sum();
            let aux_len = compute.as_ref().map_or(0, |c| c.aux_len());
            let n = bottoms.len();
            layers.push(NetLayer {
                name: name.clone(),
                type_name,
                compute,
                data,
                bottoms,
                tops,
                in_place,
                params,
                specs,
                shares: None,
                param_len,
                aux_len,
                backward: false,
                propagate: vec![false; n],
                loss_weight,
                fwd_in: Vec::new(),
                fwd_inout: Vec::new(),
                fwd_out: Vec::new(),
                bwd_data_in: Vec::new(),
                bwd_diff_in: Vec::new(),
                bwd_diff_inout: Vec::new(),
                bwd_diff_out: Vec::new(),
                line: lp.line,
            });
            share_names.push(if pl.split.is_some() { Vec::new() } else { lp.shares.clone() });
        }
        let mut views: Vec<sharing::View> = layers
            .iter()
            .map(|l| sharing::View {
                name: l.name.clone(),
                type_name: l.type_name,
                line: l.line,
                shapes: l.params.iter().map(|p| p.shape.clone()).collect(),
                specs: l.specs.clone(),
                statistics: l.compute.as_ref().is_some_and(|c| c.param_grad_is_update()),
                shares: None,
            })
            .collect();
        sharing::resolve(&mut views, &share_names, &param.file)?;
        for (l, v) in layers.iter_mut().zip(views) {
            (l.specs, l.shares) = (v.specs, v.shares);
        }
        weights_by_name(param, &layers)?;
        let Some(batch) = batch.or(input_batch) else {
            return Err(at(
                param,
                1,
                format!(
                    "the {} net has no Data or Input layer; add one (a deploy file: `layer {{ name: \"data\" type: \"Input\" \
                     top: \"data\" input_param {{ shape {{ dim: 1 dim: 3 dim: 227 dim: 227 }} }} }}`)",
                    phase.name()
                ),
            ));
        };
        if layers.len() < 2 {
            return Err(at(param, 1, format!("the {} net has nothing to compute", phase.name())));
        }
        let mut net = Net { name: param.name.clone(), phase, blobs, layers, batch, outputs: Vec::new() };
        net.plan_backward(all_backward);
        net.plan_io();
        net.outputs = (0..net.blobs.len())
            .filter(|&b| {
                let consumed = net.layers.iter().any(|l| !l.in_place && l.bottoms.contains(&b));
                let produced_by_data =
                    net.layers.iter().any(|l| (l.data.is_some() || feeds(l.type_name)) && l.tops.contains(&b));
                !consumed && !produced_by_data
            })
            .collect();
        Ok(net)
    }

    /// Caffe's rules: a layer needs backward if it has learnable parameters
    /// or a bottom that needs it, and runs it only if it contributes to a loss.
    /// Every blob has one reader (Split layers copy shared ones), so each
    /// gradient has one writer. `all`: every layer that needs backward runs
    /// it, loss or not (timing), its top gradients kept (zeros if unwritten).
    fn plan_backward(&mut self, all: bool) {
        let mut blob_needs = vec![false; self.blobs.len()];
        let mut needs = vec![false; self.layers.len()];
        for (i, l) in self.layers.iter().enumerate() {
            // Running statistics (BatchNorm) change in backward, like weights.
            let learns = l.specs.iter().any(|s| s.lr_mult != 0.0)
                || l.compute.as_ref().is_some_and(|c| c.param_grad_is_update());
            needs[i] = l.compute.is_some() && (learns || l.bottoms.iter().any(|&b| blob_needs[b]));
            for &t in &l.tops {
                blob_needs[t] = blob_needs[t] || needs[i];
            }
        }
        let mut contributes = vec![false; self.layers.len()];
        let mut blob_contributes = vec![false; self.blobs.len()];
        for i in (0..self.layers.len()).rev() {
            let l = &self.layers[i];
            let has_bwd = l.compute.as_ref().is_some_and(|c| c.has_backward());
            contributes[i] = has_bwd && (all || l.loss_weight != 0.0 || l.tops.iter().any(|&t| blob_contributes[t]));
            if contributes[i] {
                for &b in &l.bottoms {
                    blob_contributes[b] = true;
                }
            }
        }
        for (i, l) in self.layers.iter_mut().enumerate() {
            l.backward = needs[i] && contributes[i];
            if all && l.backward {
                for &t in &l.tops {
                    self.blobs[t].needs_diff = true;
                }
            }
            for (k, &b) in l.bottoms.iter().enumerate() {
                l.propagate[k] = l.backward && blob_needs[b];
                if l.propagate[k] {
                    self.blobs[b].needs_diff = true;
                }
            }
        }
    }

    /// Which blobs each layer reads and writes, in forward and backward.
    fn plan_io(&mut self) {
        let blobs = &self.blobs;
        for l in &mut self.layers {
            if l.in_place {
                l.fwd_inout.push(l.tops[0]);
            } else {
                for &b in &l.bottoms {
                    push_unique(&mut l.fwd_in, b);
                }
                for &t in &l.tops {
                    push_unique(&mut l.fwd_out, t);
                }
            }
            if !l.backward {
                continue;
            }
            let Some(c) = &l.compute else { continue };
            let reads = c.backward_reads();
            for (k, &b) in l.bottoms.iter().enumerate() {
                if reads.bottoms.get(k).copied().unwrap_or(false) {
                    push_unique(&mut l.bwd_data_in, b);
                }
            }
            if reads.tops {
                for &t in &l.tops {
                    push_unique(&mut l.bwd_data_in, t);
                }
            }
            if l.in_place {
                l.bwd_diff_inout.push(l.tops[0]);
                continue;
            }
            if reads.top_diffs || c.elementwise() {
                // A top no layer sends a gradient to has none (a Split copy
                // feeding a branch outside every loss): the layer reads it as empty.
                for &t in l.tops.iter().filter(|&&t| blobs[t].needs_diff) {
                    push_unique(&mut l.bwd_diff_in, t);
                }
            }
            for (k, &b) in l.bottoms.iter().enumerate() {
                if l.propagate[k] {
                    push_unique(&mut l.bwd_diff_out, b);
                }
            }
        }
    }

    pub fn blob(&self, name: &str) -> Option<usize> {
        self.blobs.iter().position(|b| b.name == name)
    }

    /// The largest class count any layer reading its second bottom as
    /// class indices accepts, so labels can be checked against it: before
    /// training where the data's labels are known, else (an LMDB, HDF5
    /// datasets) by every batch. A layer reading it as values (EuclideanLoss
    /// or SigmoidCrossEntropyLoss targets) sets no limit.
    pub fn check_labels(&self) -> Result<()> {
        let data = self.layers.iter().find_map(|l| l.data.as_ref().map(|d| (l, d)));
        let Some((dl, src)) = data else { return Ok(()) };
        let classes = src.set.classes();
        // The label blob and the copies Split layers make of it.
        let Some(&label) = dl.tops.get(1) else { return Ok(()) };
        let mut labels = vec![label];
        for l in self.layers.iter().filter(|l| l.type_name == "Split") {
            if labels.contains(&l.bottoms[0]) {
                labels.extend(&l.tops);
            }
        }
        for l in self.layers.iter().filter(|l| CLASS_INDICES.contains(&l.type_name)) {
            if l.bottoms.get(1).is_some_and(|b| labels.contains(b)) {
                let scores = &self.blobs[l.bottoms[0]];
                let c = scores.count() / self.batch;
                match classes {
                    Some(classes) if classes > c => {
                        return Err(Error::config(format!(
                            "{}: labels go up to {} but layer `{}` scores only {c} classes; raise the last num_output",
                            src.set.path().display(),
                            classes - 1,
                            l.name
                        )))
                    }
                    // Unknown up front (an LMDB): every batch checks its labels.
                    _ => {
                        if src.label_limit.get().is_none_or(|lim| c < lim.classes) {
                            let _ = src.label_limit.set(LabelLimit { classes: c, layer: l.name.clone() });
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
