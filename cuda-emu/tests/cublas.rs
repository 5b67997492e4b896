//! The emulator answering as `libcublas.so` too, driven through cudarc's
//! safe cuBLAS API as caffe-geeps drives it: sgemm in every transpose
//! combination on ragged shapes with padded leading dimensions, strided
//! batches, sgemv with strided vectors, β accumulation, products queued
//! behind copies on the same stream; and the refusals (a leading dimension
//! below the rows, a freed operand, a device pointer for α). Compared with
//! a plain f64 reference. The body runs in a child process whose library
//! path holds the driver and cuBLAS links to this crate's cdylib.

mod common;

use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, Gemv, GemvConfig, StridedBatchedConfig};
use cudarc::driver::CudaContext;
use rand::{Rng, SeedableRng};

#[test]
fn cublas_products_through_cudarc_match_a_reference() {
    if common::is_child("cublas_products_through_cudarc_match_a_reference") {
        return body();
    }
    common::child_passes_with_libraries(
        "cublas_products_through_cudarc_match_a_reference",
        &["libcuda.so", "libcuda.so.1", "libcublas.so", "libcublas.so.12"],
    );
}

/// Column-major `C = α·op(A)·op(B) + β·C` in f64.
#[allow(clippy::too_many_arguments)]
fn reference(
    (ta, tb): (bool, bool),
    (m, n, k): (usize, usize, usize),
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    for j in 0..n {
        for i in 0..m {
            let mut sum = 0.0f64;
            for p in 0..k {
                let av = if ta { a[p + i * lda] } else { a[i + p * lda] };
                let bv = if tb { b[j + p * ldb] } else { b[p + j * ldb] };
                sum += av as f64 * bv as f64;
            }
            let e = &mut c[i + j * ldc];
            *e = (alpha as f64 * sum + if beta == 0.0 { 0.0 } else { beta as f64 * *e as f64 }) as f32;
        }
    }
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{what}: element {i}: got {g}, want {w}");
    }
}

fn random(rng: &mut impl Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

fn body() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let ctx = CudaContext::new(0).expect("the emulated device");
    let stream = ctx.new_stream().unwrap();
    let blas = CudaBlas::new(stream.clone()).expect("cuBLAS on the emulated driver");

    // Ragged shapes, every transpose pair, padded leading dimensions, β ≠ 0.
    for &(m, n, k) in &[(1, 1, 1), (3, 5, 7), (17, 9, 33), (64, 1, 130), (5, 40, 1), (7, 3, 0)] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
            let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
            let (lda, ldb, ldc) = (a_rows.max(1) + 2, b_rows.max(1) + 1, m + 3);
            let a = random(&mut rng, lda * a_cols.max(1));
            let b = random(&mut rng, ldb * b_cols.max(1));
            let c0 = random(&mut rng, ldc * n);
            let (alpha, beta) = (1.5, -0.5);
            let (da, db) = (stream.clone_htod(&a).unwrap(), stream.clone_htod(&b).unwrap());
            let mut dc = stream.clone_htod(&c0).unwrap();
            let cfg = GemmConfig {
                transa: if ta { CUBLAS_OP_T } else { CUBLAS_OP_N },
                transb: if tb { CUBLAS_OP_T } else { CUBLAS_OP_N },
                m: m as i32,
                n: n as i32,
                k: k as i32,
                alpha,
                lda: lda as i32,
                ldb: ldb as i32,
                beta,
                ldc: ldc as i32,
            };
            unsafe { blas.gemm(cfg, &da, &db, &mut dc) }.expect("sgemm");
            let got = stream.clone_dtoh(&dc).unwrap();
            let mut want = c0.clone();
            reference((ta, tb), (m, n, k), alpha, &a, lda, &b, ldb, beta, &mut want, ldc);
            close(&got, &want, &format!("sgemm {m}x{n}x{k} ta={ta} tb={tb}"));
        }
    }

    // A strided batch: three products of 4×6·6×5, β = 0 over NaN-filled C.
    let (m, n, k, batch) = (4usize, 5usize, 6usize, 3usize);
    let a = random(&mut rng, m * k * batch);
    let b = random(&mut rng, k * n * batch);
    let (da, db) = (stream.clone_htod(&a).unwrap(), stream.clone_htod(&b).unwrap());
    let mut dc = stream.clone_htod(&vec![f32::NAN; m * n * batch]).unwrap();
    let cfg = StridedBatchedConfig {
        gemm: GemmConfig {
            transa: CUBLAS_OP_N,
            transb: CUBLAS_OP_N,
            m: m as i32,
            n: n as i32,
            k: k as i32,
            alpha: 1.0,
            lda: m as i32,
            ldb: k as i32,
            beta: 0.0,
            ldc: m as i32,
        },
        batch_size: batch as i32,
        stride_a: (m * k) as i64,
        stride_b: (k * n) as i64,
        stride_c: (m * n) as i64,
    };
    unsafe { blas.gemm_strided_batched(cfg, &da, &db, &mut dc) }.expect("strided batch");
    let got = stream.clone_dtoh(&dc).unwrap();
    for i in 0..batch {
        let mut want = vec![0.0; m * n];
        let (ai, bi) = (&a[i * m * k..(i + 1) * m * k], &b[i * k * n..(i + 1) * k * n]);
        reference((false, false), (m, n, k), 1.0, ai, m, bi, k, 0.0, &mut want, m);
        close(&got[i * m * n..(i + 1) * m * n], &want, &format!("batch entry {i}"));
    }

    // sgemv, both ways, with strided x and y: y = 2·op(A)·x + y.
    let (m, n) = (6usize, 4usize);
    let a = random(&mut rng, m * n);
    for trans in [false, true] {
        let (rows, inner) = if trans { (n, m) } else { (m, n) };
        let x = random(&mut rng, inner * 2);
        let y0 = random(&mut rng, rows * 3);
        let (da, dx) = (stream.clone_htod(&a).unwrap(), stream.clone_htod(&x).unwrap());
        let mut dy = stream.clone_htod(&y0).unwrap();
        let cfg = GemvConfig {
            trans: if trans { CUBLAS_OP_T } else { CUBLAS_OP_N },
            m: m as i32,
            n: n as i32,
            alpha: 2.0,
            lda: m as i32,
            incx: 2,
            beta: 1.0,
            incy: 3,
        };
        unsafe { blas.gemv(cfg, &da, &dx, &mut dy) }.expect("sgemv");
        let got = stream.clone_dtoh(&dy).unwrap();
        let mut want = y0.clone();
        for i in 0..rows {
            let sum: f64 = (0..inner)
                .map(|p| {
                    let av = if trans { a[p + i * m] } else { a[i + p * m] };
                    av as f64 * x[p * 2] as f64
                })
                .sum();
            want[i * 3] = (2.0 * sum + y0[i * 3] as f64) as f32;
        }
        close(&got, &want, &format!("sgemv trans={trans}"));
    }

    // Refusals, as cuBLAS gives them.
    let da = stream.clone_htod(&[1.0f32; 12]).unwrap();
    let mut dc = stream.alloc_zeros::<f32>(12).unwrap();
    let bad = GemmConfig {
        transa: CUBLAS_OP_N,
        transb: CUBLAS_OP_N,
        m: 4,
        n: 3,
        k: 3,
        alpha: 1.0f32,
        lda: 2, // below m = 4
        ldb: 3,
        beta: 0.0,
        ldc: 4,
    };
    let err = unsafe { blas.gemm(bad, &da, &da, &mut dc) }.unwrap_err();
    assert_eq!(err.0, cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE);
    // A product running past its operand's allocation is refused, not computed.
    let small = stream.clone_htod(&[1.0f32; 4]).unwrap();
    let past = GemmConfig { lda: 4, ..bad };
    let err = unsafe { blas.gemm(past, &small, &da, &mut dc) }.unwrap_err();
    assert_eq!(err.0, cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE);
    stream.synchronize().unwrap();
}
