//! caffe-geeps' layer kernels (the PTX `examples/caffe/src/gpu/ptx_modules.rs` lists, as NVRTC
//! emitted them) run in the PTX interpreter on random ragged shapes and
//! several launch geometries (fewer threads than elements, so grid-stride
//! loops turn, and more, so threads idle), against plain Rust references
//! written from the `.cu` sources: bit-exact where the CUDA does exact IEEE
//! operations (the references add in the kernels' order), within a stated
//! number of ulps where it calls `expf`/`tanhf`/`logf`.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "../../examples/caffe/src/gpu/ptx_modules.rs"]
mod caffe_ptx;

const ACTIVATIONS: &str = caffe_ptx::module("activations");
const BIAS: &str = caffe_ptx::module("bias");
const IM2COL: &str = caffe_ptx::module("im2col");
const POOLING: &str = caffe_ptx::module("pooling");
const SGD: &str = caffe_ptx::module("sgd");
const SOFTMAX: &str = caffe_ptx::module("softmax_loss");

/// (blocks, threads per block) for `n` elements: too few threads, about enough, too many.
fn geometries(n: usize) -> [(u32, u32); 3] {
    let n = n.max(1) as u32;
    [(1, 32), (n.div_ceil(128).max(1), 128), (n.div_ceil(64) + 3, 64)]
}

fn floats(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(lo..hi)).collect()
}

/// Runs kernel `name` of `ptx` with `args` (device buffers already uploaded).
fn run(ptx: &str, name: &str, geo: (u32, u32), args: &[Arg]) {
    let m = load_ptx(ptx);
    ok(launch(function(m, name), (geo.0, 1, 1), (geo.1, 1, 1), 0, args));
}

#[track_caller]
fn exact(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.to_bits() == w.to_bits(), "{what}: element {i}: got {g:e}, want {w:e}");
    }
}

fn ulps(a: f32, b: f32) -> u32 {
    let key = |x: f32| if x.is_sign_negative() { -(x.to_bits() as i64 & 0x7FFF_FFFF) } else { x.to_bits() as i64 };
    (key(a) - key(b)).unsigned_abs() as u32
}

#[track_caller]
fn close(got: &[f32], want: &[f64], max_ulps: u32, what: &str) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let w = w as f32;
        assert!(ulps(g, w) <= max_ulps || (g - w).abs() < 1e-30, "{what}: element {i}: got {g:e}, want {w:e}");
    }
}

#[test]
fn activations_match_the_references() {
    open();
    let mut rng = StdRng::seed_from_u64(1);
    for n in [1usize, 31, 257, 1000] {
        for geo in geometries(n) {
            let x = floats(&mut rng, n, -6.0, 6.0);
            let g = floats(&mut rng, n, -2.0, 2.0);
            let slope = 0.1f32;
            let y = upload_f32(&x);
            run(ACTIVATIONS, "relu_forward", geo, &[Arg::U64(y), Arg::U32(n as u32), Arg::F32(slope)]);
            let want: Vec<f32> = x.iter().map(|&v| if v > 0.0 { v } else { v * slope }).collect();
            exact(&read_f32(y, n), &want, "relu_forward");
            let d = upload_f32(&g);
            run(
                ACTIVATIONS,
                "relu_backward",
                geo,
                &[Arg::U64(upload_f32(&x)), Arg::U64(d), Arg::U32(n as u32), Arg::F32(slope)],
            );
            let want: Vec<f32> = x.iter().zip(&g).map(|(&v, &g)| g * if v > 0.0 { 1.0 } else { slope }).collect();
            exact(&read_f32(d, n), &want, "relu_backward");

            let y = upload_f32(&x);
            run(ACTIVATIONS, "sigmoid_forward", geo, &[Arg::U64(y), Arg::U32(n as u32)]);
            let want: Vec<f64> = x.iter().map(|&v| 1.0 / (1.0 + (-(v as f64)).exp())).collect();
            close(&read_f32(y, n), &want, 4, "sigmoid_forward");
            let t = floats(&mut rng, n, 0.0, 1.0);
            let d = upload_f32(&g);
            run(ACTIVATIONS, "sigmoid_backward", geo, &[Arg::U64(upload_f32(&t)), Arg::U64(d), Arg::U32(n as u32)]);
            let want: Vec<f32> = t.iter().zip(&g).map(|(&t, &g)| g * (t * (1.0 - t))).collect();
            exact(&read_f32(d, n), &want, "sigmoid_backward");

            let y = upload_f32(&x);
            run(ACTIVATIONS, "tanh_forward", geo, &[Arg::U64(y), Arg::U32(n as u32)]);
            let want: Vec<f64> = x.iter().map(|&v| (v as f64).tanh()).collect();
            close(&read_f32(y, n), &want, 4, "tanh_forward");
            let t = floats(&mut rng, n, -1.0, 1.0);
            let d = upload_f32(&g);
            run(ACTIVATIONS, "tanh_backward", geo, &[Arg::U64(upload_f32(&t)), Arg::U64(d), Arg::U32(n as u32)]);
            let want: Vec<f32> = t.iter().zip(&g).map(|(&t, &g)| g * (1.0 - t * t)).collect();
            exact(&read_f32(d, n), &want, "tanh_backward");

            let (ratio, scale, seed) = (0.3f32, 1.0 / 0.7f32, rng.gen::<u64>());
            let (y, mask) = (upload_f32(&x), upload_f32(&vec![0.0; n]));
            run(
                ACTIVATIONS,
                "dropout_forward",
                geo,
                &[Arg::U64(y), Arg::U64(mask), Arg::U32(n as u32), Arg::F32(ratio), Arg::F32(scale), Arg::U64(seed)],
            );
            let m: Vec<f32> = (0..n as u64)
                .map(|i| {
                    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    z ^= z >> 31;
                    let u = ((z >> 40) as u32) as f32 * (1.0 / 16777216.0);
                    if u >= ratio {
                        scale
                    } else {
                        0.0
                    }
                })
                .collect();
            exact(&read_f32(mask, n), &m, "dropout_forward mask");
            exact(&read_f32(y, n), &x.iter().zip(&m).map(|(a, b)| a * b).collect::<Vec<_>>(), "dropout_forward");
            let d = upload_f32(&g);
            run(ACTIVATIONS, "dropout_backward", geo, &[Arg::U64(upload_f32(&m)), Arg::U64(d), Arg::U32(n as u32)]);
            exact(&read_f32(d, n), &g.iter().zip(&m).map(|(a, b)| a * b).collect::<Vec<_>>(), "dropout_backward");
        }
    }
}

#[test]
fn bias_kernels_match_the_references() {
    open();
    let mut rng = StdRng::seed_from_u64(2);
    for (num, channels, inner) in [(1usize, 1usize, 1usize), (3, 5, 7), (2, 20, 64), (5, 3, 300)] {
        let n = num * channels * inner;
        let (x, bias) = (floats(&mut rng, n, -1.0, 1.0), floats(&mut rng, channels, -1.0, 1.0));
        for geo in geometries(n) {
            let y = upload_f32(&x);
            let dims = [Arg::U32(num as u32), Arg::U32(channels as u32), Arg::U32(inner as u32)];
            run(BIAS, "add_bias", geo, &[&[Arg::U64(y), Arg::U64(upload_f32(&bias))][..], &dims].concat());
            let want: Vec<f32> = (0..n).map(|i| x[i] + bias[(i / inner) % channels]).collect();
            exact(&read_f32(y, n), &want, "add_bias");
        }
        // One block of 256 per channel: per-thread strided sums, then the shared-memory tree.
        let grad = upload_f32(&vec![0.0; channels]);
        let dims = [Arg::U32(num as u32), Arg::U32(channels as u32), Arg::U32(inner as u32)];
        run(
            BIAS,
            "bias_gradient",
            (channels as u32, 256),
            &[&[Arg::U64(upload_f32(&x)), Arg::U64(grad)][..], &dims].concat(),
        );
        let want: Vec<f32> = (0..channels)
            .map(|c| {
                let mut partial: Vec<f32> = (0..256)
                    .map(|t| {
                        let mut s = 0.0f32;
                        let mut j = t;
                        while j < num * inner {
                            s += x[((j / inner) * channels + c) * inner + j % inner];
                            j += 256;
                        }
                        s
                    })
                    .collect();
                let mut half = 128;
                while half > 0 {
                    for t in 0..half {
                        partial[t] += partial[t + half];
                    }
                    half /= 2;
                }
                partial[0]
            })
            .collect();
        exact(&read_f32(grad, channels), &want, "bias_gradient");
    }
}

/// Convolution geometry: channels, height, width, kh, kw, pad_h, pad_w, sh, sw, dil_h, dil_w.
type Conv = [i32; 11];

fn out_size(c: &Conv) -> (i32, i32) {
    let [_, h, w, kh, kw, ph, pw, sh, sw, dh, dw] = *c;
    ((h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1, (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1)
}

fn conv_args(c: &Conv) -> Vec<Arg> {
    let (oh, ow) = out_size(c);
    c.iter().chain(&[oh, ow]).map(|&v| Arg::U32(v as u32)).collect()
}

#[test]
fn im2col_and_col2im_match_the_references() {
    open();
    let mut rng = StdRng::seed_from_u64(3);
    let convs: [Conv; 4] = [
        [1, 5, 5, 3, 3, 0, 0, 1, 1, 1, 1],
        [3, 9, 7, 3, 2, 1, 0, 2, 1, 1, 1],
        [2, 12, 12, 5, 5, 2, 2, 1, 1, 1, 1],
        [2, 11, 10, 3, 3, 2, 1, 2, 3, 2, 1],
    ];
    for c in convs {
        let [ch, h, w, kh, kw, ph, pw, sh, sw, dh, dw] = c;
        let (oh, ow) = out_size(&c);
        let rows = (ch * kh * kw) as usize;
        let ld = (oh * ow) as usize + 3;
        let image = floats(&mut rng, (ch * h * w) as usize, -1.0, 1.0);
        let mut col_want = vec![7.0f32; rows * ld];
        for row in 0..rows as i32 {
            let (kj, ki, cc) = (row % kw, (row / kw) % kh, row / (kw * kh));
            for y in 0..oh {
                for x in 0..ow {
                    let (hh, ww) = (y * sh - ph + ki * dh, x * sw - pw + kj * dw);
                    let v = if hh >= 0 && hh < h && ww >= 0 && ww < w {
                        image[((cc * h + hh) * w + ww) as usize]
                    } else {
                        0.0
                    };
                    col_want[row as usize * ld + (y * ow + x) as usize] = v;
                }
            }
        }
        for geo in geometries(rows * (oh * ow) as usize) {
            let col = upload_f32(&vec![7.0; rows * ld]);
            let image_len = Arg::U32(image.len() as u32);
            let args = [
                &[Arg::U64(upload_f32(&image)), image_len, Arg::U64(col), Arg::U32(ld as u32), Arg::U32(1)][..],
                &conv_args(&c),
            ]
            .concat();
            run(IM2COL, "im2col", geo, &args);
            exact(&read_f32(col, rows * ld), &col_want, "im2col");
        }
        let col = floats(&mut rng, rows * ld, -1.0, 1.0);
        let base = floats(&mut rng, image.len(), -1.0, 1.0);
        let mut want = base.clone();
        for (i, out) in want.iter_mut().enumerate() {
            let i = i as i32;
            let (x, y, cc) = (i % w, (i / w) % h, i / (w * h));
            let mut v = *out;
            for ki in 0..kh {
                let hh = y + ph - ki * dh;
                if hh < 0 || hh % sh != 0 || hh / sh >= oh {
                    continue;
                }
                for kj in 0..kw {
                    let ww = x + pw - kj * dw;
                    if ww < 0 || ww % sw != 0 || ww / sw >= ow {
                        continue;
                    }
                    v += col[((cc * kh + ki) * kw + kj) as usize * ld + ((hh / sh) * ow + ww / sw) as usize];
                }
            }
            *out = v;
        }
        for geo in geometries(image.len()) {
            let img = upload_f32(&base);
            let run_of_one = [Arg::U64(img), Arg::U32(base.len() as u32), Arg::U32(1)];
            let args = [&[Arg::U64(upload_f32(&col)), Arg::U32(ld as u32)][..], &run_of_one, &conv_args(&c)].concat();
            run(IM2COL, "col2im", geo, &args);
            exact(&read_f32(img, base.len()), &want, "col2im");
        }
    }
}

struct Window {
    hs: i32,
    he: i32,
    ws: i32,
    we: i32,
    size: f32,
}

/// planes, height, width, out_h, out_w, kh, kw, sh, sw, pad_h, pad_w
type Pool = [i32; 11];

fn window(p: &Pool, ph: i32, pw: i32) -> Window {
    let [_, h, w, _, _, kh, kw, sh, sw, pad_h, pad_w] = *p;
    let (hs, ws) = (ph * sh - pad_h, pw * sw - pad_w);
    let (hep, wep) = ((hs + kh).min(h + pad_h), (ws + kw).min(w + pad_w));
    Window {
        size: ((hep - hs) * (wep - ws)) as f32,
        hs: hs.max(0),
        ws: ws.max(0),
        he: (hs + kh).min(h),
        we: (ws + kw).min(w),
    }
}

fn covering(h: i32, k: i32, s: i32, pad: i32, out: i32) -> (i32, i32) {
    (if h + pad < k { 0 } else { (h + pad - k) / s + 1 }, ((h + pad) / s + 1).min(out))
}

#[test]
fn pooling_matches_the_references() {
    open();
    let mut rng = StdRng::seed_from_u64(4);
    // (planes, height, width, kh, kw, sh, sw, pad_h, pad_w); outputs as Caffe's ceil mode.
    for [planes, h, w, kh, kw, sh, sw, pad_h, pad_w] in [
        [1, 4, 4, 2, 2, 2, 2, 0, 0],
        [3, 7, 9, 3, 3, 2, 2, 1, 1],
        [4, 12, 10, 3, 2, 1, 2, 0, 1],
        [2, 24, 24, 2, 2, 2, 2, 0, 0],
    ] {
        let oh = ((h + 2 * pad_h - kh) as f32 / sh as f32).ceil() as i32 + 1;
        let ow = ((w + 2 * pad_w - kw) as f32 / sw as f32).ceil() as i32 + 1;
        let oh = if pad_h > 0 && (oh - 1) * sh >= h + pad_h { oh - 1 } else { oh };
        let ow = if pad_w > 0 && (ow - 1) * sw >= w + pad_w { ow - 1 } else { ow };
        let p: Pool = [planes, h, w, oh, ow, kh, kw, sh, sw, pad_h, pad_w];
        let dims: Vec<Arg> = p.iter().map(|&v| Arg::U32(v as u32)).collect();
        let (nin, nout) = ((planes * h * w) as usize, (planes * oh * ow) as usize);
        // Ties among small integers exercise the strict `>` of the argmax.
        let x: Vec<f32> = (0..nin).map(|_| rng.gen_range(-4i32..4) as f32).collect();
        let (mut y_max, mut mask, mut y_avg) = (vec![0f32; nout], vec![0f32; nout], vec![0f32; nout]);
        for i in 0..nout as i32 {
            let (pw, ph, plane) = (i % ow, (i / ow) % oh, i / (ow * oh));
            let win = window(&p, ph, pw);
            let xp = &x[(plane * h * w) as usize..];
            let (mut best, mut at) = (f32::NEG_INFINITY, win.hs * w + win.ws);
            let mut sum = 0.0f32;
            for r in win.hs..win.he {
                let mut row = 0.0f32;
                for c in win.ws..win.we {
                    let v = xp[(r * w + c) as usize];
                    if v > best {
                        best = v;
                        at = r * w + c;
                    }
                    row += v;
                }
                sum += row;
            }
            y_max[i as usize] = best;
            mask[i as usize] = at as f32;
            y_avg[i as usize] = sum / win.size;
        }
        let dy = floats(&mut rng, nout, -1.0, 1.0);
        let (mut dx_max, mut dx_avg) = (vec![0f32; nin], vec![0f32; nin]);
        for i in 0..nin as i32 {
            let (c, r, plane) = (i % w, (i / w) % h, i / (w * h));
            let (ph0, ph1) = covering(r, kh, sh, pad_h, oh);
            let (pw0, pw1) = covering(c, kw, sw, pad_w, ow);
            let off = (plane * oh * ow) as usize;
            let here = (r * w + c) as f32;
            let (mut gm, mut ga) = (0f32, 0f32);
            for ph in ph0..ph1 {
                for pw in pw0..pw1 {
                    let o = off + (ph * ow + pw) as usize;
                    if mask[o] == here {
                        gm += dy[o];
                    }
                    let win = window(&p, ph, pw);
                    if r >= win.hs && r < win.he && c >= win.ws && c < win.we {
                        ga += dy[o] / win.size;
                    }
                }
            }
            dx_max[i as usize] = gm;
            dx_avg[i as usize] = ga;
        }
        for geo in geometries(nout) {
            let (y, m) = (upload_f32(&vec![0.0; nout]), upload_f32(&vec![0.0; nout]));
            run(
                POOLING,
                "max_pool_forward",
                geo,
                &[&[Arg::U64(upload_f32(&x)), Arg::U64(y), Arg::U64(m)][..], &dims].concat(),
            );
            exact(&read_f32(y, nout), &y_max, "max_pool_forward");
            exact(&read_f32(m, nout), &mask, "max_pool_forward mask");
            let y = upload_f32(&vec![0.0; nout]);
            run(POOLING, "avg_pool_forward", geo, &[&[Arg::U64(upload_f32(&x)), Arg::U64(y)][..], &dims].concat());
            exact(&read_f32(y, nout), &y_avg, "avg_pool_forward");
        }
        for geo in geometries(nin) {
            let dx = upload_f32(&vec![9.0; nin]);
            let args = [&[Arg::U64(upload_f32(&dy)), Arg::U64(upload_f32(&mask)), Arg::U64(dx)][..], &dims].concat();
            run(POOLING, "max_pool_backward", geo, &args);
            exact(&read_f32(dx, nin), &dx_max, "max_pool_backward");
            let dx = upload_f32(&vec![9.0; nin]);
            run(POOLING, "avg_pool_backward", geo, &[&[Arg::U64(upload_f32(&dy)), Arg::U64(dx)][..], &dims].concat());
            exact(&read_f32(dx, nin), &dx_avg, "avg_pool_backward");
        }
    }
}

#[test]
fn softmax_loss_and_accuracy_match_the_references() {
    open();
    let mut rng = StdRng::seed_from_u64(5);
    for (num, classes) in [(1usize, 2usize), (7, 10), (64, 10), (33, 100)] {
        let z = floats(&mut rng, num * classes, -8.0, 8.0);
        // The last label is out of range: clamped to the last class.
        let mut labels: Vec<f32> = (0..num).map(|_| rng.gen_range(0..classes) as f32).collect();
        labels[num - 1] = classes as f32 + 3.0;
        let label = |i: usize| (labels[i] as usize).min(classes - 1);
        let mut prob = vec![0f64; num * classes];
        let mut loss = vec![0f64; num];
        for i in 0..num {
            let zi = &z[i * classes..(i + 1) * classes];
            let m = zi.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
            let e: Vec<f64> = zi.iter().map(|&v| (v as f64 - m).exp()).collect();
            let s: f64 = e.iter().sum();
            for k in 0..classes {
                prob[i * classes + k] = e[k] / s;
            }
            loss[i] = -(prob[i * classes + label(i)].max(1.17549435e-38)).ln();
        }
        for geo in geometries(num) {
            let (p, l) = (upload_f32(&vec![0.0; num * classes]), upload_f32(&vec![0.0; num]));
            let args = [
                Arg::U64(upload_f32(&z)),
                Arg::U64(upload_f32(&labels)),
                Arg::U64(p),
                Arg::U64(l),
                Arg::U32(num as u32),
                Arg::U32(classes as u32),
            ];
            run(SOFTMAX, "softmax_loss_forward", geo, &args);
            // expf and the sum's rounding: a few ulps on p; logf of it: a few more on the loss.
            let got = read_f32(p, num * classes);
            for (i, (&g, &w)) in got.iter().zip(&prob).enumerate() {
                assert!((g as f64 - w).abs() <= 1e-6 * w + 1e-37, "softmax p {i}: got {g:e}, want {w:e}");
            }
            let got = read_f32(l, num);
            for (i, (&g, &w)) in got.iter().zip(&loss).enumerate() {
                assert!((g as f64 - w).abs() <= 1e-5 * w.abs() + 1e-6, "softmax loss {i}: got {g:e}, want {w:e}");
            }
        }
        let p32: Vec<f32> = prob.iter().map(|&v| v as f32).collect();
        let scale = 0.25f32;
        let want: Vec<f32> = (0..num * classes)
            .map(|i| scale * (p32[i] - if i % classes == label(i / classes) { 1.0 } else { 0.0 }))
            .collect();
        for geo in geometries(num * classes) {
            let dz = upload_f32(&vec![0.0; num * classes]);
            let args = [
                Arg::U64(upload_f32(&p32)),
                Arg::U64(upload_f32(&labels)),
                Arg::U64(dz),
                Arg::U32(num as u32),
                Arg::U32(classes as u32),
                Arg::F32(scale),
            ];
            run(SOFTMAX, "softmax_loss_backward", geo, &args);
            exact(&read_f32(dz, num * classes), &want, "softmax_loss_backward");
        }
        for top_k in [1u32, 3] {
            let want: Vec<f32> = (0..num)
                .map(|i| {
                    let zi = &z[i * classes..(i + 1) * classes];
                    let better = zi.iter().filter(|&&v| v >= zi[label(i)]).count() as u32;
                    if better.wrapping_sub(1) < top_k {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            for geo in geometries(num) {
                let c = upload_f32(&vec![5.0; num]);
                let args = [
                    Arg::U64(upload_f32(&z)),
                    Arg::U64(upload_f32(&labels)),
                    Arg::U64(c),
                    Arg::U32(num as u32),
                    Arg::U32(classes as u32),
                    Arg::U32(top_k),
                ];
                run(SOFTMAX, "accuracy", geo, &args);
                exact(&read_f32(c, num), &want, "accuracy");
            }
        }
    }
}

#[test]
fn sgd_step_matches_the_solver() {
    open();
    let mut rng = StdRng::seed_from_u64(6);
    for n in [1usize, 100, 1025] {
        let (mut w, g, h) =
            (floats(&mut rng, n, -1.0, 1.0), floats(&mut rng, n, -1.0, 1.0), floats(&mut rng, n, -1.0, 1.0));
        w[0] = 0.0; // sign(0) = 0 under L1
        let (momentum, rate, decay, factor, scale) = (0.9f32, 0.01f32, 0.0005f32, 0.5f32, 0.25f32);
        for (l1, nesterov) in [(false, false), (true, false), (false, true)] {
            // The CPU solver's arithmetic (solver/gradient.rs prepare, solver/sgd.rs), unfused.
            let (mut hist, mut delta) = (h.clone(), vec![0.0f32; n]);
            for i in 0..n {
                let reg = if l1 { ((0.0 < w[i]) as i32 - (w[i] < 0.0) as i32) as f32 } else { w[i] };
                let gi = scale * (g[i] * factor + decay * reg);
                let old = hist[i];
                hist[i] = momentum * old + rate * gi;
                delta[i] = -(if nesterov { (1.0 + momentum) * hist[i] - momentum * old } else { hist[i] });
            }
            for geo in geometries(n) {
                let (gd, hd) = (upload_f32(&g), upload_f32(&h));
                let args = [
                    Arg::U64(upload_f32(&w)),
                    Arg::U64(gd),
                    Arg::U64(hd),
                    Arg::U32(n as u32),
                    Arg::F32(factor),
                    Arg::F32(decay),
                    Arg::U32(l1 as u32),
                    Arg::F32(scale),
                    Arg::F32(rate),
                    Arg::F32(momentum),
                    Arg::U32(nesterov as u32),
                ];
                run(SGD, "sgd_step", geo, &args);
                exact(&read_f32(hd, n), &hist, "sgd history");
                exact(&read_f32(gd, n), &delta, "sgd delta");
            }
        }
    }
}

#[test]
fn count_nonfinite_counts_per_block() {
    open();
    let mut rng = StdRng::seed_from_u64(8);
    for n in [1usize, 300, 5000] {
        let mut x = floats(&mut rng, n, -1.0, 1.0);
        let bad = [0, n / 2, n - 1];
        x[bad[0]] = f32::NAN;
        x[bad[1]] = f32::INFINITY;
        x[bad[2]] = f32::NEG_INFINITY;
        let want = bad.iter().collect::<std::collections::BTreeSet<_>>().len() as f32;
        for blocks in [1u32, 3, 64] {
            let counts = upload_f32(&vec![0.0; blocks as usize]);
            run(
                SGD,
                "count_nonfinite",
                (blocks, 256),
                &[Arg::U64(upload_f32(&x)), Arg::U32(n as u32), Arg::U64(counts)],
            );
            let sum: f32 = read_f32(counts, blocks as usize).iter().sum();
            assert_eq!(sum, want, "{n} values over {blocks} blocks");
        }
    }
}
