//! The native row kernels (`GEEPS_CUDA_EMU_KERNELS=native`) and the PTX
//! interpreter give the same bits for every kernel of geeps-cuda's
//! `kernels/rows.ptx`, on random rows and indexes with ragged widths, and
//! both equal a plain reference (so the comparison is not between two
//! identical mistakes). Each case runs with geeps' geometry, with a grid of
//! one block (its grid-stride loop takes every row), and with base pointers
//! 4 bytes off 16-byte alignment (the kernels' scalar path at widths a
//! multiple of 4). Each engine runs in its own child process (the emulator
//! reads its settings once per process), launching through
//! `cuLaunchKernel`: a `harness = false` target, the program is its own
//! child when `GEEPS_CUDA_EMU_TEST_OUT` names where to write the results.

mod common;

use std::ffi::c_void;
use std::process::{Command, ExitCode};
use std::ptr::null_mut;

use common::*;
use geeps_cuda_emu as emu;
use geeps_testkit::kernel_inputs::kernel_floats;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const ROWS_PTX: &str = include_str!("../../geeps-cuda/kernels/rows.ptx");
const KERNELS: [&str; 3] = ["geeps_gather", "geeps_scatter_assign", "geeps_scatter_add"];
const WIDTHS: [usize; 9] = [1, 3, 31, 32, 33, 128, 255, 257, 300];

/// Where the child writes its results; set, the program is the child.
const OUT: &str = "GEEPS_CUDA_EMU_TEST_OUT";

/// How a case is launched.
#[derive(Clone, Copy)]
enum Variant {
    /// geeps-cuda's `launch_shape`, aligned pointers.
    Geeps,
    /// One block striding over every pair.
    OneBlock,
    /// geeps-cuda's geometry, both pointers 4 bytes past an aligned address.
    Unaligned,
}

/// One launch: source rows, pairs, destination rows, width.
struct Case {
    kernel: usize,
    width: usize,
    variant: Variant,
    src: Vec<f32>,
    pairs: Vec<(u32, u32)>,
    dst: Vec<f32>,
}

/// geeps-cuda's `launch_shape` (grid, block_x, block_y) for `pairs` rows of
/// `width`: threads per row span its float4 lanes (floats when the width
/// is not a multiple of 4), 256 threads a block, at most 4096 blocks.
fn geeps_shape(pairs: usize, width: usize) -> (u32, u32, u32) {
    let lanes = if width % 4 == 0 { width / 4 } else { width };
    let block_x = lanes.next_power_of_two().min(256) as u32;
    let block_y = 256 / block_x;
    (pairs.div_ceil(block_y as usize).min(4096) as u32, block_x, block_y)
}

fn cases() -> Vec<Case> {
    let mut rng = StdRng::seed_from_u64(0x6b65_726e);
    let mut out = Vec::new();
    let variants = [Variant::Geeps, Variant::OneBlock, Variant::Unaligned];
    for (kernel, width, variant) in
        (0..3).flat_map(|k| WIDTHS.into_iter().flat_map(move |w| variants.map(|v| (k, w, v))))
    {
        let block_y = geeps_shape(1, width).2 as usize;
        let n = 2 * block_y + 1;
        let (buffer_rows, store_rows) = (n + rng.gen_range(0..4), n + rng.gen_range(1..20));
        let mut b: Vec<u32> = (0..buffer_rows as u32).collect();
        let mut s: Vec<u32> = (0..store_rows as u32).collect();
        b.shuffle(&mut rng);
        s.shuffle(&mut rng);
        let pairs: Vec<(u32, u32)> = b.into_iter().zip(s).take(n).collect();
        let (src_rows, dst_rows) = if kernel == 0 { (store_rows, buffer_rows) } else { (buffer_rows, store_rows) };
        let src = kernel_floats(&mut rng, src_rows * width);
        let dst = kernel_floats(&mut rng, dst_rows * width);
        out.push(Case { kernel, width, variant, src, pairs, dst });
    }
    out
}

/// What the host device computes.
fn reference(c: &Case) -> Vec<f32> {
    let mut dst = c.dst.clone();
    let w = c.width;
    for &(b, s) in &c.pairs {
        let (from, to) = if c.kernel == 0 { (s as usize, b as usize) } else { (b as usize, s as usize) };
        for i in 0..w {
            let v = c.src[from * w + i];
            dst[to * w + i] = if c.kernel == 2 { dst[to * w + i] + v } else { v };
        }
    }
    dst
}

/// `data` on the device, `offset` bytes into a fresh allocation; the
/// allocation and the data's address.
fn upload(data: &[f32], offset: usize) -> (u64, u64) {
    let p = alloc(data.len() * 4 + offset);
    unsafe { ok(emu::cuMemcpyHtoD_v2(p + offset as u64, data.as_ptr().cast(), data.len() * 4)) };
    (p, p + offset as u64)
}

/// Runs every case through `cuLaunchKernel`; the destinations, concatenated.
fn run_all() -> Vec<f32> {
    open();
    let mut module = null_mut();
    let image = std::ffi::CString::new(ROWS_PTX).unwrap();
    unsafe { ok(emu::cuModuleLoadData(&mut module, image.as_ptr().cast())) };
    let s = stream(1);
    let mut out = Vec::new();
    for c in cases() {
        let mut f = null_mut();
        let name = std::ffi::CString::new(KERNELS[c.kernel]).unwrap();
        unsafe { ok(emu::cuModuleGetFunction(&mut f, module, name.as_ptr())) };
        let index: Vec<f32> = c.pairs.iter().flat_map(|&(b, s)| [f32::from_bits(b), f32::from_bits(s)]).collect();
        let offset = if matches!(c.variant, Variant::Unaligned) { 4 } else { 0 };
        let ((src_alloc, mut src), (idx_alloc, mut idx), (dst_alloc, mut dst)) =
            (upload(&c.src, offset), upload(&index, 0), upload(&c.dst, offset));
        let (mut pairs, mut width) = (c.pairs.len() as u32, c.width as u32);
        let (grid, block_x, block_y) = match c.variant {
            Variant::Geeps | Variant::Unaligned => geeps_shape(c.pairs.len(), c.width),
            Variant::OneBlock => (1, geeps_shape(1, c.width).1, geeps_shape(1, c.width).2),
        };
        let mut args = [
            &mut src as *mut u64 as *mut c_void,
            &mut idx as *mut u64 as *mut c_void,
            &mut pairs as *mut u32 as *mut c_void,
            &mut dst as *mut u64 as *mut c_void,
            &mut width as *mut u32 as *mut c_void,
        ];
        unsafe {
            ok(emu::cuLaunchKernel(f, grid, 1, 1, block_x, block_y, 1, 0, s, args.as_mut_ptr(), null_mut()));
            ok(emu::cuStreamSynchronize(s));
        }
        let mut got = vec![0f32; c.dst.len()];
        unsafe { ok(emu::cuMemcpyDtoH_v2(got.as_mut_ptr().cast(), dst, got.len() * 4)) };
        out.extend(got);
        for p in [src_alloc, idx_alloc, dst_alloc] {
            ok(emu::cuMemFree_v2(p));
        }
    }
    out
}

/// The child: its engine's results, as little-endian bits, into `path`.
fn write_results(path: &str) {
    let bytes: Vec<u8> = run_all().iter().flat_map(|f| f.to_bits().to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

/// The results of engine `mode` (`interpret` or `native`), from a child.
fn engine(mode: &str) -> Vec<u32> {
    let path = std::env::temp_dir().join(format!("geeps-cuda-emu-kernels-{mode}-{}", std::process::id()));
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    // Hermetic: the child sees the engine asked for, not the caller's settings.
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GEEPS_CUDA_EMU")) {
        cmd.env_remove(k);
    }
    let out = cmd.env("GEEPS_CUDA_EMU_KERNELS", mode).env(OUT, &path).output().expect("the test binary runs");
    assert!(out.status.success(), "{mode} engine failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn native_kernels_match_the_interpreter_bit_for_bit() {
    let interpreted = engine("interpret");
    let native = engine("native");
    let want: Vec<u32> = cases().iter().flat_map(reference).map(f32::to_bits).collect();
    assert_eq!(interpreted.len(), want.len());
    assert_eq!(native.len(), want.len());
    if let Some(i) = native.iter().zip(&interpreted).position(|(a, b)| a != b) {
        panic!("float {i}: native {:#010x}, interpreter {:#010x}", native[i], interpreted[i]);
    }
    if let Some(i) = native.iter().zip(&want).position(|(a, b)| a != b) {
        panic!("float {i}: both engines {:#010x}, reference {:#010x}", native[i], want[i]);
    }
}

fn main() -> ExitCode {
    if let Ok(path) = std::env::var(OUT) {
        write_results(&path);
        return ExitCode::SUCCESS;
    }
    geeps_testkit::harness::run(&[(
        "native_kernels_match_the_interpreter_bit_for_bit",
        native_kernels_match_the_interpreter_bit_for_bit,
    )])
}
