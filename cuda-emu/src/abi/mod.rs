//! The exported C entry points of the driver API, with `cuda.h`'s exact
//! signatures and symbol names (the versioned ones, e.g. `cuMemAlloc_v2`,
//! that cudarc resolves). Every export runs inside `guard`, so no panic
//! crosses the C ABI, and turns its arguments into calls on the emulator's
//! modules. Must never dereference a handle (handles are registry keys) nor
//! hold an emulator lock while blocking.
//!
//! Safety of the exports: each has the contract of its driver API function
//! (valid output pointers, host ranges readable or writable for the sizes
//! given); the `# Safety` sections are NVIDIA's documentation.
#![allow(non_snake_case, clippy::missing_safety_doc)]

mod context;
mod copy;
mod cublas;
mod device;
mod diagnostics;
mod event;
mod extents;
mod guard;
mod init;
mod memory;
mod module;
mod stream;

pub use context::*;
pub use copy::*;
pub use cublas::*;
pub use device::*;
pub use diagnostics::*;
pub use event::*;
pub use extents::*;
pub use init::*;
pub use memory::*;
pub use module::*;
pub use stream::*;
