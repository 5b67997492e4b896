//! bf16 update deltas on the wire, with error feedback. The sender keeps,
//! per (table, partition), the residual `r` of what rounding to bf16 has not
//! yet sent: each clock it sends `q = bf16(d + r)` (round to nearest even)
//! and keeps `r = (d + r) - q`, so no update is lost over clocks; a batch
//! without deltas still sends a non-zero residual. The keeper adds bf16
//! widened to f32 (`geeps_core::transport::DeltaEncoding`). This module owns
//! the encoding and the residuals; it never touches publications (parameter
//! values stay f32) nor batches applied in process (a rank's own shard stays
//! exact).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::wire::recv_pool::RecvPool;

#[cfg(test)]
#[path = "../../tests/unit/bf16_wire_tests.rs"]
mod bf16_wire_tests;

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
    let mut out = pool.take_to_overwrite(2 * n);
    encode_values(deltas, residual, &mut out);
    Ok(Some(pool.share(out)))
}

/// `bytes` as native words, where that is their little-endian reading and
/// they are aligned for it (a pool's buffers are).
fn words_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Option<&mut [T]> {
    if cfg!(target_endian = "little") {
        bytemuck::try_cast_slice_mut(bytes).ok()
    } else {
        None
    }
}

/// [`words_mut`], read only.
fn words<T: bytemuck::Pod>(bytes: &[u8]) -> Option<&[T]> {
    if cfg!(target_endian = "little") {
        bytemuck::try_cast_slice(bytes).ok()
    } else {
        None
    }
}

/// One value of [`encode`]: sends `bf16(d + r)`, keeps what rounding left
/// (a non-finite sum leaves a NaN residual, reset to 0). Branch-free.
#[inline(always)]
fn encode_step(d: f32, r: &mut f32) -> u16 {
    let s = d + *r;
    let q = round_bits(s);
    let left = s - f32::from_bits(u32::from(q) << 16);
    *r = if left.is_finite() { left } else { 0.0 };
    q
}

/// Encodes `out.len() / 2` values (deltas, or zeros when `None`) with their
/// residuals, with AVX2 where the CPU has it: the baseline x86-64 target
/// vectorises the rounding only 4 floats wide, and it is compute-bound there.
fn encode_values(deltas: Option<&[u8]>, residual: &mut [f32], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { encode_values_avx2(deltas, residual, out) };
    }
    encode_values_body(deltas, residual, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn encode_values_avx2(deltas: Option<&[u8]>, residual: &mut [f32], out: &mut [u8]) {
    encode_values_body(deltas, residual, out)
}

#[inline(always)]
fn encode_values_body(deltas: Option<&[u8]>, residual: &mut [f32], out: &mut [u8]) {
    let typed_deltas = deltas.map(words::<f32>);
    match (typed_deltas, words_mut::<u16>(out)) {
        (Some(Some(d)), Some(o)) => {
            for ((d, r), o) in d.iter().zip(residual.iter_mut()).zip(o) {
                *o = encode_step(*d, r);
            }
        }
        (None, Some(o)) => {
            for (r, o) in residual.iter_mut().zip(o) {
                *o = encode_step(0.0, r);
            }
        }
        // Unaligned (or big-endian) buffers: the same arithmetic bytewise.
        (Some(_), _) => {
            let d = deltas.unwrap_or_default().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            for ((d, r), o) in d.zip(residual.iter_mut()).zip(out.chunks_exact_mut(2)) {
                o.copy_from_slice(&encode_step(d, r).to_le_bytes());
            }
        }
        (None, None) => {
            for (r, o) in residual.iter_mut().zip(out.chunks_exact_mut(2)) {
                o.copy_from_slice(&encode_step(0.0, r).to_le_bytes());
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of every kind: normal, subnormal, zero, infinite, NaN, near bf16's top.
    fn values(n: usize) -> Vec<f32> {
        let mut bits = 0x2545_f491u32;
        (0..n)
            .map(|i| match i % 11 {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => -f32::MAX,
                3 => f32::from_bits(3),
                4 => 0.0,
                _ => {
                    bits ^= bits << 13;
                    bits ^= bits >> 17;
                    bits ^= bits << 5;
                    f32::from_bits(bits)
                }
            })
            .collect()
    }

    /// `bytes` copied to an odd address.
    fn misaligned(bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; bytes.len() + 1];
        v[1..].copy_from_slice(bytes);
        v
    }

    #[test]
    fn every_path_encodes_the_same_bits() {
        let n = 1000;
        let deltas: Vec<u8> = values(n).iter().flat_map(|v| v.to_le_bytes()).collect();
        let start: Vec<f32> = values(n + 7)[7..].iter().map(|v| if v.is_finite() { v / 3.0 } else { 0.0 }).collect();
        // One value at a time, the definition.
        let (mut r_ref, mut out_ref) = (start.clone(), vec![0u8; 2 * n]);
        for ((d, r), o) in deltas.chunks_exact(4).zip(&mut r_ref).zip(out_ref.chunks_exact_mut(2)) {
            o.copy_from_slice(&encode_step(f32::from_le_bytes(d.try_into().unwrap()), r).to_le_bytes());
        }
        let odd_deltas = misaligned(&deltas);
        for (name, d, odd_out) in [
            ("aligned", &deltas[..], false),
            ("deltas at an odd address", &odd_deltas[1..], false),
            ("output at an odd address", &deltas[..], true),
        ] {
            for wide in [true, false] {
                let mut r = start.clone();
                let mut out = vec![0u8; 2 * n + 1];
                let o = if odd_out { &mut out[1..] } else { &mut out[..2 * n] };
                if wide {
                    encode_values(Some(d), &mut r, o);
                } else {
                    encode_values_body(Some(d), &mut r, o);
                }
                assert_eq!(o, &out_ref[..], "{name}, wide {wide}: bf16 bits differ");
                let same = r.iter().zip(&r_ref).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{name}, wide {wide}: residuals differ");
            }
        }
        // A clock without deltas is a clock of zeros.
        let (mut r_none, mut r_zero) = (start.clone(), start.clone());
        let (mut o_none, mut o_zero) = (vec![0u8; 2 * n], vec![0u8; 2 * n]);
        encode_values(None, &mut r_none, &mut o_none);
        encode_values(Some(&vec![0u8; 4 * n]), &mut r_zero, &mut o_zero);
        assert_eq!(o_none, o_zero);
        assert!(r_none.iter().zip(&r_zero).all(|(a, b)| a.to_bits() == b.to_bits()));
        let (mut r_odd, mut o_odd) = (start.clone(), vec![0u8; 2 * n + 1]);
        encode_values(None, &mut r_odd, &mut o_odd[1..]);
        assert_eq!(&o_odd[1..], &o_none[..], "no deltas, output at an odd address");
        assert!(r_odd.iter().zip(&r_none).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}
