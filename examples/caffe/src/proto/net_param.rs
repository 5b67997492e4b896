//! A parsed net as plain values: each layer's name, type with its settings,
//! blobs, parameter multipliers, loss weights and state rules. It owns
//! these types and the state-rule check; reading them from a file is
//! `net.rs`'s (in this folder), and it must never build anything.

use std::path::PathBuf;

use crate::proto::layer_conf::{ConvConf, DataConf, InnerProductConf, Normalization, ParamShare, ParamSpec, PoolConf};
use crate::proto::layer_spec::LayerSpec;
use crate::proto::net_state::{admits, NetState, Phase, StateRule};

/// A layer's type with its type-specific settings.
#[derive(Debug, Clone, PartialEq)]
pub enum LayerKind {
    Data(DataConf),
    Convolution(ConvConf),
    Pooling(PoolConf),
    InnerProduct(InnerProductConf),
    ReLU {
        negative_slope: f32,
    },
    Sigmoid,
    TanH,
    Dropout {
        ratio: f32,
    },
    SoftmaxWithLoss {
        normalization: Normalization,
    },
    Accuracy {
        top_k: usize,
    },
    /// The types beyond LeNet's (LRN, Concat, BatchNorm, ...).
    Spec(LayerSpec),
}

impl LayerKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            LayerKind::Data(c) if c.images.is_some() => "ImageData",
            LayerKind::Data(c) if c.hdf5.is_some() => "HDF5Data",
            LayerKind::Data(c) if c.memory.is_some() => "MemoryData",
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
            LayerKind::Spec(s) => s.type_name(),
        }
    }
}

/// Every layer type a prototxt may name (the automatic Split aside).
pub const LAYER_TYPES: [&str; 49] = [
    "Data",
    "ImageData",
    "HDF5Data",
    "MemoryData",
    "Input",
    "DummyData",
    "Convolution",
    "Pooling",
    "InnerProduct",
    "ReLU",
    "PReLU",
    "Sigmoid",
    "TanH",
    "Power",
    "Dropout",
    "LRN",
    "BatchNorm",
    "Scale",
    "Concat",
    "Eltwise",
    "Flatten",
    "Reshape",
    "Softmax",
    "SoftmaxWithLoss",
    "Accuracy",
    "AbsVal",
    "BNLL",
    "Exp",
    "Log",
    "Threshold",
    "ELU",
    "Silence",
    "EuclideanLoss",
    "SigmoidCrossEntropyLoss",
    "Slice",
    "Crop",
    "Deconvolution",
    "Bias",
    "Tile",
    "Reduction",
    "ArgMax",
    "Embed",
    "MVN",
    "SPP",
    "Parameter",
    "ContrastiveLoss",
    "HingeLoss",
    "MultinomialLogisticLoss",
    "InfogainLoss",
];

/// The net states a layer is in: its `include` and `exclude` rules (phase,
/// level, stages).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PhaseRules {
    pub include: Vec<StateRule>,
    pub exclude: Vec<StateRule>,
}

impl PhaseRules {
    /// Whether the layer is in a net of `phase` at level 0 without stages.
    pub fn admits(&self, phase: Phase) -> bool {
        self.admits_state(&NetState::phase(phase))
    }

    /// Caffe's rule: any met include (if there are includes), else no met exclude.
    pub fn admits_state(&self, state: &NetState) -> bool {
        admits(&self.include, &self.exclude, state)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LayerParam {
    pub name: String,
    pub kind: LayerKind,
    pub bottoms: Vec<String>,
    pub tops: Vec<String>,
    pub params: Vec<ParamSpec>,
    /// Per `param` block: its sharing name, when it has one.
    pub shares: Vec<Option<ParamShare>>,
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
