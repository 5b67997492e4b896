//! Launch geometry of the row kernels: how many threads walk a row, how many
//! rows share a block, how many blocks stride over an index. A pure function,
//! so the GPU and the CPU-side PTX checks launch the kernels identically. It
//! must never touch the driver.

use geeps_core::{Error, Result};

/// Threads per block. 256 keeps every GPU since compute capability 7.0 at
/// full occupancy with the kernels' register use (18–24 per thread).
pub const BLOCK_THREADS: u32 = 256;

/// The most blocks a launch gets: several waves of resident blocks on the
/// largest GPUs; the kernels' grid-stride loop takes the rest of the rows.
const MAX_GRID: u32 = 4096;

/// Grid and block dimensions of one row-kernel launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks, along x only.
    pub grid: u32,
    /// Threads along one row.
    pub block_x: u32,
    /// Rows per block.
    pub block_y: u32,
}

/// The launch covering `pairs` rows of `width` floats.
///
/// A row gets the smallest power of two of threads that spans its lanes, up
/// to a whole block: a lane is a 16-byte vector of 4 floats when the width
/// is a multiple of 4 (the kernels then move float4s, given aligned
/// pointers), a float otherwise. Wider rows loop over their columns, so the
/// width need not be a multiple of anything. The rest of the block takes
/// further rows; the grid is bounded and the kernels stride over the pairs,
/// so the last round of blocks may be partial (the kernels check
/// `row < pairs`).
pub fn launch_shape(pairs: usize, width: usize) -> Result<LaunchShape> {
    if pairs == 0 || width == 0 {
        return Err(Error::Device(format!(
            "a row kernel needs at least one row and one column (got {pairs} × {width})"
        )));
    }
    let width32 = u32::try_from(width)
        .map_err(|_| Error::Device(format!("row width {width} does not fit the kernels' 32-bit column index")))?;
    let lanes = if width32 % 4 == 0 { width32 / 4 } else { width32 };
    let block_x = lanes.checked_next_power_of_two().unwrap_or(BLOCK_THREADS).min(BLOCK_THREADS);
    let block_y = BLOCK_THREADS / block_x;
    // The kernels step `row += grid * block_y` in 32 bits: it must not wrap.
    let limit = u32::MAX as usize - (MAX_GRID * BLOCK_THREADS) as usize;
    if pairs > limit {
        return Err(Error::Device(format!(
            "an index of {pairs} rows exceeds the kernels' limit of {limit}; split the access"
        )));
    }
    let grid = pairs.div_ceil(block_y as usize).min(MAX_GRID as usize) as u32;
    Ok(LaunchShape { grid, block_x, block_y })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_get_a_power_of_two_of_threads_and_blocks_stay_full() {
        // 128 floats: 32 float4 lanes.
        let s = launch_shape(10, 128).unwrap();
        assert_eq!(s, LaunchShape { grid: 2, block_x: 32, block_y: 8 });
        let s = launch_shape(3, 4).unwrap();
        assert_eq!(s, LaunchShape { grid: 1, block_x: 1, block_y: 256 });
        let s = launch_shape(65, 3).unwrap();
        assert_eq!(s, LaunchShape { grid: 2, block_x: 4, block_y: 64 });
        let s = launch_shape(7, 257).unwrap();
        assert_eq!(s, LaunchShape { grid: 7, block_x: 256, block_y: 1 });
        let s = launch_shape(7, 1028).unwrap();
        assert_eq!(s, LaunchShape { grid: 7, block_x: 256, block_y: 1 });
        let s = launch_shape(1, 1).unwrap();
        assert_eq!(s, LaunchShape { grid: 1, block_x: 1, block_y: 256 });
        for width in 1..600 {
            let lanes = if width % 4 == 0 { width / 4 } else { width };
            let s = launch_shape(1000, width).unwrap();
            assert_eq!(s.block_x * s.block_y, BLOCK_THREADS, "width {width}");
            assert!(s.block_x as usize >= lanes.min(BLOCK_THREADS as usize));
            assert!(s.grid as usize * s.block_y as usize >= 1000);
            assert!((s.grid as usize - 1) * (s.block_y as usize) < 1000);
        }
    }

    #[test]
    fn the_grid_is_bounded_and_strides_over_the_rest() {
        let s = launch_shape(10_000_000, 1).unwrap();
        assert_eq!(s, LaunchShape { grid: MAX_GRID, block_x: 1, block_y: 256 });
        let limit = u32::MAX as usize - (MAX_GRID * BLOCK_THREADS) as usize;
        let s = launch_shape(limit, 300).unwrap();
        assert_eq!(s.grid, MAX_GRID);
        assert!(u32::try_from(limit + (s.grid * s.block_y) as usize).is_ok(), "the last stride wraps");
    }

    #[test]
    fn empty_and_oversized_launches_are_errors() {
        assert!(matches!(launch_shape(0, 128), Err(Error::Device(_))));
        assert!(matches!(launch_shape(5, 0), Err(Error::Device(_))));
        assert!(matches!(launch_shape(u32::MAX as usize, 128), Err(Error::Device(m)) if m.contains("split")));
        let limit = u32::MAX as usize - (MAX_GRID * BLOCK_THREADS) as usize;
        assert!(matches!(launch_shape(limit + 1, 128), Err(Error::Device(m)) if m.contains("split")));
        assert!(matches!(launch_shape(1, 1 << 33), Err(Error::Device(m)) if m.contains("32-bit")));
    }
}
