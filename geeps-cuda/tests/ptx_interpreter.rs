//! The shipped PTX, executed on the CPU by the ptoxide interpreter and
//! compared bit for bit with the host device's kernels, on random rows and
//! random indexes: ragged row widths (not multiples of the threads per row),
//! partial last blocks, rows of the destination the index does not name
//! (which must stay untouched), and adds over subnormals, signed zeros and
//! large exponents. Needs no GPU and no CUDA.
//!
//! Inputs are finite: NaN payloads and inf − inf are the one place GPUs and
//! CPUs may differ in bits, and the engine never relies on either.

use std::sync::Arc;

use geeps_core::device::{Device, DevicePtr, RowOp, RowPair};
use geeps_core::HostDevice;
use geeps_cuda::{encode_index, launch_shape, RowKernel, ROWS_PTX};
use geeps_testkit::kernel_inputs::kernel_floats;
use ptoxide::{Argument, Context, LaunchParams};
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

/// Runs `kernel` from the shipped PTX in the interpreter; returns the
/// destination (the buffer for a gather, the store for a scatter).
fn interpret(kernel: RowKernel, src: &[f32], pairs: &[RowPair], dst: &[f32], width: usize) -> Vec<f32> {
    let index = encode_index(pairs).unwrap();
    let shape = launch_shape(pairs.len(), width).unwrap();
    let mut ctx = Context::new_with_module(ROWS_PTX).expect("ptoxide parses and compiles the shipped PTX");
    let (dsrc, didx, ddst) = (ctx.alloc::<f32>(src.len()), ctx.alloc::<u32>(index.len()), ctx.alloc::<f32>(dst.len()));
    ctx.write(dsrc, src);
    ctx.write(didx, &index);
    ctx.write(ddst, dst);
    let launch = LaunchParams::func(kernel.entry()).grid1d(shape.grid).block2d(shape.block_x, shape.block_y);
    let args = [
        Argument::ptr(dsrc),
        Argument::ptr(didx),
        Argument::U32(pairs.len() as u32),
        Argument::ptr(ddst),
        Argument::U32(width as u32),
    ];
    ctx.run(launch, &args).unwrap_or_else(|e| panic!("ptoxide failed on {}: {e}", kernel.entry()));
    let mut out = vec![0.0f32; dst.len()];
    ctx.read(ddst, &mut out);
    out
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

fn assert_same_bits(kernel: RowKernel, width: usize, n: usize, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
        panic!(
            "{kernel:?}, width {width}, {n} pairs: float {i} (row {}, column {}) is {:e} ({:#010x}), host device has {:e} ({:#010x})",
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
        let got = interpret(kernel, &src, &pairs, &dst, width);
        let want = reference(kernel, &src, &pairs, &dst, width);
        assert_same_bits(kernel, width, n, &got, &want);
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
    let wrong = interpret(RowKernel::ScatterAssign, &src, &pairs, &dst, width);
    let want = reference(RowKernel::ScatterAdd, &src, &pairs, &dst, width);
    assert!(wrong.iter().zip(&want).any(|(a, b)| a.to_bits() != b.to_bits()));
}
