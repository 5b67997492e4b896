//! Caffe's `NetParameter` (the `*_train_test.prototxt` file): the subset of
//! layer types and fields this trainer runs, read strictly. It owns the
//! mapping from prototxt fields to typed layer settings and their defaults
//! (Caffe's); it must never check shapes or build anything (`net.rs` does).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::proto::fields::Fields;
use crate::proto::text::{self, Message};

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

/// Fields of LayerParameter that Caffe knows and this trainer does not run.
const LAYER_CAFFE_ONLY: &[&str] = &[
    "propagate_down",
    "blobs",
    "bottom_shape",
    "accuracy_param",
    "argmax_param",
    "batch_norm_param",
    "bias_param",
    "concat_param",
    "contrastive_loss_param",
    "crop_param",
    "dummy_data_param",
    "eltwise_param",
    "elu_param",
    "embed_param",
    "exp_param",
    "flatten_param",
    "hdf5_data_param",
    "hdf5_output_param",
    "hinge_loss_param",
    "image_data_param",
    "infogain_loss_param",
    "input_param",
    "log_param",
    "lrn_param",
    "memory_data_param",
    "mvn_param",
    "parameter_param",
    "power_param",
    "prelu_param",
    "python_param",
    "recurrent_param",
    "reduction_param",
    "reshape_param",
    "scale_param",
    "sigmoid_param",
    "softmax_param",
    "spp_param",
    "slice_param",
    "tanh_param",
    "threshold_param",
    "tile_param",
    "window_data_param",
    "convolution_param",
    "pooling_param",
    "inner_product_param",
    "relu_param",
    "dropout_param",
    "data_param",
    "transform_param",
    "loss_param",
];

impl NetParam {
    /// Reads and checks a net prototxt.
    pub fn load(path: &Path) -> Result<NetParam> {
        let src = std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read the net: {e}")))?;
        Self::parse(&src, path)
    }

    /// Parses net prototxt text; `path` names it in errors and anchors relative sources.
    pub fn parse(src: &str, path: &Path) -> Result<NetParam> {
        let msg = text::parse(src).map_err(|e| Error::Prototxt {
            file: path.to_path_buf(),
            line: e.line,
            msg: e.msg.clone(),
        })?;
        let mut f = Fields::new(path, "NetParameter", &msg);
        let name = f.string("name")?.unwrap_or_default();
        if let Some(old) = f.all("layers").first() {
            return Err(f.err(
                old.line,
                "this net uses Caffe's old V1 `layers` format; convert it with Caffe's upgrade_net_proto_text",
            ));
        }
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut layers = Vec::new();
        for m in f.messages("layer")? {
            layers.push(layer(path, m, &base_dir)?);
        }
        f.finish(&["input", "input_shape", "input_dim", "force_backward", "state", "debug_info"])?;
        if layers.is_empty() {
            return Err(Error::Prototxt { file: path.to_path_buf(), line: 1, msg: "the net has no `layer`".into() });
        }
        Ok(NetParam { name, layers, file: path.to_path_buf() })
    }
}

fn layer(file: &Path, m: &Message, base_dir: &Path) -> Result<LayerParam> {
    let mut f = Fields::new(file, "LayerParameter", m);
    let line = m.line;
    let name = f.string("name")?.unwrap_or_default();
    let type_field = f.one("type")?;
    let Some(type_field) = type_field else {
        return Err(f.err(line, format!("layer `{name}` has no `type`")));
    };
    let type_name = match &type_field.value {
        text::Value::Scalar(text::Scalar::Str(s)) => s.clone(),
        _ => return Err(f.err(type_field.line, "field `type` needs a quoted layer type, like \"Convolution\"")),
    };
    let bottoms = f.strings("bottom")?;
    let tops = f.strings("top")?;
    let mut params = Vec::new();
    for p in f.messages("param")? {
        let mut pf = Fields::new(file, "ParamSpec", p);
        let lr_mult = pf.f32("lr_mult")?.unwrap_or(1.0);
        let decay_mult = pf.f32("decay_mult")?.unwrap_or(1.0);
        pf.finish(&["name", "share_mode"])?;
        params.push(ParamSpec { lr_mult, decay_mult });
    }
    let loss_weight: Vec<f32> = {
        let all = f.all("loss_weight");
        let mut out = Vec::new();
        for fl in all {
            match &fl.value {
                text::Value::Scalar(s) => {
                    let t = s.to_string();
                    out.push(t.parse().map_err(|_| f.err(fl.line, format!("loss_weight needs a number, got {t}")))?)
                }
                _ => return Err(f.err(fl.line, "loss_weight takes a number")),
            }
        }
        out
    };
    let mut phases = PhaseRules::default();
    if let Some((p, _)) = f.enumeration("phase", &["TRAIN", "TEST"])? {
        // A layer-level `phase` is set by Caffe itself; honour it as an include.
        phases.include.push(phase(&p));
    }
    for (which, list) in [("include", &mut phases.include), ("exclude", &mut phases.exclude)] {
        for r in f.messages(which)? {
            let mut rf = Fields::new(file, "NetStateRule", r);
            let p = rf.enumeration("phase", &["TRAIN", "TEST"])?;
            rf.finish(&["min_level", "max_level", "stage", "not_stage"])?;
            match p {
                Some((p, _)) => list.push(phase(&p)),
                None => return Err(rf.err(r.line, format!("this `{which}` rule has no `phase`"))),
            }
        }
    }
    let kind = match type_name.as_str() {
        "Data" => LayerKind::Data(data(&mut f, base_dir)?),
        "Convolution" => LayerKind::Convolution(conv(&mut f)?),
        "Pooling" => LayerKind::Pooling(pool(&mut f)?),
        "InnerProduct" => LayerKind::InnerProduct(inner_product(&mut f)?),
        "ReLU" => {
            let mut negative_slope = 0.0;
            if let Some(m) = f.message("relu_param")? {
                let mut rf = Fields::new(file, "ReLUParameter", m);
                negative_slope = rf.f32("negative_slope")?.unwrap_or(0.0);
                rf.finish(&["engine"])?;
                if negative_slope < 0.0 {
                    return Err(rf.err(m.line, "negative_slope must be >= 0"));
                }
            }
            LayerKind::ReLU { negative_slope }
        }
        "Sigmoid" => LayerKind::Sigmoid,
        "TanH" => LayerKind::TanH,
        "Dropout" => {
            let mut ratio = 0.5;
            if let Some(m) = f.message("dropout_param")? {
                let mut df = Fields::new(file, "DropoutParameter", m);
                ratio = df.f32("dropout_ratio")?.unwrap_or(0.5);
                df.finish(&["scale_train"])?;
                if !(0.0..1.0).contains(&ratio) {
                    return Err(df.err(m.line, format!("dropout_ratio {ratio} must be in [0, 1)")));
                }
            }
            LayerKind::Dropout { ratio }
        }
        "SoftmaxWithLoss" => {
            let mut normalization = Normalization::Batch;
            if let Some(m) = f.message("loss_param")? {
                let mut lf = Fields::new(file, "LossParameter", m);
                if let Some(false) = lf.bool("normalize")? {
                    normalization = Normalization::None;
                }
                if let Some((n, _)) = lf.enumeration("normalization", &["FULL", "VALID", "BATCH_SIZE", "NONE"])? {
                    normalization = if n == "NONE" { Normalization::None } else { Normalization::Batch };
                }
                lf.finish(&["ignore_label"])?;
            }
            LayerKind::SoftmaxWithLoss { normalization }
        }
        "Accuracy" => {
            let mut top_k = 1;
            if let Some(m) = f.message("accuracy_param")? {
                let mut af = Fields::new(file, "AccuracyParameter", m);
                top_k = af.u32("top_k")?.unwrap_or(1) as usize;
                af.finish(&["axis", "ignore_label"])?;
                if top_k == 0 {
                    return Err(af.err(m.line, "top_k must be at least 1"));
                }
            }
            LayerKind::Accuracy { top_k }
        }
        other => {
            return Err(f.err(
                type_field.line,
                format!("unknown layer type `{other}` (layer `{name}`); caffe-geeps runs {}", LAYER_TYPES.join(", ")),
            ))
        }
    };
    // What is left is unknown, or a parameter block of another layer type.
    finish_layer(&f, &type_name)?;
    Ok(LayerParam { name, kind, bottoms, tops, params, loss_weight, phases, line })
}

/// `finish` with a message that tells a misplaced `*_param` block from an unknown field.
fn finish_layer(f: &Fields<'_>, type_name: &str) -> Result<()> {
    match f.finish(LAYER_CAFFE_ONLY) {
        Err(Error::Prototxt { file, line, msg }) if msg.contains("_param`") && msg.contains("not supported") => {
            let field = msg.split('`').nth(1).unwrap_or_default().to_string();
            Err(Error::Prototxt {
                file,
                line,
                msg: format!("field `{field}` does not apply to a {type_name} layer (or is not supported); remove it"),
            })
        }
        other => other,
    }
}

fn phase(p: &str) -> Phase {
    if p == "TRAIN" {
        Phase::Train
    } else {
        Phase::Test
    }
}

fn data(f: &mut Fields<'_>, base_dir: &Path) -> Result<DataConf> {
    let file = f.file();
    let Some(dp) = f.message("data_param")? else {
        return Err(f.err(f.line(), "a Data layer needs `data_param { source: \"...\" batch_size: N }`"));
    };
    let mut df = Fields::new(file, "DataParameter", dp);
    let source = df.string("source")?;
    let batch_size = df.u32("batch_size")?;
    // The IDX reader ignores the database kind and prefetch depth Caffe reads here.
    df.enumeration("backend", &["LEVELDB", "LMDB"])?;
    df.u32("prefetch")?;
    df.finish(&["rand_skip", "scale", "mean_file", "crop_size", "mirror", "force_encoded_color"])?;
    let Some(source) = source else { return Err(df.err(dp.line, "data_param has no `source`")) };
    let batch_size = match batch_size {
        Some(b) if b > 0 => b as usize,
        _ => return Err(df.err(dp.line, "data_param needs `batch_size` of at least 1")),
    };
    let (mut scale, mut mean_value) = (1.0, 0.0);
    if let Some(tp) = f.message("transform_param")? {
        let mut tf = Fields::new(file, "TransformationParameter", tp);
        scale = tf.f32("scale")?.unwrap_or(1.0);
        let means = tf.all("mean_value");
        if means.len() > 1 {
            return Err(tf.err(means[1].line, "one mean_value only: the images have one channel"));
        }
        if let Some(m) = means.first() {
            mean_value = value_number(m).ok_or_else(|| tf.err(m.line, "mean_value needs a number"))?;
        }
        tf.finish(&["mirror", "crop_size", "mean_file", "force_color", "force_gray"])?;
    }
    Ok(DataConf { source, batch_size, scale, mean_value, base_dir: base_dir.to_path_buf() })
}

fn value_number(field: &text::Field) -> Option<f32> {
    match &field.value {
        text::Value::Scalar(text::Scalar::Number(s)) => s.trim_end_matches(['f', 'F']).parse().ok(),
        _ => None,
    }
}

/// A 2-D size from `name` (one or two values) or `name_h` / `name_w`.
fn size2(f: &mut Fields<'_>, name: &str, default: Option<usize>, line: usize) -> Result<(usize, usize)> {
    let both = f.u32s(name)?;
    let h = f.u32(&format!("{}_h", name.trim_end_matches("_size")))?;
    let w = f.u32(&format!("{}_w", name.trim_end_matches("_size")))?;
    let v = match (both.as_slice(), h, w) {
        ([], Some(h), Some(w)) => (h as usize, w as usize),
        ([], None, None) => match default {
            Some(d) => (d, d),
            None => return Err(f.err(line, format!("`{name}` is required"))),
        },
        ([x], None, None) => (*x as usize, *x as usize),
        ([a, b], None, None) => (*a as usize, *b as usize),
        ([], _, _) => return Err(f.err(line, format!("give both `{0}_h` and `{0}_w`", name.trim_end_matches("_size")))),
        (_, None, None) => return Err(f.err(line, format!("`{name}` takes one or two values (2-D only)"))),
        _ => return Err(f.err(line, format!("give `{name}` or its _h/_w forms, not both"))),
    };
    Ok(v)
}

fn filler(f: &mut Fields<'_>, name: &str) -> Result<Filler> {
    let file = f.file();
    let Some(m) = f.message(name)? else { return Ok(Filler::Constant(0.0)) };
    let mut ff = Fields::new(file, "FillerParameter", m);
    let kind = ff.string("type")?.unwrap_or_else(|| "constant".into());
    let value = ff.f32("value")?.unwrap_or(0.0);
    let min = ff.f32("min")?.unwrap_or(0.0);
    let max = ff.f32("max")?.unwrap_or(1.0);
    let mean = ff.f32("mean")?.unwrap_or(0.0);
    let std = ff.f32("std")?.unwrap_or(1.0);
    let norm = match ff.enumeration("variance_norm", &["FAN_IN", "FAN_OUT", "AVERAGE"])? {
        None => VarianceNorm::FanIn,
        Some((n, _)) => match n.as_str() {
            "FAN_OUT" => VarianceNorm::FanOut,
            "AVERAGE" => VarianceNorm::Average,
            _ => VarianceNorm::FanIn,
        },
    };
    ff.finish(&["sparse"])?;
    match kind.as_str() {
        "constant" => Ok(Filler::Constant(value)),
        "uniform" if min <= max => Ok(Filler::Uniform { min, max }),
        "uniform" => Err(ff.err(m.line, format!("uniform filler has min {min} > max {max}"))),
        "gaussian" if std >= 0.0 => Ok(Filler::Gaussian { mean, std }),
        "gaussian" => Err(ff.err(m.line, "gaussian filler needs std >= 0")),
        "xavier" => Ok(Filler::Xavier(norm)),
        "msra" => Ok(Filler::Msra(norm)),
        other => Err(ff.err(
            m.line,
            format!("unknown filler type `{other}` in {name}; use constant, uniform, gaussian, xavier or msra"),
        )),
    }
}

fn conv(f: &mut Fields<'_>) -> Result<ConvConf> {
    let file = f.file();
    let Some(m) = f.message("convolution_param")? else {
        return Err(f.err(f.line(), "a Convolution layer needs `convolution_param { num_output kernel_size }`"));
    };
    let mut cf = Fields::new(file, "ConvolutionParameter", m);
    let num_output = cf.u32("num_output")?.unwrap_or(0) as usize;
    if num_output == 0 {
        return Err(cf.err(m.line, "convolution_param needs num_output >= 1"));
    }
    let kernel = size2(&mut cf, "kernel_size", None, m.line)?;
    let stride = size2(&mut cf, "stride", Some(1), m.line)?;
    let pad = size2(&mut cf, "pad", Some(0), m.line)?;
    let bias_term = cf.bool("bias_term")?.unwrap_or(true);
    let weight_filler = filler(&mut cf, "weight_filler")?;
    let bias_filler = filler(&mut cf, "bias_filler")?;
    if let Some(g) = cf.u32("group")? {
        if g != 1 {
            return Err(cf.err(m.line, format!("group {g}: only group 1 is supported")));
        }
    }
    if cf.u32s("dilation")?.iter().any(|d| *d != 1) {
        return Err(cf.err(m.line, "only dilation 1 is supported"));
    }
    cf.enumeration("engine", &["DEFAULT", "CAFFE", "CUDNN"])?;
    cf.finish(&["axis", "force_nd_im2col"])?;
    if kernel.0 == 0 || kernel.1 == 0 || stride.0 == 0 || stride.1 == 0 {
        return Err(cf.err(m.line, "kernel size and stride must be at least 1"));
    }
    Ok(ConvConf { num_output, kernel, stride, pad, bias_term, weight_filler, bias_filler })
}

fn pool(f: &mut Fields<'_>) -> Result<PoolConf> {
    let file = f.file();
    let Some(m) = f.message("pooling_param")? else {
        return Err(f.err(f.line(), "a Pooling layer needs `pooling_param { pool kernel_size stride }`"));
    };
    let mut pf = Fields::new(file, "PoolingParameter", m);
    let method = match pf.enumeration("pool", &["MAX", "AVE"])? {
        Some((p, _)) if p == "AVE" => PoolMethod::Ave,
        _ => PoolMethod::Max,
    };
    let global = pf.bool("global_pooling")?.unwrap_or(false);
    let kernel = size2(&mut pf, "kernel_size", if global { Some(1) } else { None }, m.line)?;
    let stride = size2(&mut pf, "stride", Some(1), m.line)?;
    let pad = size2(&mut pf, "pad", Some(0), m.line)?;
    pf.enumeration("engine", &["DEFAULT", "CAFFE", "CUDNN"])?;
    pf.finish(&["round_mode"])?;
    if kernel.0 == 0 || kernel.1 == 0 || stride.0 == 0 || stride.1 == 0 {
        return Err(pf.err(m.line, "kernel size and stride must be at least 1"));
    }
    if pad.0 >= kernel.0 || pad.1 >= kernel.1 {
        return Err(pf.err(m.line, "pad must be smaller than the kernel"));
    }
    Ok(PoolConf { method, kernel, stride, pad, global })
}

fn inner_product(f: &mut Fields<'_>) -> Result<InnerProductConf> {
    let file = f.file();
    let Some(m) = f.message("inner_product_param")? else {
        return Err(f.err(f.line(), "an InnerProduct layer needs `inner_product_param { num_output }`"));
    };
    let mut pf = Fields::new(file, "InnerProductParameter", m);
    let num_output = pf.u32("num_output")?.unwrap_or(0) as usize;
    if num_output == 0 {
        return Err(pf.err(m.line, "inner_product_param needs num_output >= 1"));
    }
    let bias_term = pf.bool("bias_term")?.unwrap_or(true);
    let weight_filler = filler(&mut pf, "weight_filler")?;
    let bias_filler = filler(&mut pf, "bias_filler")?;
    if let Some(a) = pf.i64("axis")? {
        if a != 1 {
            return Err(pf.err(m.line, format!("axis {a}: only axis 1 is supported")));
        }
    }
    if let Some(true) = pf.bool("transpose")? {
        return Err(pf.err(m.line, "transpose: true is not supported"));
    }
    pf.finish(&[])?;
    Ok(InnerProductConf { num_output, bias_term, weight_filler, bias_filler })
}
