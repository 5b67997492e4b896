//! Tests of the bf16 codec and its error feedback: special values and
//! rounding ties, the flush of a residual when a clock has no deltas, length
//! errors, and (a property test) that over many clocks the sum a keeper
//! applies equals the sum sent minus the final residual, with every residual
//! element within half a bf16 step of the value sent.

use half::bf16;
use proptest::prelude::*;

use crate::wire::bf16 as bf16_wire;

/// The wire's rounding as a `half` value, to compare with `half`'s.
fn to_bf16(x: f32) -> bf16 {
    bf16::from_bits(bf16_wire::to_bf16(x))
}
use crate::wire::recv_pool::RecvPool;

fn encode(deltas: Option<&[u8]>, residual: &mut Vec<f32>) -> Result<Option<bytes::Bytes>, String> {
    bf16_wire::encode(deltas, residual, &RecvPool::new(1))
}

/// bf16 bits widened to the f32 each is, as the keeper adds them.
fn widened(payload: &[u8]) -> Vec<f32> {
    payload.chunks_exact(2).map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)).collect()
}

fn bytes_of(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Encodes `deltas` with `residual`: the values that would cross the wire.
fn through_wire(deltas: Option<&[f32]>, residual: &mut Vec<f32>) -> Option<Vec<f32>> {
    let raw = deltas.map(bytes_of);
    let sent = encode(raw.as_deref(), residual).unwrap()?;
    assert_eq!(sent.len() * 2, residual.len() * 4, "bf16 is 2 bytes a value");
    Some(widened(&sent))
}

/// Half the distance from `q` to the next bf16 away from zero.
fn half_bf16_step(q: f32) -> f64 {
    let a = bf16::from_f32(q.abs()).to_bits();
    (bf16::from_bits(a + 1).to_f32() as f64 - bf16::from_bits(a).to_f32() as f64) / 2.0
}

/// Half the distance from `s` to the next f32 away from zero.
fn half_f32_step(s: f32) -> f64 {
    let a = s.abs();
    (f32::from_bits(a.to_bits() + 1) as f64 - a as f64) / 2.0
}

#[test]
fn rounding_agrees_with_half_except_where_half_overflows() {
    let mut bits = 0x9e37_79b9u32;
    for _ in 0..1_000_000 {
        bits ^= bits << 13;
        bits ^= bits >> 17;
        bits ^= bits << 5;
        let x = f32::from_bits(bits);
        let (ours, theirs) = (to_bf16(x), bf16::from_f32(x));
        if x.is_nan() {
            assert!(ours.is_nan() && ours.to_bits() == theirs.to_bits(), "{bits:#x}");
        } else if theirs.is_infinite() && x.is_finite() {
            assert_eq!(ours, if x > 0.0 { bf16::MAX } else { bf16::MIN }, "{bits:#x}");
        } else {
            assert_eq!(ours.to_bits(), theirs.to_bits(), "{bits:#x}");
        }
    }
}

#[test]
fn rounding_is_to_nearest_with_ties_to_even() {
    let one = 1.0f32;
    let step = 2f32.powi(-7); // bf16's step at 1.0
                              // Exactly halfway between 1.0 (even) and 1.0 + step (odd): down to even.
    assert_eq!(to_bf16(one + step / 2.0).to_f32(), one);
    // Halfway between 1.0 + step (odd) and 1.0 + 2 step (even): up to even.
    assert_eq!(to_bf16(one + 1.5 * step).to_f32(), one + 2.0 * step);
    // Just past halfway: up.
    assert_eq!(to_bf16(one + step / 2.0 + f32::EPSILON).to_f32(), one + step);
    assert_eq!(to_bf16(-(one + step / 2.0 + f32::EPSILON)).to_f32(), -(one + step));
    // Exactly representable values are kept, zeros keep their sign.
    for v in [0.0f32, 1.0, -2.5, 0.15625, 65536.0, 2f32.powi(-126)] {
        assert_eq!(to_bf16(v).to_f32(), v);
    }
    assert!(to_bf16(-0.0).to_f32().is_sign_negative());
}

#[test]
fn special_values_cross_the_wire() {
    let mut r = Vec::new();
    let got = through_wire(Some(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0]), &mut r).unwrap();
    assert!(got[0].is_nan());
    assert_eq!(&got[1..3], &[f32::INFINITY, f32::NEG_INFINITY]);
    // -0.0 plus the zero residual is +0.0: the same delta to add.
    assert_eq!(got[3], 0.0);
    // Non-finite sums are sent once, not kept in the residual.
    assert_eq!(r, vec![0.0; 4]);
    assert_eq!(through_wire(None, &mut r), None);
}

#[test]
fn subnormals_round_like_normals_and_tiny_residuals_are_not_flushed_forever() {
    // f32 subnormals: bf16 keeps their top bits, ties to even.
    let smallest_bf16 = f32::from_bits(0x0001_0000); // 2^-133
    let tie = f32::from_bits(0x0001_8000); // 1.5 x 2^-133: halfway, up to the even 2 x 2^-133
    let below_half = f32::from_bits(0x0000_7fff);
    assert_eq!(to_bf16(smallest_bf16).to_f32(), smallest_bf16);
    assert_eq!(to_bf16(tie).to_bits(), 0x0002);
    assert_eq!(to_bf16(below_half).to_bits(), 0);
    let mut r = Vec::new();
    let got = through_wire(Some(&[below_half, tie]), &mut r).unwrap();
    assert_eq!(got, vec![0.0, f32::from_bits(0x0002_0000)]);
    assert_eq!(r, vec![below_half, tie - f32::from_bits(0x0002_0000)]);
    // What is left cannot be carried by any bf16 (under 2^-134): a clock
    // without deltas sends nothing rather than zeros forever.
    assert_eq!(through_wire(None, &mut vec![below_half]), None);
}

#[test]
fn beyond_bf16_range_saturates_and_keeps_a_finite_residual() {
    let mut r = Vec::new();
    let got = through_wire(Some(&[f32::MAX, -f32::MAX]), &mut r).unwrap();
    assert_eq!(got, vec![bf16::MAX.to_f32(), bf16::MIN.to_f32()]);
    assert!(r.iter().all(|v| v.is_finite()) && r[0] > 0.0 && r[1] < 0.0, "{r:?}");
}

#[test]
fn a_clock_without_deltas_flushes_the_residual_within_two_clocks() {
    let d = [1.0 + 2f32.powi(-20), -3.3333333, 1e-3, 12345.678, 0.0];
    let mut r = Vec::new();
    let mut applied = vec![0f64; d.len()];
    let mut clocks = 0;
    let mut deltas = Some(&d[..]);
    while let Some(q) = through_wire(deltas, &mut r) {
        applied.iter_mut().zip(&q).for_each(|(a, q)| *a += *q as f64);
        deltas = None;
        clocks += 1;
        assert!(clocks <= 3, "still flushing after {clocks} clocks: {r:?}");
    }
    // The batch with deltas and at most two flushes: everything arrived, exactly.
    assert_eq!(applied, d.iter().map(|v| *v as f64).collect::<Vec<_>>());
    assert_eq!(r, vec![0.0; d.len()]);
}

#[test]
fn bad_lengths_are_errors_not_panics() {
    let mut r = Vec::new();
    let e = encode(Some(&[0; 7]), &mut r).unwrap_err();
    assert!(e.contains("7 bytes are not a whole number of 4-byte floats"), "{e}");
    encode(Some(&bytes_of(&[1.5; 4])), &mut r).unwrap();
    let e = encode(Some(&bytes_of(&[1.5; 3])), &mut r).unwrap_err();
    assert!(e.contains("deltas of 3 floats for a partition whose earlier batches had 4"), "{e}");
}

/// A delta of any sign and a wide range of magnitudes, or zero.
fn delta() -> impl Strategy<Value = f32> {
    prop_oneof![
        1 => Just(0.0f32),
        8 => (-1.0f32..1.0, -20i32..20).prop_map(|(m, e)| m * 2f32.powi(e)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Over many clocks of random deltas (some clocks without any), what the
    /// keeper applied equals what was sent minus the final residual, up to
    /// the f32 rounding of each clock's `d + r`; and after every clock each
    /// residual element is within half a bf16 step of the value sent.
    #[test]
    fn error_feedback_loses_nothing_over_clocks(
        clocks in proptest::collection::vec(proptest::option::weighted(0.8, proptest::collection::vec(delta(), 6)), 1..60)
    ) {
        let n = 6;
        let mut r = Vec::new();
        let (mut sent, mut applied, mut rounding) = (vec![0f64; n], vec![0f64; n], vec![0f64; n]);
        for d in &clocks {
            if let Some(d) = d {
                sent.iter_mut().zip(d).for_each(|(s, d)| *s += *d as f64);
            }
            let Some(q) = through_wire(d.as_deref(), &mut r) else {
                prop_assert!(r.is_empty() || r.iter().all(|v| v.abs() <= 2f32.powi(-134)));
                continue;
            };
            for i in 0..n {
                applied[i] += q[i] as f64;
                prop_assert!(
                    (r[i] as f64).abs() <= half_bf16_step(q[i]),
                    "residual {} beyond half a bf16 step of {}", r[i], q[i]
                );
                // This clock's d + r, recovered exactly as q + r.
                rounding[i] += half_f32_step(q[i] + r[i]);
            }
        }
        for i in 0..n {
            let residual = r.get(i).copied().unwrap_or(0.0) as f64;
            let gap = (applied[i] - (sent[i] - residual)).abs();
            prop_assert!(gap <= rounding[i], "element {i}: applied {} sent {} residual {residual}: off by {gap} > {}", applied[i], sent[i], rounding[i]);
        }
    }
}
