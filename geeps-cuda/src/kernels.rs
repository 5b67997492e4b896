//! The row kernels loaded into the device's context, and their launches:
//! argument packing in the order `kernels/rows.cu` declares, geometry from
//! [`launch_shape`](crate::launch_shape). Must never synchronise: a launch is
//! enqueued and returns.

use std::ffi::c_void;

use geeps_core::{Error, Result};

use crate::driver::{self, Function, Module, Stream};
use crate::launch::launch_shape;
use crate::ptx::{RowKernel, ROWS_PTX};

pub(crate) struct Kernels {
    module: Module,
    functions: [Function; 3],
}

/// An index resident on the GPU: interleaved u32 pairs at `ptr`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResidentIndex {
    pub(crate) ptr: u64,
    pub(crate) pairs: u32,
}

impl Kernels {
    /// Loads the shipped PTX into the current context.
    pub(crate) fn load() -> Result<Kernels> {
        let module = Module::load_ptx(ROWS_PTX)?;
        // In `RowKernel` order, so `kernel as usize` picks the function.
        let lookup = || -> Result<[Function; 3]> {
            Ok([
                module.function(RowKernel::ALL[0].entry())?,
                module.function(RowKernel::ALL[1].entry())?,
                module.function(RowKernel::ALL[2].entry())?,
            ])
        };
        match lookup() {
            Ok(functions) => Ok(Kernels { module, functions }),
            Err(e) => {
                // SAFETY: nothing of the module was handed out.
                if let Err(unload) = unsafe { module.unload() } {
                    tracing::warn!("{unload}");
                }
                Err(e)
            }
        }
    }

    /// Enqueues `kernel` on `stream`: rows of `width` floats from `src` to
    /// `dst` through `index`.
    ///
    /// # Safety
    /// Every row the index names lies inside live ranges at `src` and `dst`,
    /// and the index is live, until the kernel completes.
    pub(crate) unsafe fn run(
        &self,
        kernel: RowKernel,
        stream: Stream,
        src: u64,
        index: ResidentIndex,
        dst: u64,
        width: usize,
    ) -> Result<()> {
        if index.pairs == 0 || width == 0 {
            return Ok(());
        }
        let shape = launch_shape(index.pairs as usize, width)?;
        let function = self.functions[kernel as usize];
        let (mut src, mut idx, mut pairs, mut dst) = (src, index.ptr, index.pairs, dst);
        let mut width = u32::try_from(width).map_err(|_| Error::Device(format!("row width {width} exceeds u32")))?;
        // One pointer per parameter, in the kernel's order; the driver copies
        // the values at launch, so locals suffice.
        let mut args = [
            &mut src as *mut u64 as *mut c_void,
            &mut idx as *mut u64 as *mut c_void,
            &mut pairs as *mut u32 as *mut c_void,
            &mut dst as *mut u64 as *mut c_void,
            &mut width as *mut u32 as *mut c_void,
        ];
        driver::launch(function, shape, stream, &mut args)
    }

    /// # Safety
    /// No kernel is running or launched afterwards.
    pub(crate) unsafe fn unload(&self) {
        if let Err(e) = self.module.unload() {
            tracing::warn!("{e}");
        }
    }
}
