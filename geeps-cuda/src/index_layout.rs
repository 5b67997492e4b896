//! The device layout of a row index: `RowPair`s flattened to interleaved u32
//! (`buffer_row, store_row, ...`), the layout the kernels read. Checks what
//! lets the kernels run without atomics: no buffer row and no store row
//! appears twice in one index. Pure host code; it must never touch the driver.

use geeps_core::device::RowPair;
use geeps_core::{Error, Result};

/// Flattens `pairs` for upload, after checking that both columns are free of
/// repeats (a repeat would make two threads write the same row).
pub fn encode_index(pairs: &[RowPair]) -> Result<Vec<u32>> {
    let mut out = Vec::with_capacity(pairs.len() * 2);
    for p in pairs {
        out.push(p.buffer_row);
        out.push(p.store_row);
    }
    if let Some(row) = first_repeat(pairs.iter().map(|p| p.buffer_row), pairs.len()) {
        return Err(repeat_error("buffer", row));
    }
    if let Some(row) = first_repeat(pairs.iter().map(|p| p.store_row), pairs.len()) {
        return Err(repeat_error("store", row));
    }
    Ok(out)
}

fn repeat_error(column: &str, row: u32) -> Error {
    Error::Device(format!(
        "index lists {column} row {row} twice; the row kernels write without atomics and need distinct rows per index"
    ))
}

/// The first value seen twice, in O(n): a bitmap when the values are dense
/// enough for it to be small, a sorted copy otherwise.
fn first_repeat(rows: impl Iterator<Item = u32> + Clone, n: usize) -> Option<u32> {
    let max = rows.clone().max()? as usize;
    // A bitmap of at most 64 bits per entry costs no more than the sort's copy.
    if max / 64 < n.max(1024) {
        let mut seen = vec![0u64; max / 64 + 1];
        for r in rows {
            let (word, bit) = (r as usize / 64, 1u64 << (r % 64));
            if seen[word] & bit != 0 {
                return Some(r);
            }
            seen[word] |= bit;
        }
        None
    } else {
        let mut sorted: Vec<u32> = rows.collect();
        sorted.sort_unstable();
        sorted.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(buffer_row: u32, store_row: u32) -> RowPair {
        RowPair { buffer_row, store_row }
    }

    #[test]
    fn layout_is_interleaved_buffer_then_store() {
        let enc = encode_index(&[pair(0, 7), pair(1, 3), pair(2, 9)]).unwrap();
        assert_eq!(enc, vec![0, 7, 1, 3, 2, 9]);
        assert!(encode_index(&[]).unwrap().is_empty());
    }

    #[test]
    fn repeats_are_rejected_in_either_column_dense_or_sparse() {
        let dense = encode_index(&[pair(0, 5), pair(1, 6), pair(2, 5)]).unwrap_err();
        assert!(matches!(&dense, Error::Device(m) if m.contains("store row 5")), "{dense}");
        let sparse = encode_index(&[pair(0, 4_000_000_000), pair(1, 6), pair(2, 4_000_000_000)]).unwrap_err();
        assert!(matches!(&sparse, Error::Device(m) if m.contains("store row 4000000000")), "{sparse}");
        let buffer = encode_index(&[pair(3, 1), pair(3, 2)]).unwrap_err();
        assert!(matches!(&buffer, Error::Device(m) if m.contains("buffer row 3")), "{buffer}");
        encode_index(&[pair(0, u32::MAX), pair(1, 0)]).unwrap();
    }
}
