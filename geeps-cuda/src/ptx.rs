//! The PTX of the row kernels, generated from `kernels/rows.cu` by
//! `kernels/build_ptx.py` (NVRTC 12.0, virtual architecture compute_70) and
//! embedded here, so running geeps needs the NVIDIA driver only: it JIT-
//! compiles the PTX for the GPU at hand. This file names the kernels and
//! their parameters; it must never load or launch anything.

/// PTX of every row kernel (ISA 8.0: loadable by CUDA 12.0 drivers and later).
pub const ROWS_PTX: &str = include_str!("../kernels/rows.ptx");

/// The lowest compute capability the PTX targets.
pub const MIN_COMPUTE_CAPABILITY: (i32, i32) = (7, 0);

/// The lowest driver version (as `cuDriverGetVersion` reports it) that
/// accepts the PTX's ISA version.
pub const MIN_DRIVER_VERSION: i32 = 12000;

/// One of the row kernels. Each takes, in order: source pointer, index
/// pointer, pair count (u32), destination pointer, row width (u32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKernel {
    /// `buffer[buffer_row] = store[store_row]`
    Gather = 0,
    /// `store[store_row] = buffer[buffer_row]`
    ScatterAssign = 1,
    /// `store[store_row] += buffer[buffer_row]`
    ScatterAdd = 2,
}

impl RowKernel {
    /// Every kernel, in discriminant order.
    pub const ALL: [RowKernel; 3] = [RowKernel::Gather, RowKernel::ScatterAssign, RowKernel::ScatterAdd];

    /// The kernel's entry name in [`ROWS_PTX`].
    pub fn entry(self) -> &'static str {
        match self {
            RowKernel::Gather => "geeps_gather",
            RowKernel::ScatterAssign => "geeps_scatter_assign",
            RowKernel::ScatterAdd => "geeps_scatter_add",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_the_kernels_in_discriminant_order() {
        for (i, k) in RowKernel::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
    }

    #[test]
    fn every_kernel_is_in_the_ptx_at_the_documented_isa_and_target() {
        for k in RowKernel::ALL {
            assert!(ROWS_PTX.contains(&format!(".visible .entry {}(", k.entry())), "{k:?} missing");
        }
        assert!(ROWS_PTX.contains(".version 8.0\n"), "PTX ISA changed: update MIN_DRIVER_VERSION and docs/gpu.md");
        let (major, minor) = MIN_COMPUTE_CAPABILITY;
        assert!(
            ROWS_PTX.contains(&format!(".target sm_{major}{minor}\n")),
            "target changed: update MIN_COMPUTE_CAPABILITY"
        );
    }
}
