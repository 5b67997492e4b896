//! Integer and bit operations on one thread's values, one module per PTX
//! type (`s16` ... `u64`), each value read from the low bits of a 64-bit
//! register slot and written back zero-extended. Division by zero gives
//! all ones (quotient) or the dividend (remainder), as the hardware does;
//! never panics on any input (every operation wraps or saturates).

use super::inst::Fn3;

macro_rules! int_type {
    ($m:ident, $t:ty, $u:ty, $w:ty, $signed:expr) => {
        // PTX has no 8- or 16-bit atomics: those types leave `atom` unused.
        #[allow(dead_code)]
        pub mod $m {
            use $crate::ptx::inst::Fn3;
            type T = $t;
            const BITS: u32 = <$t>::BITS;
            #[inline(always)]
            fn g(x: u64) -> T {
                x as $u as T
            }
            #[inline(always)]
            fn p(x: T) -> u64 {
                x as $u as u64
            }
            fn add(a: u64, b: u64, _: u64) -> u64 {
                p(g(a).wrapping_add(g(b)))
            }
            fn add_sat(a: u64, b: u64, _: u64) -> u64 {
                p(g(a).saturating_add(g(b)))
            }
            fn sub(a: u64, b: u64, _: u64) -> u64 {
                p(g(a).wrapping_sub(g(b)))
            }
            fn sub_sat(a: u64, b: u64, _: u64) -> u64 {
                p(g(a).saturating_sub(g(b)))
            }
            fn mul_lo(a: u64, b: u64, _: u64) -> u64 {
                p(g(a).wrapping_mul(g(b)))
            }
            fn mul_hi(a: u64, b: u64, _: u64) -> u64 {
                p(((g(a) as $w * g(b) as $w) >> BITS) as T)
            }
            fn mul_wide(a: u64, b: u64, _: u64) -> u64 {
                (g(a) as $w).wrapping_mul(g(b) as $w) as u64 & wide_mask()
            }
            fn wide_mask() -> u64 {
                if BITS >= 32 {
                    u64::MAX
                } else {
                    (1u64 << (2 * BITS)) - 1
                }
            }
            fn mad_lo(a: u64, b: u64, c: u64) -> u64 {
                p(g(a).wrapping_mul(g(b)).wrapping_add(g(c)))
            }
            fn mad_hi(a: u64, b: u64, c: u64) -> u64 {
                p((((g(a) as $w * g(b) as $w) >> BITS) as T).wrapping_add(g(c)))
            }
            fn mad_wide(a: u64, b: u64, c: u64) -> u64 {
                mul_wide(a, b, 0).wrapping_add(c) & wide_mask()
            }
            fn div(a: u64, b: u64, _: u64) -> u64 {
                match g(b) {
                    0 => p(!0),
                    d => p(g(a).wrapping_div(d)),
                }
            }
            fn rem(a: u64, b: u64, _: u64) -> u64 {
                match g(b) {
                    0 => p(g(a)),
                    d => p(g(a).wrapping_rem(d)),
                }
            }
            #[allow(unused_comparisons)]
            fn abs(a: u64, _: u64, _: u64) -> u64 {
                let v = g(a);
                p(if v < 0 as T { (0 as T).wrapping_sub(v) } else { v })
            }
            fn neg(a: u64, _: u64, _: u64) -> u64 {
                p((0 as T).wrapping_sub(g(a)))
            }
            fn min(a: u64, b: u64, _: u64) -> u64 {
                p(g(a).min(g(b)))
            }
            fn max(a: u64, b: u64, _: u64) -> u64 {
                p(g(a).max(g(b)))
            }
            fn and(a: u64, b: u64, _: u64) -> u64 {
                p(g(a) & g(b))
            }
            fn or(a: u64, b: u64, _: u64) -> u64 {
                p(g(a) | g(b))
            }
            fn xor(a: u64, b: u64, _: u64) -> u64 {
                p(g(a) ^ g(b))
            }
            fn not(a: u64, _: u64, _: u64) -> u64 {
                p(!g(a))
            }
            fn cnot(a: u64, _: u64, _: u64) -> u64 {
                p((g(a) == 0) as T)
            }
            fn shl(a: u64, b: u64, _: u64) -> u64 {
                let n = b as u32;
                if n >= BITS {
                    0
                } else {
                    p(g(a) << n)
                }
            }
            fn shr(a: u64, b: u64, _: u64) -> u64 {
                // Arithmetic for signed types (Rust's `>>` on them), logical otherwise.
                p(g(a) >> (b as u32).min(BITS - 1)) & if (b as u32) >= BITS && !$signed { 0 } else { u64::MAX }
            }
            fn popc(a: u64, _: u64, _: u64) -> u64 {
                g(a).count_ones() as u64
            }
            fn clz(a: u64, _: u64, _: u64) -> u64 {
                g(a).leading_zeros() as u64
            }
            fn brev(a: u64, _: u64, _: u64) -> u64 {
                p(g(a).reverse_bits())
            }
            fn bfe(a: u64, b: u64, c: u64) -> u64 {
                let (pos, len) = ((b & 0xff) as u32, (c & 0xff) as u32);
                let v = g(a) as $u as u64;
                if len == 0 {
                    return 0;
                }
                let field = if pos >= BITS { 0 } else { v >> pos };
                let len = len.min(BITS);
                let sign_bit = if !$signed {
                    false
                } else if pos + len > BITS {
                    (v >> (BITS - 1)) & 1 == 1
                } else {
                    (v >> (pos + len - 1)) & 1 == 1
                };
                let mask = if len >= 64 { u64::MAX } else { (1u64 << len) - 1 };
                let r = if sign_bit { field | !mask } else { field & mask };
                p(r as $u as T)
            }
            fn sad(a: u64, b: u64, c: u64) -> u64 {
                let (x, y) = (g(a), g(b));
                let d = if x > y { x.wrapping_sub(y) } else { y.wrapping_sub(x) };
                p(d.wrapping_add(g(c)))
            }
            fn min_atom(old: u64, b: u64, _: u64) -> u64 {
                min(old, b, 0)
            }
            fn max_atom(old: u64, b: u64, _: u64) -> u64 {
                max(old, b, 0)
            }
            fn cas(old: u64, b: u64, c: u64) -> u64 {
                if g(old) == g(b) {
                    p(g(c))
                } else {
                    old
                }
            }
            fn exch(_: u64, b: u64, _: u64) -> u64 {
                p(g(b))
            }
            fn inc(old: u64, b: u64, _: u64) -> u64 {
                let (o, b) = (g(old) as $u, g(b) as $u);
                (if o >= b { 0 } else { o + 1 }) as u64
            }
            fn dec(old: u64, b: u64, _: u64) -> u64 {
                let (o, b) = (g(old) as $u, g(b) as $u);
                (if o == 0 || o > b { b } else { o - 1 }) as u64
            }

            /// The function of `op` with modifiers `mods`, if this type has it.
            pub fn pick(op: &str, mods: &[&str]) -> Option<Fn3> {
                let has = |m: &str| mods.contains(&m);
                Some(match op {
                    "add" if has("sat") => add_sat,
                    "sub" if has("sat") => sub_sat,
                    "add" => add,
                    "sub" => sub,
                    "mul" if has("hi") => mul_hi,
                    "mul" if has("wide") => mul_wide,
                    "mul" => mul_lo,
                    "mad" if has("hi") => mad_hi,
                    "mad" if has("wide") => mad_wide,
                    "mad" => mad_lo,
                    "div" => div,
                    "rem" => rem,
                    "abs" => abs,
                    "neg" => neg,
                    "min" => min,
                    "max" => max,
                    "and" => and,
                    "or" => or,
                    "xor" => xor,
                    "not" => not,
                    "cnot" => cnot,
                    "shl" => shl,
                    "shr" => shr,
                    "popc" => popc,
                    "clz" => clz,
                    "brev" => brev,
                    "bfe" => bfe,
                    "sad" => sad,
                    _ => return None,
                })
            }

            /// The read-modify-write of `atom.op` / `red.op`.
            pub fn atom(op: &str) -> Option<Fn3> {
                Some(match op {
                    "add" => add,
                    "min" => min_atom,
                    "max" => max_atom,
                    "and" => and,
                    "or" => or,
                    "xor" => xor,
                    "exch" => exch,
                    "cas" => cas,
                    "inc" => inc,
                    "dec" => dec,
                    _ => return None,
                })
            }
        }
    };
}

int_type!(s8, i8, u8, i16, true);
int_type!(u8, u8, u8, u16, false);
int_type!(s16, i16, u16, i32, true);
int_type!(u16, u16, u16, u32, false);
int_type!(s32, i32, u32, i64, true);
int_type!(u32, u32, u32, u64, false);
int_type!(s64, i64, u64, i128, true);
int_type!(u64, u64, u64, u128, false);

fn pred_and(a: u64, b: u64, _: u64) -> u64 {
    a & b & 1
}
fn pred_or(a: u64, b: u64, _: u64) -> u64 {
    (a | b) & 1
}
fn pred_xor(a: u64, b: u64, _: u64) -> u64 {
    (a ^ b) & 1
}
fn pred_not(a: u64, _: u64, _: u64) -> u64 {
    (a & 1) ^ 1
}

/// The integer function of `op` on type `ty` (`b32` acts as `u32`).
pub fn pick(op: &str, ty: &str, mods: &[&str]) -> Option<Fn3> {
    match ty {
        "pred" => Some(match op {
            "and" => pred_and,
            "or" => pred_or,
            "xor" => pred_xor,
            "not" => pred_not,
            _ => return None,
        }),
        "s8" => s8::pick(op, mods),
        "u8" | "b8" => u8::pick(op, mods),
        "s16" => s16::pick(op, mods),
        "u16" | "b16" => u16::pick(op, mods),
        "s32" => s32::pick(op, mods),
        "u32" | "b32" => u32::pick(op, mods),
        "s64" => s64::pick(op, mods),
        "u64" | "b64" => u64::pick(op, mods),
        _ => None,
    }
}

/// The read-modify-write of an integer `atom`/`red`.
pub fn atom(op: &str, ty: &str) -> Option<Fn3> {
    match ty {
        "s32" => s32::atom(op),
        "u32" | "b32" => u32::atom(op),
        "s64" => s64::atom(op),
        "u64" | "b64" => u64::atom(op),
        _ => None,
    }
}

/// `bfi`: `len` bits of `a` inserted into `b` at `pos`.
pub fn bfi(a: u64, b: u64, pos: u64, len: u64, bits: u32) -> u64 {
    let (pos, len) = ((pos & 0xff) as u32, (len & 0xff) as u32);
    let full = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    if len == 0 || pos >= bits {
        return b & full;
    }
    let len = len.min(bits - pos);
    let mask = if len == 64 { u64::MAX } else { ((1u64 << len) - 1) << pos };
    ((b & !mask) | ((a << pos) & mask)) & full
}

/// `prmt.b32` (default mode): bytes of `{b, a}` picked by the selector `c`.
pub fn prmt(a: u64, b: u64, c: u64) -> u64 {
    let bytes = ((b as u32 as u64) << 32 | a as u32 as u64).to_le_bytes();
    let mut out = 0u32;
    for i in 0..4 {
        let sel = (c >> (4 * i)) & 0xf;
        let mut byte = bytes[(sel & 7) as usize];
        if sel & 8 != 0 {
            byte = if byte & 0x80 != 0 { 0xff } else { 0 };
        }
        out |= (byte as u32) << (8 * i);
    }
    out as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_shifts_and_fields_follow_ptx() {
        let f = |op: &str, ty: &str, a: i64, b: i64| pick(op, ty, &[]).unwrap()(a as u64, b as u64, 0);
        assert_eq!(f("div", "s32", -7, 2) as u32 as i32, -3);
        assert_eq!(f("rem", "s32", -7, 2) as u32 as i32, -1);
        assert_eq!(f("div", "u32", 7, 0), 0xFFFF_FFFF);
        assert_eq!(f("shr", "s32", -8, 1) as u32 as i32, -4);
        assert_eq!(f("shr", "u32", -8i32 as u32 as i64, 1), 0x7FFF_FFFC);
        assert_eq!(f("shr", "s32", -8, 40) as u32 as i32, -1);
        assert_eq!(f("shl", "b32", 1, 32), 0);
        assert_eq!(pick("mul", "s32", &["wide"]).unwrap()(-3i32 as u32 as u64, 5, 0) as i64, -15);
        assert_eq!(pick("bfe", "s32", &[]).unwrap()(0xF0, 4, 4) as u32 as i32, -1);
        assert_eq!(pick("bfe", "u32", &[]).unwrap()(0xF0, 4, 4), 0xF);
        assert_eq!(bfi(0b11, 0, 4, 2, 32), 0b11_0000);
        assert_eq!(prmt(0x44332211, 0x88776655, 0x3210), 0x44332211);
        assert_eq!(prmt(0x44332211, 0x88776655, 0x7654), 0x88776655);
    }
}
