//! geeps' row kernels (`geeps-cuda/kernels/rows.cu`) in native Rust, chosen
//! with `GEEPS_CUDA_EMU_KERNELS=native` for speed: gather, scatter-assign and
//! scatter-add over an index of interleaved u32 `(buffer_row, store_row)`
//! pairs, every pair below `pairs` whatever the grid (the CUDA code strides
//! its grid over the pairs). The add is the kernel's single f32 `dst + src`
//! per float (on its float4 path as on its scalar one), so results match the
//! PTX bit for bit.
//! An access outside the allocation an argument points into is
//! CUDA_ERROR_ILLEGAL_ADDRESS. Must never run a kernel whose name or
//! signature differs from geeps' (those go to the interpreter).

use crate::launch::{lock_all, Launch};
use crate::result::{CUresult, CUDA_ERROR_ILLEGAL_ADDRESS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOp {
    /// `buffer[b] = store[s]`
    Gather,
    /// `store[s] = buffer[b]`
    ScatterAssign,
    /// `store[s] += buffer[b]`
    ScatterAdd,
}

/// The row kernel `launch` runs, if it is one of geeps' with its signature
/// `(u64 src, u64 index, u32 pairs, u64 dst, u32 width)` and a 1-D grid of 2-D blocks.
pub fn detect(launch: &Launch) -> Option<RowOp> {
    let op = match launch.name() {
        "geeps_gather" => RowOp::Gather,
        "geeps_scatter_assign" => RowOp::ScatterAssign,
        "geeps_scatter_add" => RowOp::ScatterAdd,
        _ => return None,
    };
    let sizes: Vec<usize> = launch.entry().params.iter().map(|p| p.size).collect();
    let flat = launch.grid.1 == 1 && launch.grid.2 == 1 && launch.block.2 == 1;
    (sizes == [8, 8, 4, 8, 4] && flat).then_some(op)
}

fn u32_arg(launch: &Launch, i: usize) -> u32 {
    u32::from_ne_bytes(launch.args[i][..4].try_into().unwrap_or([0; 4]))
}

fn illegal(what: String) -> (CUresult, String) {
    (CUDA_ERROR_ILLEGAL_ADDRESS, what)
}

/// Runs `op` as the CUDA kernel would.
pub fn run(op: RowOp, launch: &Launch) -> Result<(), (CUresult, String)> {
    let name = launch.name().to_string();
    let (pairs, width) = (u32_arg(launch, 2), u32_arg(launch, 4) as usize);
    let rows = pairs as usize;
    if rows == 0 || width == 0 {
        return Ok(());
    }
    let (allocs, slots) = launch.allocations();
    // (slot in `allocs`, offset) of the allocation parameter `param` points into.
    let target = |param: usize| {
        launch.pointers.iter().zip(&slots).find(|(p, _)| p.param == param).map(|(p, &s)| (s, p.offset)).ok_or_else(
            || {
                let value = u64::from_ne_bytes(launch.args[param][..8].try_into().unwrap_or([0; 8]));
                illegal(format!("kernel `{name}`: argument {param} ({value:#x}) is not in any live allocation"))
            },
        )
    };
    let (src, index, dst) = (target(0)?, target(1)?, target(3)?);
    let mut guards = lock_all(&allocs);
    let row_bytes = width * 4;
    let mut row = vec![0u8; row_bytes];
    for p in 0..rows {
        let at = index.1 + 8 * p;
        let words = guards[index.0].get(at..at + 8).ok_or_else(|| {
            illegal(format!("kernel `{name}`: pair {p} of the index lies past the end of its allocation"))
        })?;
        let b = u32::from_ne_bytes(words[..4].try_into().unwrap_or([0; 4])) as usize;
        let s = u32::from_ne_bytes(words[4..].try_into().unwrap_or([0; 4])) as usize;
        let (from_row, to_row) = match op {
            RowOp::Gather => (s, b),
            RowOp::ScatterAssign | RowOp::ScatterAdd => (b, s),
        };
        let from = src.1 + from_row * row_bytes;
        let slice = guards[src.0].get(from..from + row_bytes).ok_or_else(|| {
            illegal(format!("kernel `{name}`: source row {from_row} (pair {p}) lies past the end of its allocation"))
        })?;
        row.copy_from_slice(slice);
        let to = dst.1 + to_row * row_bytes;
        let out = guards[dst.0].get_mut(to..to + row_bytes).ok_or_else(|| {
            illegal(format!("kernel `{name}`: destination row {to_row} (pair {p}) lies past the end of its allocation"))
        })?;
        match op {
            RowOp::Gather | RowOp::ScatterAssign => out.copy_from_slice(&row),
            RowOp::ScatterAdd => {
                for (d, s) in out.chunks_exact_mut(4).zip(row.chunks_exact(4)) {
                    let sum = f32::from_ne_bytes(d.try_into().unwrap_or([0; 4]))
                        + f32::from_ne_bytes(s.try_into().unwrap_or([0; 4]));
                    d.copy_from_slice(&sum.to_ne_bytes());
                }
            }
        }
    }
    Ok(())
}
