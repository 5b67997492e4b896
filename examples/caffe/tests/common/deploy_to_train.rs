//! Training a published deploy file the way a user does: its input (an
//! `Input` layer, or the net-level `input` with `input_dim` or
//! `input_shape`) is replaced by a Data layer over an LMDB of random images
//! of the input's size (`substitute::random_lmdb`), and a `SoftmaxWithLoss`
//! on the net's last top (the top no later layer reads; when that top is a
//! `Softmax`'s, the Softmax's bottom, as users put the loss on the logits)
//! is appended; in a V1-format file (`layers` with enum types) both are
//! written as V1 layers. A deploy file names no fillers where it expects
//! published weights, so training starts from stand-in weights (random,
//! He-scaled, with BatchNorm statistics of the data), as a user fine-tunes
//! from the published ones. It owns those edits, the stand-in weights and
//! a small CPU SGD solver; it never edits, drops or reorders any other
//! layer or field of the net it trains (only the throwaway copy that
//! computes the stand-in BatchNorm statistics sets `use_global_stats: false`).

use std::ops::Range;
use std::path::{Path, PathBuf};

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{build_nets, train, TrainOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::substitute::{self, Images};

/// One field of a prototxt message: `key: value` or `key { ... }`.
#[derive(Debug)]
struct Field {
    key: String,
    /// A scalar's text without quotes, or a block's inner range.
    value: Value,
    /// The whole field, key to closing brace or value's end.
    span: Range<usize>,
}

#[derive(Debug)]
enum Value {
    Scalar(String),
    Block(Range<usize>),
}

/// The fields of `text[range]` at its own level (nested blocks are one
/// field each); comments and strings are skipped as the prototxt reader does.
fn fields(text: &str, range: Range<usize>) -> Vec<Field> {
    let b = text.as_bytes();
    let mut i = range.start;
    let mut out = Vec::new();
    let skip = |mut i: usize| {
        while i < range.end {
            match b[i] {
                b'#' => i = text[i..range.end].find('\n').map_or(range.end, |n| i + n),
                c if c.is_ascii_whitespace() || c == b';' || c == b',' => i += 1,
                _ => break,
            }
        }
        i
    };
    loop {
        i = skip(i);
        if i >= range.end {
            return out;
        }
        let start = i;
        while i < range.end && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        assert!(
            i > start,
            "prototxt: expected a field name at byte {start}: {:?}",
            &text[start..range.end.min(start + 40)]
        );
        let key = text[start..i].to_string();
        i = skip(i);
        if i < range.end && b[i] == b':' {
            i = skip(i + 1);
        }
        assert!(i < range.end, "prototxt: `{key}` has no value");
        let value = match b[i] {
            b'{' => {
                let close = matching_brace(text, i);
                let inner = i + 1..close;
                i = close + 1;
                Value::Block(inner)
            }
            q @ (b'"' | b'\'') => {
                let mut j = i + 1;
                while j < range.end && b[j] != q {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let s = text[i + 1..j].to_string();
                i = j + 1;
                Value::Scalar(s)
            }
            b'[' => {
                let close = text[i..range.end].find(']').map_or(range.end, |n| i + n);
                let s = text[i..=close].to_string();
                i = close + 1;
                Value::Scalar(s)
            }
            _ => {
                let s = i;
                while i < range.end && !b[i].is_ascii_whitespace() && !b"#;,{}".contains(&b[i]) {
                    i += 1;
                }
                Value::Scalar(text[s..i].to_string())
            }
        };
        out.push(Field { key, value, span: start..i });
    }
}

/// The index of the `}` closing the `{` at `open` (strings and comments skipped).
fn matching_brace(text: &str, open: usize) -> usize {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, open);
    while i < b.len() {
        match b[i] {
            b'#' => i = text[i..].find('\n').map_or(b.len(), |n| i + n),
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    panic!("prototxt: the `{{` at byte {open} is never closed");
}

fn scalars<'a>(fs: &'a [Field], key: &str) -> Vec<&'a str> {
    fs.iter()
        .filter(|f| f.key == key)
        .filter_map(|f| match &f.value {
            Value::Scalar(s) => Some(s.as_str()),
            Value::Block(_) => None,
        })
        .collect()
}

fn block<'a>(fs: &'a [Field], key: &str) -> Option<&'a Range<usize>> {
    fs.iter().find(|f| f.key == key).and_then(|f| match &f.value {
        Value::Block(r) => Some(r),
        Value::Scalar(_) => None,
    })
}

fn dims(text: &str, shape: &Range<usize>) -> Vec<usize> {
    let fs = fields(text, shape.clone());
    scalars(&fs, "dim").iter().map(|d| d.parse().unwrap_or_else(|_| panic!("input dim `{d}`"))).collect()
}

/// A layer's name, type, bottoms and tops.
struct Layer {
    name: String,
    kind: String,
    bottoms: Vec<String>,
    tops: Vec<String>,
    span: Range<usize>,
    body: Range<usize>,
}

/// The layer field's name: `layers` in a V1-format file, else `layer`.
fn layer_key(top: &[Field]) -> &'static str {
    if top.iter().any(|f| f.key == "layers") {
        "layers"
    } else {
        "layer"
    }
}

fn layers(text: &str, top: &[Field]) -> Vec<Layer> {
    let key = layer_key(top);
    top.iter()
        .filter(|f| f.key == key)
        .map(|f| {
            let Value::Block(body) = &f.value else { panic!("prototxt: `layer` without a block") };
            let fs = fields(text, body.clone());
            let one = |k: &str| scalars(&fs, k).first().map(|s| s.to_string()).unwrap_or_default();
            let many = |k: &str| scalars(&fs, k).iter().map(|s| s.to_string()).collect();
            Layer {
                name: one("name"),
                kind: one("type"),
                bottoms: many("bottom"),
                tops: many("top"),
                span: f.span.clone(),
                body: body.clone(),
            }
        })
        .collect()
}

/// The deploy file's one input: its blob name, N×C×H×W shape, and the
/// spans of the fields that declare it.
fn input(text: &str, top: &[Field], layers: &[Layer]) -> (String, Vec<usize>, Vec<Range<usize>>) {
    let names = scalars(top, "input");
    let inputs: Vec<&Layer> = layers.iter().filter(|l| l.kind == "Input").collect();
    match (names.as_slice(), inputs.as_slice()) {
        ([name], []) => {
            let mut shape: Vec<usize> = scalars(top, "input_dim").iter().map(|d| d.parse().unwrap()).collect();
            if let Some(s) = block(top, "input_shape") {
                shape = dims(text, s);
            }
            let spans = top
                .iter()
                .filter(|f| ["input", "input_dim", "input_shape"].contains(&f.key.as_str()))
                .map(|f| f.span.clone())
                .collect();
            (name.to_string(), shape, spans)
        }
        ([], [layer]) => {
            assert_eq!(layer.tops.len(), 1, "`{}`: one Input top is handled", layer.name);
            let fs = fields(text, layer.body.clone());
            let param = block(&fs, "input_param").expect("an Input layer without input_param");
            let pf = fields(text, param.clone());
            let shape = block(&pf, "shape").map(|s| dims(text, s)).unwrap_or_default();
            (layer.tops[0].clone(), shape, vec![layer.span.clone()])
        }
        _ => panic!("the deploy file must declare exactly one input (net-level `input` or one Input layer)"),
    }
}

/// The blob the loss goes on: the last-written top that no later layer
/// reads, or the bottom of the Softmax that wrote it.
fn logits(layers: &[Layer]) -> String {
    // (blob, read since written, writer index) in write order.
    let mut blobs: Vec<(String, bool, usize)> = Vec::new();
    for (k, l) in layers.iter().enumerate() {
        for b in &l.bottoms {
            if let Some(e) = blobs.iter_mut().find(|e| &e.0 == b) {
                e.1 = true;
            }
        }
        for t in &l.tops {
            blobs.retain(|e| &e.0 != t);
            blobs.push((t.clone(), false, k));
        }
    }
    let (blob, _, writer) = blobs.iter().rev().find(|e| !e.1).expect("the deploy file has no unread top");
    let w = &layers[*writer];
    if w.kind == "Softmax" || w.kind == "SOFTMAX" {
        w.bottoms.first().unwrap_or_else(|| panic!("Softmax `{}` has no bottom", w.name)).clone()
    } else {
        blob.clone()
    }
}

/// `span` widened to whole lines where only blanks share them, so removing
/// it leaves no empty line behind.
fn whole_lines(text: &str, span: &Range<usize>) -> Range<usize> {
    let line_start = text[..span.start].rfind('\n').map_or(0, |n| n + 1);
    let start = if text[line_start..span.start].trim().is_empty() { line_start } else { span.start };
    let rest = &text[span.end..];
    let end = match rest.find('\n') {
        Some(n) if rest[..n].trim().is_empty() => span.end + n + 1,
        None if rest.trim().is_empty() => text.len(),
        _ => span.end,
    };
    start..end
}

/// `deploy` (a deploy file's text) as a train net reading batches of
/// `batch` from a fresh LMDB under `dir` with labels below `classes`.
pub fn train_net(deploy: &str, dir: &Path, classes: i32, batch: usize) -> String {
    let top = fields(deploy, 0..deploy.len());
    let layers = layers(deploy, &top);
    let (data, shape, spans) = input(deploy, &top, &layers);
    let [_, channels, height, width] = shape[..] else {
        panic!("the input `{data}` is {shape:?}, not N×C×H×W");
    };
    let logits = logits(&layers);
    for taken in ["label", "loss"] {
        assert!(
            !layers.iter().any(|l| l.name == taken || l.tops.iter().any(|t| t == taken)),
            "the deploy file already has a `{taken}`"
        );
    }
    let db = dir.join("random_lmdb");
    substitute::random_lmdb(&db, Images { channels, height, width, classes }, 2 * batch.max(2), 1);
    // Raw bytes 0..255: ImageNet's per-channel means taken off and scaled
    // as MobileNet's files say their inputs were (about unit variance).
    let transform = if channels == 3 {
        "mean_value: 104 mean_value: 117 mean_value: 123 scale: 0.017".to_string()
    } else {
        "scale: 0.00390625".to_string()
    };
    let key = layer_key(&top);
    let (data_type, loss_type) =
        if key == "layers" { ("DATA", "SOFTMAX_LOSS") } else { ("\"Data\"", "\"SoftmaxWithLoss\"") };
    let data_layer = format!(
        "{key} {{\n  name: \"data\"\n  type: {data_type}\n  top: \"{data}\"\n  top: \"label\"\n  transform_param {{ \
         {transform} }}\n  data_param {{ source: \"{}\" batch_size: {batch} backend: LMDB }}\n}}\n",
        db.display()
    );
    let loss_layer = format!(
        "{key} {{\n  name: \"loss\"\n  type: {loss_type}\n  bottom: \"{logits}\"\n  bottom: \"label\"\n  \
         top: \"loss\"\n}}\n"
    );
    let mut cut: Vec<Range<usize>> = spans.iter().map(|s| whole_lines(deploy, s)).collect();
    cut.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(deploy.len() + data_layer.len() + loss_layer.len());
    let mut at = 0;
    for (k, r) in cut.iter().enumerate() {
        out.push_str(&deploy[at..r.start]);
        if k == 0 {
            out.push_str(&data_layer);
        }
        at = r.end;
    }
    out.push_str(&deploy[at..]);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&loss_layer);
    out
}

/// Fine-tuning's SGD settings: a rate ten times below training from
/// scratch, and the gradient's norm clipped, since stand-in weights are far
/// from a trained net's (with BatchNorm on stored statistics, ResNet's
/// first steps diverge unclipped).
const FINE_TUNE: &str = "base_lr: 0.001\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: \"fixed\"\n\
                         clip_gradients: 10\ntest_iter: 1\n";

/// Writes the train net of `deploy` and an `iterations`-iteration CPU SGD
/// solver for it (fine-tuning's settings, `substitute::solver_for`'s
/// schedule) into `dir`; the solver's path.
pub fn prepare(deploy: &str, dir: &Path, classes: i32, batch: usize, iterations: u64) -> PathBuf {
    let net_file = dir.join("net.prototxt");
    std::fs::write(&net_file, train_net(deploy, dir, classes, batch)).expect("write the net");
    let path = dir.join("solver.prototxt");
    let solver = substitute::solver_for(Some(FINE_TUNE), &net_file, dir, iterations);
    std::fs::write(&path, solver).expect("write the solver");
    path
}

/// Random weights for `layout`: each weight blob gaussian with He's
/// variance 2 / fan-in, biases 0, Scale's factors 1, BatchNorm's
/// statistics empty (all 0) for [`stand_in_weights`] to compute.
fn random_weights(layout: &ParamLayout, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    layout
        .layers
        .iter()
        .map(|lp| {
            let mut v = vec![0.0f32; lp.len];
            for (k, b) in lp.blobs.iter().enumerate() {
                let blob = &mut v[b.offset..b.offset + b.len];
                match (lp.type_name, k) {
                    ("BatchNorm", _) => {}
                    ("Scale", 0) => blob.fill(1.0),
                    _ if b.shape.len() >= 2 => {
                        let std = (2.0 * b.shape[0] as f32 / b.len as f32).sqrt();
                        // Box-Muller: a standard normal from two uniforms.
                        blob.iter_mut().for_each(|w| {
                            let (u, t): (f32, f32) = (rng.gen_range(f32::EPSILON..1.0), rng.gen());
                            *w = std * (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * t).cos();
                        });
                    }
                    _ => {}
                }
            }
            v
        })
        .collect()
}

/// Stand-in weights for the net `prepare` wrote into `dir` (what a user
/// would load from the published `.caffemodel`): [`random_weights`], with
/// every BatchNorm's statistics those of one batch of the data, as a
/// published model's are of its data. They come from one iteration of a
/// copy of the net whose BatchNorms compute batch statistics
/// (`use_global_stats: false`), its step on the weights dropped; the net
/// trained keeps its own `use_global_stats`. Written to
/// `dir/stand_in.caffemodel`; returns that path and the weights.
pub fn stand_in_weights(dir: &Path, seed: u64) -> (PathBuf, Vec<Vec<f32>>) {
    let solver = SolverParam::load(&dir.join("solver.prototxt")).expect("the solver `prepare` wrote");
    let (net, _) = build_nets(&solver, &DataCache::default()).expect("the net `prepare` wrote");
    let layout = ParamLayout::of(&net);
    let file = dir.join("stand_in.caffemodel");
    let mut weights = random_weights(&layout, seed);
    layout.write_caffemodel(&net.name, &weights, &file).expect("write the stand-in weights");
    if layout.layers.iter().any(|lp| lp.type_name == "BatchNorm") {
        let calibrate = dir.join("calibrate");
        std::fs::create_dir_all(&calibrate).expect("calibration directory");
        let text = std::fs::read_to_string(dir.join("net.prototxt")).expect("the net `prepare` wrote");
        let net_file = calibrate.join("net.prototxt");
        std::fs::write(&net_file, substitute::rewrite_all(&text, "use_global_stats", "false")).expect("write");
        let path = calibrate.join("solver.prototxt");
        std::fs::write(&path, substitute::solver_for(Some(FINE_TUNE), &net_file, &calibrate, 1)).expect("write");
        let solver = SolverParam::load(&path).expect("the calibration solver");
        let mut options = TrainOptions { weights: Some(file.clone()), ..TrainOptions::default() };
        options.ps.budget_from_net = true;
        let report = train(&solver, &options, &Cluster::in_process(1).expect("one worker"))
            .unwrap_or_else(|e| panic!("computing the stand-in BatchNorm statistics: {e}"));
        // Only the statistics are taken; the iteration's step on the weights is not.
        for (k, lp) in layout.layers.iter().enumerate() {
            if lp.type_name == "BatchNorm" {
                weights[k].clone_from(&report.final_params[k]);
            }
        }
        layout.write_caffemodel(&net.name, &weights, &file).expect("write the stand-in weights");
    }
    (file, weights)
}

/// The BatchNorm layers of `deploy` that normalise by their stored
/// statistics in training too (`use_global_stats: true`): theirs never move.
pub fn frozen_statistics(deploy: &str) -> Vec<String> {
    let top = fields(deploy, 0..deploy.len());
    layers(deploy, &top)
        .into_iter()
        .filter(|l| matches!(l.kind.as_str(), "BatchNorm" | "BATCHNORM"))
        .filter(|l| {
            let fs = fields(deploy, l.body.clone());
            block(&fs, "batch_norm_param")
                .is_some_and(|p| scalars(&fields(deploy, p.clone()), "use_global_stats") == ["true"])
        })
        .map(|l| l.name)
        .collect()
}
