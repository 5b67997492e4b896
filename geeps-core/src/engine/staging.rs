//! Host staging for one thread: page-locked scratch grown on demand, the
//! copies of host-resident rows into a device buffer and of a device buffer
//! out to the host, and the count of bytes they move. It never takes a
//! region's lock; callers hold the one they need.

use std::sync::atomic::AtomicU64;

use crate::device::host::run_row_kernel;
use crate::device::{DevicePtr, PinnedBuf, RowOp, RowPair, StreamId};
use crate::engine::acquired::Acquired;
use crate::engine::shared::Shared;
use crate::error::Result;
use crate::stats::StatsCollector;

/// Page-locked scratch owned by one thread, grown on demand.
#[derive(Default)]
pub(crate) struct Staging {
    buf: Option<PinnedBuf>,
}

impl Staging {
    pub(crate) fn get(&mut self, sh: &Shared, floats: usize) -> Result<&mut PinnedBuf> {
        if self.buf.as_ref().is_none_or(|b| b.len() < floats) {
            self.buf = Some(sh.device.alloc_pinned(floats.next_power_of_two())?);
        }
        Ok(self.buf.as_mut().expect("set above"))
    }
}

pub(crate) fn count(counter: &AtomicU64, floats: usize) {
    StatsCollector::add(counter, floats as u64 * 4);
}

/// Copies host-resident rows (`pairs`: buffer row ↔ host slot) into a device buffer.
pub(crate) fn host_rows_in(
    sh: &Shared,
    stream: StreamId,
    host: &[f32],
    pairs: &[RowPair],
    buffer: DevicePtr,
    staging: &mut Staging,
) -> Result<()> {
    if pairs.is_empty() {
        return Ok(());
    }
    let w = sh.width();
    count(&sh.stats.h2d, pairs.len() * w);
    if sh.host_addressable {
        // SAFETY: pairs were built from this region's layout and this buffer's
        // keys; the store is only read by a gather.
        unsafe { run_row_kernel(RowOp::Gather, pairs, host.as_ptr() as *mut f32, buffer.0 as *mut f32, w) };
        return Ok(());
    }
    let stage = staging.get(sh, pairs.len() * w)?;
    for (k, p) in pairs.iter().enumerate() {
        let s = p.store_row as usize * w;
        stage[k * w..(k + 1) * w].copy_from_slice(&host[s..s + w]);
    }
    // One copy per run of consecutive buffer rows.
    let mut k = 0;
    while k < pairs.len() {
        let mut end = k + 1;
        while end < pairs.len() && pairs[end].buffer_row == pairs[end - 1].buffer_row + 1 {
            end += 1;
        }
        let dst = buffer.add_floats(pairs[k].buffer_row as usize * w);
        // SAFETY: staging holds the rows; dst lies inside the buffer.
        unsafe { sh.device.copy_h2d(stream, stage.as_ptr().add(k * w), dst, (end - k) * w)? };
        k = end;
    }
    sh.device.synchronize(stream)
}

/// A host-visible view of a whole device buffer (a d2h copy when needed).
pub(crate) fn host_view(sh: &Shared, stream: StreamId, acq: &Acquired, staging: &mut Staging) -> Result<*const f32> {
    if sh.host_addressable {
        return Ok(acq.ptr.0 as *const f32);
    }
    count(&sh.stats.d2h, acq.floats);
    let stage = staging.get(sh, acq.floats)?;
    // SAFETY: the buffer is live and held by the caller; staging is large enough.
    unsafe { sh.device.copy_d2h(stream, acq.ptr, stage.as_mut_ptr(), acq.floats)? };
    sh.device.synchronize(stream)?;
    Ok(stage.as_ptr())
}
