//! Comparisons (`setp`, `set`), class tests (`testp`) and selections
//! (`selp`, `slct`) on one thread's values, giving 0 or 1. Float comparisons are ordered (false
//! with a NaN) unless their name ends in `u`; `num`/`nan` test for NaNs.
//! Must never panic on any input.

use std::cmp::Ordering::{Equal, Greater, Less};

use super::inst::Fn3;

macro_rules! int_cmp {
    ($t:ty, $u:ty, $op:expr) => {{
        let f: Option<Fn3> = match $op {
            "eq" => Some(|a, b, _| ((a as $u as $t) == (b as $u as $t)) as u64),
            "ne" => Some(|a, b, _| ((a as $u as $t) != (b as $u as $t)) as u64),
            "lt" => Some(|a, b, _| ((a as $u as $t) < (b as $u as $t)) as u64),
            "le" => Some(|a, b, _| ((a as $u as $t) <= (b as $u as $t)) as u64),
            "gt" => Some(|a, b, _| ((a as $u as $t) > (b as $u as $t)) as u64),
            "ge" => Some(|a, b, _| ((a as $u as $t) >= (b as $u as $t)) as u64),
            "lo" => Some(|a, b, _| ((a as $u) < (b as $u)) as u64),
            "ls" => Some(|a, b, _| ((a as $u) <= (b as $u)) as u64),
            "hi" => Some(|a, b, _| ((a as $u) > (b as $u)) as u64),
            "hs" => Some(|a, b, _| ((a as $u) >= (b as $u)) as u64),
            _ => None,
        };
        f
    }};
}

macro_rules! float_cmp {
    ($t:ty, $get:expr, $op:expr) => {{
        let f: Option<Fn3> = match $op {
            "eq" => Some(|a, b, _| ($get(a) == $get(b)) as u64),
            "ne" => Some(|a, b, _| {
                let (x, y): ($t, $t) = ($get(a), $get(b));
                (x != y && !x.is_nan() && !y.is_nan()) as u64
            }),
            "lt" => Some(|a, b, _| ($get(a) < $get(b)) as u64),
            "le" => Some(|a, b, _| ($get(a) <= $get(b)) as u64),
            "gt" => Some(|a, b, _| ($get(a) > $get(b)) as u64),
            "ge" => Some(|a, b, _| ($get(a) >= $get(b)) as u64),
            "equ" => Some(|a, b, _| !($get(a) != $get(b) && !$get(a).is_nan() && !$get(b).is_nan()) as u64),
            "neu" => Some(|a, b, _| ($get(a) != $get(b)) as u64),
            "ltu" => Some(|a, b, _| !matches!($get(a).partial_cmp(&$get(b)), Some(Greater | Equal)) as u64),
            "leu" => Some(|a, b, _| !matches!($get(a).partial_cmp(&$get(b)), Some(Greater)) as u64),
            "gtu" => Some(|a, b, _| !matches!($get(a).partial_cmp(&$get(b)), Some(Less | Equal)) as u64),
            "geu" => Some(|a, b, _| !matches!($get(a).partial_cmp(&$get(b)), Some(Less)) as u64),
            "num" => Some(|a, b, _| (!$get(a).is_nan() && !$get(b).is_nan()) as u64),
            "nan" => Some(|a, b, _| ($get(a).is_nan() || $get(b).is_nan()) as u64),
            _ => None,
        };
        f
    }};
}

fn f32_of(x: u64) -> f32 {
    f32::from_bits(x as u32)
}

/// The comparison `cmp` of two `ty` values.
pub fn pick(cmp: &str, ty: &str) -> Option<Fn3> {
    match ty {
        "s16" => int_cmp!(i16, u16, cmp),
        "u16" | "b16" => int_cmp!(u16, u16, cmp),
        "s32" => int_cmp!(i32, u32, cmp),
        "u32" | "b32" => int_cmp!(u32, u32, cmp),
        "s64" => int_cmp!(i64, u64, cmp),
        "u64" | "b64" => int_cmp!(u64, u64, cmp),
        "f32" => float_cmp!(f32, f32_of, cmp),
        "f64" => float_cmp!(f64, f64::from_bits, cmp),
        _ => None,
    }
}

macro_rules! float_class {
    ($get:expr, $class:expr) => {{
        let f: Option<Fn3> = match $class {
            "finite" => Some(|a, _, _| $get(a).is_finite() as u64),
            "infinite" => Some(|a, _, _| $get(a).is_infinite() as u64),
            "number" => Some(|a, _, _| !$get(a).is_nan() as u64),
            "notanumber" => Some(|a, _, _| $get(a).is_nan() as u64),
            "normal" => Some(|a, _, _| $get(a).is_normal() as u64),
            "subnormal" => Some(|a, _, _| $get(a).is_subnormal() as u64),
            _ => None,
        };
        f
    }};
}

/// `testp.<class>` of an `f32`/`f64`.
pub fn testp(class: &str, ty: &str) -> Option<Fn3> {
    match ty {
        "f32" => float_class!(f32_of, class),
        "f64" => float_class!(f64::from_bits, class),
        _ => None,
    }
}

/// `selp`: `a` where the predicate `c` is set, else `b`.
pub fn selp(a: u64, b: u64, c: u64) -> u64 {
    if c & 1 != 0 {
        a
    } else {
        b
    }
}

/// `slct.s32`: `a` where `c >= 0`, else `b`.
pub fn slct_s32(a: u64, b: u64, c: u64) -> u64 {
    if c as u32 as i32 >= 0 {
        a
    } else {
        b
    }
}

/// `slct.f32`: `a` where `c >= 0` (NaN is not), else `b`.
pub fn slct_f32(a: u64, b: u64, c: u64) -> u64 {
    if f32_of(c) >= 0.0 {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unordered_comparisons_are_true_with_nan() {
        let (nan, one) = (f32::NAN.to_bits() as u64, 1f32.to_bits() as u64);
        for (c, want) in [("lt", 0), ("ltu", 1), ("ne", 0), ("neu", 1), ("equ", 1), ("eq", 0), ("nan", 1), ("num", 0)] {
            assert_eq!(pick(c, "f32").unwrap()(nan, one, 0), want, "{c}");
        }
        assert_eq!(pick("lt", "s32").unwrap()(-1i32 as u32 as u64, 0, 0), 1);
        assert_eq!(pick("lo", "s32").unwrap()(-1i32 as u32 as u64, 0, 0), 0);
    }
}
