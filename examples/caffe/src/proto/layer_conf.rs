//! Each layer type's settings as plain values (Caffe's `*_param` messages),
//! with Caffe's defaults: what the prototxt reader produces and the layers
//! are built from. It owns these types only; it must never parse a file or
//! compute.

use std::path::PathBuf;

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
    /// Caffe's gaussian with `sparse: s`: each value kept with probability
    /// s / `shape[0]` (the outputs), the others zero.
    SparseGaussian {
        mean: f32,
        std: f32,
        sparse: u32,
    },
    /// Uniform in ±sqrt(3 / n), n from `norm`.
    Xavier(VarianceNorm),
    /// Gaussian with std sqrt(2 / n), n from `norm`.
    Msra(VarianceNorm),
    /// Bilinear upsampling weights over the last two axes (a
    /// Deconvolution's kernel in FCNs).
    Bilinear,
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

/// `param { name share_mode }` of one parameter blob: the name layers
/// share it by (Caffe's weight sharing), and which multipliers the block
/// wrote (a sharer's must agree with the owner's, as Caffe checks).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamShare {
    pub name: String,
    /// `share_mode: PERMISSIVE`: only the counts must agree, not the shapes.
    pub permissive: bool,
    pub lr_set: bool,
    pub decay_set: bool,
    /// The line of the `param` block.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DataConf {
    /// An LMDB directory or the path prefix of IDX files, as written.
    pub source: String,
    pub batch_size: usize,
    /// `transform_param`: `(x − mean) · scale`, after a crop (`crop_size`
    /// 0: none) and, in TRAIN, a random mirror.
    pub scale: f32,
    pub mirror: bool,
    pub crop_size: usize,
    /// One value for every channel, or one per channel; empty: none.
    pub mean_values: Vec<f32>,
    /// A mean image (`.binaryproto`), as written; loaded by the net.
    pub mean_file: Option<String>,
    /// The prototxt's directory, to resolve a relative source or mean_file against.
    pub base_dir: PathBuf,
    /// An ImageData layer's: `source` is a list of image files.
    pub images: Option<ImageListConf>,
    /// An HDF5Data layer's: `source` is a list of .h5 files.
    pub hdf5: Option<Hdf5Conf>,
    /// A MemoryData layer's: `source` is the layer's name, under which the
    /// library's caller feeds it arrays (`DataCache::feed_memory_data`).
    pub memory: Option<MemoryConf>,
}

/// A MemoryData layer's item shape (its `memory_data_param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemoryConf {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

/// How an HDF5Data layer reads its files (its `hdf5_data_param` and tops).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Hdf5Conf {
    /// The dataset each top reads, in top order (the tops' names).
    pub datasets: Vec<String>,
    pub shuffle: bool,
}

/// How an ImageData layer reads its images (its `image_data_param`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ImageListConf {
    /// The folder the list's paths are under ("": as written).
    pub root_folder: String,
    /// Resize to this size when both are above 0.
    pub new_height: u32,
    pub new_width: u32,
    /// BGR (true) or one grey channel.
    pub is_color: bool,
    pub shuffle: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConvConf {
    pub num_output: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub dilation: (usize, usize),
    /// Channel groups (AlexNet's two-tower convolutions).
    pub group: usize,
    pub bias_term: bool,
    pub weight_filler: Filler,
    pub bias_filler: Filler,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMethod {
    Max,
    Ave,
}

/// `round_mode`: how the pooled size rounds `(in + 2·pad − kernel) / stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolRound {
    /// Up (Caffe's default): a last, clipped window covers the remainder.
    Ceil,
    /// Down: only whole windows (DenseNet's first pooling).
    Floor,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PoolConf {
    pub method: PoolMethod,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub global: bool,
    pub round: PoolRound,
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

/// Which neighbours a value is normalised over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormRegion {
    AcrossChannels,
    WithinChannel,
}

/// `lrn_param`, with Caffe's defaults in [`LrnConf::default`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LrnConf {
    pub local_size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub k: f32,
    pub region: NormRegion,
}

impl Default for LrnConf {
    fn default() -> Self {
        LrnConf { local_size: 5, alpha: 1.0, beta: 0.75, k: 1.0, region: NormRegion::AcrossChannels }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum EltwiseOp {
    /// One coefficient per bottom.
    Sum(Vec<f32>),
    Prod,
    Max,
}

/// `power_param`, with Caffe's defaults (1, 1, 0) in [`PowerConf::default`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerConf {
    pub power: f32,
    pub scale: f32,
    pub shift: f32,
}

impl Default for PowerConf {
    fn default() -> Self {
        PowerConf { power: 1.0, scale: 1.0, shift: 0.0 }
    }
}

/// `scale_param` (one bottom), with Caffe's defaults in [`ScaleConf::default`].
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleConf {
    pub axis: i64,
    /// −1: to the last axis; 0: one scalar.
    pub num_axes: i64,
    pub bias_term: bool,
    pub filler: Filler,
    pub bias_filler: Filler,
}

impl Default for ScaleConf {
    fn default() -> Self {
        ScaleConf {
            axis: 1,
            num_axes: 1,
            bias_term: false,
            filler: Filler::Constant(1.0),
            bias_filler: Filler::Constant(0.0),
        }
    }
}

/// `batch_norm_param`; `use_global_stats` already resolved for the phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNormConf {
    pub use_global_stats: bool,
    pub moving_average_fraction: f32,
    pub eps: f32,
}

impl BatchNormConf {
    /// Caffe's defaults: global statistics in TEST only, fraction 0.999, eps 1e-5.
    pub fn for_phase(train: bool) -> BatchNormConf {
        BatchNormConf { use_global_stats: !train, moving_average_fraction: 0.999, eps: 1e-5 }
    }
}

/// Everything a convolution is built from (Caffe's `convolution_param`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConvSpec {
    pub num_output: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub dilation: (usize, usize),
    /// Channel groups: input and output channels split into `group` parts,
    /// output part g seeing input part g only.
    pub group: usize,
    pub bias_term: bool,
    pub weight_filler: Filler,
    pub bias_filler: Filler,
}

impl From<&ConvConf> for ConvSpec {
    fn from(c: &ConvConf) -> ConvSpec {
        ConvSpec {
            num_output: c.num_output,
            kernel: c.kernel,
            stride: c.stride,
            pad: c.pad,
            dilation: c.dilation,
            group: c.group,
            bias_term: c.bias_term,
            weight_filler: c.weight_filler.clone(),
            bias_filler: c.bias_filler.clone(),
        }
    }
}

/// What a loss is divided by: the batch (the blob's first axis), every
/// value (Caffe's FULL and VALID without ignore_label), or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossNorm {
    Batch,
    Count,
    None,
}
