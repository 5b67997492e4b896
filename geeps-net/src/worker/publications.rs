//! A worker's reading of a publication's payload: f32 rows as they came
//! (kept as the base of later changes when the keeper says so), or a bf16
//! change added to the rows that keeper sent before. It never reads a
//! socket and never decides when rows are merged: the reader and the puller
//! do.

use bytes::Bytes;
use geeps_core::transport::Landing;

use crate::wire::bf16_rows::ReceivedRows;
use crate::wire::{Encoding, PublishHeader};

/// The rows a publication carries: its f32 payload (kept as the base of
/// later bf16 changes when it says so), or its bf16 change added to the
/// rows this keeper sent before, written into a landing slot where there
/// is one.
pub(super) fn rows_of(
    p: &PublishHeader,
    payload: Bytes,
    received: &mut ReceivedRows,
    landing: Option<&Landing>,
) -> std::result::Result<Bytes, String> {
    match Encoding::try_from(p.encoding) {
        Ok(Encoding::F32) => {
            if p.base {
                received.set_base(p.table, p.partition, &payload);
            }
            Ok(payload)
        }
        Ok(Encoding::Bf16) => {
            let len = received.len_bytes(p.table, p.partition).unwrap_or(0);
            match landing.and_then(|l| l.slot(p.table, p.partition, p.age, len)) {
                Some(mut slot) => {
                    received.apply(p.table, p.partition, &payload, slot.bytes_mut())?;
                    Ok(slot.into_bytes())
                }
                None => {
                    let mut rows = vec![0u8; len];
                    received.apply(p.table, p.partition, &payload, &mut rows)?;
                    Ok(Bytes::from(rows))
                }
            }
        }
        Err(other) => Err(format!(
            "rows in unknown encoding {other} (this worker reads {} = f32, {} = bf16); run the same geeps version on every rank",
            u32::from(Encoding::F32),
            u32::from(Encoding::Bf16)
        )),
    }
}
