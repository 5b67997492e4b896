//! Each layer type's `*_param` read into its settings: Caffe's field names
//! and defaults, every bad value recorded at its line with what to write
//! instead. It owns that per-type translation; which `*_param` a type may
//! set, and the checks across layers, are `net`'s (in this folder). It must never check
//! shapes (they are known only when the net is built) or read files.

use std::path::Path;

use crate::proto::caffe::{self, eltwise_parameter, loss_parameter, lrn_parameter, pooling_parameter};
use crate::proto::layer_conf::{
    DataConf, EltwiseOp, Filler, Hdf5Conf, ImageListConf, InnerProductConf, LrnConf, MemoryConf, NormRegion,
    Normalization, PoolConf, PoolMethod, PoolRound, PowerConf, ScaleConf,
};
use crate::proto::layer_spec::{BatchNormSpec, LayerSpec, LossNorm, NeuronFn};
use crate::proto::locate::Loc;
use crate::proto::net_param::LayerKind;
use crate::proto::problems::Problems;
use crate::proto::shared_params::{conv, dims2, filler, loss_norm};
use crate::proto::standard_params;

/// The settings of a layer of type `type_name` (one `TYPE_PARAMS` lists);
/// `None` when they cannot be read (the reasons recorded in `p`).
pub(crate) fn kind(
    type_name: &str,
    lp: &caffe::LayerParameter,
    loc: &Loc<'_>,
    base_dir: &Path,
    p: &mut Problems,
) -> Option<LayerKind> {
    let spec = |s: Option<LayerSpec>| s.map(LayerKind::Spec);
    match type_name {
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
        "LRN" => spec(lrn(lp, loc, p)),
        "Concat" => spec(concat(lp, loc, p)),
        "Eltwise" => spec(eltwise(lp, loc, p)),
        "Flatten" => {
            let f = lp.flatten_param.unwrap_or_default();
            Some(LayerKind::Spec(LayerSpec::Flatten { axis: f.axis().into(), end_axis: f.end_axis().into() }))
        }
        "Reshape" => spec(reshape(lp, loc, p)),
        "Softmax" => {
            let axis = lp.softmax_param.as_ref().map_or(1, |s| s.axis()).into();
            Some(LayerKind::Spec(LayerSpec::Softmax { axis }))
        }
        "BatchNorm" => spec(batch_norm(lp, loc, p)),
        "Scale" => spec(scale(lp, loc, p)),
        "PReLU" => {
            let pr = lp.prelu_param.clone().unwrap_or_default();
            let filler = filler(pr.filler.as_ref(), &loc.at("prelu_param"), "filler", Filler::Constant(0.25), p)?;
            Some(LayerKind::Spec(LayerSpec::PRelu { channel_shared: pr.channel_shared(), filler }))
        }
        "Power" => {
            let pw = lp.power_param.unwrap_or_default();
            Some(LayerKind::Spec(LayerSpec::Power(PowerConf {
                power: pw.power(),
                scale: pw.scale(),
                shift: pw.shift(),
            })))
        }
        "Input" => spec(input(lp, loc, p)),
        "ImageData" => image_data(lp, loc, base_dir, p).map(LayerKind::Data),
        "HDF5Data" => hdf5_data(lp, loc, base_dir, p).map(LayerKind::Data),
        "DummyData" => spec(dummy_data(lp, loc, p)),
        "AbsVal" => Some(LayerKind::Spec(LayerSpec::Neuron(NeuronFn::AbsVal))),
        "BNLL" => Some(LayerKind::Spec(LayerSpec::Neuron(NeuronFn::Bnll))),
        "Exp" | "Log" => spec(exp_log(type_name, lp, loc, p)),
        "Threshold" => {
            let threshold = lp.threshold_param.unwrap_or_default().threshold();
            Some(LayerKind::Spec(LayerSpec::Neuron(NeuronFn::Threshold(threshold))))
        }
        "ELU" => {
            let alpha = lp.elu_param.unwrap_or_default().alpha();
            if !(alpha >= 0.0 && alpha.is_finite()) {
                // Its backward reads the top (in place, as Caffe runs it), which needs alpha >= 0.
                p.push(loc.at("elu_param").of("alpha"), format!("alpha {alpha}: caffe-geeps runs ELU with alpha >= 0"));
            }
            Some(LayerKind::Spec(LayerSpec::Neuron(NeuronFn::Elu(alpha))))
        }
        "Silence" => Some(LayerKind::Spec(LayerSpec::Silence)),
        "EuclideanLoss" => {
            if lp.loss_param.as_ref().is_some_and(|l| l.ignore_label.is_some()) {
                p.push(
                    loc.at("loss_param").of("ignore_label"),
                    "ignore_label does not apply to EuclideanLoss; remove it",
                );
            }
            Some(LayerKind::Spec(LayerSpec::EuclideanLoss))
        }
        "SigmoidCrossEntropyLoss" => spec(sigmoid_cross_entropy(lp, loc, p)),
        "MemoryData" => memory_data(lp, loc, base_dir, p).map(LayerKind::Data),
        t if standard_params::TYPE_PARAMS.iter().any(|(s, _)| *s == t) => {
            spec(standard_params::spec(t, lp, loc, base_dir, p))
        }
        _ => unreachable!("TYPE_PARAMS lists only the types matched here"),
    }
}

fn lrn(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let l = lp.lrn_param.unwrap_or_default();
    let ll = loc.at("lrn_param");
    let local_size = l.local_size() as usize;
    if local_size % 2 == 0 {
        p.push(
            ll.of("local_size"),
            format!(
                "local_size {local_size} must be odd (the window is centred on each value); use {}",
                local_size + 1
            ),
        );
    }
    for (field, v) in [("alpha", l.alpha()), ("beta", l.beta())] {
        if !v.is_finite() {
            p.push(ll.of(field), format!("{field} must be a finite number"));
        }
    }
    let region = match l.norm_region() {
        lrn_parameter::NormRegion::AcrossChannels => NormRegion::AcrossChannels,
        lrn_parameter::NormRegion::WithinChannel => NormRegion::WithinChannel,
    };
    // Across channels `k` is the divisor's floor, which a power of −β needs
    // above 0; within a channel Caffe uses 1 and ignores it.
    if region == NormRegion::AcrossChannels && l.k() <= 0.0 {
        p.push(ll.of("k"), format!("k {} must be positive (Caffe's default is 1)", l.k()));
    }
    // `engine` picks an implementation, not the math: every engine runs here as CAFFE.
    Some(LayerSpec::Lrn(LrnConf { local_size, alpha: l.alpha(), beta: l.beta(), k: l.k(), region }))
}

fn concat(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let c = lp.concat_param.unwrap_or_default();
    let cl = loc.at("concat_param");
    match (c.axis, c.concat_dim) {
        (Some(_), Some(_)) => {
            p.push(cl.of("concat_dim"), "give `axis` or the old `concat_dim`, not both; keep `axis`");
            None
        }
        // The old field, as Caffe still reads it.
        (None, Some(d)) => Some(LayerSpec::Concat { axis: d.into() }),
        _ => Some(LayerSpec::Concat { axis: c.axis().into() }),
    }
}

fn eltwise(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let e = lp.eltwise_param.clone().unwrap_or_default();
    let el = loc.at("eltwise_param");
    // `stable_prod_grad: false` is Caffe's division shortcut for the same
    // gradient; the stable product serves both.
    let op = match e.operation() {
        eltwise_parameter::EltwiseOp::Sum => EltwiseOp::Sum(e.coeff.clone()),
        other => {
            if !e.coeff.is_empty() {
                p.push(
                    el.of("coeff"),
                    format!("coeff applies to operation: SUM only (this one is {}); remove it", other.as_str_name()),
                );
                return None;
            }
            if other == eltwise_parameter::EltwiseOp::Prod {
                EltwiseOp::Prod
            } else {
                EltwiseOp::Max
            }
        }
    };
    Some(LayerSpec::Eltwise(op))
}

fn reshape(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let Some(r) = &lp.reshape_param else {
        p.push(loc.line(), "a Reshape layer needs `reshape_param { shape { dim: ... } }`");
        return None;
    };
    let rl = loc.at("reshape_param");
    let Some(shape) = &r.shape else {
        p.push(rl.line(), "reshape_param needs `shape { dim: ... }` (0 copies an axis, -1 infers one)");
        return None;
    };
    let sl = rl.at("shape");
    let before = p.len();
    for (i, &d) in shape.dim.iter().enumerate() {
        if d < -1 {
            p.push(
                sl.nth("dim", i).line(),
                format!("dim {d} is invalid; use a positive size, 0 to copy or -1 to infer"),
            );
        }
    }
    if let Some(second) = shape.dim.iter().enumerate().filter(|(_, d)| **d == -1).nth(1) {
        p.push(sl.nth("dim", second.0).line(), "only one dim can be -1 (inferred); give this one a size");
    }
    if r.num_axes() < -1 {
        p.push(rl.of("num_axes"), format!("num_axes {} must be -1 (to the last axis) or more", r.num_axes()));
    }
    (p.len() == before).then(|| LayerSpec::Reshape {
        dims: shape.dim.clone(),
        axis: r.axis().into(),
        num_axes: r.num_axes().into(),
    })
}

fn batch_norm(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let b = lp.batch_norm_param.unwrap_or_default();
    let bl = loc.at("batch_norm_param");
    let fraction = b.moving_average_fraction();
    if !(0.0..=1.0).contains(&fraction) {
        p.push(bl.of("moving_average_fraction"), format!("moving_average_fraction {fraction} must be in [0, 1]"));
    }
    if b.eps() <= 0.0 {
        p.push(bl.of("eps"), format!("eps {} must be positive (Caffe's default is 1e-5)", b.eps()));
    }
    Some(LayerSpec::BatchNorm(BatchNormSpec {
        use_global_stats: b.use_global_stats,
        moving_average_fraction: fraction,
        eps: b.eps(),
    }))
}

fn scale(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let s = lp.scale_param.clone().unwrap_or_default();
    let sl = loc.at("scale_param");
    let d = ScaleConf::default();
    if s.num_axes() < -1 {
        p.push(sl.of("num_axes"), format!("num_axes {} must be -1 (to the last axis) or more", s.num_axes()));
    }
    let weights = filler(s.filler.as_ref(), &sl, "filler", d.filler, p);
    let bias = filler(s.bias_filler.as_ref(), &sl, "bias_filler", d.bias_filler, p);
    Some(LayerSpec::Scale(ScaleConf {
        axis: s.axis().into(),
        num_axes: s.num_axes().into(),
        bias_term: s.bias_term(),
        filler: weights?,
        bias_filler: bias?,
    }))
}

fn input(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let Some(ip) = &lp.input_param else {
        p.push(loc.line(), "an Input layer needs `input_param { shape { dim: ... } }`");
        return None;
    };
    let il = loc.at("input_param");
    let tops = lp.top.len();
    if ip.shape.is_empty() || (ip.shape.len() != 1 && ip.shape.len() != tops) {
        p.push(
            il.line(),
            format!("input_param has {} shapes for {tops} tops; give one shape, or one per top", ip.shape.len()),
        );
        return None;
    }
    let before = p.len();
    let mut shapes = Vec::new();
    for (i, s) in ip.shape.iter().enumerate() {
        let sl = il.nth("shape", i);
        if s.dim.is_empty() {
            p.push(sl.line(), "this shape has no `dim`; give each axis's size");
        }
        for (k, &d) in s.dim.iter().enumerate() {
            if d < 1 {
                p.push(sl.nth("dim", k).line(), format!("dim {d}: every dim of an input must be at least 1"));
            }
        }
        shapes.push(s.dim.iter().map(|&d| d.max(0) as usize).collect());
    }
    (p.len() == before).then_some(LayerSpec::Input { shapes, tops })
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

/// Exp and Log: `base` (−1: e, else above 0 and not 1 for Log), scale, shift.
fn exp_log(type_name: &str, lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let (base, scale, shift, field) = if type_name == "Exp" {
        let e = lp.exp_param.unwrap_or_default();
        (e.base(), e.scale(), e.shift(), "exp_param")
    } else {
        let l = lp.log_param.unwrap_or_default();
        (l.base(), l.scale(), l.shift(), "log_param")
    };
    if base != -1.0 && (base <= 0.0 || (type_name == "Log" && base == 1.0)) {
        p.push(
            loc.at(field).of("base"),
            format!(
                "base {base}: give -1 (e) or a positive base{}",
                if type_name == "Log" { " other than 1" } else { "" }
            ),
        );
        return None;
    }
    Some(LayerSpec::Neuron(if type_name == "Exp" {
        NeuronFn::Exp { base, scale, shift }
    } else {
        NeuronFn::Log { base, scale, shift }
    }))
}

/// SigmoidCrossEntropyLoss: divided by the batch unless loss_param says otherwise (Caffe 1.0).
fn sigmoid_cross_entropy(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    Some(LayerSpec::SigmoidCrossEntropyLoss(loss_norm(lp, LossNorm::Batch, loc, p)))
}

fn data(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<DataConf> {
    let Some(dp) = &lp.data_param else {
        p.push(loc.line(), "a Data layer needs `data_param { source: \"...\" batch_size: N }`");
        return None;
    };
    let dl = loc.at("data_param");
    // Neither source needs the database kind (`backend`: a directory is
    // read as an LMDB, a LevelDB refused with how to convert it) nor a
    // prefetch depth, so both are accepted as written.
    for (field, set, instead) in [
        ("rand_skip", dp.rand_skip.is_some(), "remove it"),
        ("scale", dp.scale.is_some(), "write it as transform_param { scale }"),
        ("mean_file", dp.mean_file.is_some(), "write it as transform_param { mean_file }"),
        ("crop_size", dp.crop_size.is_some(), "write it as transform_param { crop_size }"),
        ("mirror", dp.mirror.is_some(), "write it as transform_param { mirror }"),
        ("force_encoded_color", dp.force_encoded_color.is_some(), "remove it"),
    ] {
        if set {
            p.push(
                dl.of(field),
                format!("field `{field}` of DataParameter is not supported by caffe-geeps; {instead}"),
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
    transform(lp, loc, p, source?, batch_size, base_dir)
}

/// A data layer's settings: its source and batch with its `transform_param`.
fn transform(
    lp: &caffe::LayerParameter,
    loc: &Loc<'_>,
    p: &mut Problems,
    source: String,
    batch_size: usize,
    base_dir: &Path,
) -> Option<DataConf> {
    let tp = lp.transform_param.clone().unwrap_or_default();
    let tl = loc.at("transform_param");
    for (field, set) in [("force_color", tp.force_color()), ("force_gray", tp.force_gray())] {
        if set {
            p.push(tl.of(field), format!("`{field}` of transform_param is not supported by caffe-geeps; remove it"));
        }
    }
    if tp.mean_file.is_some() && !tp.mean_value.is_empty() {
        p.push(tl.of("mean_value"), "give `mean_file` or `mean_value`, not both (Caffe refuses both); keep one");
    }
    if !tp.scale().is_finite() {
        p.push(tl.of("scale"), "scale must be a finite number");
    }
    Some(DataConf {
        source,
        batch_size,
        scale: tp.scale(),
        mirror: tp.mirror(),
        crop_size: tp.crop_size() as usize,
        mean_values: tp.mean_value.clone(),
        mean_file: tp.mean_file.clone(),
        base_dir: base_dir.to_path_buf(),
        images: None,
        hdf5: None,
        memory: None,
    })
}

/// MemoryData: batches of the arrays the library's caller feeds it
/// (`DataCache::feed_memory_data`, as Caffe's `MemoryDataLayer::Reset`);
/// its source is its own name.
fn memory_data(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<DataConf> {
    let Some(mp) = &lp.memory_data_param else {
        p.push(loc.line(), "a MemoryData layer needs `memory_data_param { batch_size channels height width }`");
        return None;
    };
    let ml = loc.at("memory_data_param");
    let mut ok = true;
    for (field, value) in
        [("batch_size", mp.batch_size()), ("channels", mp.channels()), ("height", mp.height()), ("width", mp.width())]
    {
        if value == 0 {
            p.push(ml.line(), format!("memory_data_param needs `{field}` of at least 1"));
            ok = false;
        }
    }
    if lp.top.len() != 2 {
        p.push(loc.line(), "a MemoryData layer has two tops: the data and the label");
        ok = false;
    }
    let memory =
        MemoryConf { channels: mp.channels() as usize, height: mp.height() as usize, width: mp.width() as usize };
    let name = lp.name.clone().unwrap_or_default();
    let conf = transform(lp, loc, p, name, mp.batch_size() as usize, base_dir)?;
    ok.then_some(DataConf { memory: Some(memory), ..conf })
}

/// HDF5Data: a list file of .h5 files, each top a dataset of every file,
/// used as stored (no transform, as Caffe's).
fn hdf5_data(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<DataConf> {
    let Some(hp) = &lp.hdf5_data_param else {
        p.push(loc.line(), "an HDF5Data layer needs `hdf5_data_param { source: \"files.txt\" batch_size: N }`");
        return None;
    };
    let hl = loc.at("hdf5_data_param");
    let source = match hp.source.as_deref() {
        Some(s) if !s.trim().is_empty() => Some(s.to_string()),
        _ => {
            p.push(hl.line(), "hdf5_data_param has no `source` (a list file of .h5 paths, one a line)");
            None
        }
    };
    let batch_size = hp.batch_size() as usize;
    if batch_size == 0 {
        p.push(hl.line(), "hdf5_data_param needs `batch_size` of at least 1");
    }
    if lp.top.is_empty() {
        p.push(loc.line(), "an HDF5Data layer needs a `top` per dataset it reads (the top's name is the dataset's)");
    }
    let hdf5 = Hdf5Conf { datasets: lp.top.clone(), shuffle: hp.shuffle() };
    transform(lp, loc, p, source?, batch_size, base_dir).map(|c| DataConf { hdf5: Some(hdf5), ..c })
}

/// ImageData: a list file of images, read as a Data layer reads an LMDB.
fn image_data(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<DataConf> {
    let Some(ip) = &lp.image_data_param else {
        p.push(loc.line(), "an ImageData layer needs `image_data_param { source: \"list.txt\" batch_size: N }`");
        return None;
    };
    let il = loc.at("image_data_param");
    for (field, set, instead) in [
        ("rand_skip", ip.rand_skip.is_some(), "remove it"),
        ("scale", ip.scale.is_some(), "write it as transform_param { scale }"),
        ("mean_file", ip.mean_file.is_some(), "write it as transform_param { mean_file }"),
        ("crop_size", ip.crop_size.is_some(), "write it as transform_param { crop_size }"),
        ("mirror", ip.mirror.is_some(), "write it as transform_param { mirror }"),
    ] {
        if set {
            p.push(
                il.of(field),
                format!("field `{field}` of ImageDataParameter is not supported by caffe-geeps; {instead}"),
            );
        }
    }
    let Some(source) = ip.source.clone() else {
        p.push(il.line(), "image_data_param has no `source` (the list file: `path label` a line)");
        return None;
    };
    let batch_size = ip.batch_size() as usize;
    if batch_size == 0 {
        p.push(il.of("batch_size"), "image_data_param needs `batch_size` of at least 1");
    }
    if (ip.new_height() == 0) != (ip.new_width() == 0) {
        p.push(il.of("new_height"), "set both new_height and new_width, or neither");
    }
    let images = ImageListConf {
        root_folder: ip.root_folder().to_string(),
        new_height: ip.new_height(),
        new_width: ip.new_width(),
        is_color: ip.is_color(),
        shuffle: ip.shuffle(),
    };
    transform(lp, loc, p, source, batch_size, base_dir).map(|c| DataConf { images: Some(images), ..c })
}

/// DummyData: per top a shape (`shape`, or the legacy num/channels/height/
/// width) and a filler (none: constant 0; one: for every top).
fn dummy_data(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let d = lp.dummy_data_param.clone().unwrap_or_default();
    let dl = loc.at("dummy_data_param");
    let tops = lp.top.len();
    let legacy = [&d.num, &d.channels, &d.height, &d.width];
    let shapes: Vec<Vec<i64>> = if !d.shape.is_empty() {
        if legacy.iter().any(|l| !l.is_empty()) {
            p.push(dl.of("num"), "give `shape` or num/channels/height/width, not both");
            return None;
        }
        d.shape.iter().map(|s| s.dim.clone()).collect()
    } else {
        let n = d.num.len();
        if n == 0 || legacy.iter().any(|l| l.len() != n) {
            p.push(dl.line(), "DummyData needs `shape { dim: ... }` (or as many num, channels, height and width)");
            return None;
        }
        (0..n).map(|i| legacy.iter().map(|l| i64::from(l[i])).collect()).collect()
    };
    if shapes.len() != 1 && shapes.len() != tops {
        p.push(dl.line(), format!("{} shapes for {tops} tops; give one shape, or one per top", shapes.len()));
        return None;
    }
    if d.data_filler.len() > 1 && d.data_filler.len() != tops {
        p.push(
            dl.line(),
            format!("{} data_filler for {tops} tops; give none, one, or one per top", d.data_filler.len()),
        );
        return None;
    }
    let mut fillers = Vec::new();
    for i in 0..tops {
        // None: constant 0; one: for every top; else one per top.
        let which = if d.data_filler.len() == 1 { 0 } else { i };
        fillers.push(filler(d.data_filler.get(which), &dl, "data_filler", Filler::Constant(0.0), p)?);
    }
    let before = p.len();
    let shapes: Vec<Vec<usize>> = (0..tops)
        .map(|i| {
            let s = &shapes[if shapes.len() == 1 { 0 } else { i }];
            if s.is_empty() || s.iter().any(|&d| d < 1) {
                p.push(dl.line(), format!("shape {s:?}: every dim must be at least 1"));
            }
            s.iter().map(|&d| d.max(0) as usize).collect()
        })
        .collect();
    (p.len() == before).then_some(LayerSpec::DummyData { shapes, fillers })
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
    let round = match pp.round_mode() {
        pooling_parameter::RoundMode::Ceil => PoolRound::Ceil,
        pooling_parameter::RoundMode::Floor => PoolRound::Floor,
    };
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
    Some(PoolConf { method, kernel, stride, pad, global, round })
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
    let weight_filler = filler(ip.weight_filler.as_ref(), &il, "weight_filler", Filler::Constant(0.0), p);
    let bias_filler = filler(ip.bias_filler.as_ref(), &il, "bias_filler", Filler::Constant(0.0), p);
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
