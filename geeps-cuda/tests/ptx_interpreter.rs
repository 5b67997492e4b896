//! The shipped PTX, executed on the CPU by the emulated driver's PTX
//! interpreter (`geeps_cuda_emu::ptx`, called directly: no driver, no
//! settings) and compared bit for bit with the host device's kernels, on
//! random rows and random indexes: ragged row widths (not multiples of the
//! threads per row), partial last blocks, rows of the destination the index
//! does not name (which must stay untouched), and adds over subnormals,
//! signed zeros and large exponents. Each case runs with geeps' launch
//! shape, with a grid of one block (the kernels' grid-stride loop then
//! takes every row), and with both row pointers 4 bytes off 16-byte
//! alignment (the kernels' scalar path where they would move float4s).
//! Needs no GPU and no CUDA.
//!
//! Inputs are finite: NaN payloads and inf − inf are the one place GPUs and
//! CPUs may differ in bits, and the engine never relies on either.

use std::sync::Arc;

use geeps_core::device::{Device, DevicePtr, RowOp, RowPair};
use geeps_core::HostDevice;
use geeps_cuda::{encode_index, launch_shape, LaunchShape, RowKernel, ROWS_PTX};
use geeps_cuda_emu::ptx::{self, Geometry, Memory, Program};
use geeps_testkit::kernel_inputs::kernel_floats;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Row widths: below, at and past a warp and a block, and odd sizes between.
const WIDTHS: [usize; 12] = [1, 3, 31, 32, 33, 100, 128, 255, 256, 257, 300, 513];

/// `n` pairs with distinct buffer rows below `buffer_rows` and distinct store
/// rows below `store_rows`, in random order.
fn pairs(rng: &mut StdRng, n: usize, buffer_rows: usize, store_rows: usize) -> Vec<RowPair> {
    let mut b: Vec<u32> = (0..buffer_rows as u32).collect();
    let mut s: Vec<u32> = (0..store_rows as u32).collect();
    b.shuffle(rng);
    s.shuffle(rng);
    b.iter().zip(&s).take(n).map(|(&buffer_row, &store_row)| RowPair { buffer_row, store_row }).collect()
}

/// How a case is launched: geeps' shape, or one block striding over every
/// row; row pointers aligned, or 4 bytes off.
#[derive(Debug, Clone, Copy)]
struct Variant {
    one_block: bool,
    misaligned: bool,
}

const VARIANTS: [Variant; 3] = [
    Variant { one_block: false, misaligned: false },
    Variant { one_block: true, misaligned: false },
    Variant { one_block: false, misaligned: true },
];

fn bytes(floats: &[f32]) -> Vec<u8> {
    floats.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// Runs `kernel` from the shipped PTX in the interpreter; returns the
/// destination (the buffer for a gather, the store for a scatter).
fn interpret(kernel: RowKernel, src: &[f32], pairs: &[RowPair], dst: &[f32], width: usize, how: Variant) -> Vec<f32> {
    let index: Vec<u8> = encode_index(pairs).unwrap().iter().flat_map(|w| w.to_le_bytes()).collect();
    let geeps = launch_shape(pairs.len(), width).unwrap();
    let shape = if how.one_block { LaunchShape { grid: 1, ..geeps } } else { geeps };
    let program = Program::load(ROWS_PTX).expect("the interpreter parses the shipped PTX");
    let code = program.kernel(kernel.entry()).unwrap_or_else(|e| panic!("{e}"));
    // Device addresses far apart, 256-byte aligned as the driver's, plus the offset.
    let offset: u64 = if how.misaligned { 4 } else { 0 };
    let (src_at, index_at, dst_at) = (0x1000_0000 + offset, 0x2000_0000u64, 0x3000_0000 + offset);
    let (mut src_mem, mut index_mem, mut dst_mem) = (bytes(src), index, bytes(dst));
    let args: [&[u8]; 5] = [
        &src_at.to_le_bytes(),
        &index_at.to_le_bytes(),
        &(pairs.len() as u32).to_le_bytes(),
        &dst_at.to_le_bytes(),
        &(width as u32).to_le_bytes(),
    ];
    let mut params = vec![0u8; code.param_bytes];
    for (&(at, size), arg) in code.params.iter().zip(args) {
        assert_eq!(size, arg.len(), "{}: parameter sizes changed", kernel.entry());
        params[at..at + size].copy_from_slice(arg);
    }
    let globals = vec![(src_at, &mut src_mem[..]), (index_at, &mut index_mem[..]), (dst_at, &mut dst_mem[..])];
    let mut data = program.data();
    let mut mem = Memory::new(globals, params, &mut data);
    let geo = Geometry { grid: (shape.grid, 1, 1), block: (shape.block_x, shape.block_y, 1), dynamic_shared: 0 };
    if let Err(stop) = ptx::run(code, geo, &mut mem) {
        panic!("{} faulted at PTX line {}: {:?}", kernel.entry(), stop.line, stop.fault);
    }
    drop(mem);
    dst_mem.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// Runs `kernel` on the host device, the reference implementation.
fn reference(kernel: RowKernel, src: &[f32], pairs: &[RowPair], dst: &[f32], width: usize) -> Vec<f32> {
    let dev = Arc::new(HostDevice::new(1 << 30));
    let s = dev.create_stream().unwrap();
    let upload = |data: &[f32]| -> DevicePtr {
        let p = dev.alloc(data.len()).unwrap();
        unsafe { dev.copy_h2d(s, data.as_ptr(), p, data.len()).unwrap() };
        p
    };
    let (psrc, pdst) = (upload(src), upload(dst));
    let index = dev.upload_index(pairs).unwrap();
    unsafe {
        match kernel {
            RowKernel::Gather => dev.rows(s, RowOp::Gather, psrc, index, pdst, width),
            RowKernel::ScatterAssign => dev.rows(s, RowOp::ScatterAssign, pdst, index, psrc, width),
            RowKernel::ScatterAdd => dev.rows(s, RowOp::ScatterAdd, pdst, index, psrc, width),
        }
        .unwrap()
    };
    let mut out = vec![0.0f32; dst.len()];
    unsafe { dev.copy_d2h(s, pdst, out.as_mut_ptr(), out.len()).unwrap() };
    dev.synchronize(s).unwrap();
    out
}

fn assert_same_bits(kernel: RowKernel, width: usize, n: usize, how: Variant, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
        panic!(
            "{kernel:?}, width {width}, {n} pairs, {how:?}: float {i} (row {}, column {}) is {:e} ({:#010x}), host device has {:e} ({:#010x})",
            i / width,
            i % width,
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits()
        );
    }
}

/// One kernel at one width: a count with a partial last block and a random
/// count, over stores and buffers with rows the index leaves alone.
fn check(kernel: RowKernel, width: usize, rng: &mut StdRng) {
    let rows_per_block = launch_shape(1, width).unwrap().block_y as usize;
    let counts = [2 * rows_per_block + 1, rng.gen_range(1..=3 * rows_per_block).min(300)];
    for n in counts {
        let (buffer_rows, store_rows) = (n + rng.gen_range(0..4), n + rng.gen_range(1..40));
        let pairs = pairs(rng, n, buffer_rows, store_rows);
        let (src_rows, dst_rows) = match kernel {
            RowKernel::Gather => (store_rows, buffer_rows),
            RowKernel::ScatterAssign | RowKernel::ScatterAdd => (buffer_rows, store_rows),
        };
        let src = kernel_floats(rng, src_rows * width);
        let dst = kernel_floats(rng, dst_rows * width);
        let want = reference(kernel, &src, &pairs, &dst, width);
        for how in VARIANTS {
            let got = interpret(kernel, &src, &pairs, &dst, width, how);
            assert_same_bits(kernel, width, n, how, &got, &want);
        }
    }
}

#[test]
fn gather_matches_the_host_device_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0x6765_6570);
    for width in WIDTHS {
        check(RowKernel::Gather, width, &mut rng);
    }
}

#[test]
fn scatter_assign_matches_the_host_device_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0x7363_6174);
    for width in WIDTHS {
        check(RowKernel::ScatterAssign, width, &mut rng);
    }
}

#[test]
fn scatter_add_matches_the_host_device_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0x6164_6473);
    for width in WIDTHS {
        check(RowKernel::ScatterAdd, width, &mut rng);
    }
}

/// The interpreter is only evidence if it can tell kernels apart: running the
/// gather where a scatter-add belongs must be caught.
#[test]
fn the_comparison_catches_a_wrong_kernel() {
    let mut rng = StdRng::seed_from_u64(7);
    let width = 33;
    let pairs = pairs(&mut rng, 20, 20, 30);
    let (src, dst) = (kernel_floats(&mut rng, 20 * width), kernel_floats(&mut rng, 30 * width));
    let wrong = interpret(RowKernel::ScatterAssign, &src, &pairs, &dst, width, VARIANTS[0]);
    let want = reference(RowKernel::ScatterAdd, &src, &pairs, &dst, width);
    assert!(wrong.iter().zip(&want).any(|(a, b)| a.to_bits() != b.to_bits()));
}
