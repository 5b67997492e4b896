//! The settings several layer types read alike: a filler, a 2-D size from
//! a repeated field or its `_h`/`_w` forms, and `convolution_param` (which
//! Convolution and Deconvolution share). Every bad value is recorded at its
//! line with what to write instead; it must never check shapes or read files.

use crate::proto::caffe::{self, filler_parameter, loss_parameter};
use crate::proto::layer_conf::{ConvConf, Filler, VarianceNorm};
use crate::proto::layer_spec::LossNorm;
use crate::proto::locate::Loc;
use crate::proto::problems::Problems;

/// A 2-D size from a repeated field (one or two values) or its `_h`/`_w` forms.
pub(crate) fn dims2(
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

/// Field `name` of `l` (`default` when it is not written).
pub(crate) fn filler(
    f: Option<&caffe::FillerParameter>,
    l: &Loc<'_>,
    name: &str,
    default: Filler,
    p: &mut Problems,
) -> Option<Filler> {
    let Some(f) = f else { return Some(default) };
    let fl = l.at(name);
    let norm = match f.variance_norm() {
        filler_parameter::VarianceNorm::FanIn => VarianceNorm::FanIn,
        filler_parameter::VarianceNorm::FanOut => VarianceNorm::FanOut,
        filler_parameter::VarianceNorm::Average => VarianceNorm::Average,
    };
    let sparse = f.sparse();
    if sparse < -1 || (sparse != -1 && f.r#type() != "gaussian") {
        p.push(
            fl.of("sparse"),
            format!("`sparse: {sparse}` applies only to a gaussian filler, and must be >= 0 there (Caffe's rule); remove it"),
        );
    }
    let (min, max, mean, std) = (f.min(), f.max(), f.mean(), f.std());
    let filler = match f.r#type() {
        "constant" => Filler::Constant(f.value()),
        "uniform" if min <= max => Filler::Uniform { min, max },
        "uniform" => {
            p.push(fl.line(), format!("uniform filler has min {min} > max {max}"));
            return None;
        }
        "gaussian" if std >= 0.0 && sparse >= 0 => Filler::SparseGaussian { mean, std, sparse: sparse as u32 },
        "gaussian" if std >= 0.0 => Filler::Gaussian { mean, std },
        "gaussian" => {
            p.push(fl.of("std"), "gaussian filler needs std >= 0");
            return None;
        }
        "xavier" => Filler::Xavier(norm),
        "msra" => Filler::Msra(norm),
        "bilinear" => Filler::Bilinear,
        other => {
            p.push(
                fl.of("type"),
                format!("unknown filler type `{other}` in {name}; use constant, uniform, gaussian, xavier, msra or bilinear"),
            );
            return None;
        }
    };
    Some(filler)
}

pub(crate) fn conv(lp: &caffe::LayerParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<ConvConf> {
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
    let dilation = dims2(&c.dilation, (None, None), Some(1), ("dilation", "dilation"), &cl, p);
    let weight_filler = filler(c.weight_filler.as_ref(), &cl, "weight_filler", Filler::Constant(0.0), p);
    let bias_filler = filler(c.bias_filler.as_ref(), &cl, "bias_filler", Filler::Constant(0.0), p);
    let group = c.group() as usize;
    if group == 0 {
        p.push(cl.of("group"), "group 0: use group 1 (no grouping) or more");
    } else if num_output % group != 0 {
        p.push(
            cl.of("group"),
            format!("group {group} must divide num_output {num_output}; use a divisor of it (1 for no grouping)"),
        );
    }
    if c.axis() != 1 {
        p.push(cl.of("axis"), format!("axis {}: only axis 1 is supported", c.axis()));
    }
    if c.force_nd_im2col() {
        p.push(cl.of("force_nd_im2col"), "force_nd_im2col is not supported; remove it");
    }
    let (kernel, stride, pad, dilation) = (kernel?, stride?, pad?, dilation?);
    if kernel.0 == 0 || kernel.1 == 0 || stride.0 == 0 || stride.1 == 0 {
        p.push(cl.line(), "kernel size and stride must be at least 1");
    }
    if dilation.0 == 0 || dilation.1 == 0 {
        p.push(cl.of("dilation"), "dilation must be at least 1 (1: no dilation)");
    }
    Some(ConvConf {
        num_output,
        kernel,
        stride,
        pad,
        dilation,
        group,
        bias_term: c.bias_term(),
        weight_filler: weight_filler?,
        bias_filler: bias_filler?,
    })
}

/// A loss layer's normalisation from its `loss_param`, Caffe 1.0's rules:
/// `normalization` when given (FULL and VALID agree without an
/// `ignore_label`, which is refused), else the old `normalize` (true: by
/// the count, false: by the batch), else the layer's own `default`.
pub(crate) fn loss_norm(lp: &caffe::LayerParameter, default: LossNorm, loc: &Loc<'_>, p: &mut Problems) -> LossNorm {
    let Some(l) = &lp.loss_param else { return default };
    if l.ignore_label.is_some() {
        p.push(loc.at("loss_param").of("ignore_label"), "ignore_label is not supported; remove it");
    }
    if l.normalization.is_some() {
        return match l.normalization() {
            loss_parameter::NormalizationMode::Full | loss_parameter::NormalizationMode::Valid => LossNorm::Count,
            loss_parameter::NormalizationMode::BatchSize => LossNorm::Batch,
            loss_parameter::NormalizationMode::None => LossNorm::None,
        };
    }
    match l.normalize {
        Some(true) => LossNorm::Count,
        Some(false) => LossNorm::Batch,
        None => default,
    }
}
