//! Caffe's `NetParameter` (the `*_train_test.prototxt` file) read into the
//! settings this trainer runs: the generated message is checked field by
//! field, every problem of the file collected with its line and what to
//! write instead. It owns that translation and Caffe's defaults; it must
//! never check shapes or build anything (`net.rs` does).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::proto::caffe::{self, filler_parameter, loss_parameter, pooling_parameter};
use crate::proto::locate::Loc;
use crate::proto::problems::Problems;
use crate::proto::text;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Train,
    Test,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Train => "TRAIN",
            Phase::Test => "TEST",
        }
    }
}

/// How a blob's initial values are drawn (Caffe's `FillerParameter`).
#[derive(Debug, Clone, PartialEq)]
pub enum Filler {
    Constant(f32),
    Uniform {
        min: f32,
        max: f32,
    },
    Gaussian {
        mean: f32,
        std: f32,
    },
    /// Uniform in ±sqrt(3 / n), n from `norm`.
    Xavier(VarianceNorm),
    /// Gaussian with std sqrt(2 / n), n from `norm`.
    Msra(VarianceNorm),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarianceNorm {
    FanIn,
    FanOut,
    Average,
}

/// `param { lr_mult decay_mult }` of one parameter blob.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub lr_mult: f32,
    pub decay_mult: f32,
}

impl Default for ParamSpec {
    fn default() -> Self {
        ParamSpec { lr_mult: 1.0, decay_mult: 1.0 }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DataConf {
    /// Path prefix of the IDX files, as written.
    pub source: String,
    pub batch_size: usize,
    pub scale: f32,
    /// Subtracted from every pixel before scaling (Caffe's order).
    pub mean_value: f32,
    /// The prototxt's directory, to resolve a relative source against.
    pub base_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConvConf {
    pub num_output: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub bias_term: bool,
    pub weight_filler: Filler,
    pub bias_filler: Filler,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMethod {
    Max,
    Ave,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PoolConf {
    pub method: PoolMethod,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub global: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InnerProductConf {
    pub num_output: usize,
    pub bias_term: bool,
    pub weight_filler: Filler,
    pub bias_filler: Filler,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalization {
    /// Divide by the batch size (FULL, VALID and BATCH_SIZE coincide here:
    /// one label per image and no ignore_label).
    Batch,
    None,
}

/// A layer's type with its type-specific settings.
#[derive(Debug, Clone, PartialEq)]
pub enum LayerKind {
    Data(DataConf),
    Convolution(ConvConf),
    Pooling(PoolConf),
    InnerProduct(InnerProductConf),
    ReLU { negative_slope: f32 },
    Sigmoid,
    TanH,
    Dropout { ratio: f32 },
    SoftmaxWithLoss { normalization: Normalization },
    Accuracy { top_k: usize },
}

impl LayerKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            LayerKind::Data(_) => "Data",
            LayerKind::Convolution(_) => "Convolution",
            LayerKind::Pooling(_) => "Pooling",
            LayerKind::InnerProduct(_) => "InnerProduct",
            LayerKind::ReLU { .. } => "ReLU",
            LayerKind::Sigmoid => "Sigmoid",
            LayerKind::TanH => "TanH",
            LayerKind::Dropout { .. } => "Dropout",
            LayerKind::SoftmaxWithLoss { .. } => "SoftmaxWithLoss",
            LayerKind::Accuracy { .. } => "Accuracy",
        }
    }
}

pub const LAYER_TYPES: [&str; 10] = [
    "Data",
    "Convolution",
    "Pooling",
    "InnerProduct",
    "ReLU",
    "Sigmoid",
    "TanH",
    "Dropout",
    "SoftmaxWithLoss",
    "Accuracy",
];

/// The phases a layer is in: `include` and `exclude` rules.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PhaseRules {
    pub include: Vec<Phase>,
    pub exclude: Vec<Phase>,
}

impl PhaseRules {
    /// Caffe's rule: any matching include (if there are includes), no matching exclude.
    pub fn admits(&self, phase: Phase) -> bool {
        (self.include.is_empty() || self.include.contains(&phase)) && !self.exclude.contains(&phase)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LayerParam {
    pub name: String,
    pub kind: LayerKind,
    pub bottoms: Vec<String>,
    pub tops: Vec<String>,
    pub params: Vec<ParamSpec>,
    /// Per top; empty means Caffe's default (1 for a loss layer's top, 0 otherwise).
    pub loss_weight: Vec<f32>,
    pub phases: PhaseRules,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NetParam {
    pub name: String,
    pub layers: Vec<LayerParam>,
    pub file: PathBuf,
}

/// The `*_param` fields of LayerParameter each layer type reads; any other
/// one set on a layer is a mistake.
const TYPE_PARAMS: &[(&str, &[&str])] = &[
    ("Data", &["data_param", "transform_param"]),
    ("Convolution", &["convolution_param"]),
    ("Pooling", &["pooling_param"]),
    ("InnerProduct", &["inner_product_param"]),
    ("ReLU", &["relu_param"]),
    ("Sigmoid", &["sigmoid_param"]),
    ("TanH", &["tanh_param"]),
    ("Dropout", &["dropout_param"]),
    ("SoftmaxWithLoss", &["loss_param", "softmax_param"]),
    ("Accuracy", &["accuracy_param"]),
];

/// The `*_param` fields a layer sets.
fn set_params(lp: &caffe::LayerParameter) -> Vec<&'static str> {
    [
        ("transform_param", lp.transform_param.is_some()),
        ("loss_param", lp.loss_param.is_some()),
        ("accuracy_param", lp.accuracy_param.is_some()),
        ("batch_norm_param", lp.batch_norm_param.is_some()),
        ("concat_param", lp.concat_param.is_some()),
        ("convolution_param", lp.convolution_param.is_some()),
        ("data_param", lp.data_param.is_some()),
        ("dropout_param", lp.dropout_param.is_some()),
        ("eltwise_param", lp.eltwise_param.is_some()),
        ("flatten_param", lp.flatten_param.is_some()),
        ("inner_product_param", lp.inner_product_param.is_some()),
        ("input_param", lp.input_param.is_some()),
        ("lrn_param", lp.lrn_param.is_some()),
        ("pooling_param", lp.pooling_param.is_some()),
        ("power_param", lp.power_param.is_some()),
        ("prelu_param", lp.prelu_param.is_some()),
        ("relu_param", lp.relu_param.is_some()),
        ("reshape_param", lp.reshape_param.is_some()),
        ("scale_param", lp.scale_param.is_some()),
        ("sigmoid_param", lp.sigmoid_param.is_some()),
        ("softmax_param", lp.softmax_param.is_some()),
        ("tanh_param", lp.tanh_param.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}

impl NetParam {
    /// Reads and checks a net prototxt.
    pub fn load(path: &Path) -> Result<NetParam> {
        let src = std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read the net: {e}")))?;
        Self::parse(&src, path)
    }

    /// Parses net prototxt text; `path` names it in errors and anchors relative sources.
    pub fn parse(src: &str, path: &Path) -> Result<NetParam> {
        let (msg, locs) = text::parse::<caffe::NetParameter>(src, path, "NetParameter")?;
        Self::from_proto(&msg, &locs.root(), path)
    }

    /// Checks a parsed net (`loc`: where it is written in `path`, for errors).
    pub fn from_proto(msg: &caffe::NetParameter, loc: &Loc<'_>, path: &Path) -> Result<NetParam> {
        let mut p = Problems::new(path);
        let old_inputs = "declares net inputs the old way, which caffe-geeps does not run; remove it";
        for (field, set) in [
            ("input", !msg.input.is_empty()),
            ("input_shape", !msg.input_shape.is_empty()),
            ("input_dim", !msg.input_dim.is_empty()),
        ] {
            if set {
                p.push(loc.of(field), format!("`{field}` {old_inputs}"));
            }
        }
        for (field, set) in [
            ("force_backward", msg.force_backward.is_some()),
            ("state", msg.state.is_some()),
            ("debug_info", msg.debug_info.is_some()),
        ] {
            if set {
                p.push(
                    loc.of(field),
                    format!("field `{field}` of NetParameter is not supported by caffe-geeps; remove it"),
                );
            }
        }
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut layers = Vec::new();
        for (i, lp) in msg.layer.iter().enumerate() {
            if let Some(l) = layer(lp, &loc.nth("layer", i), &base_dir, &mut p) {
                layers.push(l);
            }
        }
        if msg.layer.is_empty() {
            p.push(loc.line(), "the net has no `layer`");
        }
        duplicate_names(&layers, &mut p);
        p.finish()?;
        Ok(NetParam { name: msg.name().to_string(), layers, file: path.to_path_buf() })
    }
}

/// Two layers of one phase with one name: both lines.
fn duplicate_names(layers: &[LayerParam], p: &mut Problems) {
    let mut reported = std::collections::HashSet::new();
    for phase in [Phase::Train, Phase::Test] {
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for l in layers.iter().filter(|l| l.phases.admits(phase) && !l.name.is_empty()) {
            match seen.get(l.name.as_str()) {
                Some(&first) if reported.insert((first, l.line)) => p.push(
                    l.line,
                    format!(
                        "layer name `{}` is used twice in the {} net (lines {first} and {}); give each layer its own name",
                        l.name,
                        phase.name(),
                        l.line
                    ),
                ),
                Some(_) => {}
                None => {
                    seen.insert(&l.name, l.line);
                }
            }
        }
    }
}

/// One layer; `None` when it has problems (all recorded in `p`).
fn layer(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<LayerParam> {
    let before = p.len();
    let name = lp.name().to_string();
    let line = loc.line();
    let Some(type_name) = lp.r#type.as_deref() else {
        p.push(line, format!("layer `{name}` has no `type`"));
        return None;
    };
    let mut params = Vec::new();
    for (i, ps) in lp.param.iter().enumerate() {
        let pl = loc.nth("param", i);
        if ps.name.is_some() || ps.share_mode.is_some() {
            let field = if ps.name.is_some() { "name" } else { "share_mode" };
            p.push(
                pl.of(field),
                format!("`param {{ {field} }}` (sharing parameters between layers) is not supported; remove it"),
            );
        }
        params.push(ParamSpec { lr_mult: ps.lr_mult(), decay_mult: ps.decay_mult() });
    }
    for (field, set) in [("propagate_down", !lp.propagate_down.is_empty()), ("blobs", !lp.blobs.is_empty())] {
        if set {
            p.push(
                loc.of(field),
                format!("field `{field}` of LayerParameter is not supported by caffe-geeps; remove it"),
            );
        }
    }
    let mut phases = PhaseRules::default();
    if let Some(ph) = lp.phase {
        // A layer-level `phase` is set by Caffe itself; honour it as an include.
        phases.include.push(phase(ph));
    }
    for (which, rules, list) in
        [("include", &lp.include, &mut phases.include), ("exclude", &lp.exclude, &mut phases.exclude)]
    {
        for (i, r) in rules.iter().enumerate() {
            let rl = loc.nth(which, i);
            for (field, set) in [
                ("min_level", r.min_level.is_some()),
                ("max_level", r.max_level.is_some()),
                ("stage", !r.stage.is_empty()),
                ("not_stage", !r.not_stage.is_empty()),
            ] {
                if set {
                    p.push(rl.of(field), format!("`{field}` in a NetStateRule is not supported; rule on `phase` only"));
                }
            }
            match r.phase {
                Some(ph) => list.push(phase(ph)),
                None => p.push(
                    rl.line(),
                    format!("this `{which}` rule has no `phase`; add `phase: TRAIN` or `phase: TEST`"),
                ),
            }
        }
    }
    let Some(&(_, allowed)) = TYPE_PARAMS.iter().find(|(t, _)| *t == type_name) else {
        p.push(
            loc.of("type"),
            format!("unknown layer type `{type_name}` (layer `{name}`); caffe-geeps runs {}", LAYER_TYPES.join(", ")),
        );
        return None;
    };
    for field in set_params(lp) {
        if !allowed.contains(&field) {
            p.push(loc.of(field), format!("`{field}` does not apply to a {type_name} layer; remove it"));
        }
    }
    let kind = match type_name {
        "Data" => data(lp, loc, base_dir, p).map(LayerKind::Data),
        "Convolution" => conv(lp, loc, p).map(LayerKind::Convolution),
        "Pooling" => pool(lp, loc, p).map(LayerKind::Pooling),
        "InnerProduct" => inner_product(lp, loc, p).map(LayerKind::InnerProduct),
        "ReLU" => {
            let negative_slope = lp.relu_param.as_ref().map_or(0.0, |r| r.negative_slope());
            if negative_slope < 0.0 {
                p.push(loc.at("relu_param").of("negative_slope"), "negative_slope must be >= 0");
            }
            Some(LayerKind::ReLU { negative_slope })
        }
        "Sigmoid" => Some(LayerKind::Sigmoid),
        "TanH" => Some(LayerKind::TanH),
        "Dropout" => {
            let ratio = lp.dropout_param.as_ref().map_or(0.5, |d| d.dropout_ratio());
            if !(0.0..1.0).contains(&ratio) {
                p.push(loc.at("dropout_param").of("dropout_ratio"), format!("dropout_ratio {ratio} must be in [0, 1)"));
            }
            Some(LayerKind::Dropout { ratio })
        }
        "SoftmaxWithLoss" => softmax_loss(lp, loc, p).map(|normalization| LayerKind::SoftmaxWithLoss { normalization }),
        "Accuracy" => {
            let a = lp.accuracy_param.unwrap_or_default();
            let al = loc.at("accuracy_param");
            if a.top_k() == 0 {
                p.push(al.of("top_k"), "top_k must be at least 1");
            }
            if a.axis() != 1 {
                p.push(al.of("axis"), format!("axis {}: only axis 1 (the class axis) is supported", a.axis()));
            }
            if a.ignore_label.is_some() {
                p.push(al.of("ignore_label"), "ignore_label is not supported; remove it");
            }
            Some(LayerKind::Accuracy { top_k: a.top_k() as usize })
        }
        _ => unreachable!("TYPE_PARAMS lists only the types matched here"),
    };
    let kind = kind.filter(|_| p.len() == before)?;
    Some(LayerParam {
        name,
        kind,
        bottoms: lp.bottom.clone(),
        tops: lp.top.clone(),
        params,
        loss_weight: lp.loss_weight.clone(),
        phases,
        line,
    })
}

fn phase(p: i32) -> Phase {
    if p == caffe::Phase::Train as i32 {
        Phase::Train
    } else {
        Phase::Test
    }
}

fn softmax_loss(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<Normalization> {
    let mut normalization = Normalization::Batch;
    if let Some(l) = &lp.loss_param {
        let ll = loc.at("loss_param");
        if l.normalization.is_some() {
            if l.normalization() == loss_parameter::NormalizationMode::None {
                normalization = Normalization::None;
            }
        } else if l.normalize == Some(false) {
            // Caffe's old `normalize: false` means BATCH_SIZE.
            normalization = Normalization::Batch;
        }
        if l.ignore_label.is_some() {
            p.push(ll.of("ignore_label"), "ignore_label is not supported; remove it");
        }
    }
    if let Some(s) = &lp.softmax_param {
        if s.axis() != 1 {
            p.push(loc.at("softmax_param").of("axis"), format!("axis {}: only axis 1 is supported", s.axis()));
        }
    }
    Some(normalization)
}

fn data(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<DataConf> {
    let Some(dp) = &lp.data_param else {
        p.push(loc.line(), "a Data layer needs `data_param { source: \"...\" batch_size: N }`");
        return None;
    };
    let dl = loc.at("data_param");
    // The IDX reader needs neither the database kind nor a prefetch depth.
    for (field, set) in [
        ("rand_skip", dp.rand_skip.is_some()),
        ("scale", dp.scale.is_some()),
        ("mean_file", dp.mean_file.is_some()),
        ("crop_size", dp.crop_size.is_some()),
        ("mirror", dp.mirror.is_some()),
        ("force_encoded_color", dp.force_encoded_color.is_some()),
    ] {
        if set {
            p.push(
                dl.of(field),
                format!("field `{field}` of DataParameter is not supported by caffe-geeps; remove it"),
            );
        }
    }
    let source = dp.source.clone();
    if source.is_none() {
        p.push(dl.line(), "data_param has no `source`");
    }
    let batch_size = dp.batch_size.unwrap_or(0) as usize;
    if batch_size == 0 {
        p.push(dl.line(), "data_param needs `batch_size` of at least 1");
    }
    let (mut scale, mut mean_value) = (1.0, 0.0);
    if let Some(tp) = &lp.transform_param {
        let tl = loc.at("transform_param");
        scale = tp.scale();
        if tp.mean_value.len() > 1 {
            p.push(tl.nth("mean_value", 1).line(), "one mean_value only: the images have one channel");
        }
        mean_value = tp.mean_value.first().copied().unwrap_or(0.0);
        for (field, set) in [
            ("mirror", tp.mirror()),
            ("crop_size", tp.crop_size() > 0),
            ("mean_file", tp.mean_file.is_some()),
            ("force_color", tp.force_color()),
            ("force_gray", tp.force_gray()),
        ] {
            if set {
                p.push(
                    tl.of(field),
                    format!("`{field}` of transform_param is not supported by caffe-geeps; remove it"),
                );
            }
        }
    }
    Some(DataConf { source: source?, batch_size, scale, mean_value, base_dir: base_dir.to_path_buf() })
}

/// A 2-D size from a repeated field (one or two values) or its `_h`/`_w` forms.
fn dims2(
    both: &[u32],
    hw: (Option<u32>, Option<u32>),
    default: Option<usize>,
    (name, short): (&str, &str),
    l: &Loc<'_>,
    p: &mut Problems,
) -> Option<(usize, usize)> {
    let line = l.line();
    let v = match (both, hw) {
        ([], (Some(h), Some(w))) => (h as usize, w as usize),
        ([], (None, None)) => match default {
            Some(d) => (d, d),
            None => {
                p.push(line, format!("`{name}` is required"));
                return None;
            }
        },
        ([x], (None, None)) => (*x as usize, *x as usize),
        ([a, b], (None, None)) => (*a as usize, *b as usize),
        ([], _) => {
            p.push(line, format!("give both `{short}_h` and `{short}_w`"));
            return None;
        }
        (_, (None, None)) => {
            p.push(l.nth(name, 2).line(), format!("`{name}` takes one or two values (2-D only)"));
            return None;
        }
        _ => {
            p.push(line, format!("give `{name}` or its _h/_w forms, not both"));
            return None;
        }
    };
    Some(v)
}

fn filler(f: Option<&caffe::FillerParameter>, l: &Loc<'_>, name: &str, p: &mut Problems) -> Option<Filler> {
    let Some(f) = f else { return Some(Filler::Constant(0.0)) };
    let fl = l.at(name);
    let norm = match f.variance_norm() {
        filler_parameter::VarianceNorm::FanIn => VarianceNorm::FanIn,
        filler_parameter::VarianceNorm::FanOut => VarianceNorm::FanOut,
        filler_parameter::VarianceNorm::Average => VarianceNorm::Average,
    };
    if f.sparse() != -1 {
        p.push(fl.of("sparse"), "sparse fillers are not supported; remove `sparse`");
    }
    let (min, max, mean, std) = (f.min(), f.max(), f.mean(), f.std());
    let filler = match f.r#type() {
        "constant" => Filler::Constant(f.value()),
        "uniform" if min <= max => Filler::Uniform { min, max },
        "uniform" => {
            p.push(fl.line(), format!("uniform filler has min {min} > max {max}"));
            return None;
        }
        "gaussian" if std >= 0.0 => Filler::Gaussian { mean, std },
        "gaussian" => {
            p.push(fl.of("std"), "gaussian filler needs std >= 0");
            return None;
        }
        "xavier" => Filler::Xavier(norm),
        "msra" => Filler::Msra(norm),
        other => {
            p.push(
                fl.of("type"),
                format!("unknown filler type `{other}` in {name}; use constant, uniform, gaussian, xavier or msra"),
            );
            return None;
        }
    };
    Some(filler)
}

fn conv(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<ConvConf> {
    let Some(c) = &lp.convolution_param else {
        p.push(loc.line(), "a Convolution layer needs `convolution_param { num_output kernel_size }`");
        return None;
    };
    let cl = loc.at("convolution_param");
    let num_output = c.num_output() as usize;
    if num_output == 0 {
        p.push(cl.line(), "convolution_param needs num_output >= 1");
    }
    let kernel = dims2(&c.kernel_size, (c.kernel_h, c.kernel_w), None, ("kernel_size", "kernel"), &cl, p);
    let stride = dims2(&c.stride, (c.stride_h, c.stride_w), Some(1), ("stride", "stride"), &cl, p);
    let pad = dims2(&c.pad, (c.pad_h, c.pad_w), Some(0), ("pad", "pad"), &cl, p);
    let weight_filler = filler(c.weight_filler.as_ref(), &cl, "weight_filler", p);
    let bias_filler = filler(c.bias_filler.as_ref(), &cl, "bias_filler", p);
    if c.group() != 1 {
        p.push(cl.of("group"), format!("group {}: only group 1 is supported", c.group()));
    }
    if c.dilation.iter().any(|d| *d != 1) {
        p.push(cl.of("dilation"), "only dilation 1 is supported");
    }
    if c.axis() != 1 {
        p.push(cl.of("axis"), format!("axis {}: only axis 1 is supported", c.axis()));
    }
    if c.force_nd_im2col() {
        p.push(cl.of("force_nd_im2col"), "force_nd_im2col is not supported; remove it");
    }
    let (kernel, stride, pad) = (kernel?, stride?, pad?);
    if kernel.0 == 0 || kernel.1 == 0 || stride.0 == 0 || stride.1 == 0 {
        p.push(cl.line(), "kernel size and stride must be at least 1");
    }
    Some(ConvConf {
        num_output,
        kernel,
        stride,
        pad,
        bias_term: c.bias_term(),
        weight_filler: weight_filler?,
        bias_filler: bias_filler?,
    })
}

fn pool(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<PoolConf> {
    let Some(pp) = &lp.pooling_param else {
        p.push(loc.line(), "a Pooling layer needs `pooling_param { pool kernel_size stride }`");
        return None;
    };
    let pl = loc.at("pooling_param");
    let method = match pp.pool() {
        pooling_parameter::PoolMethod::Max => PoolMethod::Max,
        pooling_parameter::PoolMethod::Ave => PoolMethod::Ave,
        pooling_parameter::PoolMethod::Stochastic => {
            p.push(pl.of("pool"), "pool: STOCHASTIC is not supported; use MAX, AVE");
            return None;
        }
    };
    if pp.round_mode() == pooling_parameter::RoundMode::Floor {
        p.push(pl.of("round_mode"), "round_mode: FLOOR is not supported; caffe-geeps pools as CEIL (Caffe's default)");
    }
    let global = pp.global_pooling();
    let one = |v: Option<u32>| v.map(|v| vec![v]).unwrap_or_default();
    let kernel = dims2(
        &one(pp.kernel_size),
        (pp.kernel_h, pp.kernel_w),
        global.then_some(1),
        ("kernel_size", "kernel"),
        &pl,
        p,
    )?;
    let stride = dims2(&one(pp.stride), (pp.stride_h, pp.stride_w), Some(1), ("stride", "stride"), &pl, p)?;
    let pad = dims2(&one(pp.pad), (pp.pad_h, pp.pad_w), Some(0), ("pad", "pad"), &pl, p)?;
    if kernel.0 == 0 || kernel.1 == 0 || stride.0 == 0 || stride.1 == 0 {
        p.push(pl.line(), "kernel size and stride must be at least 1");
    }
    if pad.0 >= kernel.0 || pad.1 >= kernel.1 {
        p.push(pl.line(), "pad must be smaller than the kernel");
    }
    Some(PoolConf { method, kernel, stride, pad, global })
}

fn inner_product(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<InnerProductConf> {
    let Some(ip) = &lp.inner_product_param else {
        p.push(loc.line(), "an InnerProduct layer needs `inner_product_param { num_output }`");
        return None;
    };
    let il = loc.at("inner_product_param");
    let num_output = ip.num_output() as usize;
    if num_output == 0 {
        p.push(il.line(), "inner_product_param needs num_output >= 1");
    }
    let weight_filler = filler(ip.weight_filler.as_ref(), &il, "weight_filler", p);
    let bias_filler = filler(ip.bias_filler.as_ref(), &il, "bias_filler", p);
    if ip.axis() != 1 {
        p.push(il.of("axis"), format!("axis {}: only axis 1 is supported", ip.axis()));
    }
    if ip.transpose() {
        p.push(il.of("transpose"), "transpose: true is not supported");
    }
    Some(InnerProductConf {
        num_output,
        bias_term: ip.bias_term(),
        weight_filler: weight_filler?,
        bias_filler: bias_filler?,
    })
}
