//! The emulator's own PTX interpreter: runs the PTX NVRTC 12.x emits for
//! ordinary kernels (integer, float, logic, comparison, conversion, move,
//! memory, atomic, warp-shuffle/vote and control instructions; `.shared`,
//! `.local` and module variables; barriers; 3-D grids and blocks) on the CPU. A module is parsed
//! at load; each kernel is decoded once into a compact instruction list
//! and executed SIMT-style over each block's threads. What it does not
//! implement is an error naming the instruction and its PTX line, never a
//! panic. Must never reach memory other than what the launch hands it.

mod compare;
mod convert;
mod decode;
mod error;
mod exec;
mod float;
mod inst;
mod int;
mod memory;
mod operand;
mod parse;
mod program;
mod source;

pub use error::Error;
pub use exec::{Geometry, Stop};
pub use inst::Code;
pub use memory::{Fault, Memory};
pub use program::{run, Program};
