//! The layers' compute, one folder per layer type (its CPU code in
//! `mod.rs`, its GPU code in `gpu.rs`, its CUDA kernel and PTX beside them),
//! the contract they implement (`layer`) and building them (`factory`,
//! `spec`). This file only declares the modules and re-exports; it must
//! never define an item of its own (the layers would import it back).

pub mod accuracy;
pub mod activation;
pub mod batch_norm;
pub mod concat;
pub mod conv;
pub mod dropout;
pub mod dummy_data;
pub mod eltwise;
pub mod euclidean_loss;
mod factory;
pub mod filler;
pub mod im2col;
pub mod inner_product;
pub mod input;
mod layer;
pub mod lrn;
pub mod pointwise;
pub mod pointwise_in_place;
pub mod pool;
pub mod power;
pub mod prelu;
pub mod reshape;
pub mod scale;
pub mod sigmoid_cross_entropy_loss;
pub mod silence;
pub mod softmax;
pub mod softmax_loss;
pub mod spec;
pub mod split;

pub use crate::proto::layer_conf::Filler;
pub use factory::build;
pub(crate) use layer::gpu_methods;
pub use layer::{axis_index, count, Backward, Forward, GpuBackward, GpuForward, Layer, ParamBlob, Reads, Shape};
