//! Random floats that exercise row kernels where CPU and GPU arithmetic could
//! part ways: values of like magnitude (adds that round), subnormals of both
//! signs, and any finite bit pattern (huge exponents, signed zeros). Never
//! NaN or infinity: their payloads and `inf - inf` are where devices may
//! differ in bits, and the engine never relies on them.

use rand::Rng;

/// A random finite float: any sign, any exponent but the all-ones one.
pub fn finite_float(rng: &mut impl Rng) -> f32 {
    loop {
        let f = f32::from_bits(rng.gen());
        if f.is_finite() {
            return f;
        }
    }
}

/// `n` floats mixing like magnitudes, subnormals and any finite pattern.
pub fn kernel_floats(rng: &mut impl Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 7 {
            // Values of like magnitude, so adds round rather than absorb.
            0..=3 => rng.gen_range(-1.0e3f32..1.0e3),
            4 => f32::from_bits(rng.gen_range(0..0x0080_0000) | (rng.gen::<u32>() & 0x8000_0000)),
            _ => finite_float(rng),
        })
        .collect()
}
