//! The PTX interpreter's instructions, one class at a time, through
//! `cuLaunchKernel`: each snippet runs in one thread per input pair and
//! its 32-bit result is compared exactly with Rust (integer division and
//! remainder signs, arithmetic and logical shifts, min/max with NaN,
//! unordered comparisons, conversions' rounding and saturation, directed
//! rounding of fma, ex2 with flushing, selp, 64-bit pack/unpack, vector
//! and local-memory accesses, divergent loops, barriers in a loop over
//! shared memory, 3-D indexes).

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const HEAD: &str = ".version 8.0\n.target sm_70\n.address_size 64\n";

/// A kernel computing `%r4` from `%r2`/`%r3` (also as `%f2`/`%f3`) with `body`.
fn snippet(body: &str) -> String {
    format!(
        "{HEAD}.visible .entry t(.param .u64 out, .param .u64 inp, .param .u32 n)\n{{\n\
         .reg .pred %p<8>;\n.reg .b32 %r<16>;\n.reg .f32 %f<16>;\n.reg .b64 %rd<16>;\n.reg .f64 %fd<8>;\n.reg .b16 %rs<8>;\n\
         ld.param.u64 %rd1, [out];\nld.param.u64 %rd2, [inp];\nld.param.u32 %r9, [n];\n\
         mov.u32 %r1, %tid.x;\nmov.u32 %r8, %ctaid.x;\nmov.u32 %r7, %ntid.x;\nmad.lo.s32 %r1, %r8, %r7, %r1;\n\
         setp.ge.u32 %p7, %r1, %r9;\n@%p7 bra $DONE;\n\
         mul.wide.u32 %rd3, %r1, 8;\nadd.s64 %rd4, %rd2, %rd3;\n\
         ld.global.u32 %r2, [%rd4];\nld.global.u32 %r3, [%rd4+4];\nmov.b32 %f2, %r2;\nmov.b32 %f3, %r3;\n\
         {body}\n\
         mul.wide.u32 %rd5, %r1, 4;\nadd.s64 %rd6, %rd1, %rd5;\nst.global.u32 [%rd6], %r4;\n\
         $DONE:\nret;\n}}\n"
    )
}

/// Runs `body` over `inputs`; each thread's `%r4`.
fn run(body: &str, inputs: &[(u32, u32)]) -> Vec<u32> {
    let m = load_ptx(&snippet(body));
    let f = function(m, "t");
    let flat: Vec<u32> = inputs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let inp = upload_u32(&flat);
    let out = upload_u32(&vec![0xDEAD_BEEF; inputs.len()]);
    let n = inputs.len() as u32;
    ok(launch(f, (n.div_ceil(64), 1, 1), (64, 1, 1), 0, &[Arg::U64(out), Arg::U64(inp), Arg::U32(n)]));
    read_u32(out, inputs.len())
}

/// Checks `body` against `want` on `inputs`.
#[track_caller]
fn check(body: &str, inputs: &[(u32, u32)], want: impl Fn(u32, u32) -> u32) {
    let got = run(body, inputs);
    for (&(a, b), g) in inputs.iter().zip(got) {
        let w = want(a, b);
        assert_eq!(g, w, "`{body}` on ({a:#x}, {b:#x}): got {g:#x}, want {w:#x}");
    }
}

fn int_inputs() -> Vec<(u32, u32)> {
    let mut rng = StdRng::seed_from_u64(7);
    let special = [0u32, 1, 2, 3, 7, 31, 32, 33, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF_FFF9, 0xFFFF_FFFE];
    let mut v: Vec<(u32, u32)> = special.iter().flat_map(|&a| special.iter().map(move |&b| (a, b))).collect();
    v.extend((0..300).map(|_| (rng.gen::<u32>() >> rng.gen_range(0..32), rng.gen::<u32>() >> rng.gen_range(0..32))));
    v
}

fn float_inputs() -> Vec<(u32, u32)> {
    let mut rng = StdRng::seed_from_u64(11);
    let special = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1.5,
        2.5,
        -2.5,
        -2.7,
        3.5,
        1e20,
        -1e20,
        3e9,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let mut v: Vec<(u32, u32)> =
        special.iter().flat_map(|&a| special.iter().map(move |&b| (a.to_bits(), b.to_bits()))).collect();
    v.extend((0..300).map(|_| (rng.gen_range(-100.0f32..100.0).to_bits(), rng.gen_range(-4.0f32..4.0).to_bits())));
    v
}

/// The float `n` steps (of ±1) from positive `x` (`next_up` needs a newer Rust than the MSRV).
fn step(x: f32, n: i32) -> f32 {
    if x == 0.0 {
        return f32::from_bits(1).copysign(n as f32);
    }
    let b = x.to_bits() as i64 + if x > 0.0 { n as i64 } else { -n as i64 };
    f32::from_bits(b as u32)
}

fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

#[test]
fn integer_arithmetic_matches_rust() {
    open();
    let ins = int_inputs();
    let nz: Vec<(u32, u32)> =
        ins.iter().copied().filter(|&(a, b)| b != 0 && !(a == 0x8000_0000 && b == u32::MAX)).collect();
    check("div.s32 %r4, %r2, %r3;", &nz, |a, b| (a as i32 / b as i32) as u32);
    check("rem.s32 %r4, %r2, %r3;", &nz, |a, b| (a as i32 % b as i32) as u32);
    check("div.u32 %r4, %r2, %r3;", &nz, |a, b| a / b);
    check("rem.u32 %r4, %r2, %r3;", &nz, |a, b| a % b);
    check("shr.s32 %r4, %r2, %r3;", &ins, |a, b| ((a as i32) >> b.min(31)) as u32);
    check("shr.u32 %r4, %r2, %r3;", &ins, |a, b| a.checked_shr(b).unwrap_or(0));
    check("shr.b32 %r4, %r2, %r3;", &ins, |a, b| a.checked_shr(b).unwrap_or(0));
    check("shl.b32 %r4, %r2, %r3;", &ins, |a, b| a.checked_shl(b).unwrap_or(0));
    check("mul.hi.s32 %r4, %r2, %r3;", &ins, |a, b| ((a as i32 as i64 * b as i32 as i64) >> 32) as u32);
    check("mul.hi.u32 %r4, %r2, %r3;", &ins, |a, b| ((a as u64 * b as u64) >> 32) as u32);
    check("mad.lo.s32 %r4, %r2, %r3, %r2;", &ins, |a, b| a.wrapping_mul(b).wrapping_add(a));
    check("min.s32 %r4, %r2, %r3;", &ins, |a, b| (a as i32).min(b as i32) as u32);
    check("max.u32 %r4, %r2, %r3;", &ins, |a, b| a.max(b));
    check("abs.s32 %r4, %r2;", &ins, |a, _| (a as i32).wrapping_abs() as u32);
    check("neg.s32 %r4, %r2;", &ins, |a, _| (a as i32).wrapping_neg() as u32);
    check("sub.s32 %r4, %r2, %r3;", &ins, |a, b| a.wrapping_sub(b));
    check("not.b32 %r4, %r2;", &ins, |a, _| !a);
    check("and.b32 %r5, %r2, %r3;\nor.b32 %r6, %r2, %r3;\nxor.b32 %r4, %r5, %r6;", &ins, |a, b| a ^ b);
    check("popc.b32 %r4, %r2;", &ins, |a, _| a.count_ones());
    check("clz.b32 %r4, %r2;", &ins, |a, _| a.leading_zeros());
    check("brev.b32 %r4, %r2;", &ins, |a, _| a.reverse_bits());
    check("cnot.b32 %r4, %r2;", &ins, |a, _| (a == 0) as u32);
    check("bfe.u32 %r4, %r2, 4, 8;", &ins, |a, _| (a >> 4) & 0xFF);
    check("bfe.s32 %r4, %r2, 4, 8;", &ins, |a, _| ((a << 20) as i32 >> 24) as u32);
    check("bfi.b32 %r4, %r2, %r3, 8, 4;", &ins, |a, b| (b & !0xF00) | ((a & 0xF) << 8));
    // 64-bit: wide products, 64-bit division, pack and unpack.
    check("mul.wide.s32 %rd7, %r2, %r3;\nshr.u64 %rd8, %rd7, 32;\ncvt.u32.u64 %r4, %rd8;", &ins, |a, b| {
        ((a as i32 as i64 * b as i32 as i64) >> 32) as u32
    });
    check("mov.b64 %rd7, {%r2, %r3};\nshr.u64 %rd8, %rd7, 16;\ncvt.u32.u64 %r4, %rd8;", &ins, |a, b| {
        (((b as u64) << 32 | a as u64) >> 16) as u32
    });
    check("mov.b64 %rd7, {%r2, %r3};\nmov.b64 {%r5, %r6}, %rd7;\nsub.s32 %r4, %r6, %r5;", &ins, |a, b| {
        b.wrapping_sub(a)
    });
    check(
        "cvt.s64.s32 %rd7, %r2;\ncvt.s64.s32 %rd8, %r3;\nshr.s64 %rd9, %rd7, 3;\nrem.s64 %rd10, %rd9, 1000;\nadd.s64 %rd11, %rd10, %rd8;\ncvt.u32.u64 %r4, %rd11;",
        &ins,
        |a, b| (((a as i32 as i64) >> 3) % 1000 + b as i32 as i64) as u32,
    );
    check(
        "cvt.u16.u32 %rs1, %r2;\ncvt.s16.s32 %rs2, %r3;\nadd.s16 %rs3, %rs1, %rs2;\ncvt.s32.s16 %r4, %rs3;",
        &ins,
        |a, b| (a as u16 as i16).wrapping_add(b as u16 as i16) as i32 as u32,
    );
    check(
        "setp.lt.s32 %p1, %r2, %r3;\nselp.u32 %r4, 7, 9, %p1;",
        &ins,
        |a, b| if (a as i32) < (b as i32) { 7 } else { 9 },
    );
    check("setp.lo.u32 %p1, %r2, %r3;\nsetp.ne.and.u32 %p2, %r2, 0, %p1;\nselp.u32 %r4, 1, 0, %p2;", &ins, |a, b| {
        (a < b && a != 0) as u32
    });
    check(
        "setp.hi.u32 %p1|%p2, %r2, %r3;\nselp.u32 %r5, 2, 0, %p1;\nselp.u32 %r6, 1, 0, %p2;\nadd.s32 %r4, %r5, %r6;",
        &ins,
        |a, b| {
            if a > b {
                2
            } else {
                1
            }
        },
    );
}

#[test]
fn float_arithmetic_matches_rust() {
    open();
    let ins = float_inputs();
    let b = |x: f32| x.to_bits();
    let same = |x: f32| if x.is_nan() { 0x7FFF_FFFF } else { x.to_bits() };
    let canon =
        |body: &str| format!("{body}\nsetp.nan.f32 %p1, %f4, %f4;\nmov.b32 %r4, %f4;\n@%p1 mov.u32 %r4, 0x7FFFFFFF;");
    check(&canon("add.f32 %f4, %f2, %f3;"), &ins, |x, y| same(f(x) + f(y)));
    check(&canon("sub.rn.f32 %f4, %f2, %f3;"), &ins, |x, y| same(f(x) - f(y)));
    check(&canon("mul.rn.f32 %f4, %f2, %f3;"), &ins, |x, y| same(f(x) * f(y)));
    check(&canon("div.rn.f32 %f4, %f2, %f3;"), &ins, |x, y| same(f(x) / f(y)));
    check(&canon("fma.rn.f32 %f4, %f2, %f3, %f2;"), &ins, |x, y| same(f(x).mul_add(f(y), f(x))));
    check(&canon("sqrt.rn.f32 %f4, %f2;"), &ins, |x, _| same(f(x).sqrt()));
    check(&canon("rcp.rn.f32 %f4, %f2;"), &ins, |x, _| same(1.0 / f(x)));
    check(&canon("neg.f32 %f4, %f2;"), &ins, |x, _| same(-f(x)));
    check(&canon("abs.f32 %f4, %f2;"), &ins, |x, _| same(f(x).abs()));
    // min/max: a NaN operand gives the other one.
    let min = |x: f32, y: f32| {
        if x.is_nan() {
            y
        } else if y.is_nan() || x < y || (x == y && x.is_sign_negative()) {
            x
        } else {
            y
        }
    };
    check(&canon("min.f32 %f4, %f2, %f3;"), &ins, |x, y| same(min(f(x), f(y))));
    let max = |x: f32, y: f32| {
        if x.is_nan() {
            y
        } else if y.is_nan() || x > y || (x == y && y.is_sign_negative()) {
            x
        } else {
            y
        }
    };
    check(&canon("max.f32 %f4, %f2, %f3;"), &ins, |x, y| same(max(f(x), f(y))));
    check(&canon("add.sat.f32 %f4, %f2, %f3;"), &ins, |x, y| {
        let v = f(x) + f(y);
        b(if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) })
    });
    // Every comparison, ordered and unordered.
    type Cmp = fn(f32, f32) -> bool;
    let cmps: [(&str, Cmp); 14] = [
        ("eq", |x, y| x == y),
        ("ne", |x, y| x != y && !x.is_nan() && !y.is_nan()),
        ("lt", |x, y| x < y),
        ("le", |x, y| x <= y),
        ("gt", |x, y| x > y),
        ("ge", |x, y| x >= y),
        ("equ", |x, y| x == y || x.is_nan() || y.is_nan()),
        ("neu", |x, y| x != y),
        ("ltu", |x, y| x < y || x.is_nan() || y.is_nan()),
        ("leu", |x, y| x <= y || x.is_nan() || y.is_nan()),
        ("gtu", |x, y| x > y || x.is_nan() || y.is_nan()),
        ("geu", |x, y| x >= y || x.is_nan() || y.is_nan()),
        ("num", |x, y| !x.is_nan() && !y.is_nan()),
        ("nan", |x, y| x.is_nan() || y.is_nan()),
    ];
    for (c, want) in cmps {
        check(&format!("setp.{c}.f32 %p1, %f2, %f3;\nselp.u32 %r4, 1, 0, %p1;"), &ins, |x, y| want(f(x), f(y)) as u32);
    }
    type Class = fn(f32) -> bool;
    let classes: [(&str, Class); 6] = [
        ("finite", f32::is_finite),
        ("infinite", f32::is_infinite),
        ("number", |x| !x.is_nan()),
        ("notanumber", f32::is_nan),
        ("normal", f32::is_normal),
        ("subnormal", f32::is_subnormal),
    ];
    for (c, want) in classes {
        check(&format!("testp.{c}.f32 %p1, %f2;\nselp.u32 %r4, 1, 0, %p1;"), &ins, |x, _| want(f(x)) as u32);
    }
    check("set.gt.u32.f32 %r4, %f2, %f3;", &ins, |x, y| if f(x) > f(y) { u32::MAX } else { 0 });
    check("selp.f32 %f4, %f2, %f3, %p7;\nmov.b32 %r4, %f4;", &ins, |_, y| y);
}

#[test]
fn conversions_round_and_saturate_as_ptx() {
    open();
    let ins = float_inputs();
    let sat_i32 = |v: f32| if v.is_nan() { 0 } else { v as i32 as u32 };
    check("cvt.rzi.s32.f32 %r4, %f2;", &ins, |x, _| sat_i32(f(x).trunc()));
    check("cvt.rni.s32.f32 %r4, %f2;", &ins, |x, _| sat_i32(f(x).round_ties_even()));
    check("cvt.rmi.s32.f32 %r4, %f2;", &ins, |x, _| sat_i32(f(x).floor()));
    check("cvt.rpi.s32.f32 %r4, %f2;", &ins, |x, _| sat_i32(f(x).ceil()));
    check("cvt.rzi.u32.f32 %r4, %f2;", &ins, |x, _| if f(x).is_nan() { 0 } else { f(x) as u32 });
    check("cvt.rni.f32.f32 %f4, %f2;\nmov.b32 %r4, %f4;", &ins, |x, _| f(x).round_ties_even().to_bits());
    check("cvt.sat.f32.f32 %f4, %f2;\nmov.b32 %r4, %f4;", &ins, |x, _| {
        if f(x).is_nan() {
            0
        } else {
            f(x).clamp(0.0, 1.0).to_bits()
        }
    });
    check("cvt.rzi.s64.f32 %rd7, %f2;\nshr.s64 %rd8, %rd7, 32;\ncvt.u32.u64 %r4, %rd8;", &ins, |x, _| {
        (if f(x).is_nan() { 0 } else { f(x) as i64 } >> 32) as u32
    });
    check(
        "cvt.f64.f32 %fd1, %f2;\nmul.f64 %fd2, %fd1, 0d3FF8000000000000;\ncvt.rn.f32.f64 %f4, %fd2;\nmov.b32 %r4, %f4;",
        &ins,
        |x, _| {
            let v = (f(x) as f64 * 1.5) as f32;
            if v.is_nan() {
                0x7FC0_0000 | v.to_bits()
            } else {
                v.to_bits()
            }
        },
    );
    let ints = int_inputs();
    check("cvt.rn.f32.s32 %f4, %r2;\nmov.b32 %r4, %f4;", &ints, |a, _| (a as i32 as f32).to_bits());
    check("cvt.rz.f32.u32 %f4, %r2;\nmov.b32 %r4, %f4;", &ints, |a, _| {
        let r = a as f32;
        (if r as u64 > a as u64 { step(r, -1) } else { r }).to_bits()
    });
    check("cvt.sat.u8.s32 %rs1, %r2;\ncvt.u32.u16 %r4, %rs1;", &ints, |a, _| (a as i32).clamp(0, 255) as u32);
    check("cvt.s8.s32 %rs1, %r2;\ncvt.s32.s8 %r4, %rs1;", &ints, |a, _| a as i8 as i32 as u32);
}

#[test]
fn directed_rounding_of_fma_and_ex2() {
    open();
    let mut rng = StdRng::seed_from_u64(5);
    // Products are exact in f64, so floor/ceil to f32 of the f64 value is the exact reference.
    let ins: Vec<(u32, u32)> =
        (0..500).map(|_| (rng.gen_range(-8.0f32..8.0).to_bits(), rng.gen_range(-8.0f32..8.0).to_bits())).collect();
    let down = |x: u32, y: u32| {
        let v = f(x) as f64 * f(y) as f64;
        let r = v as f32;
        (if r as f64 > v { step(r, -1) } else { r }).to_bits()
    };
    let up = |x: u32, y: u32| {
        let v = f(x) as f64 * f(y) as f64;
        let r = v as f32;
        (if (r as f64) < v { step(r, 1) } else { r }).to_bits()
    };
    let zero = "mov.f32 %f5, 0f00000000;";
    check(&format!("{zero}\nfma.rm.f32 %f4, %f2, %f3, %f5;\nmov.b32 %r4, %f4;"), &ins, down);
    check(&format!("{zero}\nfma.rp.f32 %f4, %f2, %f3, %f5;\nmov.b32 %r4, %f4;"), &ins, up);
    check(&format!("{zero}\nmul.rz.f32 %f4, %f2, %f3;\nmov.b32 %r4, %f4;"), &ins, |x, y| {
        if f(x) * f(y) > 0.0 {
            down(x, y)
        } else {
            up(x, y)
        }
    });
    let rn = run(&format!("{zero}\nfma.rn.f32 %f4, %f2, %f3, %f5;\nmov.b32 %r4, %f4;"), &ins);
    let differ = ins.iter().zip(&rn).filter(|(&(x, y), &r)| r != down(x, y)).count();
    assert!(differ > 50, "fma.rn and fma.rm differ on only {differ} of 500 products");
    // (1 + 2^-23)^2 - 1 = 2^-22 + 2^-46 lies halfway: .rn and .rm give 2^-22, .rp one ulp more.
    let a = (1.0f32 + f32::EPSILON).to_bits();
    let one = "mov.f32 %f5, 0fBF800000;";
    let fma = |m: &str| run(&format!("{one}\nfma.{m}.f32 %f4, %f2, %f2, %f5;\nmov.b32 %r4, %f4;"), &[(a, 0)])[0];
    assert_eq!(f(fma("rn")), 2f32.powi(-22));
    assert_eq!(f(fma("rm")), 2f32.powi(-22));
    assert_eq!(f(fma("rp")), step(2f32.powi(-22), 1));
    // ex2.approx.ftz: within 2 ulp of exp2; subnormal inputs and results flush to zero.
    let xs: Vec<(u32, u32)> = (0..400).map(|i| ((i as f32 * 0.37 - 70.0).to_bits(), 0)).collect();
    let got = run("ex2.approx.ftz.f32 %f4, %f2;\nmov.b32 %r4, %f4;", &xs);
    for (&(x, _), g) in xs.iter().zip(got) {
        let want = f(x).exp2();
        assert!((g as i64 - want.to_bits() as i64).abs() <= 2, "ex2({}) = {}, want {want}", f(x), f(g));
    }
    let edge = [(1e-40f32.to_bits(), 0), ((-140.0f32).to_bits(), 0)];
    let got = run("ex2.approx.ftz.f32 %f4, %f2;\nmov.b32 %r4, %f4;", &edge);
    assert_eq!(got, [1f32.to_bits(), 0]);
}

fn kernel(body: &str, params: &str) -> String {
    format!("{HEAD}.visible .entry k({params})\n{{\n{body}\n}}\n")
}

#[test]
fn vector_and_local_memory_round_trip() {
    open();
    let body = "
    .local .align 16 .b8 __local_depot0[32];
    .reg .b64 %SP;
    .reg .b64 %SPL;
    .reg .b32 %r<16>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<8>;
    mov.u64 %SPL, __local_depot0;
    cvta.local.u64 %SP, %SPL;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd3];
    st.local.v4.f32 [%SPL], {%f4, %f3, %f2, %f1};
    st.u32 [%SP+16], %r1;
    ld.local.v2.f32 {%f5, %f6}, [%SPL+8];
    ld.u32 %r2, [%SP+16];
    ld.local.v2.f32 {%f1, %f2}, [%SPL];
    st.global.v4.f32 [%rd3], {%f1, %f2, %f5, %f6};
    add.s32 %r3, %r2, 1;
    st.global.u32 [%rd3+12], %r3;
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0"));
    let data: Vec<f32> = (0..4 * 40).map(|i| i as f32 * 0.5).collect();
    let p = upload_f32(&data);
    ok(launch(function(m, "k"), (1, 1, 1), (40, 1, 1), 0, &[Arg::U64(p)]));
    let got = read_f32(p, data.len());
    for t in 0..40 {
        let v = &data[4 * t..4 * t + 4];
        assert_eq!(&got[4 * t..4 * t + 3], &[v[3], v[2], v[1]], "thread {t}");
        assert_eq!(got[4 * t + 3].to_bits(), t as u32 + 1, "thread {t}");
    }
}

#[test]
fn divergent_loops_reconverge() {
    open();
    // Thread t sums k for k < t % 7, doubling on odd k; odd threads then add 1000.
    let body = "
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, 7;
    mov.u32 %r3, 0;
    mov.u32 %r4, 0;
    $LOOP:
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra $END;
    and.b32 %r5, %r3, 1;
    setp.eq.s32 %p2, %r5, 0;
    @%p2 bra $EVEN;
    shl.b32 %r6, %r3, 1;
    add.s32 %r4, %r4, %r6;
    bra.uni $NEXT;
    $EVEN:
    add.s32 %r4, %r4, %r3;
    $NEXT:
    add.s32 %r3, %r3, 1;
    bra.uni $LOOP;
    $END:
    and.b32 %r7, %r1, 1;
    setp.eq.s32 %p3, %r7, 0;
    @!%p3 add.s32 %r4, %r4, 1000;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0"));
    let p = upload_u32(&[0; 100]);
    ok(launch(function(m, "k"), (1, 1, 1), (100, 1, 1), 0, &[Arg::U64(p)]));
    let want: Vec<u32> = (0..100u32)
        .map(|t| {
            (0..t % 7).map(|k| if k % 2 == 1 { 2 * k } else { k }).sum::<u32>() + if t % 2 == 1 { 1000 } else { 0 }
        })
        .collect();
    assert_eq!(read_u32(p, 100), want);
}

#[test]
fn shared_tree_reduction_with_barriers_in_a_loop() {
    open();
    let body = "
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 sdata[1024];
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    mov.u32 %r5, sdata;
    shl.b32 %r6, %r1, 2;
    add.s32 %r7, %r5, %r6;
    st.shared.f32 [%r7], %f1;
    shr.u32 %r8, %r3, 1;
    $LOOP:
    bar.sync 0;
    setp.eq.s32 %p1, %r8, 0;
    @%p1 bra $OUT;
    setp.ge.u32 %p2, %r1, %r8;
    @%p2 bra $SKIP;
    shl.b32 %r9, %r8, 2;
    add.s32 %r10, %r7, %r9;
    ld.shared.f32 %f2, [%r10];
    ld.shared.f32 %f3, [%r7];
    add.f32 %f4, %f3, %f2;
    st.shared.f32 [%r7], %f4;
    $SKIP:
    shr.u32 %r8, %r8, 1;
    bra.uni $LOOP;
    $OUT:
    setp.ne.s32 %p3, %r1, 0;
    @%p3 bra $DONE;
    ld.shared.f32 %f5, [sdata];
    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.f32 [%rd6], %f5;
    $DONE:
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0, .param .u64 k_param_1"));
    let (blocks, threads) = (5usize, 256usize);
    let mut rng = StdRng::seed_from_u64(3);
    let data: Vec<f32> = (0..blocks * threads).map(|_| rng.gen_range(-10i32..10) as f32).collect();
    let (inp, out) = (upload_f32(&data), upload_f32(&vec![0.0; blocks]));
    ok(launch(function(m, "k"), (blocks as u32, 1, 1), (threads as u32, 1, 1), 0, &[Arg::U64(inp), Arg::U64(out)]));
    // Small integers: every order of additions gives the exact sum.
    let want: Vec<f32> = data.chunks(threads).map(|c| c.iter().sum()).collect();
    assert_eq!(read_f32(out, blocks), want);
}

#[test]
fn three_dimensional_grids_and_blocks() {
    open();
    let body = "
    .reg .b32 %r<32>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %tid.z;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %ntid.z;
    mov.u32 %r7, %ctaid.x;
    mov.u32 %r8, %ctaid.y;
    mov.u32 %r9, %ctaid.z;
    mov.u32 %r10, %nctaid.x;
    mov.u32 %r11, %nctaid.y;
    mad.lo.s32 %r12, %r9, %r11, %r8;
    mad.lo.s32 %r12, %r12, %r10, %r7;
    mad.lo.s32 %r13, %r3, %r5, %r2;
    mad.lo.s32 %r13, %r13, %r4, %r1;
    mul.lo.s32 %r14, %r4, %r5;
    mul.lo.s32 %r14, %r14, %r6;
    mad.lo.s32 %r15, %r12, %r14, %r13;
    mad.lo.s32 %r16, %r2, 10, %r1;
    mad.lo.s32 %r16, %r3, 100, %r16;
    mad.lo.s32 %r16, %r7, 1000, %r16;
    mad.lo.s32 %r16, %r8, 10000, %r16;
    mad.lo.s32 %r16, %r9, 100000, %r16;
    mul.wide.u32 %rd2, %r15, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r16;
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0"));
    let (g, b) = ((3u32, 2u32, 4u32), (5u32, 3u32, 2u32));
    let n = (g.0 * g.1 * g.2 * b.0 * b.1 * b.2) as usize;
    let p = upload_u32(&vec![0; n]);
    ok(launch(function(m, "k"), g, b, 0, &[Arg::U64(p)]));
    let mut want = Vec::new();
    for cz in 0..g.2 {
        for cy in 0..g.1 {
            for cx in 0..g.0 {
                for tz in 0..b.2 {
                    for ty in 0..b.1 {
                        for tx in 0..b.0 {
                            want.push(tx + 10 * ty + 100 * tz + 1000 * cx + 10000 * cy + 100000 * cz);
                        }
                    }
                }
            }
        }
    }
    assert_eq!(read_u32(p, n), want);
}

#[test]
fn atomics_accumulate() {
    open();
    let body = "
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    atom.global.add.u32 %r2, [%rd1], 1;
    atom.global.max.s32 %r3, [%rd1+4], %r1;
    cvt.rn.f32.u32 %f1, %r1;
    red.global.add.f32 [%rd1+8], %f1;
    atom.global.cas.b32 %r4, [%rd1+12], %r1, 99;
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0"));
    let p = upload_u32(&[0, 0, 0, 5]);
    ok(launch(function(m, "k"), (1, 1, 1), (64, 1, 1), 0, &[Arg::U64(p)]));
    let got = read_u32(p, 4);
    assert_eq!(got[..2], [64, 63]);
    assert_eq!(f32::from_bits(got[2]), (0..64).sum::<u32>() as f32);
    assert_eq!(got[3], 99);
}

#[test]
fn dynamic_shared_memory_reverses_a_block() {
    open();
    let body = "
    .extern .shared .align 4 .b8 dyn[];
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r3, [%rd3];
    mov.u64 %rd4, dyn;
    add.s64 %rd5, %rd4, %rd2;
    st.shared.u32 [%rd5], %r3;
    bar.sync 0;
    sub.s32 %r4, %r2, %r1;
    sub.s32 %r4, %r4, 1;
    mul.wide.u32 %rd6, %r4, 4;
    add.s64 %rd7, %rd4, %rd6;
    cvta.shared.u64 %rd7, %rd7;
    ld.u32 %r5, [%rd7];
    st.global.u32 [%rd3], %r5;
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0"));
    let data: Vec<u32> = (0..96).collect();
    let p = upload_u32(&data);
    ok(launch(function(m, "k"), (1, 1, 1), (96, 1, 1), 96 * 4, &[Arg::U64(p)]));
    assert_eq!(read_u32(p, 96), data.iter().rev().copied().collect::<Vec<_>>());
}

#[test]
fn pointers_read_from_memory_reach_other_allocations() {
    open();
    // out[t] = *table[t] + 1, *table[t] = 0: the pointed-to buffers are not arguments.
    let body = "
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.nc.u64 %rd5, [%rd4];
    ld.global.u32 %r2, [%rd5];
    add.s32 %r3, %r2, 1;
    st.global.u32 [%rd5], 0;
    mul.wide.u32 %rd6, %r1, 4;
    add.s64 %rd7, %rd2, %rd6;
    st.global.u32 [%rd7], %r3;
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0, .param .u64 k_param_1"));
    let buffers: Vec<u64> = (0..4).map(|i| upload_u32(&[10 * i, 99])).collect();
    let words: Vec<u32> = buffers.iter().flat_map(|&p| [p as u32, (p >> 32) as u32]).collect();
    let (table, out) = (upload_u32(&words), upload_u32(&[0; 4]));
    ok(launch(function(m, "k"), (1, 1, 1), (4, 1, 1), 0, &[Arg::U64(table), Arg::U64(out)]));
    assert_eq!(read_u32(out, 4), [1, 11, 21, 31]);
    for &b in &buffers {
        assert_eq!(read_u32(b, 2), [0, 99]);
    }
}

#[test]
fn module_variables_are_initialised_and_kept() {
    open();
    // A constant table and a global counter: out[t] = table[t % 4] + counter (counted up per launch).
    let ptx = format!(
        "{HEAD}.const .align 4 .b8 table[16] = {{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}};
.global .align 4 .u32 counter = 100;
.visible .entry k(.param .u64 k_param_0)
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 3;
    mul.wide.u32 %rd2, %r2, 4;
    mov.u64 %rd3, table;
    add.s64 %rd4, %rd3, %rd2;
    ld.const.u32 %r3, [%rd4];
    ld.global.u32 %r4, [counter];
    add.s32 %r5, %r3, %r4;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r5;
    bar.sync 0;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $END;
    atom.global.add.u32 %r6, [counter], 10;
    $END:
    ret;
}}
"
    );
    let ptx = ptx.replace(".reg .b32 %r<8>;", ".reg .b32 %r<8>;\n    .reg .pred %p<2>;");
    let m = load_ptx(&ptx);
    let p = upload_u32(&[0; 6]);
    ok(launch(function(m, "k"), (1, 1, 1), (6, 1, 1), 0, &[Arg::U64(p)]));
    assert_eq!(read_u32(p, 6), [101, 102, 103, 104, 101, 102]);
    ok(launch(function(m, "k"), (1, 1, 1), (6, 1, 1), 0, &[Arg::U64(p)]));
    assert_eq!(read_u32(p, 6), [111, 112, 113, 114, 111, 112]);
}

#[test]
fn warp_shuffles_and_votes() {
    open();
    // Per thread t (lane = t % 32): a shfl.down tree sum of t*t over the warp, a
    // ballot of lane < 5, lane 3's t broadcast, and t of the lane below.
    let body = "
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    mul.lo.s32 %r2, %r1, %r1;
    shfl.sync.down.b32 %r3|%p1, %r2, 16, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3|%p1, %r2, 8, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3|%p1, %r2, 4, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3|%p1, %r2, 2, 31, -1;
    add.s32 %r2, %r2, %r3;
    shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
    add.s32 %r2, %r2, %r3;
    mov.u32 %r4, %laneid;
    setp.lt.u32 %p2, %r4, 5;
    vote.sync.ballot.b32 %r5, %p2, -1;
    shfl.sync.idx.b32 %r6, %r1, 3, 31, -1;
    shfl.sync.up.b32 %r7, %r1, 1, 0, -1;
    vote.sync.all.pred %p3, %p2, -1;
    selp.u32 %r8, 1, 0, %p3;
    mul.wide.u32 %rd2, %r1, 32;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r2, %r5, %r6, %r7};
    st.global.u32 [%rd3+16], %r8;
    ret;";
    let m = load_ptx(&kernel(body, ".param .u64 k_param_0"));
    let p = upload_u32(&[0; 64 * 8]);
    ok(launch(function(m, "k"), (1, 1, 1), (64, 1, 1), 0, &[Arg::U64(p)]));
    let got = read_u32(p, 64 * 8);
    for w in 0..2u32 {
        let mut v: Vec<u32> = (0..32).map(|l| (32 * w + l) * (32 * w + l)).collect();
        for off in [16, 8, 4, 2] {
            v = (0..32).map(|l| v[l] + if l + off < 32 { v[l + off] } else { v[l] }).collect();
        }
        v = (0..32).map(|l| v[l] + v[l ^ 1]).collect();
        for l in 0..32u32 {
            let t = (32 * w + l) as usize;
            let below = if l > 0 { t as u32 - 1 } else { t as u32 };
            assert_eq!(got[8 * t..8 * t + 5], [v[l as usize], 0x1F, 32 * w + 3, below, 0], "thread {t}");
        }
    }
    assert_eq!(got[0], (0..32u32).map(|t| t * t).sum::<u32>());
}
