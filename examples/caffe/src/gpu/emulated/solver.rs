//! The SGD step (`solvers/sgd.cu`'s `sgd_step`) in native
//! Rust: g <- scale * (g * factor + decay * reg(w)) with reg = w (L2) or
//! sign(w) (L1), h <- momentum * h + rate * g, the delta -h or for Nesterov
//! -((1 + momentum) * h - momentum * h_old), each operation the CUDA code's
//! explicitly rounded (`__fmul_rn`, `__fadd_rn`) f32 one, in its order.
//! Must never fuse a multiply and an add.

use super::view::{for_each, Args, Fault, Memory};

/// `sgd_step(w, grad_delta, history, n, factor, decay, l1, scale, rate, momentum, nesterov)`.
pub fn sgd_step(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let (factor, decay, l1, scale) = (a.f32(4), a.f32(5), a.u32(6) != 0, a.f32(7));
    let (rate, momentum, nesterov) = (a.f32(8), a.f32(9), a.u32(10) != 0);
    for_each(a.u32(3), |i| {
        let wi = m.f32(0, i)?;
        let reg = if l1 { ((0.0 < wi) as i32 - (wi < 0.0) as i32) as f32 } else { wi };
        let g = scale * (m.f32(1, i)? * factor + decay * reg);
        let old = m.f32(2, i)?;
        let h = momentum * old + rate * g;
        m.set_f32(2, i, h)?;
        let step = if nesterov { (1.0 + momentum) * h - momentum * old } else { h };
        m.set_f32(1, i, -step)
    })
}
