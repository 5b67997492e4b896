//! The trainer's native kernels (`caffe_geeps::gpu::emulated`, registered
//! with the emulated driver, run under `GEEPS_CUDA_EMU_KERNELS=native`) give
//! the same bits as the emulator's PTX interpreter for every kernel they
//! run natively, on random ragged shapes (padding, strides and
//! dilations for im2col/col2im and pooling; L1/L2 and Nesterov for the SGD
//! step; mirrored crops and every mean kind for the transform) and several
//! launch geometries (fewer threads than elements, about enough, more;
//! reduction blocks of 256, 96 and 7 threads). Each engine runs every case
//! in its own child process through `cuLaunchKernel`, and the parent
//! compares all the buffers afterwards. A native fault is checked too, so
//! the comparison cannot pass by both runs using the interpreter. The
//! target is `harness = false`: `main` runs a child's helper when the
//! binary is started as one, and the tests otherwise.

// The emulator's own test helpers: the driver linked in, called directly.
#[path = "../src/gpu/ptx_modules.rs"]
mod caffe_ptx;
#[path = "../../../cuda-emu/tests/common/mod.rs"]
mod emulator;

use std::collections::BTreeMap;
use std::process::ExitCode;

use emulator::*;
use geeps_testkit::kernel_inputs::kernel_floats;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MODULES: [&str; 9] = [
    caffe_ptx::module("activations"),
    caffe_ptx::module("bias"),
    caffe_ptx::module("im2col"),
    caffe_ptx::module("pooling"),
    caffe_ptx::module("sgd"),
    caffe_ptx::module("transform"),
    caffe_ptx::module("eltwise"),
    caffe_ptx::module("scale"),
    caffe_ptx::module("prelu"),
];
const CONCAT: &str = caffe_ptx::module("concat");
const ACT: usize = 0;
const BIAS: usize = 1;
const IM2COL: usize = 2;
const POOL: usize = 3;
const SGD: usize = 4;
const TRANSFORM: usize = 5;
const ELTWISE: usize = 6;
const SCALE: usize = 7;
const PRELU: usize = 8;
const COPY: usize = 9;

/// A kernel argument: a device buffer (uploaded, and read back after the launch) or a scalar.
#[derive(Clone)]
enum In {
    Buf(Vec<u32>),
    S(Arg),
}

struct Case {
    module: usize,
    name: &'static str,
    geo: (u32, u32),
    args: Vec<In>,
}

fn buf(v: &[f32]) -> In {
    In::Buf(v.iter().map(|f| f.to_bits()).collect())
}
fn u(v: u32) -> In {
    In::S(Arg::U32(v))
}
fn int(v: i32) -> In {
    In::S(Arg::U32(v as u32))
}
fn f(v: f32) -> In {
    In::S(Arg::F32(v))
}

/// (blocks, threads per block) for `n` elements: too few threads, about enough, too many.
fn geometries(n: usize) -> [(u32, u32); 3] {
    let n = n.max(1) as u32;
    [(1, 32), (n.div_ceil(128).max(1), 128), (n.div_ceil(64) + 3, 64)]
}

fn push_all(out: &mut Vec<Case>, module: usize, name: &'static str, n: usize, args: Vec<In>) {
    for geo in geometries(n) {
        out.push(Case { module, name, geo, args: args.clone() });
    }
}

fn elementwise(rng: &mut StdRng, out: &mut Vec<Case>) {
    for n in [1usize, 33, 300, 1025] {
        let (x, y, z) = (kernel_floats(rng, n), kernel_floats(rng, n), kernel_floats(rng, n));
        let unit: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let nn = u(n as u32);
        for slope in [0.0f32, 0.1] {
            push_all(out, ACT, "relu_forward", n, vec![buf(&x), nn.clone(), f(slope)]);
            push_all(out, ACT, "relu_backward", n, vec![buf(&x), buf(&y), nn.clone(), f(slope)]);
        }
        push_all(out, ACT, "sigmoid_backward", n, vec![buf(&unit), buf(&y), nn.clone()]);
        push_all(out, ACT, "tanh_backward", n, vec![buf(&unit), buf(&y), nn.clone()]);
        for ratio in [0.0f32, 0.5] {
            let seed = In::S(Arg::U64(rng.gen()));
            let args = vec![buf(&x), buf(&y), nn.clone(), f(ratio), f(1.0 / (1.0 - ratio)), seed];
            push_all(out, ACT, "dropout_forward", n, args);
        }
        let mask: Vec<f32> = (0..n).map(|i| [0.0, 2.0][i % 3 / 2]).collect();
        push_all(out, ACT, "dropout_backward", n, vec![buf(&mask), buf(&y), nn.clone()]);
        push_all(out, ELTWISE, "add_scaled", n, vec![buf(&x), buf(&y), nn.clone(), f(0.75)]);
        push_all(out, ELTWISE, "eltwise_scale_copy", n, vec![buf(&x), buf(&y), nn.clone(), f(-1.5)]);
        push_all(out, ELTWISE, "eltwise_multiply", n, vec![buf(&x), buf(&y), nn.clone()]);
        let ks: Vec<f32> = (0..n).map(|i| (i % 4) as f32).collect();
        push_all(out, ELTWISE, "eltwise_max_forward", n, vec![buf(&x), buf(&ks), buf(&y), nn.clone(), u(2)]);
        push_all(out, ELTWISE, "eltwise_max_backward", n, vec![buf(&x), buf(&y), buf(&ks), nn.clone(), u(3)]);
        let mut weights = z.clone();
        for w in weights.iter_mut().step_by(5) {
            *w = 0.0;
        }
        for (l1, nesterov) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let args = vec![
                buf(&weights),
                buf(&x),
                buf(&unit),
                nn.clone(),
                f(rng.gen_range(0.5..2.0)),
                f(5e-4),
                u(l1),
                f(0.125),
                f(0.01),
                f(0.9),
                u(nesterov),
            ];
            push_all(out, SGD, "sgd_step", n, args);
        }
        let mut odd = x.clone();
        for (i, v) in odd.iter_mut().enumerate().step_by(7) {
            *v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][i % 3];
        }
        for (blocks, threads) in [(1, 256), (3, 256), (2, 100), (4, 33)] {
            let args = vec![buf(&odd), nn.clone(), buf(&vec![0.0; blocks as usize])];
            out.push(Case { module: SGD, name: "count_nonfinite", geo: (blocks, threads), args });
        }
    }
}

fn bias_and_copies(rng: &mut StdRng, out: &mut Vec<Case>) {
    for (num, channels, inner) in [(1, 1, 1), (3, 5, 7), (2, 20, 1), (4, 3, 64), (1, 2, 300)] {
        let n = num * channels * inner;
        let (y, b) = (kernel_floats(rng, n), kernel_floats(rng, channels));
        let dims = [u(num as u32), u(channels as u32), u(inner as u32)];
        let mut args = vec![buf(&y), buf(&b)];
        args.extend(dims.iter().cloned());
        push_all(out, BIAS, "add_bias", n, args);
        for threads in [256, 96, 7] {
            let mut args = vec![buf(&y), buf(&vec![0.0; channels])];
            args.extend(dims.iter().cloned());
            out.push(Case { module: BIAS, name: "bias_gradient", geo: (channels as u32, threads), args });
        }
        let (rows, len, src_ld, dst_ld) = (num * channels, inner, inner + rng.gen_range(0..3), inner + 2);
        let (src, dst) = (kernel_floats(rng, rows * src_ld), kernel_floats(rng, rows * dst_ld));
        let args = vec![buf(&src), u(src_ld as u32), buf(&dst), u(dst_ld as u32), u(rows as u32), u(len as u32)];
        push_all(out, COPY, "copy_rows", rows * len, args);
        let params = kernel_floats(rng, 2 * channels);
        for has_bias in [0, 1] {
            let mut args = vec![buf(&y), buf(&vec![0.0; n]), buf(&params)];
            args.extend(dims.iter().cloned());
            args.push(u(has_bias));
            push_all(out, SCALE, "scale_forward", n, args);
            let x = kernel_floats(rng, n);
            for threads in [256, 96, 7] {
                let mut args = vec![buf(&x), buf(&y), buf(&params), buf(&vec![0.0; 2 * channels])];
                args.extend(dims.iter().cloned());
                args.push(u(has_bias));
                out.push(Case { module: SCALE, name: "scale_backward", geo: (channels as u32, threads), args });
            }
        }
        let slopes = kernel_floats(rng, channels);
        for shared in [0, 1] {
            let args = vec![
                buf(&y),
                buf(&vec![0.0; n]),
                buf(&slopes),
                u(n as u32),
                u(channels as u32),
                u(inner as u32),
                u(shared),
            ];
            push_all(out, PRELU, "prelu_forward", n, args);
            let x = kernel_floats(rng, n);
            for threads in [256, 96, 7] {
                let mut args = vec![buf(&x), buf(&y), buf(&slopes), buf(&vec![0.0; channels])];
                args.extend(dims.iter().cloned());
                args.push(u(shared));
                out.push(Case { module: PRELU, name: "prelu_backward", geo: (channels as u32, threads), args });
            }
        }
        for (blocks, threads) in [(1, 256), (2, 33)] {
            let args = vec![buf(&y), u(n as u32), buf(&[0.0])];
            out.push(Case { module: PRELU, name: "prelu_sum", geo: (blocks, threads), args });
        }
    }
}

fn convolutions(rng: &mut StdRng, out: &mut Vec<Case>) {
    let mut made = 0;
    while made < 14 {
        let (c, h, w) = (rng.gen_range(1..4), rng.gen_range(1..10), rng.gen_range(1..10));
        let (kh, kw) = (rng.gen_range(1..4), rng.gen_range(1..4));
        let (ph, pw, sh, sw) = (rng.gen_range(0..3), rng.gen_range(0..3), rng.gen_range(1..4), rng.gen_range(1..4));
        let (dh, dw) = if made % 3 == 0 { (rng.gen_range(2..4), rng.gen_range(1..3)) } else { (1, 1) };
        let oh = (h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1;
        let ow = (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
        if h + 2 * ph < dh * (kh - 1) + 1 || w + 2 * pw < dw * (kw - 1) + 1 {
            continue;
        }
        made += 1;
        // A run of 1 to 3 images, some with a gap between them, some columns with spare room.
        let count = rng.gen_range(1..4usize);
        let image_len = (c * h * w) as usize;
        let stride = image_len + if made % 2 == 0 { rng.gen_range(0..3) } else { 0 };
        let ld = count * (oh * ow) as usize + rng.gen_range(0..3);
        let rows = (c * kh * kw) as usize;
        let geometry = [c, h, w, kh, kw, ph, pw, sh, sw, dh, dw, oh, ow].map(int);
        let images = kernel_floats(rng, (count - 1) * stride + image_len);
        let col = kernel_floats(rng, rows * ld);
        let mut args = vec![buf(&images), u(stride as u32), buf(&col), u(ld as u32), u(count as u32)];
        args.extend(geometry.iter().cloned());
        push_all(out, IM2COL, "im2col", rows * count * (oh * ow) as usize, args);
        let mut args = vec![buf(&col), u(ld as u32), buf(&images), u(stride as u32), u(count as u32)];
        args.extend(geometry.iter().cloned());
        push_all(out, IM2COL, "col2im", image_len * count, args);
    }
    for (a, b, inner) in [(1, 1, 1), (3, 5, 7), (64, 20, 9), (2, 50, 1)] {
        let src = kernel_floats(rng, a * b * inner);
        let args = vec![buf(&src), buf(&vec![0.0; a * b * inner]), u(a as u32), u(b as u32), u(inner as u32)];
        push_all(out, IM2COL, "swap_outer", a * b * inner, args);
    }
}

fn pooling(rng: &mut StdRng, out: &mut Vec<Case>) {
    for _ in 0..12 {
        let (planes, h, w) = (rng.gen_range(1..5), rng.gen_range(1..10), rng.gen_range(1..10));
        let (kh, kw) = (rng.gen_range(1..4), rng.gen_range(1..4));
        let (sh, sw) = (rng.gen_range(1..3), rng.gen_range(1..3));
        let (ph, pw) = (rng.gen_range(0..kh), rng.gen_range(0..kw));
        // Caffe's output size: ceil, then the last window must start inside the padded input.
        let size = |x: i32, k: i32, s: i32, p: i32| {
            let mut o = (x + 2 * p - k + s - 1).max(0) / s + 1;
            if p > 0 && (o - 1) * s >= x + p {
                o -= 1;
            }
            o
        };
        let (oh, ow) = (size(h, kh, sh, ph), size(w, kw, sw, pw));
        let geometry = [planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw].map(int);
        let (ins, outs) = ((planes * h * w) as usize, (planes * oh * ow) as usize);
        let mut x = kernel_floats(rng, ins);
        for v in x.iter_mut().step_by(4) {
            *v = 1.0; // ties: the first maximum must win
        }
        let (y, dy) = (kernel_floats(rng, outs), kernel_floats(rng, outs));
        let mask: Vec<f32> = (0..outs).map(|_| rng.gen_range(0..h * w) as f32).collect();
        let with = |mut front: Vec<In>| {
            front.extend(geometry.iter().cloned());
            front
        };
        push_all(out, POOL, "max_pool_forward", outs, with(vec![buf(&x), buf(&y), buf(&y)]));
        push_all(out, POOL, "avg_pool_forward", outs, with(vec![buf(&x), buf(&y)]));
        push_all(out, POOL, "max_pool_backward", ins, with(vec![buf(&dy), buf(&mask), buf(&x)]));
        push_all(out, POOL, "avg_pool_backward", ins, with(vec![buf(&dy), buf(&x)]));
    }
}

fn transforms(rng: &mut StdRng, out: &mut Vec<Case>) {
    for _ in 0..6 {
        let (num, c, h, w) = (rng.gen_range(1..4), rng.gen_range(1..4), rng.gen_range(1..9), rng.gen_range(1..9));
        let (oh, ow) = (rng.gen_range(1..=h), rng.gen_range(1..=w));
        let placements: Vec<u32> = (0..num)
            .flat_map(|_| [rng.gen_range(0..=h - oh) as u32, rng.gen_range(0..=w - ow) as u32, rng.gen_range(0..2)])
            .collect();
        let image = (c * h * w) as usize;
        let bytes: Vec<u32> = (0..(num as usize * image).div_ceil(4)).map(|_| rng.gen()).collect();
        let floats = kernel_floats(rng, num as usize * image);
        let n = (num * c * oh * ow) as usize;
        for kind in 0..3u32 {
            let mean = kernel_floats(rng, if kind == 2 { c as usize } else { image });
            for (name, x) in [("transform_bytes", In::Buf(bytes.clone())), ("transform_floats", buf(&floats))] {
                let mut args = vec![x, buf(&vec![0.0; n]), In::Buf(placements.clone()), buf(&mean), u(kind)];
                args.extend([u(num as u32), int(c), int(h), int(w), int(oh), int(ow), f(1.0 / 255.0)]);
                push_all(out, TRANSFORM, name, n, args);
            }
        }
    }
}

fn cases() -> Vec<Case> {
    let mut rng = StdRng::seed_from_u64(0x6361_6666);
    let mut out = Vec::new();
    elementwise(&mut rng, &mut out);
    bias_and_copies(&mut rng, &mut out);
    convolutions(&mut rng, &mut out);
    pooling(&mut rng, &mut out);
    transforms(&mut rng, &mut out);
    out
}

/// Registers the trainer's native kernels with the linked-in emulator.
fn register() {
    let code = caffe_geeps::gpu::emulated::with_table(|table, count| unsafe {
        geeps_cuda_emu::native_kernels::registry::geeps_cuda_emu_register_native_kernels(
            caffe_geeps::gpu::emulated::NATIVE_KERNELS_ABI,
            table.cast(),
            count,
        )
    });
    ok(code);
}

/// Runs every case; each case's buffers after it ran, concatenated.
fn run_all() -> Vec<u32> {
    open();
    register();
    let mut modules: Vec<_> = MODULES.iter().map(|p| load_ptx(p)).collect();
    modules.push(load_ptx(CONCAT));
    let mut out = Vec::new();
    for c in cases() {
        let bufs: Vec<Option<(u64, usize)>> = c
            .args
            .iter()
            .map(|a| match a {
                In::Buf(words) => Some((upload_u32(words), words.len())),
                In::S(_) => None,
            })
            .collect();
        let args: Vec<Arg> =
            c.args.iter().zip(&bufs).map(|(a, b)| if let In::S(s) = a { *s } else { Arg::U64(b.unwrap().0) }).collect();
        let f = function(modules[c.module], c.name);
        ok(launch(f, (c.geo.0, 1, 1), (c.geo.1, 1, 1), 0, &args));
        for (p, n) in bufs.into_iter().flatten() {
            out.extend(read_u32(p, n));
            ok(geeps_cuda_emu::cuMemFree_v2(p));
        }
    }
    out
}

/// Child: writes its engine's results to `GEEPS_CUDA_EMU_TEST_OUT`.
fn caffe_engine_results() {
    let path = std::env::var("GEEPS_CUDA_EMU_TEST_OUT").unwrap();
    let bytes: Vec<u8> = run_all().iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&path, bytes).unwrap();
    let native: String = geeps_cuda_emu::native_kernels::launches().iter().map(|(k, n)| format!("{k} {n}\n")).collect();
    std::fs::write(format!("{path}.native"), native).unwrap();
}

/// The words of every buffer after each case, and the launches run natively by kernel.
fn engine(mode: &str) -> (Vec<u32>, BTreeMap<String, u64>) {
    let path = std::env::temp_dir().join(format!("geeps-cuda-emu-caffe-{mode}-{}", std::process::id()));
    let path_text = path.to_string_lossy().into_owned();
    let envs =
        [("GEEPS_CUDA_EMU_KERNELS", mode), ("GEEPS_CUDA_EMU_TEST_OUT", &path_text), ("GEEPS_CUDA_EMU_DELAY_US", "0")];
    let out = run_child("caffe_engine_results", &envs);
    assert!(out.status.success(), "{mode} engine failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&path).unwrap();
    let native_path = format!("{path_text}.native");
    let native = std::fs::read_to_string(&native_path).unwrap();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&native_path);
    let native =
        native.lines().filter_map(|l| l.split_once(' ')).map(|(k, n)| (k.to_string(), n.parse().unwrap())).collect();
    (bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect(), native)
}

fn native_caffe_kernels_match_the_interpreter_bit_for_bit() {
    let (interpreted, none) = engine("interpret");
    let (native, ran) = engine("native");
    assert!(none.is_empty(), "the interpreting engine ran kernels natively: {none:?}");
    let mut want = BTreeMap::new();
    for c in cases() {
        *want.entry(c.name.to_string()).or_insert(0u64) += 1;
    }
    assert_eq!(ran, want, "not every launch ran natively");
    assert_eq!(native.len(), interpreted.len());
    if let Some(i) = native.iter().zip(&interpreted).position(|(a, b)| a != b) {
        // Name the case the word belongs to.
        let (mut at, mut which) = (0usize, String::new());
        for c in cases() {
            let words: usize = c.args.iter().map(|a| if let In::Buf(w) = a { w.len() } else { 0 }).sum();
            if i < at + words {
                which = format!("{} on {:?}, word {} of its buffers", c.name, c.geo, i - at);
                break;
            }
            at += words;
        }
        panic!("{which}: native {:#010x}, interpreter {:#010x}", native[i], interpreted[i]);
    }
}

/// Child: a native im2col reading past its image is CUDA_ERROR_ILLEGAL_ADDRESS.
fn native_fault() {
    open();
    register();
    let m = load_ptx(MODULES[IM2COL]);
    // A 1x4x4 image claimed as 2x4x4.
    let (image, col) = (upload_f32(&[1.0; 16]), upload_f32(&[0.0; 2 * 16]));
    let geometry = [2, 4, 4, 1, 1, 0, 0, 1, 1, 1, 1, 4, 4].map(|v| Arg::U32(v as u32));
    let mut args = vec![Arg::U64(image), Arg::U32(32), Arg::U64(col), Arg::U32(16), Arg::U32(1)];
    args.extend(geometry);
    code(
        launch(function(m, "im2col"), (1, 1, 1), (64, 1, 1), 0, &args),
        geeps_cuda_emu::result::CUDA_ERROR_ILLEGAL_ADDRESS,
    );
}

fn native_kernels_fault_past_an_allocation() {
    let out = run_child("native_fault", &[("GEEPS_CUDA_EMU_KERNELS", "native")]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "native fault child failed:\n{text}{}", String::from_utf8_lossy(&out.stdout));
    // The native engine's message, not the interpreter's: the kernel really ran natively.
    assert!(text.contains("read of element 16 of argument 0"), "no native fault message:\n{text}");
}

/// A child runs its helper and nothing else; otherwise the tests run.
fn main() -> ExitCode {
    if is_child("caffe_engine_results") {
        caffe_engine_results();
        return ExitCode::SUCCESS;
    }
    if is_child("native_fault") {
        native_fault();
        return ExitCode::SUCCESS;
    }
    geeps_testkit::harness::run(&[
        (
            "native_caffe_kernels_match_the_interpreter_bit_for_bit",
            native_caffe_kernels_match_the_interpreter_bit_for_bit,
        ),
        ("native_kernels_fault_past_an_allocation", native_kernels_fault_past_an_allocation),
    ])
}
