//! Rows on the wire: dense little-endian `f32` bytes, and the conversions
//! between them and floats (zero-copy views and owners where the host is
//! little-endian, converting copies elsewhere). It owns no rows and never
//! knows what the bytes belong to.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};

/// Checks that a payload holds exactly `floats` floats.
pub(crate) fn check_payload(bytes: &[u8], floats: usize) -> Result<()> {
    if bytes.len() != floats * 4 {
        return Err(Error::Mismatch(format!("row payload of {} bytes, expected {}", bytes.len(), floats * 4)));
    }
    Ok(())
}

/// Floats viewed as their in-memory bytes (little-endian on the hosts where
/// callers hand them out as `Bytes` without copying).
pub(crate) fn float_bytes(values: &[f32]) -> &[u8] {
    bytemuck::cast_slice(values)
}

/// Converts dense little-endian bytes to floats (one memcpy on little-endian hosts).
pub(crate) fn floats_from_bytes(bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check_payload(bytes, out.len())?;
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice_mut::<f32, u8>(out).copy_from_slice(bytes);
    } else {
        for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
    }
    Ok(())
}

/// Views dense little-endian bytes as floats without copying, when the host
/// is little-endian and the bytes are aligned (payloads read into their own
/// buffer and vectors of floats always are).
pub(crate) fn floats_view(bytes: &[u8]) -> Option<&[f32]> {
    le_view(bytes)
}

/// Dense little-endian bytes viewed as words of `T` without copying, where
/// the host is little-endian and the bytes are aligned for `T`.
pub(crate) fn le_view<T: bytemuck::Pod>(bytes: &[u8]) -> Option<&[T]> {
    if cfg!(target_endian = "little") {
        bytemuck::try_cast_slice(bytes).ok()
    } else {
        None
    }
}

/// Floats owned as bytes, for `Bytes::from_owner`.
struct FloatBytes(Vec<f32>);

impl AsRef<[u8]> for FloatBytes {
    fn as_ref(&self) -> &[u8] {
        float_bytes(&self.0)
    }
}

/// Shared floats owned as bytes, for `Bytes::from_owner`.
struct SharedFloatBytes(Arc<Vec<f32>>);

impl AsRef<[u8]> for SharedFloatBytes {
    fn as_ref(&self) -> &[u8] {
        // Nobody mutates the floats while shared: writers use `Arc::make_mut`.
        float_bytes(&self.0)
    }
}

/// Views shared floats as `Bytes` without copying (little-endian hosts; a
/// converting copy elsewhere). The floats stay shared until the bytes drop.
pub(crate) fn bytes_from_shared(values: Arc<Vec<f32>>) -> Bytes {
    if cfg!(target_endian = "little") {
        Bytes::from_owner(SharedFloatBytes(values))
    } else {
        bytes_from_floats(&values)
    }
}

/// Copies floats into dense little-endian bytes.
pub(crate) fn bytes_from_floats(values: &[f32]) -> Bytes {
    if cfg!(target_endian = "little") {
        return Bytes::from_owner(FloatBytes(values.to_vec()));
    }
    let mut v = Vec::with_capacity(values.len() * 4);
    for f in values {
        v.extend_from_slice(&f.to_le_bytes());
    }
    Bytes::from(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_bytes_roundtrip_and_length_check() {
        let v = [1.5f32, -2.0, f32::MAX];
        let b = bytes_from_floats(&v);
        let mut out = [0.0; 3];
        floats_from_bytes(&b, &mut out).unwrap();
        assert_eq!(out, v);
        assert!(floats_from_bytes(&b[1..], &mut out).is_err());
    }
}
