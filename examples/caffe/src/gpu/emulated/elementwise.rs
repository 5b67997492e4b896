//! caffe-geeps' one-value-per-thread kernels in native Rust
//! (`activations.cu` without the transcendental ones, `bias.cu`'s
//! `add_bias`, `eltwise.cu`, `concat.cu`, `scale_forward`, `prelu_forward`): each index of the grid-stride
//! loop gets the CUDA code's f32 operations, operands in its order (which
//! fixes a NaN's payload), with no fused multiply-add (their PTX has none).
//! Must never run sigmoid/tanh forward (expf/tanhf approximations): those
//! stay interpreted.

use super::view::{for_each, Args, Fault, Memory};

/// `relu_forward(y, n, slope)`.
pub fn relu_forward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let slope = a.f32(2);
    for_each(a.u32(1), |i| {
        let v = m.f32(0, i)?;
        m.set_f32(0, i, if v > 0.0 { v } else { v * slope })
    })
}

/// `relu_backward(y, d, n, slope)`.
pub fn relu_backward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let slope = a.f32(3);
    for_each(a.u32(2), |i| {
        let s = if m.f32(0, i)? > 0.0 { 1.0 } else { slope };
        m.set_f32(1, i, m.f32(1, i)? * s)
    })
}

/// `sigmoid_backward(y, d, n)`: d *= t * (1 - t).
pub fn sigmoid_backward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    for_each(a.u32(2), |i| {
        let t = m.f32(0, i)?;
        m.set_f32(1, i, m.f32(1, i)? * (t * (1.0 - t)))
    })
}

/// `tanh_backward(y, d, n)`: d *= 1 - t * t.
pub fn tanh_backward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    for_each(a.u32(2), |i| {
        let t = m.f32(0, i)?;
        m.set_f32(1, i, m.f32(1, i)? * (1.0 - t * t))
    })
}

/// The dropout draw: splitmix64 of the seed and the index, its top 24 bits as a float in [0, 1).
fn dropout_uniform(seed: u64, i: u64) -> f32 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 40) as u32) as f32 * (1.0 / 16_777_216.0)
}

/// `dropout_forward(y, mask, n, ratio, scale, seed)`.
pub fn dropout_forward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let (ratio, scale, seed) = (a.f32(3), a.f32(4), a.u64(5));
    for_each(a.u32(2), |i| {
        let keep = if dropout_uniform(seed, i) >= ratio { scale } else { 0.0 };
        m.set_f32(1, i, keep)?;
        m.set_f32(0, i, m.f32(0, i)? * keep)
    })
}

/// `dropout_backward(mask, d, n)`.
pub fn dropout_backward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    for_each(a.u32(2), |i| m.set_f32(1, i, m.f32(1, i)? * m.f32(0, i)?))
}

/// `add_bias(y, bias, num, channels, inner)`: y[i] += bias[(i / inner) % channels].
pub fn add_bias(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let (num, channels, inner) = (a.u32(2), a.u32(3), a.u32(4));
    let n = num.wrapping_mul(channels).wrapping_mul(inner);
    for_each(n, |i| {
        let b = m.f32(1, ((i as u32 / inner) % channels) as u64)?;
        m.set_f32(0, i, m.f32(0, i)? + b)
    })
}

/// `add_scaled(y, x, n, c)`: y += c * x.
pub fn add_scaled(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let c = a.f32(3);
    for_each(a.u32(2), |i| m.set_f32(0, i, m.f32(0, i)? + c * m.f32(1, i)?))
}

/// `eltwise_scale_copy(y, x, n, c)`: y = c * x.
pub fn scale_copy(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let c = a.f32(3);
    for_each(a.u32(2), |i| m.set_f32(0, i, c * m.f32(1, i)?))
}

/// `eltwise_multiply(y, x, n)`: y *= x.
pub fn multiply(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    for_each(a.u32(2), |i| m.set_f32(0, i, m.f32(0, i)? * m.f32(1, i)?))
}

/// `eltwise_max_forward(y, mask, x, n, k)`: where x beats y strictly, y = x and mask = k.
pub fn max_forward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let k = a.u32(4) as f32;
    for_each(a.u32(3), |i| {
        let v = m.f32(2, i)?;
        if v > m.f32(0, i)? {
            m.set_f32(0, i, v)?;
            m.set_f32(1, i, k)?;
        }
        Ok(())
    })
}

/// `eltwise_max_backward(dx, dy, mask, n, k)`: dy where the mask (as an unsigned int) is k, else 0.
pub fn max_backward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let k = a.u32(4);
    for_each(a.u32(3), |i| {
        // A float to unsigned conversion saturates and takes NaN to 0, as PTX's cvt.rzi.u32.f32.
        let v = if m.f32(2, i)? as u32 == k { m.f32(1, i)? } else { 0.0 };
        m.set_f32(0, i, v)
    })
}

/// `copy_rows(src, src_ld, dst, dst_ld, rows, len)`.
pub fn copy_rows(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let (src_ld, dst_ld, rows, len) = (a.u32(1) as u64, a.u32(3) as u64, a.u32(4), a.u32(5));
    for_each(rows.wrapping_mul(len), |i| {
        let (r, k) = (i / len as u64, i % len as u64);
        m.set_f32(2, r * dst_ld + k, m.f32(0, r * src_ld + k)?)
    })
}

/// `scale_forward(y, x_keep, params, outer, dim, inner, has_bias)`: y = y * gamma[s] + (beta[s] or +0), keeping y.
pub fn scale_forward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let (outer, dim, inner, has_bias) = (a.u32(3), a.u32(4), a.u32(5), a.u32(6) != 0);
    for_each(outer.wrapping_mul(dim).wrapping_mul(inner), |i| {
        let s = ((i as u32 / inner) % dim) as u64;
        let v = m.f32(0, i)?;
        m.set_f32(1, i, v)?;
        let b = if has_bias { m.f32(2, dim as u64 + s)? } else { 0.0 };
        m.set_f32(0, i, v * m.f32(2, s)? + b)
    })
}

/// `prelu_forward(y, x_keep, slopes, n, channels, inner, shared)`: y = x where x > 0, else a * x, keeping x.
pub fn prelu_forward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let (channels, inner, shared) = (a.u32(4), a.u32(5), a.u32(6) != 0);
    for_each(a.u32(3), |i| {
        let v = m.f32(0, i)?;
        m.set_f32(1, i, v)?;
        let slope = m.f32(2, if shared { 0 } else { ((i as u32 / inner) % channels) as u64 })?;
        m.set_f32(0, i, if v > 0.0 { v } else { slope * v })
    })
}
