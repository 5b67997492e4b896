//! The thin unsafe edge over the CUDA driver API (cudarc's `driver::result`
//! and `sys` layers). Every driver call of geeps-cuda is made in this folder;
//! each turns a `CUresult` into a `geeps_core::Error` that says what to fix.
//! Raw handles are wrapped in `Copy` newtypes that may cross threads (the
//! driver API is thread-safe). Nothing here may keep state beyond a handle,
//! or touch the driver before [`library_present`] said it can be loaded.

mod context;
mod errors;
mod gpu;
mod memory;
mod module;
mod stream;

pub(crate) use context::Context;
pub(crate) use gpu::{device_count, device_facts, driver_version, init, library_present};
pub(crate) use memory::{
    host_alloc, host_free, mem_alloc, mem_free, mem_get_info, memcpy_d2d, memcpy_d2h, memcpy_h2d, memset_zero,
};
pub(crate) use module::{launch, Function, Module};
pub(crate) use stream::{Event, Stream};
