//! The update values of SGD with momentum and of Nesterov's accelerated
//! gradient (Caffe's SGDSolver and NesterovSolver ComputeUpdateValue): `g`
//! holds the prepared gradient and becomes what Caffe subtracts from the
//! parameters. It owns those two rules; it must never regularize or clip.

/// h ← momentum·h + rate·g; update = h.
pub fn momentum(g: &mut [f32], h: &mut [f32], rate: f32, momentum: f32) {
    for (gi, hi) in g.iter_mut().zip(h) {
        *hi = momentum * *hi + rate * *gi;
        *gi = *hi;
    }
}

/// h_new ← momentum·h + rate·g; update = (1 + momentum)·h_new − momentum·h
/// (Caffe steps back the old momentum and over-steps the new).
pub fn nesterov(g: &mut [f32], h: &mut [f32], rate: f32, momentum: f32) {
    for (gi, hi) in g.iter_mut().zip(h) {
        let old = *hi;
        *hi = momentum * old + rate * *gi;
        *gi = (1.0 + momentum) * *hi - momentum * old;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f32, want: f64) {
        assert!((got as f64 - want).abs() < 1e-6, "{got} vs {want}");
    }

    #[test]
    fn momentum_accumulates_the_scaled_gradients() {
        // rate 0.1, momentum 0.9, gradients 1, 2, -1:
        // h = 0.1, 0.09 + 0.2 = 0.29, 0.261 − 0.1 = 0.161.
        let mut h = [0.0];
        for (g0, want) in [(1.0, 0.1), (2.0, 0.29), (-1.0, 0.161)] {
            let mut g = [g0];
            momentum(&mut g, &mut h, 0.1, 0.9);
            close(g[0], want);
            close(h[0], want);
        }
    }

    #[test]
    fn nesterov_looks_ahead() {
        // rate 0.1, momentum 0.9, gradients 1, 2, -1:
        // h: 0.1, 0.29, 0.161; update = 1.9·h_new − 0.9·h_old:
        // 0.19, 0.551 − 0.09 = 0.461, 0.3059 − 0.261 = 0.0449.
        let mut h = [0.0];
        for (g0, want_h, want) in [(1.0, 0.1, 0.19), (2.0, 0.29, 0.461), (-1.0, 0.161, 0.0449)] {
            let mut g = [g0];
            nesterov(&mut g, &mut h, 0.1, 0.9);
            close(h[0], want_h);
            close(g[0], want);
        }
    }
}
