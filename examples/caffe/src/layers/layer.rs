//! The contract between a layer and its caller: every layer type implements
//! [`Layer`] (shapes at setup, then forward and backward over whatever memory
//! the caller hands it, be it geeps buffers or vectors, on the CPU or as
//! device ranges on the GPU). It owns that contract and the shape helpers
//! every layer shares; it must never own storage or know where the slices
//! live.

use crate::gpu::{DevSlice, Gpu};
use crate::proto::layer_conf::Filler;
pub use crate::proto::shape::Shape;

pub fn count(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Caffe's axis index: negative counts from the end (−1 is the last axis).
pub fn axis_index(axis: i64, axes: usize) -> Result<usize, String> {
    let n = axes as i64;
    if axis >= n || axis < -n {
        return Err(format!("axis {axis} is outside a blob of {axes} axes (use {} to {})", -n, n - 1));
    }
    Ok(if axis < 0 { axis + n } else { axis } as usize)
}

/// A parameter blob of a layer: its shape and how to initialise it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamBlob {
    pub shape: Shape,
    pub filler: Filler,
}

/// Inputs and outputs of one forward call.
pub struct Forward<'a, 'b> {
    /// The layer's parameters, blobs concatenated (weights, then bias).
    pub params: &'a [f32],
    /// Bottom data (empty for an elementwise layer, which works on `tops[0]`).
    pub bottoms: &'a [&'b [f32]],
    /// Top data to write. An elementwise layer finds its input already here.
    pub tops: &'a mut [&'b mut [f32]],
    /// State for backward ([`Layer::aux_len`] floats).
    pub aux: &'a mut [f32],
    pub train: bool,
    /// Seeds this call's randomness (dropout), so runs are reproducible.
    pub seed: u64,
}

/// Inputs and outputs of one backward call.
pub struct Backward<'a, 'b> {
    pub params: &'a [f32],
    /// Bottom data; an entry is empty when [`Layer::backward_reads`] says it is unused.
    pub bottoms: &'a [&'b [f32]],
    /// Top data (given to elementwise layers only).
    pub tops: &'a [&'b [f32]],
    /// Top gradients (empty for elementwise layers and losses).
    pub top_diffs: &'a [&'b [f32]],
    /// Bottom gradients to write; an empty entry needs none. An elementwise
    /// layer finds its top gradient already here and scales it in place.
    pub bottom_diffs: &'a mut [&'b mut [f32]],
    /// The gradient of `params`, same layout, to overwrite.
    pub param_grad: &'a mut [f32],
    pub aux: &'a [f32],
    /// Gradient scale of a loss layer's output (its loss_weight).
    pub loss_weight: f32,
}

/// [`Forward`] on the GPU: the same blobs as device ranges.
pub struct GpuForward<'a> {
    pub params: DevSlice,
    pub bottoms: &'a [DevSlice],
    pub tops: &'a [DevSlice],
    pub aux: DevSlice,
    pub train: bool,
    pub seed: u64,
}

/// [`Backward`] on the GPU: the same blobs as device ranges (an empty
/// range where the CPU call has an empty slice).
pub struct GpuBackward<'a> {
    pub params: DevSlice,
    pub bottoms: &'a [DevSlice],
    pub tops: &'a [DevSlice],
    pub top_diffs: &'a [DevSlice],
    pub bottom_diffs: &'a [DevSlice],
    pub param_grad: DevSlice,
    pub aux: DevSlice,
    pub loss_weight: f32,
}

fn no_gpu_code(layer: &str) -> crate::Error {
    crate::Error::Gpu(format!("the {layer} layer has no GPU code; its caller stages it through host memory"))
}

/// What a layer's backward reads besides its top gradients.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reads {
    /// Per bottom: whether its data is read.
    pub bottoms: Vec<bool>,
    /// Whether top data is read (elementwise layers).
    pub tops: bool,
    /// Whether top gradients are read (false for losses, which start the chain).
    pub top_diffs: bool,
}

/// One layer's computation.
pub trait Layer: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn top_shapes(&self) -> Vec<Shape>;
    fn param_blobs(&self) -> Vec<ParamBlob> {
        Vec::new()
    }
    /// Floats kept from forward to backward (a pooling mask, probabilities).
    fn aux_len(&self) -> usize {
        0
    }
    /// Elementwise layers may run in place (top == bottom). Their forward
    /// finds the input in `tops[0]`, their backward the top gradient in
    /// `bottom_diffs[0]`.
    fn elementwise(&self) -> bool {
        false
    }
    /// Whether the layer contributes to the loss and starts backward.
    fn is_loss(&self) -> bool {
        false
    }
    /// Whether the parameters are running statistics (BatchNorm's), not
    /// weights: backward then writes into `param_grad` the change to add to
    /// them (each of N workers adds its change / N, so the shared values
    /// follow the average), and no solver touches them.
    fn param_grad_is_update(&self) -> bool {
        false
    }
    /// Whether the layer has a backward at all (Accuracy does not).
    fn has_backward(&self) -> bool {
        true
    }
    fn backward_reads(&self) -> Reads;
    fn forward(&self, f: Forward<'_, '_>);
    fn backward(&self, b: Backward<'_, '_>);
    /// Whether the layer computes on the GPU ([`Layer::forward_gpu`] and
    /// [`Layer::backward_gpu`]); others run on the CPU, staged.
    fn on_gpu(&self) -> bool {
        false
    }
    /// [`Layer::forward`] enqueued on `gpu`'s stream (the caller syncs).
    fn forward_gpu(&self, _gpu: &Gpu, _f: &GpuForward<'_>) -> crate::Result<()> {
        Err(no_gpu_code(self.type_name()))
    }
    /// [`Layer::backward`] enqueued on `gpu`'s stream (the caller syncs).
    fn backward_gpu(&self, _gpu: &Gpu, _b: &GpuBackward<'_>) -> crate::Result<()> {
        Err(no_gpu_code(self.type_name()))
    }
}

/// The three GPU methods of a [`Layer`] impl whose GPU code is the type's
/// `forward_on` / `backward_on` (in its `gpu` submodule).
macro_rules! gpu_methods {
    () => {
        fn on_gpu(&self) -> bool {
            true
        }

        fn forward_gpu(&self, gpu: &crate::gpu::Gpu, f: &crate::layers::GpuForward<'_>) -> crate::Result<()> {
            self.forward_on(gpu, f)
        }

        fn backward_gpu(&self, gpu: &crate::gpu::Gpu, b: &crate::layers::GpuBackward<'_>) -> crate::Result<()> {
            self.backward_on(gpu, b)
        }
    };
}
pub(crate) use gpu_methods;

/// Elements per rayon task for elementwise loops: large enough to amortise
/// scheduling, small enough to split a LeNet activation across two cores.
pub(crate) const CHUNK: usize = 1 << 14;
