//! The `*_param` of Caffe's remaining standard layers (Slice, Crop,
//! Deconvolution, Bias, Tile, Reduction, ArgMax, Embed, MVN, SPP,
//! Parameter, ContrastiveLoss, HingeLoss, MultinomialLogisticLoss,
//! InfogainLoss) read
//! into their settings with Caffe's defaults, every bad or unsupported
//! value recorded at its line with what to write instead. It owns that
//! per-type translation; it must never check shapes (known only when the
//! net is built) or read files (InfogainLoss's `source` is read by the net).

use std::path::Path;

use crate::proto::caffe::{self, hinge_loss_parameter, reduction_parameter, spp_parameter};
use crate::proto::layer_conf::{ConvSpec, Filler, PoolMethod};
use crate::proto::layer_spec::{LayerSpec, LossNorm};
use crate::proto::locate::Loc;
use crate::proto::problems::Problems;
use crate::proto::shared_params::{conv, filler, loss_norm};
use crate::proto::standard_conf::{
    ArgMaxConf, BiasConf, ContrastiveConf, EmbedConf, HingeNorm, InfogainConf, MvnConf, ReductionConf, ReductionOp,
    SppConf,
};

/// The layer types read here, with the `*_param` fields each may set.
pub(crate) const TYPE_PARAMS: &[(&str, &[&str])] = &[
    ("Slice", &["slice_param"]),
    ("Crop", &["crop_param"]),
    ("Deconvolution", &["convolution_param"]),
    ("Bias", &["bias_param"]),
    ("Tile", &["tile_param"]),
    ("Reduction", &["reduction_param"]),
    ("ArgMax", &["argmax_param"]),
    ("Embed", &["embed_param"]),
    ("MVN", &["mvn_param"]),
    ("SPP", &["spp_param"]),
    ("Parameter", &["parameter_param"]),
    ("ContrastiveLoss", &["contrastive_loss_param", "loss_param"]),
    ("HingeLoss", &["hinge_loss_param", "loss_param"]),
    ("MultinomialLogisticLoss", &["loss_param"]),
    ("InfogainLoss", &["infogain_loss_param", "loss_param"]),
];

/// The `*_param` fields of these types that a layer sets.
pub(crate) fn set_params(lp: &caffe::LayerParameter) -> Vec<&'static str> {
    [
        ("slice_param", lp.slice_param.is_some()),
        ("crop_param", lp.crop_param.is_some()),
        ("bias_param", lp.bias_param.is_some()),
        ("tile_param", lp.tile_param.is_some()),
        ("reduction_param", lp.reduction_param.is_some()),
        ("argmax_param", lp.argmax_param.is_some()),
        ("embed_param", lp.embed_param.is_some()),
        ("mvn_param", lp.mvn_param.is_some()),
        ("spp_param", lp.spp_param.is_some()),
        ("parameter_param", lp.parameter_param.is_some()),
        ("contrastive_loss_param", lp.contrastive_loss_param.is_some()),
        ("hinge_loss_param", lp.hinge_loss_param.is_some()),
        ("infogain_loss_param", lp.infogain_loss_param.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}

/// The settings of a layer of `type_name` (one of [`TYPE_PARAMS`]); `None`
/// when they cannot be read (the reasons recorded in `p`).
pub(crate) fn spec(
    type_name: &str,
    lp: &caffe::LayerParameter,
    loc: &Loc<'_>,
    base_dir: &Path,
    p: &mut Problems,
) -> Option<LayerSpec> {
    let before = p.len();
    let spec = match type_name {
        "Slice" => slice(lp, loc, p),
        "Crop" => {
            let c = lp.crop_param.clone().unwrap_or_default();
            Some(LayerSpec::Crop { axis: c.axis().into(), offsets: c.offset.iter().map(|&o| o as usize).collect() })
        }
        "Deconvolution" => conv(lp, loc, p).map(|c| LayerSpec::Deconvolution(ConvSpec::from(&c))),
        "Bias" => {
            let b = lp.bias_param.clone().unwrap_or_default();
            let bl = loc.at("bias_param");
            if b.num_axes() < -1 {
                p.push(bl.of("num_axes"), format!("num_axes {} must be -1 (to the last axis) or more", b.num_axes()));
            }
            let filler = filler(b.filler.as_ref(), &bl, "filler", Filler::Constant(0.0), p)?;
            Some(LayerSpec::Bias(BiasConf { axis: b.axis().into(), num_axes: b.num_axes().into(), filler }))
        }
        "Tile" => {
            let t = lp.tile_param.unwrap_or_default();
            let tl = loc.at("tile_param");
            match t.tiles {
                None => {
                    p.push(tl.line(), "a Tile layer needs `tile_param { tiles: N }` (the number of copies)");
                    None
                }
                Some(n) if n < 1 => {
                    p.push(tl.of("tiles"), format!("tiles {n} must be at least 1"));
                    None
                }
                Some(n) => Some(LayerSpec::Tile { axis: t.axis().into(), tiles: n as usize }),
            }
        }
        "Reduction" => {
            let r = lp.reduction_param.unwrap_or_default();
            let op = match r.operation() {
                reduction_parameter::ReductionOp::Sum => ReductionOp::Sum,
                reduction_parameter::ReductionOp::Asum => ReductionOp::Asum,
                reduction_parameter::ReductionOp::Sumsq => ReductionOp::Sumsq,
                reduction_parameter::ReductionOp::Mean => ReductionOp::Mean,
            };
            Some(LayerSpec::Reduction(ReductionConf { op, axis: r.axis().into(), coeff: r.coeff() }))
        }
        "ArgMax" => {
            let a = lp.argmax_param.unwrap_or_default();
            if a.top_k() < 1 {
                p.push(loc.at("argmax_param").of("top_k"), "top_k must be at least 1");
            }
            Some(LayerSpec::ArgMax(ArgMaxConf {
                out_max_val: a.out_max_val(),
                top_k: a.top_k() as usize,
                axis: a.axis.map(i64::from),
            }))
        }
        "Embed" => embed(lp, loc, p),
        "MVN" => {
            let m = lp.mvn_param.unwrap_or_default();
            if !(m.eps() >= 0.0 && m.eps().is_finite()) {
                p.push(loc.at("mvn_param").of("eps"), format!("eps {} must be a finite number >= 0", m.eps()));
            }
            Some(LayerSpec::Mvn(MvnConf {
                normalize_variance: m.normalize_variance(),
                across_channels: m.across_channels(),
                eps: m.eps(),
            }))
        }
        "SPP" => spp(lp, loc, p),
        "Parameter" => parameter(lp, loc, p),
        "ContrastiveLoss" => {
            let c = lp.contrastive_loss_param.unwrap_or_default();
            Some(LayerSpec::ContrastiveLoss(ContrastiveConf { margin: c.margin(), legacy_version: c.legacy_version() }))
        }
        "HingeLoss" => {
            let norm = match lp.hinge_loss_param.unwrap_or_default().norm() {
                hinge_loss_parameter::Norm::L1 => HingeNorm::L1,
                hinge_loss_parameter::Norm::L2 => HingeNorm::L2,
            };
            Some(LayerSpec::HingeLoss(norm))
        }
        "MultinomialLogisticLoss" => Some(LayerSpec::MultinomialLogisticLoss),
        "InfogainLoss" => infogain(lp, loc, base_dir, p),
        _ => unreachable!("TYPE_PARAMS lists only the types matched here"),
    };
    if matches!(type_name, "ContrastiveLoss" | "HingeLoss" | "MultinomialLogisticLoss") {
        batch_divided_loss(type_name, lp, loc, p);
    }
    spec.filter(|_| p.len() == before)
}

/// Slice: `axis` or the old `slice_dim`, and the cut points (increasing).
fn slice(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let s = lp.slice_param.clone().unwrap_or_default();
    let sl = loc.at("slice_param");
    let axis = match (s.axis, s.slice_dim) {
        (Some(_), Some(_)) => {
            p.push(
                sl.of("slice_dim"),
                "give `axis` or the old `slice_dim`, not both (Caffe refuses both); keep `axis`",
            );
            return None;
        }
        (None, Some(d)) => i64::from(d),
        _ => s.axis().into(),
    };
    let tops = lp.top.len();
    if !s.slice_point.is_empty() && s.slice_point.len() + 1 != tops {
        p.push(
            sl.of("slice_point"),
            format!(
                "{} slice_point for {tops} tops: give one fewer than the tops, or none to cut equal parts",
                s.slice_point.len()
            ),
        );
        return None;
    }
    for (i, w) in s.slice_point.windows(2).enumerate() {
        if w[1] <= w[0] {
            p.push(
                sl.nth("slice_point", i + 1).line(),
                format!("slice_point {} must be above the one before ({})", w[1], w[0]),
            );
        }
    }
    if s.slice_point.first() == Some(&0) {
        p.push(
            sl.nth("slice_point", 0).line(),
            "slice_point 0 would make an empty first top; the first must be at least 1",
        );
    }
    Some(LayerSpec::Slice { axis, points: s.slice_point.iter().map(|&x| x as usize).collect(), tops })
}

fn embed(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let Some(e) = &lp.embed_param else {
        p.push(loc.line(), "an Embed layer needs `embed_param { num_output input_dim }`");
        return None;
    };
    let el = loc.at("embed_param");
    if e.num_output() == 0 {
        p.push(el.line(), "embed_param needs num_output >= 1");
    }
    if e.input_dim() == 0 {
        p.push(el.line(), "embed_param needs input_dim >= 1 (one more than the largest index)");
    }
    let weight_filler = filler(e.weight_filler.as_ref(), &el, "weight_filler", Filler::Constant(0.0), p);
    let bias_filler = filler(e.bias_filler.as_ref(), &el, "bias_filler", Filler::Constant(0.0), p);
    Some(LayerSpec::Embed(EmbedConf {
        num_output: e.num_output() as usize,
        input_dim: e.input_dim() as usize,
        bias_term: e.bias_term(),
        weight_filler: weight_filler?,
        bias_filler: bias_filler?,
    }))
}

fn spp(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let s = lp.spp_param.unwrap_or_default();
    let sl = loc.at("spp_param");
    let method = match s.pool() {
        spp_parameter::PoolMethod::Max => PoolMethod::Max,
        spp_parameter::PoolMethod::Ave => PoolMethod::Ave,
        spp_parameter::PoolMethod::Stochastic => {
            p.push(sl.of("pool"), "pool: STOCHASTIC is not supported; use MAX or AVE");
            return None;
        }
    };
    // `engine` picks an implementation, not the math: every engine runs here as CAFFE.
    let height = s.pyramid_height();
    if height < 1 {
        p.push(sl.line(), "an SPP layer needs `spp_param { pyramid_height: N }` with N >= 1");
        return None;
    }
    Some(LayerSpec::Spp(SppConf { pyramid_height: height as usize, method }))
}

fn parameter(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerSpec> {
    let Some(shape) = lp.parameter_param.as_ref().and_then(|pp| pp.shape.as_ref()) else {
        p.push(loc.line(), "a Parameter layer needs `parameter_param { shape { dim: ... } }`");
        return None;
    };
    let sl = loc.at("parameter_param").at("shape");
    for (k, &d) in shape.dim.iter().enumerate() {
        if d < 1 {
            p.push(sl.nth("dim", k).line(), format!("dim {d}: every dim of a Parameter must be at least 1"));
        }
    }
    Some(LayerSpec::Parameter { shape: shape.dim.iter().map(|&d| d.max(0) as usize).collect() })
}

/// These losses divide by the batch whatever `loss_param` says (as Caffe's
/// do): a `loss_param` field set on them is refused rather than ignored.
fn batch_divided_loss(type_name: &str, lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) {
    let Some(l) = &lp.loss_param else { return };
    let ll = loc.at("loss_param");
    for (field, set) in [
        ("ignore_label", l.ignore_label.is_some()),
        ("normalization", l.normalization.is_some()),
        ("normalize", l.normalize.is_some()),
    ] {
        if set {
            p.push(
                ll.of(field),
                format!("`{field}` does not apply to {type_name}, which Caffe divides by the batch size; remove it"),
            );
        }
    }
}

/// InfogainLoss: the class axis, Caffe 1.0's normalisation (VALID by
/// default; without `ignore_label` FULL and VALID agree), and the matrix's
/// file unless H is the third bottom.
fn infogain(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<LayerSpec> {
    let ip = lp.infogain_loss_param.clone().unwrap_or_default();
    let norm = loss_norm(lp, LossNorm::Count, loc, p);
    let bottoms = lp.bottom.len();
    match (bottoms, &ip.source) {
        (3, Some(_)) => p.push(
            loc.at("infogain_loss_param").of("source"),
            "H is the third bottom here: give `source` or a third bottom, not both (Caffe ignores `source` then); remove it",
        ),
        (2, None) => p.push(
            loc.line(),
            "InfogainLoss needs its matrix H: `infogain_loss_param { source: \"H.binaryproto\" }` or a third bottom",
        ),
        _ => {}
    }
    Some(LayerSpec::InfogainLoss(InfogainConf {
        axis: ip.axis().into(),
        norm,
        source: if bottoms == 3 { None } else { ip.source.clone() },
        base_dir: base_dir.to_path_buf(),
        matrix: Vec::new(),
    }))
}
