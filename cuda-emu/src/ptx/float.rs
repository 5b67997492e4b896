//! Floating-point operations on one thread's values (f32 in the low 32
//! bits of a register slot, f64 in all 64), with PTX's rounding modifiers:
//! `.rn` is Rust's arithmetic; `.rz`, `.rm` and `.rp` start from the
//! round-to-nearest result and step one ulp where the exact error (found
//! with error-free transformations in f64) says the directed result lies
//! on the other side. The `.approx` functions use Rust's (more accurate)
//! ones. Must never depend on the host's floating-point environment.

use super::inst::Fn3;

pub const RN: u8 = 0;
pub const RZ: u8 = 1;
pub const RM: u8 = 2;
pub const RP: u8 = 3;

/// The rounding mode among `mods` (`rn` when none).
pub fn mode(mods: &[&str]) -> u8 {
    for m in mods {
        match *m {
            "rz" | "rzi" => return RZ,
            "rm" | "rmi" => return RM,
            "rp" | "rpi" => return RP,
            _ => {}
        }
    }
    RN
}

#[inline(always)]
fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
#[inline(always)]
fn pf(x: f32) -> u64 {
    x.to_bits() as u64
}
#[inline(always)]
fn d(x: u64) -> f64 {
    f64::from_bits(x)
}
#[inline(always)]
fn pd(x: f64) -> u64 {
    x.to_bits()
}

/// `r` (round-to-nearest) moved to the result of mode `m`, given the sign
/// of `exact - r` in `err`. An infinite `r` from finite operands overflowed:
/// the exact value is finite, on the zero side of `r`.
pub fn direct32<const M: u8>(r: f32, err: f64) -> f32 {
    if M == RN || err == 0.0 || r.is_nan() || err.is_nan() {
        return r;
    }
    match M {
        RZ if r > 0.0 && err < 0.0 => down(r),
        RZ if r < 0.0 && err > 0.0 => up(r),
        RM if err < 0.0 => down(r),
        RP if err > 0.0 => up(r),
        _ => r,
    }
}

pub fn direct64<const M: u8>(r: f64, err: f64) -> f64 {
    if M == RN || err == 0.0 || r.is_nan() || err.is_nan() {
        return r;
    }
    match M {
        RZ if r > 0.0 && err < 0.0 => down(r),
        RZ if r < 0.0 && err > 0.0 => up(r),
        RM if err < 0.0 => down(r),
        RP if err > 0.0 => up(r),
        _ => r,
    }
}

/// The next float above `x` (`next_up`, which needs a newer Rust than the MSRV).
pub trait Step: Copy {
    fn step_up(self) -> Self;
    fn step_down(self) -> Self;
}

macro_rules! step {
    ($t:ty) => {
        impl Step for $t {
            fn step_up(self) -> $t {
                if self.is_nan() || self == <$t>::INFINITY {
                    self
                } else if self == 0.0 {
                    <$t>::from_bits(1)
                } else if self > 0.0 {
                    <$t>::from_bits(self.to_bits() + 1)
                } else {
                    <$t>::from_bits(self.to_bits() - 1)
                }
            }
            fn step_down(self) -> $t {
                -(-self).step_up()
            }
        }
    };
}
step!(f32);
step!(f64);

fn up<T: Step>(x: T) -> T {
    x.step_up()
}
fn down<T: Step>(x: T) -> T {
    x.step_down()
}

/// `a + b = s + e` exactly.
#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The sign carrier of `exact - r` for an overflowed `r` (see `direct32`).
#[inline(always)]
fn overflow_err(r: f64, finite: bool) -> Option<f64> {
    (r.is_infinite() && finite).then_some(-r)
}

fn add32<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (f(a), f(b));
    let r = x + y;
    if M == RN {
        return pf(r);
    }
    let err = overflow_err(r as f64, x.is_finite() && y.is_finite()).unwrap_or_else(|| {
        let (s, e) = two_sum(x as f64, y as f64);
        (s - r as f64) + e
    });
    pf(direct32::<M>(r, err))
}
fn sub32<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    add32::<M>(a, pf(-f(b)), 0)
}
fn mul32<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (f(a), f(b));
    let r = x * y;
    if M == RN {
        return pf(r);
    }
    let err = overflow_err(r as f64, x.is_finite() && y.is_finite()).unwrap_or(x as f64 * y as f64 - r as f64);
    pf(direct32::<M>(r, err))
}
fn fma32<const M: u8>(a: u64, b: u64, c: u64) -> u64 {
    let (x, y, z) = (f(a), f(b), f(c));
    let r = x.mul_add(y, z);
    if M == RN {
        return pf(r);
    }
    let err = overflow_err(r as f64, x.is_finite() && y.is_finite() && z.is_finite()).unwrap_or_else(|| {
        // x*y is exact in f64 (48 significant bits).
        let (s, e) = two_sum(x as f64 * y as f64, z as f64);
        (s - r as f64) + e
    });
    pf(direct32::<M>(r, err))
}
fn div32<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (f(a), f(b));
    let r = x / y;
    // A NaN or infinity from a NaN, infinite or zero divisor or dividend is exact.
    let exact_special = !(x.is_finite() && y != 0.0 && y.is_finite());
    if M == RN || (!r.is_finite() && exact_special) {
        return pf(r);
    }
    let err =
        overflow_err(r as f64, true).unwrap_or_else(|| (r as f64).mul_add(-(y as f64), x as f64) * (y as f64).signum());
    pf(direct32::<M>(r, err))
}
fn sqrt32<const M: u8>(a: u64, _: u64, _: u64) -> u64 {
    let x = f(a);
    let r = x.sqrt();
    if M == RN || !r.is_finite() {
        return pf(r);
    }
    pf(direct32::<M>(r, (r as f64).mul_add(-(r as f64), x as f64)))
}
fn rcp32<const M: u8>(a: u64, _: u64, _: u64) -> u64 {
    div32::<M>(pf(1.0), a, 0)
}
fn abs32(a: u64, _: u64, _: u64) -> u64 {
    a & 0x7FFF_FFFF
}
fn neg32(a: u64, _: u64, _: u64) -> u64 {
    (a ^ 0x8000_0000) & 0xFFFF_FFFF
}
/// PTX `min`: a NaN operand yields the other; -0 is below +0.
fn min32(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (f(a), f(b));
    match (x.is_nan(), y.is_nan()) {
        (true, true) => 0x7FFF_FFFF,
        (true, false) => pf(y),
        (false, true) => pf(x),
        _ if x == y => pf(x) | pf(y),
        _ => pf(if x < y { x } else { y }),
    }
}
fn max32(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (f(a), f(b));
    match (x.is_nan(), y.is_nan()) {
        (true, true) => 0x7FFF_FFFF,
        (true, false) => pf(y),
        (false, true) => pf(x),
        _ if x == y => pf(x) & pf(y),
        _ => pf(if x > y { x } else { y }),
    }
}
fn rsqrt32(a: u64, _: u64, _: u64) -> u64 {
    pf(1.0 / f(a).sqrt())
}
fn ex2_32(a: u64, _: u64, _: u64) -> u64 {
    pf(f(a).exp2())
}
fn lg2_32(a: u64, _: u64, _: u64) -> u64 {
    pf(f(a).log2())
}
fn sin32(a: u64, _: u64, _: u64) -> u64 {
    pf(f(a).sin())
}
fn cos32(a: u64, _: u64, _: u64) -> u64 {
    pf(f(a).cos())
}
fn tanh32(a: u64, _: u64, _: u64) -> u64 {
    pf(f(a).tanh())
}
fn copysign32(a: u64, b: u64, _: u64) -> u64 {
    pf(f(b).copysign(f(a)))
}

fn add64<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (d(a), d(b));
    let (r, e) = two_sum(x, y);
    if M == RN || !r.is_finite() {
        return pd(r);
    }
    pd(direct64::<M>(r, e))
}
fn sub64<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    add64::<M>(a, pd(-d(b)), 0)
}
fn mul64<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (d(a), d(b));
    let r = x * y;
    if M == RN || !r.is_finite() {
        return pd(r);
    }
    pd(direct64::<M>(r, x.mul_add(y, -r)))
}
fn fma64<const M: u8>(a: u64, b: u64, c: u64) -> u64 {
    let (x, y, z) = (d(a), d(b), d(c));
    let r = x.mul_add(y, z);
    if M == RN || !r.is_finite() {
        return pd(r);
    }
    let p = x * y;
    let pe = x.mul_add(y, -p);
    let (s, e) = two_sum(p, z);
    pd(direct64::<M>(r, ((s - r) + e) + pe))
}
fn div64<const M: u8>(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (d(a), d(b));
    let r = x / y;
    if M == RN || !r.is_finite() {
        return pd(r);
    }
    pd(direct64::<M>(r, -r.mul_add(y, -x) * y.signum()))
}
fn sqrt64<const M: u8>(a: u64, _: u64, _: u64) -> u64 {
    let x = d(a);
    let r = x.sqrt();
    if M == RN || !r.is_finite() {
        return pd(r);
    }
    pd(direct64::<M>(r, -r.mul_add(r, -x)))
}
fn rcp64<const M: u8>(a: u64, _: u64, _: u64) -> u64 {
    div64::<M>(pd(1.0), a, 0)
}
fn abs64(a: u64, _: u64, _: u64) -> u64 {
    a & !(1 << 63)
}
fn neg64(a: u64, _: u64, _: u64) -> u64 {
    a ^ (1 << 63)
}
fn min64(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (d(a), d(b));
    match (x.is_nan(), y.is_nan()) {
        (true, true) => 0x7FF8_0000_0000_0000,
        (true, false) => b,
        (false, true) => a,
        _ if x == y => a | b,
        _ => pd(if x < y { x } else { y }),
    }
}
fn max64(a: u64, b: u64, _: u64) -> u64 {
    let (x, y) = (d(a), d(b));
    match (x.is_nan(), y.is_nan()) {
        (true, true) => 0x7FF8_0000_0000_0000,
        (true, false) => b,
        (false, true) => a,
        _ if x == y => a & b,
        _ => pd(if x > y { x } else { y }),
    }
}
fn rsqrt64(a: u64, _: u64, _: u64) -> u64 {
    pd(1.0 / d(a).sqrt())
}
fn ex2_64(a: u64, _: u64, _: u64) -> u64 {
    pd(d(a).exp2())
}
fn lg2_64(a: u64, _: u64, _: u64) -> u64 {
    pd(d(a).log2())
}
fn copysign64(a: u64, b: u64, _: u64) -> u64 {
    pd(d(b).copysign(d(a)))
}
fn atom_add32(old: u64, b: u64, _: u64) -> u64 {
    pf(f(old) + f(b))
}
fn atom_add64(old: u64, b: u64, _: u64) -> u64 {
    pd(d(old) + d(b))
}

macro_rules! by_mode {
    ($fun:ident, $m:expr) => {
        match $m {
            RZ => $fun::<RZ> as Fn3,
            RM => $fun::<RM> as Fn3,
            RP => $fun::<RP> as Fn3,
            _ => $fun::<RN> as Fn3,
        }
    };
}

/// The float function of `op` on `ty` (`f32`/`f64`) with modifiers `mods`.
pub fn pick(op: &str, ty: &str, mods: &[&str]) -> Option<Fn3> {
    let m = mode(mods);
    Some(match (op, ty) {
        ("add", "f32") => by_mode!(add32, m),
        ("sub", "f32") => by_mode!(sub32, m),
        ("mul", "f32") => by_mode!(mul32, m),
        ("fma" | "mad", "f32") => by_mode!(fma32, m),
        ("div", "f32") => by_mode!(div32, m),
        ("sqrt", "f32") => by_mode!(sqrt32, m),
        ("rcp", "f32") => by_mode!(rcp32, m),
        ("abs", "f32") => abs32,
        ("neg", "f32") => neg32,
        ("min", "f32") => min32,
        ("max", "f32") => max32,
        ("rsqrt", "f32") => rsqrt32,
        ("ex2", "f32") => ex2_32,
        ("lg2", "f32") => lg2_32,
        ("sin", "f32") => sin32,
        ("cos", "f32") => cos32,
        ("tanh", "f32") => tanh32,
        ("copysign", "f32") => copysign32,
        ("add", "f64") => by_mode!(add64, m),
        ("sub", "f64") => by_mode!(sub64, m),
        ("mul", "f64") => by_mode!(mul64, m),
        ("fma" | "mad", "f64") => by_mode!(fma64, m),
        ("div", "f64") => by_mode!(div64, m),
        ("sqrt", "f64") => by_mode!(sqrt64, m),
        ("rcp", "f64") => by_mode!(rcp64, m),
        ("abs", "f64") => abs64,
        ("neg", "f64") => neg64,
        ("min", "f64") => min64,
        ("max", "f64") => max64,
        ("rsqrt", "f64") => rsqrt64,
        ("ex2", "f64") => ex2_64,
        ("lg2", "f64") => lg2_64,
        ("copysign", "f64") => copysign64,
        _ => return None,
    })
}

/// The read-modify-write of a float `atom.add`/`red.add`.
pub fn atom(op: &str, ty: &str) -> Option<Fn3> {
    match (op, ty) {
        ("add", "f32") => Some(atom_add32),
        ("add", "f64") => Some(atom_add64),
        ("exch", "f32" | "b32") => super::int::atom("exch", "b32"),
        ("exch", "f64" | "b64") => super::int::atom("exch", "b64"),
        _ => None,
    }
}

/// An f32 subnormal flushed to a zero of its sign (`.ftz`).
#[inline(always)]
pub fn ftz32(x: u64) -> u64 {
    if x & 0x7F80_0000 == 0 {
        x & 0x8000_0000
    } else {
        x
    }
}

/// `.sat`: clamped to [0, 1], NaN to +0.
#[inline(always)]
pub fn sat32(x: u64) -> u64 {
    let v = f(x);
    pf(if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) })
}

#[inline(always)]
pub fn sat64(x: u64) -> u64 {
    let v = d(x);
    pd(if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fma(m: &str, a: f32, b: f32, c: f32) -> f32 {
        f32::from_bits(pick("fma", "f32", &[m]).unwrap()(pf(a), pf(b), pf(c)) as u32)
    }

    #[test]
    fn directed_fma_brackets_the_exact_result() {
        let (rm, rp, rn) = (fma("rm", 1.1, 1.1, 0.0), fma("rp", 1.1, 1.1, 0.0), fma("rn", 1.1, 1.1, 0.0));
        assert_eq!(rp, up(rm));
        let exact = 1.1f32 as f64 * 1.1f32 as f64;
        assert!((rm as f64) < exact && exact < rp as f64);
        assert!(rn == rm || rn == rp);
        assert_eq!(fma("rz", -1.1, 1.1, 0.0), -rm);
        assert_eq!(fma("rm", f32::MAX, 2.0, 0.0), f32::MAX);
        assert_eq!(fma("rp", f32::MAX, 2.0, 0.0), f32::INFINITY);
    }

    #[test]
    fn min_max_skip_nan() {
        let nan = pf(f32::NAN);
        assert_eq!(f(min32(nan, pf(2.0), 0)), 2.0);
        assert_eq!(f(max32(pf(1.0), nan, 0)), 1.0);
        assert!(f(min32(nan, nan, 0)).is_nan());
        assert_eq!(min32(pf(0.0), pf(-0.0), 0), pf(-0.0));
    }
}
