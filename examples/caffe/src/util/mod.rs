//! Numeric helpers shared by the layers (Caffe's `util/`): the CPU matrix
//! products (`blas`, Caffe's `math_functions`). Must never know a layer.

pub mod blas;
