//! How an update batch's deltas are laid out, and the keeper's arithmetic on
//! each layout: f32 (what the engine produces) or bf16 (a compressed wire's,
//! added as they arrive instead of being widened into a second buffer first).
//! It owns the per-value sums; it never holds rows or decides when to add.

use crate::error::{Error, Result};
use crate::transport::bytes::{check_payload, floats_view, le_view};

/// The layout of an [`UpdateBatch`](crate::transport::UpdateBatch)'s deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DeltaEncoding {
    /// Little-endian f32, 4 bytes a value.
    #[default]
    F32,
    /// Little-endian bf16, 2 bytes a value: each the top half of an f32
    /// (widened exactly by the keeper).
    Bf16,
}

impl DeltaEncoding {
    /// Its name in messages, and the bytes of one value.
    fn layout(self) -> (&'static str, usize) {
        match self {
            DeltaEncoding::F32 => ("f32", 4),
            DeltaEncoding::Bf16 => ("bf16", 2),
        }
    }
}

/// Refuses deltas that do not hold exactly `floats` values.
pub(crate) fn check_deltas(bytes: &[u8], encoding: DeltaEncoding, floats: usize) -> Result<()> {
    let (name, each) = encoding.layout();
    if bytes.len() != floats * each {
        return Err(Error::Mismatch(format!(
            "{name} deltas of {} bytes for a partition of {floats} floats: expected {} ({each} bytes each)",
            bytes.len(),
            floats * each
        )));
    }
    Ok(())
}

/// Values per block of [`add_all`]: the block (16 KiB) stays in L1 while
/// every batch's deltas for it go in.
const BLOCK: usize = 4096;

/// `values = ((base + d₀) + d₁) + …`, element by element in the order given
/// (the same bits as one pass per batch), with `base` the values themselves
/// when `None`. Done block by block, so the rows cross memory once for any
/// number of batches instead of once per batch. Lengths are checked by the
/// caller ([`check_deltas`]).
pub(crate) fn add_all(values: &mut [f32], base: Option<&[f32]>, deltas: &[(&[u8], DeltaEncoding)]) {
    for (block, out) in values.chunks_mut(BLOCK).enumerate() {
        let range = block * BLOCK..block * BLOCK + out.len();
        if let Some(base) = base {
            // Into L1 first: the block's sums then run in place.
            out.copy_from_slice(&base[range.clone()]);
        }
        for &(bytes, e) in deltas {
            let each = e.layout().1;
            add_unchecked(out, &bytes[range.start * each..range.end * each], e);
        }
    }
}

/// `values += deltas`, the length already checked.
fn add_unchecked(values: &mut [f32], bytes: &[u8], encoding: DeltaEncoding) {
    match encoding {
        DeltaEncoding::F32 => match floats_view(bytes) {
            Some(d) => values.iter_mut().zip(d).for_each(|(v, d)| *v += *d),
            None => values
                .iter_mut()
                .zip(bytes.chunks_exact(4))
                .for_each(|(v, c)| *v += f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        },
        DeltaEncoding::Bf16 => match le_view::<u16>(bytes) {
            Some(d) => values.iter_mut().zip(d).for_each(|(v, d)| *v += widen(*d)),
            None => values
                .iter_mut()
                .zip(bytes.chunks_exact(2))
                .for_each(|(v, c)| *v += widen(u16::from_le_bytes([c[0], c[1]]))),
        },
    }
}

/// Adds dense little-endian deltas to `values`.
pub(crate) fn add_bytes(values: &mut [f32], bytes: &[u8]) -> Result<()> {
    check_payload(bytes, values.len())?;
    add_unchecked(values, bytes, DeltaEncoding::F32);
    Ok(())
}

/// A bf16 as the f32 it is.
#[inline(always)]
fn widen(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::bytes::bytes_from_floats;

    fn bf16_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect()
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// The same bytes one further along, so their address is odd.
    fn odd(bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; bytes.len() + 1];
        v[1..].copy_from_slice(bytes);
        v
    }

    #[test]
    fn bf16_deltas_add_exactly_at_any_address() {
        // Values exact in bf16: the sums are exact too.
        let deltas = [1.5f32, -2.0, 0.0, 0.25, -(2f32.powi(100)), 7.0];
        let base = [10.0f32, 20.0, 30.0, 40.0, 50.0, 60.0];
        let want: Vec<f32> = base.iter().zip(&deltas).map(|(b, d)| b + d).collect();
        let bytes = bf16_bytes(&deltas);
        let shifted = odd(&bytes);
        for payload in [&bytes[..], &shifted[1..]] {
            let mut values = base;
            add_all(&mut values, None, &[(payload, DeltaEncoding::Bf16)]);
            assert_eq!(values.to_vec(), want);
            let mut out = [0f32; 6];
            add_all(&mut out, Some(&base), &[(payload, DeltaEncoding::Bf16)]);
            assert_eq!(out.to_vec(), want);
        }
    }

    /// Values whose sums round differently in another order.
    fn awkward(seed: u32, len: usize) -> Vec<f32> {
        (0..len as u32)
            .map(|i| {
                let x = (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 1_000_003;
                (x as f32 - 500_000.0) * 1e-3 * if i % 7 == 0 { 1e7 } else { 1.0 }
            })
            .collect()
    }

    #[test]
    fn batches_added_together_give_the_bits_of_one_pass_each() {
        // Past one block, not a multiple of it; mixed encodings and addresses.
        let len = 3 * BLOCK + 123;
        let base = awkward(1, len);
        let deltas: Vec<Vec<f32>> = (2..6).map(|s| awkward(s, len)).collect();
        let payloads: Vec<(Vec<u8>, DeltaEncoding)> = vec![
            (f32_bytes(&deltas[0]), DeltaEncoding::F32),
            (odd(&f32_bytes(&deltas[1])), DeltaEncoding::F32),
            (bf16_bytes(&deltas[2]), DeltaEncoding::Bf16),
            (odd(&bf16_bytes(&deltas[3])), DeltaEncoding::Bf16),
        ];
        let views: Vec<(&[u8], DeltaEncoding)> =
            payloads.iter().map(|(b, e)| (if b.len() % 2 == 1 { &b[1..] } else { &b[..] }, *e)).collect();
        let mut one_by_one = base.clone();
        for (d, e) in &views {
            check_deltas(d, *e, len).unwrap();
            add_unchecked(&mut one_by_one, d, *e);
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut in_place = base.clone();
        add_all(&mut in_place, None, &views);
        assert_eq!(bits(&in_place), bits(&one_by_one));
        let mut copied = vec![f32::NAN; len];
        add_all(&mut copied, Some(&base), &views);
        assert_eq!(bits(&copied), bits(&one_by_one));
        // Another order gives other bits: the test can tell orders apart.
        let mut reversed = base.clone();
        let backwards: Vec<_> = views.iter().rev().copied().collect();
        add_all(&mut reversed, None, &backwards);
        assert_ne!(bits(&reversed), bits(&one_by_one));
        // No batches: a copy of the base.
        let mut copy = vec![0f32; len];
        add_all(&mut copy, Some(&base), &[]);
        assert_eq!(bits(&copy), bits(&base));
    }

    #[test]
    fn lengths_are_checked_per_encoding() {
        assert!(check_deltas(&[0u8; 16], DeltaEncoding::Bf16, 4).is_err());
        let e = check_deltas(&[0u8; 7], DeltaEncoding::Bf16, 4).unwrap_err().to_string();
        assert!(e.contains("bf16 deltas of 7 bytes for a partition of 4 floats: expected 8 (2 bytes each)"), "{e}");
        assert!(check_deltas(&[0u8; 8], DeltaEncoding::F32, 4).is_err());
        check_deltas(&[0u8; 8], DeltaEncoding::Bf16, 4).unwrap();
        check_deltas(&[0u8; 16], DeltaEncoding::F32, 4).unwrap();
    }

    #[test]
    fn zero_copy_views_and_adds() {
        let b = bytes_from_floats(&[1.0, 2.0, 3.0]);
        assert_eq!(floats_view(&b).unwrap(), &[1.0, 2.0, 3.0]);
        let mut v = [10.0f32; 3];
        add_bytes(&mut v, &b).unwrap();
        assert_eq!(v, [11.0, 12.0, 13.0]);
        // Misaligned bytes still add correctly, through the converting path.
        let mut raw = [0u8; 13];
        raw[1..].copy_from_slice(&b);
        let mut v = [0.0f32; 3];
        add_bytes(&mut v, &raw[1..]).unwrap();
        assert_eq!(v, [1.0, 2.0, 3.0]);
        assert!(add_bytes(&mut v, &raw[..5]).is_err());
    }
}
