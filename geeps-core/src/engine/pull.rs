//! Merging a keeper's publication into the parameter cache: the message
//! kept as the partition's content where it can be, else written into the
//! cached rows with this worker's pending deltas added back; then the data
//! age advances and readers wake. Run by the puller threads. Never sends.

use crate::engine::cache_write::write_cache;
use crate::engine::shared::Shared;
use crate::engine::staging::{count, Staging};
use crate::error::{Error, Result};
use crate::transport::bytes::{floats_from_bytes, floats_view};
use crate::transport::delta_encoding::add_bytes;
use crate::transport::Publish;

/// Merges published rows into the cache and advances its data age.
pub(crate) fn apply_publish(sh: &Shared, publish: &Publish, staging: &mut Staging) -> Result<()> {
    let table = publish.table as usize;
    let parts = sh
        .stores
        .params
        .get(table)
        .and_then(|p| p.as_ref())
        .ok_or_else(|| Error::UnknownTable { table: publish.table, declared: sh.tables.len() })?;
    let p = parts.get(publish.partition as usize).ok_or_else(|| {
        Error::InvalidKeys(format!("publication for partition {} of table {table}", publish.partition))
    })?;
    let stream = sh.pull_streams[publish.partition as usize % sh.pull_streams.len()];
    let mut guard = p.state.lock();
    let st = &mut *guard;
    if publish.age < st.age {
        return Ok(());
    }
    if sh.config.read_my_writes {
        // This worker's deltas the publication includes are no longer in flight.
        let mine = publish.included.get(sh.rank).copied().unwrap_or(0);
        st.inflight.retain(|f| f.clock >= mine);
    }
    let own_pending = sh.config.read_my_writes && (!st.inflight.is_empty() || st.dirty);
    let view = floats_view(&publish.rows).filter(|v| v.len() == st.accum.len() && !own_pending);
    if view.is_some() && sh.host_addressable {
        // Nothing of ours to add back, and reads gather on the host: the
        // message itself becomes the partition's content, copied nowhere
        // (into the table's landing buffer, if it did not arrive in one, so
        // that reads across partitions are served in place).
        let part = publish.partition as usize;
        let rows = match sh.landing.as_ref().filter(|l| l.lands(table)) {
            Some(l) if !l.contiguous(table, part, &[&publish.rows]) => {
                let landed = l.copy_in(publish.table, publish.partition, publish.age, &publish.rows);
                if landed.is_some() {
                    count(&sh.stats.h2d, publish.rows.len() / 4);
                }
                landed
            }
            _ => None,
        };
        st.published = Some(rows.unwrap_or_else(|| publish.rows.clone()));
    } else {
        st.published = None;
        let mut merged = std::mem::take(&mut st.scratch);
        let rows: &[f32] = match view {
            // Nothing of ours to add back: copy straight from the message.
            Some(view) => view,
            None => {
                merged.resize(st.accum.len(), 0.0);
                floats_from_bytes(&publish.rows, &mut merged)?;
                // Add back this worker's deltas the publication does not include yet.
                for f in &st.inflight {
                    add_bytes(&mut merged, &f.deltas)?;
                }
                if own_pending && st.dirty {
                    merged.iter_mut().zip(st.deltas()).for_each(|(m, d)| *m += *d);
                }
                &merged
            }
        };
        write_cache(sh, p, &mut st.host, rows, stream, staging)?;
        st.scratch = merged;
    }
    // The cache now holds every delta of ours still pending.
    st.inflight.iter_mut().for_each(|f| f.in_cache = true);
    st.accum_in_cache = true;
    st.age = publish.age;
    st.included.clone_from(&publish.included);
    drop(guard);
    p.cond.notify_all();
    Ok(())
}
