//! The update values of Caffe's adaptive solvers, AdaGrad, RMSProp,
//! AdaDelta and Adam (their ComputeUpdateValue): `g` holds the prepared
//! gradient and becomes what Caffe subtracts from the parameters; the
//! histories are Caffe's `history_` blobs (two for AdaDelta and Adam). It
//! owns those rules; it must never regularize or clip.

/// h ← h + g²; update = rate·g / (√h + δ).
pub fn adagrad(g: &mut [f32], h: &mut [f32], rate: f32, delta: f32) {
    for (gi, hi) in g.iter_mut().zip(h) {
        *hi += *gi * *gi;
        *gi = rate * (*gi / (hi.sqrt() + delta));
    }
}

/// h ← (1 − decay)·g² + decay·h; update = rate·g / (√h + δ).
pub fn rmsprop(g: &mut [f32], h: &mut [f32], rate: f32, delta: f32, decay: f32) {
    for (gi, hi) in g.iter_mut().zip(h) {
        *hi = (1.0 - decay) * *gi * *gi + decay * *hi;
        *gi = rate * (*gi / (hi.sqrt() + delta));
    }
}

/// h ← (1 − m)·g² + m·h; u = g·√((h2 + δ) / (h + δ));
/// h2 ← (1 − m)·u² + m·h2; update = rate·u.
pub fn adadelta(g: &mut [f32], h: &mut [f32], h2: &mut [f32], rate: f32, delta: f32, m: f32) {
    for ((gi, hi), h2i) in g.iter_mut().zip(h).zip(h2) {
        *hi = (1.0 - m) * *gi * *gi + m * *hi;
        let u = *gi * ((*h2i + delta) / (*hi + delta)).sqrt();
        *h2i = (1.0 - m) * u * u + m * *h2i;
        *gi = rate * u;
    }
}

/// At step t (from 1): m ← (1 − β1)·g + β1·m; v ← (1 − β2)·g² + β2·v;
/// update = rate·√(1 − β2^t) / (1 − β1^t) · m / (√v + ε).
pub fn adam(g: &mut [f32], m: &mut [f32], v: &mut [f32], rate: f32, (b1, b2): (f32, f32), eps: f32, t: u64) {
    // Caffe computes the correction in double.
    let t = t as f64;
    let correction = ((1.0 - (b2 as f64).powf(t)).sqrt() / (1.0 - (b1 as f64).powf(t))) as f32;
    for ((gi, mi), vi) in g.iter_mut().zip(m).zip(v) {
        *mi = (1.0 - b1) * *gi + b1 * *mi;
        *vi = (1.0 - b2) * *gi * *gi + b2 * *vi;
        *gi = rate * correction * (*mi / (vi.sqrt() + eps));
    }
}

#[cfg(test)]
mod tests {
    //! Expected values worked out by hand from Caffe's formulas for the
    //! gradients 1, 2, −1 (rate 0.1, δ = 1e−8 unless said).
    use super::*;

    /// Within float rounding: Caffe's solvers run in f32 too (1 − 0.999 is
    /// already 1.3e−5 off there).
    fn close(got: f32, want: f64) {
        assert!((got as f64 - want).abs() <= 3e-5 * want.abs().max(1e-3), "{got} vs {want}");
    }

    const GRADS: [f32; 3] = [1.0, 2.0, -1.0];

    #[test]
    fn adagrad_divides_by_the_root_of_the_summed_squares() {
        // h = 1, 5, 6; update = 0.1·g/√h = 0.1, 0.2/√5, −0.1/√6.
        let want = [0.1, 0.2 / 5f64.sqrt(), -0.1 / 6f64.sqrt()];
        let mut h = [0.0];
        for (g0, w) in GRADS.iter().zip(want) {
            let mut g = [*g0];
            adagrad(&mut g, &mut h, 0.1, 1e-8);
            close(g[0], w);
        }
        close(h[0], 6.0);
        // δ keeps a zero gradient on a zero history finite.
        let (mut g, mut h) = ([0.0], [0.0]);
        adagrad(&mut g, &mut h, 0.1, 1e-8);
        assert_eq!(g[0], 0.0);
    }

    #[test]
    fn rmsprop_divides_by_the_root_of_the_running_mean_square() {
        // decay 0.9: h = 0.1, 0.09 + 0.4 = 0.49, 0.441 + 0.1 = 0.541;
        // update = 0.1·g/√h.
        let want = [0.1 / 0.1f64.sqrt(), 0.2 / 0.7, -0.1 / 0.541f64.sqrt()];
        let mut h = [0.0];
        for (g0, w) in GRADS.iter().zip(want) {
            let mut g = [*g0];
            rmsprop(&mut g, &mut h, 0.1, 1e-8, 0.9);
            close(g[0], w);
        }
        close(h[0], 0.541);
    }

    #[test]
    fn adadelta_scales_by_the_ratio_of_update_and_gradient_rms() {
        // momentum 0.5, δ = 0.01, rate 1.
        // t1: h = 0.5; u = 1·√(0.01/0.51) = 0.140028008; h2 = 0.5·u² = 0.009803922.
        // t2: h = 0.25 + 2 = 2.25; u = 2·√((0.009803922 + 0.01)/2.26) = 0.187219627;
        //     h2 = 0.5·u² + 0.5·0.009803922 = 0.022427555.
        // t3: h = 0.5 + 1.125 = 1.625; u = −√((0.022427555 + 0.01)/1.635) = −0.140830987.
        let u1 = (0.01f64 / 0.51).sqrt();
        let h2_1 = 0.5 * u1 * u1;
        let u2 = 2.0 * ((h2_1 + 0.01) / 2.26).sqrt();
        let h2_2 = 0.5 * u2 * u2 + 0.5 * h2_1;
        let u3 = -((h2_2 + 0.01) / 1.635).sqrt();
        assert!((u1 - 0.140_028_008).abs() < 1e-8 && (u2 - 0.187_219_627).abs() < 1e-8);
        assert!((u3 + 0.140_830_987).abs() < 1e-8);
        let (mut h, mut h2) = ([0.0], [0.0]);
        for (g0, w) in GRADS.iter().zip([u1, u2, u3]) {
            let mut g = [*g0];
            adadelta(&mut g, &mut h, &mut h2, 1.0, 0.01, 0.5);
            close(g[0], w);
        }
        close(h[0], 1.625);
        // The learning rate scales the step, not the history.
        let (mut h, mut h2, mut g) = ([0.0], [0.0], [1.0]);
        adadelta(&mut g, &mut h, &mut h2, 0.5, 0.01, 0.5);
        close(g[0], 0.5 * u1);
        close(h2[0], h2_1);
    }

    #[test]
    fn adam_corrects_the_bias_of_its_moments() {
        // β1 0.9, β2 0.999, rate 0.1.
        // t1: m = 0.1, v = 0.001, c = √0.001/0.1; update = 0.1·c·0.1/√0.001 = 0.1.
        // t2: m = 0.09 + 0.2 = 0.29, v = 0.000999 + 0.004 = 0.004999,
        //     c = √(1 − 0.998001)/(1 − 0.81) = √0.001999/0.19.
        // t3: m = 0.261 − 0.1 = 0.161, v = 0.004994001 + 0.001 = 0.005994001,
        //     c = √(1 − 0.997002999)/(1 − 0.729).
        let u2 = 0.1 * (0.001999f64.sqrt() / 0.19) * 0.29 / 0.004999f64.sqrt();
        let u3 = 0.1 * ((1.0 - 0.997_002_999f64).sqrt() / 0.271) * 0.161 / 0.005_994_001f64.sqrt();
        let (mut m, mut v) = ([0.0], [0.0]);
        for (t, (g0, w)) in GRADS.iter().zip([0.1, u2, u3]).enumerate() {
            let mut g = [*g0];
            adam(&mut g, &mut m, &mut v, 0.1, (0.9, 0.999), 1e-8, t as u64 + 1);
            close(g[0], w);
        }
        close(m[0], 0.161);
        close(v[0], 0.005_994_001);
    }
}
