//! bf16 update deltas on the wire, with error feedback. The sender keeps,
//! per (table, partition), the residual `r` of what rounding to bf16 has not
//! yet sent: each clock it sends `q = bf16(d + r)` (round to nearest even)
//! and keeps `r = (d + r) - q`, so no update is lost over clocks; a batch
//! without deltas still sends a non-zero residual. The keeper decodes bf16
//! back to f32 before applying. This module owns that arithmetic and the
//! residuals; it never touches publications (parameter values stay f32) nor
//! batches applied in process (a rank's own shard stays exact).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::recv_pool::RecvPool;

/// `x` rounded to the nearest bf16 (ties to even). A finite value that
/// would round to infinity (beyond bf16's largest, just under f32's) stays
/// at the largest finite bf16 instead: its residual then stays finite and
/// is sent over the next clocks rather than turning every later value of
/// that position into infinity. NaN stays NaN (quieted), as `half` does.
/// The bf16's bits.
pub(crate) fn to_bf16(x: f32) -> u16 {
    round_bits(x)
}

/// [`to_bf16`] on bits, without branches, so that encoding loops vectorise.
#[inline(always)]
fn round_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let abs = b & 0x7fff_ffff;
    let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
    let nan = ((b >> 16) as u16) | 0x0040;
    let saturated = if abs < 0x7f80_0000 && rounded & 0x7fff == 0x7f80 { rounded - 1 } else { rounded };
    if abs > 0x7f80_0000 {
        nan
    } else {
        saturated
    }
}

/// Encodes one batch's deltas (little-endian f32 bytes; `None` when the
/// worker touched nothing this clock) as bf16, adding and updating the
/// residual. Returns `None` only when there are no deltas and the residual
/// holds nothing bf16 can carry (zeros, or values under bf16's smallest
/// subnormal, 2^-133): otherwise the residual is flushed as deltas (bf16 of
/// it), so a worker that stops updating still delivers what rounding held
/// back, within two clocks (a residual has at most 16 significant bits, a
/// flush sends the top 8 of them). A non-finite sum (NaN, infinity) is sent
/// as it is, as the f32 wire would, and its residual reset to zero so it is
/// sent only once. `pool` lends the output buffer.
pub(crate) fn encode(deltas: Option<&[u8]>, residual: &mut Vec<f32>, pool: &RecvPool) -> Result<Option<Bytes>, String> {
    let n = match deltas {
        Some(d) if d.len() % 4 != 0 => {
            return Err(format!("deltas of {} bytes are not a whole number of 4-byte floats", d.len()))
        }
        Some(d) => d.len() / 4,
        None if residual.iter().all(|r| to_bf16(*r) & 0x7fff == 0) => return Ok(None),
        None => residual.len(),
    };
    if residual.is_empty() {
        residual.resize(n, 0.0);
    } else if residual.len() != n {
        return Err(format!(
            "deltas of {n} floats for a partition whose earlier batches had {}; every batch of a partition carries all its rows",
            residual.len()
        ));
    }
    let mut out = pool.take(2 * n);
    out.resize(2 * n, 0);
    // Branch-free per value: a non-finite sum leaves a NaN residual, reset to 0.
    let step = |d: f32, r: &mut f32, o: &mut [u8]| {
        let s = d + *r;
        let q = round_bits(s);
        let left = s - f32::from_bits((q as u32) << 16);
        *r = if left.is_finite() { left } else { 0.0 };
        o.copy_from_slice(&q.to_le_bytes());
    };
    match deltas {
        Some(d) => {
            for ((d, r), o) in d.chunks_exact(4).zip(residual.iter_mut()).zip(out.chunks_exact_mut(2)) {
                step(f32::from_le_bytes([d[0], d[1], d[2], d[3]]), r, o);
            }
        }
        None => {
            for (r, o) in residual.iter_mut().zip(out.chunks_exact_mut(2)) {
                step(0.0, r, o);
            }
        }
    }
    Ok(Some(pool.share(out)))
}

/// Decodes bf16 deltas (little-endian, 2 bytes each) to little-endian f32
/// bytes, exactly (every bf16 is an f32: its bits are the f32's top half),
/// into a buffer of `pool`. An odd length is refused.
pub(crate) fn decode(payload: &[u8], pool: &RecvPool) -> Result<Bytes, String> {
    if payload.len() % 2 != 0 {
        return Err(format!("bf16 deltas of {} bytes are not a whole number of 2-byte values", payload.len()));
    }
    let mut out = pool.take(2 * payload.len());
    out.resize(2 * payload.len(), 0);
    for (b, o) in payload.chunks_exact(2).zip(out.chunks_exact_mut(4)) {
        o.copy_from_slice(&[0, 0, b[0], b[1]]);
    }
    Ok(pool.share(out))
}

/// One (table, partition)'s residual, f32, the partition's size.
pub(crate) type Residual = Arc<Mutex<Vec<f32>>>;

/// The sender's residuals, one per (table, partition) it sends bf16 to.
#[derive(Default)]
pub(crate) struct Residuals {
    by_partition: Mutex<HashMap<(u32, u32), Residual>>,
}

impl Residuals {
    /// The residual of a (table, partition), zeros until its first batch.
    /// Hold its lock from encoding until the batch is queued: batches of a
    /// partition then leave in the order their residuals were updated.
    pub(crate) fn of(&self, table: u32, partition: u32) -> Residual {
        self.by_partition.lock().entry((table, partition)).or_default().clone()
    }
}
