//! Initial parameter values, as Caffe's fillers draw them (constant,
//! uniform, gaussian (dense or `sparse`), xavier, msra with their variance norms, bilinear). It owns the
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
        Filler::SparseGaussian { mean, std, sparse } => {
            // Caffe's: the gaussian draw, then a Bernoulli mask keeping each
            // value with probability sparse / num_outputs (shape[0]).
            let keep = sparse as f64 / shape.first().copied().unwrap_or(1).max(1) as f64;
            (0..count)
                .map(|_| {
                    let v = mean + std * normal(rng);
                    if rng.gen_bool(keep.min(1.0)) {
                        v
                    } else {
                        0.0
                    }
                })
                .collect()
        }
        Filler::Xavier(norm) => {
            let a = (3.0 / norm_n(norm, shape)).sqrt();
            (0..count).map(|_| uniform(rng, -a, a)).collect()
        }
        Filler::Msra(norm) => {
            let std = (2.0 / norm_n(norm, shape)).sqrt();
            (0..count).map(|_| std * normal(rng)).collect()
        }
        Filler::Bilinear => bilinear(shape),
    }
}

/// Caffe's bilinear filler: with f = ⌈k / 2⌉ and c = (2f − 1 − f mod 2) / 2f,
/// tap (y, x) of every k×k kernel is (1 − |x/f − c|)(1 − |y/f − c|). Caffe
/// takes square kernels; a k_h×k_w one gets each axis its own f and c.
fn bilinear(shape: &[usize]) -> Vec<f32> {
    let count: usize = shape.iter().product();
    let axis = |k: usize| {
        let f = k.div_ceil(2).max(1) as f32;
        let c = (2.0 * f - 1.0 - f % 2.0) / (2.0 * f);
        move |i: usize| 1.0 - (i as f32 / f - c).abs()
    };
    let (h, w) = match shape {
        [.., h, w] => (*h, *w),
        [w] => (1, *w),
        [] => (1, 1),
    };
    let (fy, fx) = (axis(h), axis(w));
    (0..count).map(|i| fx(i % w.max(1)) * fy((i / w.max(1)) % h.max(1))).collect()
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

    #[test]
    fn bilinear_is_caffes() {
        let mut rng = StdRng::seed_from_u64(1);
        // k = 4 (2x upsampling): f = 2, c = 0.75; taps 0.25, 0.75, 0.75, 0.25 per axis.
        let w = fill(&Filler::Bilinear, &[2, 1, 4, 4], &mut rng);
        let t = [0.25f32, 0.75, 0.75, 0.25];
        for (i, v) in w.iter().enumerate() {
            let want = t[i % 4] * t[(i / 4) % 4];
            assert!((v - want).abs() < 1e-6, "{i}: {v} vs {want}");
        }
        // k = 3: f = 2, c = 0.75 as well (Caffe's formula): taps 0.25, 0.75, 0.75.
        let w = fill(&Filler::Bilinear, &[1, 1, 3, 3], &mut rng);
        let t = [0.25f32, 0.75, 0.75];
        for (i, v) in w.iter().enumerate() {
            assert!((v - t[i % 3] * t[i / 3]).abs() < 1e-6, "{i}: {v}");
        }
    }

    #[test]
    fn sparse_gaussian_keeps_sparse_over_outputs() {
        let mut rng = StdRng::seed_from_u64(2);
        // 100 outputs, sparse 15: each value kept with probability 0.15.
        let w = fill(&Filler::SparseGaussian { mean: 0.0, std: 1.0, sparse: 15 }, &[100, 400], &mut rng);
        let kept = w.iter().filter(|v| **v != 0.0).count() as f32 / w.len() as f32;
        assert!((kept - 0.15).abs() < 0.01, "{kept}");
    }
}
