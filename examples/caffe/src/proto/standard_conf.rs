//! The settings of Caffe's shape, reduction and loss layers beyond the
//! image classifiers' (Slice, Crop, Bias, Tile, Reduction, ArgMax, Embed,
//! MVN, SPP, ContrastiveLoss, HingeLoss, InfogainLoss) as plain values, with
//! Caffe's defaults. It owns these types only; it must never parse a file
//! or compute.

use std::path::PathBuf;

use crate::proto::layer_conf::{Filler, LossNorm, PoolMethod};

/// `bias_param`: the bias covers the bottom's axes [axis, axis + num_axes)
/// (−1: to the last); with two bottoms the second bottom's shape decides.
#[derive(Debug, Clone, PartialEq)]
pub struct BiasConf {
    pub axis: i64,
    pub num_axes: i64,
    pub filler: Filler,
}

impl Default for BiasConf {
    fn default() -> Self {
        BiasConf { axis: 1, num_axes: 1, filler: Filler::Constant(0.0) }
    }
}

/// Reduction's operations (Caffe's `ReductionOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReductionOp {
    Sum,
    /// Σ |x|.
    Asum,
    /// Σ x².
    Sumsq,
    Mean,
}

/// `reduction_param`: every axis from `axis` on is reduced, times `coeff`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReductionConf {
    pub op: ReductionOp,
    pub axis: i64,
    pub coeff: f32,
}

impl Default for ReductionConf {
    fn default() -> Self {
        ReductionConf { op: ReductionOp::Sum, axis: 0, coeff: 1.0 }
    }
}

/// `argmax_param`: the `top_k` largest along `axis` (unset: over all but
/// the first axis), with their values when `out_max_val`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArgMaxConf {
    pub out_max_val: bool,
    pub top_k: usize,
    pub axis: Option<i64>,
}

/// `embed_param`: a lookup table of `input_dim` rows of `num_output`.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedConf {
    pub num_output: usize,
    pub input_dim: usize,
    pub bias_term: bool,
    pub weight_filler: Filler,
    pub bias_filler: Filler,
}

/// `mvn_param`: per item and channel (or per item across channels), the
/// mean removed and, when `normalize_variance`, divided by σ + eps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MvnConf {
    pub normalize_variance: bool,
    pub across_channels: bool,
    pub eps: f32,
}

impl Default for MvnConf {
    fn default() -> Self {
        MvnConf { normalize_variance: true, across_channels: false, eps: 1e-9 }
    }
}

/// `spp_param`: levels 0 .. pyramid_height, level l pooling into 2^l × 2^l bins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SppConf {
    pub pyramid_height: usize,
    pub method: PoolMethod,
}

/// `contrastive_loss_param`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContrastiveConf {
    pub margin: f32,
    /// Caffe's first form: max(margin − d², 0) for dissimilar pairs.
    pub legacy_version: bool,
}

impl Default for ContrastiveConf {
    fn default() -> Self {
        ContrastiveConf { margin: 1.0, legacy_version: false }
    }
}

/// HingeLoss's norm: the hinge summed (L1) or squared (L2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HingeNorm {
    L1,
    L2,
}

/// InfogainLoss's settings: the class axis, the normaliser, and where H
/// comes from when it is not the third bottom.
#[derive(Debug, Clone, PartialEq)]
pub struct InfogainConf {
    pub axis: i64,
    pub norm: LossNorm,
    /// `infogain_loss_param.source` as written, and the net file's folder
    /// to resolve it against.
    pub source: Option<String>,
    pub base_dir: PathBuf,
    /// H, row-major, once the net has read `source` (empty before).
    pub matrix: Vec<f32>,
}
