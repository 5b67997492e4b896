//! Kernels run in native Rust instead of the PTX interpreter when
//! `GEEPS_CUDA_EMU_KERNELS=native`, for speed: geeps' row kernels (`rows`)
//! and caffe-geeps' exactly reproducible ones (`caffe`). Each is recognised
//! by its name and parameter sizes (and, for caffe's, arguments the native
//! loop reproduces) and gives the PTX's bits, as `tests/kernels.rs` and
//! `tests/caffe_kernels.rs` prove against the interpreter. Must never claim
//! a launch it cannot reproduce: those go to the interpreter.

pub mod caffe;
pub mod rows;
pub mod view;

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::launch::{lock_all, Launch};
use view::Fault;

/// Launches run natively so far in this process, by kernel name: what lets
/// a test show a launch really took the native path.
static LAUNCHES: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// How many launches of each kernel ran natively in this process.
pub fn launches() -> BTreeMap<String, u64> {
    LAUNCHES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Native {
    Rows(rows::RowOp),
    Caffe(caffe::Kernel),
}

/// The native kernel that runs `launch`, if there is one.
pub fn detect(launch: &Launch) -> Option<Native> {
    rows::detect(launch).map(Native::Rows).or_else(|| caffe::detect(launch).map(Native::Caffe))
}

/// Runs `kernel` as the CUDA kernel would.
pub fn run(kernel: Native, launch: &Launch) -> Result<(), Fault> {
    *LAUNCHES.lock().unwrap_or_else(|p| p.into_inner()).entry(launch.name().to_string()).or_default() += 1;
    match kernel {
        Native::Rows(op) => rows::run(op, launch),
        Native::Caffe(k) => {
            let (allocs, slots) = launch.allocations();
            let mut guards = lock_all(&allocs);
            let mut memory = view::Memory::new(launch, &slots, &mut guards);
            caffe::run(k, launch, &mut memory)
        }
    }
}
