//! Initial parameter values, as Caffe's fillers draw them (constant,
//! uniform, gaussian, xavier, msra with their variance norms). It owns the
//! formulas; it must never decide which blob gets which filler.

use rand::Rng;

use crate::proto::net::{Filler, VarianceNorm};

/// Fan-in and fan-out of a blob as Caffe counts them: count / shape[0] and
/// count / shape[1] (the count itself for a 1-D blob).
fn fans(shape: &[usize]) -> (f32, f32) {
    let count: usize = shape.iter().product();
    let fan_in = count / shape.first().copied().unwrap_or(1).max(1);
    let fan_out = if shape.len() > 1 { count / shape[1].max(1) } else { count };
    (fan_in as f32, fan_out as f32)
}

fn norm_n(norm: VarianceNorm, shape: &[usize]) -> f32 {
    let (fan_in, fan_out) = fans(shape);
    match norm {
        VarianceNorm::FanIn => fan_in,
        VarianceNorm::FanOut => fan_out,
        VarianceNorm::Average => (fan_in + fan_out) / 2.0,
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut impl Rng) -> f32 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// Values for a blob of `shape`.
pub fn fill(filler: &Filler, shape: &[usize], rng: &mut impl Rng) -> Vec<f32> {
    let count: usize = shape.iter().product();
    match *filler {
        Filler::Constant(v) => vec![v; count],
        Filler::Uniform { min, max } => (0..count).map(|_| uniform(rng, min, max)).collect(),
        Filler::Gaussian { mean, std } => (0..count).map(|_| mean + std * normal(rng)).collect(),
        Filler::Xavier(norm) => {
            let a = (3.0 / norm_n(norm, shape)).sqrt();
            (0..count).map(|_| uniform(rng, -a, a)).collect()
        }
        Filler::Msra(norm) => {
            let std = (2.0 / norm_n(norm, shape)).sqrt();
            (0..count).map(|_| std * normal(rng)).collect()
        }
    }
}

fn uniform(rng: &mut impl Rng, min: f32, max: f32) -> f32 {
    if min == max {
        min
    } else {
        rng.gen_range(min..max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn xavier_bounds_and_gaussian_moments() {
        let mut rng = StdRng::seed_from_u64(1);
        let w = fill(&Filler::Xavier(VarianceNorm::FanIn), &[20, 1, 5, 5], &mut rng);
        let a = (3.0f32 / 25.0).sqrt();
        assert!(w.iter().all(|v| v.abs() <= a));
        assert!(w.iter().any(|v| v.abs() > a * 0.9));
        let g = fill(&Filler::Gaussian { mean: 1.0, std: 0.1 }, &[10000], &mut rng);
        let mean = g.iter().sum::<f32>() / g.len() as f32;
        let var = g.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / g.len() as f32;
        assert!((mean - 1.0).abs() < 0.01 && (var.sqrt() - 0.1).abs() < 0.01, "{mean} {var}");
        assert_eq!(fill(&Filler::Constant(0.5), &[3], &mut rng), vec![0.5; 3]);
    }
}
