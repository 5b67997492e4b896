//! The layers' compute, one folder per layer type (its CPU code in
//! `mod.rs`, its GPU code in `gpu.rs`, its CUDA kernel and PTX beside them),
//! the contract they implement (`layer`) and building them (`factory`,
//! `spec`). This file only declares the modules and re-exports; it must
//! never define an item of its own (the layers would import it back).

pub mod accuracy;
pub mod activation;
pub mod argmax;
pub mod batch_norm;
pub mod bias;
pub mod concat;
pub mod contrastive_loss;
pub mod conv;
pub mod crop;
pub mod deconv;
pub mod dropout;
pub mod dummy_data;
pub mod eltwise;
pub mod embed;
pub mod euclidean_loss;
mod factory;
pub mod filler;
pub mod hinge_loss;
pub mod im2col;
pub mod infogain_loss;
pub mod inner_product;
pub mod input;
mod layer;
pub mod lrn;
pub mod multinomial_logistic_loss;
pub mod mvn;
pub mod parameter;
pub mod pointwise;
pub mod pointwise_in_place;
pub mod pool;
pub mod power;
pub mod prelu;
pub mod reduction;
pub mod reshape;
pub mod scale;
pub mod sigmoid_cross_entropy_loss;
pub mod silence;
pub mod slice;
pub mod softmax;
pub mod softmax_loss;
pub mod spec;
pub mod split;
pub mod spp;
pub mod tile;

pub use crate::proto::layer_conf::Filler;
pub use factory::build;
pub(crate) use layer::gpu_methods;
pub use layer::{axis_index, count, Backward, Forward, GpuBackward, GpuForward, Layer, ParamBlob, Reads, Shape};
