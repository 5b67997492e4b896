//! The layer types beyond LeNet's with their settings, as plain values:
//! the one step between a parsed `LayerParameter` and building the layer
//! (`layers::spec`). It owns these types only; it must never build a layer
//! or read files.

pub use crate::proto::layer_conf::LossNorm;
use crate::proto::layer_conf::{BatchNormConf, ConvSpec, EltwiseOp, Filler, LrnConf, PowerConf, ScaleConf};
use crate::proto::shape::Shape;
use crate::proto::standard_conf::{
    ArgMaxConf, BiasConf, ContrastiveConf, EmbedConf, HingeNorm, InfogainConf, MvnConf, ReductionConf, SppConf,
};

/// `batch_norm_param` as written: `use_global_stats` unset means Caffe's
/// phase default (batch statistics in TRAIN, stored ones in TEST).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNormSpec {
    pub use_global_stats: Option<bool>,
    pub moving_average_fraction: f32,
    pub eps: f32,
}

impl Default for BatchNormSpec {
    fn default() -> Self {
        let d = BatchNormConf::for_phase(true);
        BatchNormSpec { use_global_stats: None, moving_average_fraction: d.moving_average_fraction, eps: d.eps }
    }
}

/// A layer type with its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum LayerSpec {
    Convolution(ConvSpec),
    Lrn(LrnConf),
    Concat {
        axis: i64,
    },
    Eltwise(EltwiseOp),
    Flatten {
        axis: i64,
        end_axis: i64,
    },
    Reshape {
        dims: Vec<i64>,
        axis: i64,
        num_axes: i64,
    },
    Softmax {
        axis: i64,
    },
    BatchNorm(BatchNormSpec),
    Scale(ScaleConf),
    PRelu {
        channel_shared: bool,
        filler: Filler,
    },
    Power(PowerConf),
    /// Shapes of the tops (one for all, or one per top) and the top count.
    Input {
        shapes: Vec<Shape>,
        tops: usize,
    },
    /// One shape and one filler per top.
    DummyData {
        shapes: Vec<Shape>,
        fillers: Vec<Filler>,
    },
    /// A pointwise function of one blob (AbsVal, BNLL, Exp, Log, Threshold, ELU).
    Neuron(NeuronFn),
    /// Takes any bottoms, makes no top.
    Silence,
    /// ‖a − b‖² / 2N.
    EuclideanLoss,
    /// Cross-entropy of sigmoid(x) against targets in [0, 1].
    SigmoidCrossEntropyLoss(LossNorm),
    /// Cuts one bottom along `axis` at `points` (none: into equal parts, one per top).
    Slice {
        axis: i64,
        points: Vec<usize>,
        tops: usize,
    },
    /// The first bottom cut to the second's sizes from `axis` on, starting
    /// at `offsets` (none: 0; one: for every cropped axis; else one each).
    Crop {
        axis: i64,
        offsets: Vec<usize>,
    },
    /// The transpose of a convolution (its `convolution_param`).
    Deconvolution(ConvSpec),
    Bias(BiasConf),
    /// `tiles` copies of the bottom along `axis`.
    Tile {
        axis: i64,
        tiles: usize,
    },
    Reduction(ReductionConf),
    ArgMax(ArgMaxConf),
    Embed(EmbedConf),
    Mvn(MvnConf),
    Spp(SppConf),
    /// A learned blob of this shape as its top.
    Parameter {
        shape: Shape,
    },
    ContrastiveLoss(ContrastiveConf),
    HingeLoss(HingeNorm),
    /// −Σ log p(label) / N over probabilities.
    MultinomialLogisticLoss,
    /// Softmax, then −Σ H[label, k] log p_k over the normaliser.
    InfogainLoss(InfogainConf),
}

/// The pointwise functions, with Caffe's settings (`base` −1 is e).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NeuronFn {
    AbsVal,
    Bnll,
    Exp { base: f32, scale: f32, shift: f32 },
    Log { base: f32, scale: f32, shift: f32 },
    Threshold(f32),
    Elu(f32),
}

impl LayerSpec {
    /// Caffe's type name.impl LayerSpec {
    /// Caffe's type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            LayerSpec::Convolution(_) => "Convolution",
            LayerSpec::Lrn(_) => "LRN",
            LayerSpec::Concat { .. } => "Concat",
            LayerSpec::Eltwise(_) => "Eltwise",
            LayerSpec::Flatten { .. } => "Flatten",
            LayerSpec::Reshape { .. } => "Reshape",
            LayerSpec::Softmax { .. } => "Softmax",
            LayerSpec::BatchNorm(_) => "BatchNorm",
            LayerSpec::Scale(_) => "Scale",
            LayerSpec::PRelu { .. } => "PReLU",
            LayerSpec::Power(_) => "Power",
            LayerSpec::Input { .. } => "Input",
            LayerSpec::DummyData { .. } => "DummyData",
            LayerSpec::Neuron(f) => match f {
                NeuronFn::AbsVal => "AbsVal",
                NeuronFn::Bnll => "BNLL",
                NeuronFn::Exp { .. } => "Exp",
                NeuronFn::Log { .. } => "Log",
                NeuronFn::Threshold(_) => "Threshold",
                NeuronFn::Elu(_) => "ELU",
            },
            LayerSpec::Silence => "Silence",
            LayerSpec::EuclideanLoss => "EuclideanLoss",
            LayerSpec::SigmoidCrossEntropyLoss(_) => "SigmoidCrossEntropyLoss",
            LayerSpec::Slice { .. } => "Slice",
            LayerSpec::Crop { .. } => "Crop",
            LayerSpec::Deconvolution(_) => "Deconvolution",
            LayerSpec::Bias(_) => "Bias",
            LayerSpec::Tile { .. } => "Tile",
            LayerSpec::Reduction(_) => "Reduction",
            LayerSpec::ArgMax(_) => "ArgMax",
            LayerSpec::Embed(_) => "Embed",
            LayerSpec::Mvn(_) => "MVN",
            LayerSpec::Spp(_) => "SPP",
            LayerSpec::Parameter { .. } => "Parameter",
            LayerSpec::ContrastiveLoss(_) => "ContrastiveLoss",
            LayerSpec::HingeLoss(_) => "HingeLoss",
            LayerSpec::MultinomialLogisticLoss => "MultinomialLogisticLoss",
            LayerSpec::InfogainLoss(_) => "InfogainLoss",
        }
    }
}
