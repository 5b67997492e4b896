//! How an update batch's deltas are laid out, and the keeper's arithmetic on
//! each layout: f32 (what the engine produces) or bf16 (a compressed wire's,
//! added as they arrive instead of being widened into a second buffer first).
//! It owns the per-value sums; it never holds rows or decides when to add.

use crate::error::{Error, Result};
use crate::transport::{add_bytes, floats_view, le_view};

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

/// Refuses deltas that do not hold exactly `floats` values.
pub(crate) fn check_deltas(bytes: &[u8], encoding: DeltaEncoding, floats: usize) -> Result<()> {
    let (name, each) = match encoding {
        DeltaEncoding::F32 => ("f32", 4),
        DeltaEncoding::Bf16 => ("bf16", 2),
    };
    if bytes.len() != floats * each {
        return Err(Error::Mismatch(format!(
            "{name} deltas of {} bytes for a partition of {floats} floats: expected {} ({each} bytes each)",
            bytes.len(),
            floats * each
        )));
    }
    Ok(())
}

/// `values += deltas`.
pub(crate) fn add_deltas(values: &mut [f32], bytes: &[u8], encoding: DeltaEncoding) -> Result<()> {
    check_deltas(bytes, encoding, values.len())?;
    match encoding {
        DeltaEncoding::F32 => add_bytes(values, bytes),
        DeltaEncoding::Bf16 => {
            match le_view::<u16>(bytes) {
                Some(d) => values.iter_mut().zip(d).for_each(|(v, d)| *v += widen(*d)),
                None => values
                    .iter_mut()
                    .zip(bytes.chunks_exact(2))
                    .for_each(|(v, c)| *v += widen(u16::from_le_bytes([c[0], c[1]]))),
            }
            Ok(())
        }
    }
}

/// `out = base + deltas`, in one pass (lengths checked by the caller).
pub(crate) fn sum_into(out: &mut [f32], base: &[f32], bytes: &[u8], encoding: DeltaEncoding) {
    let pairs = out.iter_mut().zip(base);
    match encoding {
        DeltaEncoding::F32 => match floats_view(bytes) {
            Some(d) => pairs.zip(d).for_each(|((o, b), d)| *o = *b + *d),
            None => pairs
                .zip(bytes.chunks_exact(4))
                .for_each(|((o, b), c)| *o = *b + f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        },
        DeltaEncoding::Bf16 => match le_view::<u16>(bytes) {
            Some(d) => pairs.zip(d).for_each(|((o, b), d)| *o = *b + widen(*d)),
            None => pairs
                .zip(bytes.chunks_exact(2))
                .for_each(|((o, b), c)| *o = *b + widen(u16::from_le_bytes([c[0], c[1]]))),
        },
    }
}

/// A bf16 as the f32 it is.
#[inline(always)]
fn widen(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect()
    }

    #[test]
    fn bf16_deltas_add_exactly_at_any_address() {
        // Values exact in bf16: the sums are exact too.
        let deltas = [1.5f32, -2.0, 0.0, 0.25, -(2f32.powi(100)), 7.0];
        let base = [10.0f32, 20.0, 30.0, 40.0, 50.0, 60.0];
        let want: Vec<f32> = base.iter().zip(&deltas).map(|(b, d)| b + d).collect();
        let bytes = bf16_bytes(&deltas);
        let mut odd = vec![0u8; bytes.len() + 1];
        odd[1..].copy_from_slice(&bytes);
        for payload in [&bytes[..], &odd[1..]] {
            let mut values = base;
            add_deltas(&mut values, payload, DeltaEncoding::Bf16).unwrap();
            assert_eq!(values.to_vec(), want);
            let mut out = [0f32; 6];
            sum_into(&mut out, &base, payload, DeltaEncoding::Bf16);
            assert_eq!(out.to_vec(), want);
        }
    }

    #[test]
    fn lengths_are_checked_per_encoding() {
        let mut values = [0f32; 4];
        assert!(add_deltas(&mut values, &[0u8; 16], DeltaEncoding::Bf16).is_err());
        let e = add_deltas(&mut values, &[0u8; 7], DeltaEncoding::Bf16).unwrap_err().to_string();
        assert!(e.contains("bf16 deltas of 7 bytes for a partition of 4 floats: expected 8 (2 bytes each)"), "{e}");
        assert!(add_deltas(&mut values, &[0u8; 8], DeltaEncoding::F32).is_err());
        add_deltas(&mut values, &[0u8; 8], DeltaEncoding::Bf16).unwrap();
        add_deltas(&mut values, &[0u8; 16], DeltaEncoding::F32).unwrap();
        assert_eq!(values, [0.0; 4]);
    }
}
