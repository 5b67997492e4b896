//! Caffe's DataTransformer on the GPU (`data/transform.cu`)
//! in native Rust: out = (x - mean) * scale per output value over each
//! image's crop window at its (h_off, w_off), mirrored when asked, the mean
//! an image (kind 1), per channel (2) or none (0); the stored batch as bytes
//! (`transform_bytes`) or floats (`transform_floats`). The index arithmetic
//! is the CUDA code's, in 64 bits where it uses size_t. Only for shapes
//! whose int products fit (`sane`); others stay interpreted. Must never
//! fuse the subtract and the multiply.

use super::view::{for_each, Args, Fault, Memory};

const INT: i64 = i32::MAX as i64;

/// The int arguments (c, h, w, oh, ow) and the batch size, if the CUDA int arithmetic cannot overflow or divide by 0.
pub fn outputs(a: &Args) -> Option<u32> {
    let [c, h, w, oh, ow] = [6, 7, 8, 9, 10].map(|k| a.i32(k) as i64);
    let fits = [c, h, w, oh, ow].iter().all(|&v| v >= 1) && c * oh * ow <= INT && c * h * w <= INT;
    let n = a.u32(5) as u64 * (c * oh * ow) as u64;
    (fits && n < 1 << 32).then_some(n as u32)
}

/// `transform_bytes` (`bytes`) or `transform_floats`:
/// `(x, out, placements, mean, mean_kind, num, c, h, w, oh, ow, scale)`.
pub fn transform(a: &Args, m: &mut Memory, bytes: bool) -> Result<(), Fault> {
    let Some(n) = outputs(a) else { return Ok(()) };
    let [c, h, w, oh, ow] = [6, 7, 8, 9, 10].map(|k| a.i32(k) as i64 as u64);
    let (mean_kind, scale) = (a.u32(4), a.f32(11));
    for_each(n, |i| {
        let (xo, y, ch, k) = (i % ow, (i / ow) % oh, (i / (ow * oh)) % c, i / (ow * oh * c));
        let at = 3 * k;
        let (h_off, w_off, mirror) = (m.u32(2, at)? as u64, m.u32(2, at + 1)? as u64, m.u32(2, at + 2)?);
        let xw = if mirror != 0 { ow - 1 - xo } else { xo };
        let src = ((ch.wrapping_mul(h).wrapping_add(h_off).wrapping_add(y)).wrapping_mul(w))
            .wrapping_add(w_off)
            .wrapping_add(xw);
        let from = k.wrapping_mul(c * h * w).wrapping_add(src);
        let v = if bytes { m.u8(0, from)? as f32 } else { m.f32(0, from)? };
        let mean = match mean_kind {
            1 => m.f32(3, src)?,
            2 => m.f32(3, ch)?,
            _ => 0.0,
        };
        m.set_f32(1, i, (v - mean) * scale)
    })
}
