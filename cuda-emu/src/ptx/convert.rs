//! `cvt`: conversions between every integer and float type with PTX's
//! rounding (`.rn/.rz/.rm/.rp` to a float, `.rni/.rzi/.rmi/.rpi` to an
//! integer or integral float), `.sat` and `.ftz`. Float to integer always
//! saturates and takes NaN to 0, as PTX does. The conversion's types and
//! modifiers are one constant operand, so a single function serves all.
//! Must never panic on any input.

use super::float::{direct32, direct64, ftz32, RM, RN, RP, RZ};

/// A type's code in a conversion spec.
pub fn code(ty: &str) -> Option<u64> {
    Some(match ty {
        "u8" | "b8" => 0,
        "u16" | "b16" => 1,
        "u32" | "b32" => 2,
        "u64" | "b64" => 3,
        "s8" => 4,
        "s16" => 5,
        "s32" => 6,
        "s64" => 7,
        "f16" => 8,
        "f32" => 9,
        "f64" => 10,
        "bf16" => 11,
        _ => return None,
    })
}

/// The spec of `cvt.<mods>.<dst>.<src>`.
pub fn spec(dst: u64, src: u64, mode: u8, sat: bool, ftz: bool, integral: bool) -> u64 {
    dst | src << 8 | (mode as u64) << 16 | (sat as u64) << 24 | (ftz as u64) << 25 | (integral as u64) << 26
}

fn is_float(t: u64) -> bool {
    t >= 8
}

/// (min, max) of integer type `t`.
fn range(t: u64) -> (i128, i128) {
    match t {
        0 => (0, u8::MAX as i128),
        1 => (0, u16::MAX as i128),
        2 => (0, u32::MAX as i128),
        3 => (0, u64::MAX as i128),
        4 => (i8::MIN as i128, i8::MAX as i128),
        5 => (i16::MIN as i128, i16::MAX as i128),
        6 => (i32::MIN as i128, i32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    }
}

fn int_of(x: u64, t: u64) -> i128 {
    match t {
        0 => x as u8 as i128,
        1 => x as u16 as i128,
        2 => x as u32 as i128,
        3 => x as i128,
        4 => x as i8 as i128,
        5 => x as i16 as i128,
        6 => x as i32 as i128,
        _ => x as i64 as i128,
    }
}

fn bits_of_int(v: i128, t: u64) -> u64 {
    let bits = [8, 16, 32, 64][(t & 3) as usize];
    if bits == 64 {
        v as u64
    } else {
        (v as u64) & ((1u64 << bits) - 1)
    }
}

/// IEEE half to f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => return f32::from_bits(sign) + (m as f32) * 2f32.powi(-24) * if sign != 0 { -1.0 } else { 1.0 },
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// f64 to IEEE half, rounding to nearest even.
pub fn f64_to_f16(x: f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
    let a = x.abs();
    if a.is_nan() {
        return sign | 0x7e00;
    }
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // Scale so the half's last mantissa bit is worth 1, round to even, rebuild.
    let e = if a < 2f64.powi(-14) { -14 } else { a.log2().floor() as i32 };
    let e = e.max(-14);
    let ulp = 2f64.powi(e - 10);
    let q = (a / ulp).round_ties_even() * ulp;
    if q == 0.0 {
        return sign;
    }
    if q < 2f64.powi(-14) {
        return sign | (q / 2f64.powi(-24)) as u16;
    }
    let e2 = q.log2().floor() as i32;
    let man = ((q / 2f64.powi(e2) - 1.0) * 1024.0).round() as u16;
    sign | (((e2 + 15) as u16) << 10) | man
}

fn round_integral(v: f64, mode: u8) -> f64 {
    match mode {
        RZ => v.trunc(),
        RM => v.floor(),
        RP => v.ceil(),
        _ => v.round_ties_even(),
    }
}

/// A dedicated function for the conversions index arithmetic uses most,
/// equal to `cvt` with `spec` on every input.
pub fn fast(s: u64) -> Option<super::inst::Fn3> {
    let (dt, st, rest) = (s & 0xff, (s >> 8) & 0xff, s >> 16);
    let rz_integral = spec(0, 0, RZ, false, false, true) >> 16;
    Some(match (dt, st, rest) {
        (3 | 7, 6, 0) => |a, _, _| a as u32 as i32 as i64 as u64,
        (3 | 7, 2, 0) => |a, _, _| a as u32 as u64,
        (2 | 6, 3 | 7, 0) => |a, _, _| a as u32 as u64,
        (9, 6, 0) => |a, _, _| (a as u32 as i32 as f32).to_bits() as u64,
        (9, 2, 0) => |a, _, _| (a as u32 as f32).to_bits() as u64,
        // Rust's float-to-int `as` truncates, saturates and takes NaN to 0, as PTX does.
        (6, 9, r) if r == rz_integral => |a, _, _| f32::from_bits(a as u32) as i32 as u32 as u64,
        (2, 9, r) if r == rz_integral => |a, _, _| f32::from_bits(a as u32) as u32 as u64,
        _ => return None,
    })
}

/// `cvt` of `a` as described by `spec` (see `spec`).
pub fn cvt(a: u64, spec: u64, _: u64) -> u64 {
    let (dt, st) = (spec & 0xff, (spec >> 8) & 0xff);
    let mode = ((spec >> 16) & 0xff) as u8;
    let (sat, ftz, integral) = (spec >> 24 & 1 == 1, spec >> 25 & 1 == 1, spec >> 26 & 1 == 1);
    if !is_float(st) && !is_float(dt) {
        let v = int_of(a, st);
        let (lo, hi) = range(dt);
        return bits_of_int(if sat { v.clamp(lo, hi) } else { v }, dt);
    }
    if is_float(st) {
        let src = match st {
            8 => f16_to_f32(a as u16) as f64,
            9 => f32::from_bits((if ftz { ftz32(a) } else { a }) as u32) as f64,
            11 => f32::from_bits((a as u32) << 16) as f64,
            _ => f64::from_bits(a),
        };
        if !is_float(dt) {
            if src.is_nan() {
                return 0;
            }
            let (lo, hi) = range(dt);
            let r = round_integral(src, mode);
            let v = if r < lo as f64 {
                lo
            } else if r > hi as f64 {
                hi
            } else {
                r as i128
            };
            return bits_of_int(v, dt);
        }
        let v = if integral { round_integral(src, mode) } else { src };
        return float_out(v, dt, mode, sat, ftz, 0.0);
    }
    // Integer to float.
    let v = int_of(a, st);
    let approx = v as f64;
    // The f64 may itself be rounded (64-bit integers): the residue keeps the exact error's sign.
    let residue = (v - approx as i128) as f64;
    float_out(approx, dt, mode, sat, ftz, residue)
}

/// The float `v + residue` (residue far below `v`'s ulp, or 0) as type `dt`.
fn float_out(v: f64, dt: u64, mode: u8, sat: bool, ftz: bool, residue: f64) -> u64 {
    let v = if sat && !v.is_nan() {
        v.clamp(0.0, 1.0)
    } else if sat {
        0.0
    } else {
        v
    };
    match dt {
        9 => {
            let r = v as f32;
            let err = if r.is_infinite() && v.is_finite() { -(r as f64) } else { (v - r as f64) + residue };
            let r = match mode {
                RZ => direct32::<RZ>(r, err),
                RM => direct32::<RM>(r, err),
                RP => direct32::<RP>(r, err),
                _ => direct32::<RN>(r, err),
            };
            let bits = r.to_bits() as u64;
            if ftz {
                ftz32(bits)
            } else {
                bits
            }
        }
        10 => match mode {
            RZ => direct64::<RZ>(v, residue),
            RM => direct64::<RM>(v, residue),
            RP => direct64::<RP>(v, residue),
            _ => v,
        }
        .to_bits(),
        11 => {
            let b = (v as f32).to_bits();
            let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
            (if (v as f32).is_nan() { 0x7fc0 } else { rounded }) as u64
        }
        _ => f64_to_f16(v) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_conversions_equal_the_general_one() {
        let values = [
            0u64,
            1,
            0x7FFF_FFFF,
            0x8000_0000,
            0xFFFF_FFFF,
            0x1_2345_6789,
            u64::MAX,
            0x4F80_0000,
            0xCF00_0001,
            0x7FC0_0000,
        ];
        let pairs = [
            ("s64", "s32", RN, false),
            ("u64", "u32", RN, false),
            ("u32", "u64", RN, false),
            ("s32", "s64", RN, false),
            ("f32", "s32", RN, false),
            ("f32", "u32", RN, false),
            ("s32", "f32", RZ, true),
            ("u32", "f32", RZ, true),
        ];
        for (d, s, mode, integral) in pairs {
            let sp = spec(code(d).unwrap(), code(s).unwrap(), mode, false, false, integral);
            let f = fast(sp).unwrap_or_else(|| panic!("no fast cvt.{d}.{s}"));
            for &v in &values {
                let v = if s.ends_with("32") { v & 0xFFFF_FFFF } else { v };
                assert_eq!(f(v, sp, 0), cvt(v, sp, 0), "cvt.{d}.{s} of {v:#x}");
            }
        }
    }

    fn c(dst: &str, src: &str, mode: u8, sat: bool, integral: bool, a: u64) -> u64 {
        cvt(a, spec(code(dst).unwrap(), code(src).unwrap(), mode, sat, false, integral), 0)
    }

    #[test]
    fn float_to_int_rounds_and_saturates() {
        let f = |x: f32| x.to_bits() as u64;
        assert_eq!(c("s32", "f32", RN, false, true, f(2.5)), 2);
        assert_eq!(c("s32", "f32", RN, false, true, f(3.5)), 4);
        assert_eq!(c("s32", "f32", RZ, false, true, f(-2.7)) as u32 as i32, -2);
        assert_eq!(c("s32", "f32", RM, false, true, f(-2.2)) as u32 as i32, -3);
        assert_eq!(c("u32", "f32", RZ, false, true, f(-5.0)), 0);
        assert_eq!(c("u32", "f32", RZ, false, true, f(1e20)), u32::MAX as u64);
        assert_eq!(c("s32", "f32", RZ, false, true, f(f32::NAN)), 0);
        assert_eq!(c("u8", "s32", RN, true, false, 300), 255);
        assert_eq!(c("s64", "s32", RN, false, false, -1i32 as u32 as u64), u64::MAX);
        assert_eq!(f32::from_bits(c("f32", "f32", RN, true, false, f(1.5)) as u32), 1.0);
        assert_eq!(c("f32", "f32", RN, true, false, f(f32::NAN)), 0);
        // 2^24 + 1 is not an f32: .rz and .rm go down, .rp up.
        let big = (1u64 << 24) + 1;
        assert_eq!(f32::from_bits(c("f32", "u32", RP, false, false, big) as u32), 16777218.0);
        assert_eq!(f32::from_bits(c("f32", "u32", RZ, false, false, big) as u32), 16777216.0);
        assert_eq!(f16_to_f32(f64_to_f16(1.5)), 1.5);
        assert_eq!(f64_to_f16(65504.0), 0x7bff);
    }
}
