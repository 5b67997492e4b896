//! caffe-geeps' compute on a CUDA GPU: the device handle, kernel loading and
//! launch, cuBLAS products and device scratch, all on one stream of the
//! worker's GPU, over the device addresses of geeps buffers. This file only
//! declares the modules and re-exports what the layers use; it must never
//! define an item of its own (the children would import it back).
//!
//! Each layer's GPU code and CUDA kernel sit in the layer's folder
//! (`layers/<layer>/gpu.rs` and its `.cu`/`.ptx`, as Caffe's `.cu` files
//! beside its `.cpp`); the kernels shared by several layers are in `ops`.

mod dev_slice;
mod device;
mod device_vec;
pub mod emulated;
mod gemm;
mod kernels;
mod ops;
mod ptx_modules;
mod scratch;
mod solver;
mod transform;

pub use dev_slice::DevSlice;
pub use device::{Gpu, DEFAULT_SCRATCH_BOUND};
pub use device_vec::DeviceVec;
pub use gemm::{Strided, Transpose};
pub use kernels::{Arg, BLOCK};
pub use ops::holds;
