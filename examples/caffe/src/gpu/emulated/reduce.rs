//! caffe-geeps' block reductions in native Rust: `bias_gradient` (one block
//! per channel), `count_nonfinite` (one count per block), `scale_backward`
//! and `prelu_backward` (one block per parameter, also scaling the gradient
//! values it owns) and `prelu_sum`. Each thread's
//! partial is built in its strided order, then the shared-memory tree halves
//! `blockDim.x` as the CUDA loop does (an odd width drops its last partial
//! there too), so the sum has the GPU's association exactly. Only for blocks
//! of at most 256 threads (the shared array's size); larger ones stay
//! interpreted. Must never change the association of the sum.

use super::view::{Args, Fault, Memory};

/// The shared-memory tree of the CUDA code over `partial` (one per thread).
fn tree<T: Copy>(partial: &mut [T], add: impl Fn(T, T) -> T) -> T {
    let mut half = partial.len() / 2;
    while half > 0 {
        for t in 0..half {
            partial[t] = add(partial[t], partial[t + half]);
        }
        half /= 2;
    }
    partial[0]
}

/// Whether `j += blockDim.x` from below `n` cannot wrap.
pub fn strided(n: u32, threads: u32) -> bool {
    n as u64 + threads as u64 <= 1 << 32
}

/// `bias_gradient(dy, grad, num, channels, inner)`, `gridDim.x` blocks.
pub fn bias_gradient(a: &Args, m: &mut Memory, blocks: u32, threads: u32) -> Result<(), Fault> {
    let (num, channels, inner) = (a.u32(2), a.u32(3) as u64, a.u32(4));
    let total = num.wrapping_mul(inner);
    let mut partial = vec![0.0f32; threads as usize];
    for c in 0..blocks as u64 {
        for (t, p) in partial.iter_mut().enumerate() {
            let mut sum = 0.0f32;
            let mut j = t as u64;
            while j < total as u64 {
                let (b, k) = (j / inner as u64, j % inner as u64);
                sum += m.f32(0, (b * channels + c) * inner as u64 + k)?;
                j += threads as u64;
            }
            *p = sum;
        }
        let sum = tree(&mut partial, |x, y| x + y);
        m.set_f32(1, c, sum)?;
    }
    Ok(())
}

/// `count_nonfinite(x, n, counts)`: counts[b] = block b's non-finite values, as a float.
pub fn count_nonfinite(a: &Args, m: &mut Memory, blocks: u32, threads: u32) -> Result<(), Fault> {
    let n = a.u32(1) as u64;
    let stride = blocks as u64 * threads as u64;
    let mut partial = vec![0u32; threads as usize];
    for b in 0..blocks as u64 {
        for (t, p) in partial.iter_mut().enumerate() {
            let mut bad = 0u32;
            let mut i = b * threads as u64 + t as u64;
            while i < n {
                // The CUDA test `x - x == 0`, true exactly for finite x.
                let bad_here = !m.f32(0, i)?.is_finite();
                bad = bad.wrapping_add(bad_here as u32);
                i += stride;
            }
            *p = bad;
        }
        let count = tree(&mut partial, u32::wrapping_add);
        m.set_f32(2, b, count as f32)?;
    }
    Ok(())
}

/// `scale_backward(x, d, params, grad, outer, dim, inner, has_bias)`, one
/// block per parameter s: grad[s] = sum d * x, grad[dim + s] = sum d, d *= gamma[s].
pub fn scale_backward(a: &Args, m: &mut Memory, blocks: u32, threads: u32) -> Result<(), Fault> {
    let (outer, dim, inner, has_bias) = (a.u32(4), a.u32(5) as u64, a.u32(6) as u64, a.u32(7) != 0);
    let total = outer.wrapping_mul(inner as u32) as u64;
    let (mut px, mut ps) = (vec![0.0f32; threads as usize], vec![0.0f32; threads as usize]);
    for s in 0..blocks as u64 {
        let g = m.f32(2, s)?;
        for t in 0..threads as usize {
            let (mut gx, mut gs) = (0.0f32, 0.0f32);
            let mut j = t as u64;
            while j < total {
                let at = ((j / inner) * dim + s) * inner + j % inner;
                let dv = m.f32(1, at)?;
                gx += dv * m.f32(0, at)?;
                gs += dv;
                m.set_f32(1, at, dv * g)?;
                j += threads as u64;
            }
            (px[t], ps[t]) = (gx, gs);
        }
        let (gx, gs) = (tree(&mut px, |x, y| x + y), tree(&mut ps, |x, y| x + y));
        m.set_f32(3, s, gx)?;
        if has_bias {
            m.set_f32(3, dim + s, gs)?;
        }
    }
    Ok(())
}

/// `prelu_backward(x, d, slopes, sums, num, channels, inner, shared)`, one
/// block per channel c: sums[c] = sum d * x where x <= 0, and d *= a there.
pub fn prelu_backward(a: &Args, m: &mut Memory, blocks: u32, threads: u32) -> Result<(), Fault> {
    let (num, channels, inner, shared) = (a.u32(4), a.u32(5) as u64, a.u32(6) as u64, a.u32(7) != 0);
    let total = num.wrapping_mul(inner as u32) as u64;
    let mut partial = vec![0.0f32; threads as usize];
    for c in 0..blocks as u64 {
        let slope = m.f32(2, if shared { 0 } else { c })?;
        for (t, p) in partial.iter_mut().enumerate() {
            let mut sum = 0.0f32;
            let mut j = t as u64;
            while j < total {
                let at = ((j / inner) * channels + c) * inner + j % inner;
                let xv = m.f32(0, at)?;
                if xv <= 0.0 {
                    let dv = m.f32(1, at)?;
                    sum += dv * xv;
                    m.set_f32(1, at, dv * slope)?;
                }
                j += threads as u64;
            }
            *p = sum;
        }
        let sum = tree(&mut partial, |x, y| x + y);
        m.set_f32(3, c, sum)?;
    }
    Ok(())
}

/// `prelu_sum(sums, n, total)`: *total = the block sum of sums[0..n) (every block writes the same).
pub fn prelu_sum(a: &Args, m: &mut Memory, blocks: u32, threads: u32) -> Result<(), Fault> {
    let n = a.u32(1) as u64;
    let mut partial = vec![0.0f32; threads as usize];
    for _ in 0..blocks {
        for (t, p) in partial.iter_mut().enumerate() {
            let mut s = 0.0f32;
            let mut j = t as u64;
            while j < n {
                s += m.f32(0, j)?;
                j += threads as u64;
            }
            *p = s;
        }
        let total = tree(&mut partial, |x, y| x + y);
        m.set_f32(2, 0, total)?;
    }
    Ok(())
}
