//! Writing whole partitions of rows into the cached rows: a publication's
//! rows copied into the host and device parts of the cache, and a
//! publication kept as the partition's content settled there before
//! anything adds to it. Callers hold the partition's lock.

use crate::device::{PinnedBuf, StreamId};
use crate::engine::shared::Shared;
use crate::engine::staging::{count, Staging};
use crate::engine::store::{ParamPartition, ParamState};
use crate::error::Result;
use crate::transport::bytes::{floats_from_bytes, floats_view};

/// Copies a partition's rows (partition-row order) into its cached rows.
pub(crate) fn write_cache(
    sh: &Shared,
    p: &ParamPartition,
    host: &mut PinnedBuf,
    rows: &[f32],
    stream: StreamId,
    staging: &mut Staging,
) -> Result<()> {
    let w = sh.width();
    for (slot, r) in p.layout.host_order.iter().enumerate() {
        let r = *r as usize;
        host[slot * w..(slot + 1) * w].copy_from_slice(&rows[r * w..(r + 1) * w]);
    }
    let Some(dev) = p.device.ptr else { return Ok(()) };
    let order = &p.layout.device_order;
    count(&sh.stats.h2d, order.len() * w);
    let contiguous = order.windows(2).all(|x| x[1] == x[0] + 1);
    if contiguous && sh.host_addressable {
        let first = order[0] as usize;
        // SAFETY: the region holds `order.len()` rows; `rows` holds them from `first`.
        unsafe { sh.device.copy_h2d(stream, rows.as_ptr().add(first * w), dev, order.len() * w)? };
    } else {
        let stage = staging.get(sh, order.len() * w)?;
        for (slot, r) in order.iter().enumerate() {
            let r = *r as usize;
            stage[slot * w..(slot + 1) * w].copy_from_slice(&rows[r * w..(r + 1) * w]);
        }
        // SAFETY: as above, from staging.
        unsafe { sh.device.copy_h2d(stream, stage.as_ptr(), dev, order.len() * w)? };
    }
    sh.device.synchronize(stream)
}

/// Copies a publication kept as the partition's content into the cached
/// rows, before anything adds to them.
pub(crate) fn settle_publication(
    sh: &Shared,
    p: &ParamPartition,
    st: &mut ParamState,
    stream: StreamId,
    staging: &mut Staging,
) -> Result<()> {
    let Some(rows) = st.published.take() else { return Ok(()) };
    if let Some(view) = floats_view(&rows) {
        return write_cache(sh, p, &mut st.host, view, stream, staging);
    }
    let mut values = std::mem::take(&mut st.scratch);
    values.resize(st.accum.len(), 0.0);
    floats_from_bytes(&rows, &mut values)?;
    let written = write_cache(sh, p, &mut st.host, &values, stream, staging);
    st.scratch = values;
    written
}
