//! Dense matrix products for the layers: row-major SGEMM on top of the
//! `matrixmultiply` crate, with transposes expressed as strides (no copies),
//! and a rayon-parallel form that splits the rows of the result. It owns the
//! bounds checks that make the unsafe call sound; it must never allocate.

use rayon::prelude::*;

/// `c (m×n) = alpha · op(a) · op(b) + beta · c`, all row-major. `a` is m×k
/// (k×m when `ta`), `b` is k×n (n×k when `tb`).
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    ta: bool,
    tb: bool,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    b: &[f32],
    beta: f32,
    c: &mut [f32],
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm operands too short");
    if m == 0 || n == 0 {
        return;
    }
    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
    // SAFETY: the asserts above bound every index the strides reach:
    // a[i·rsa + p·csa] < m·k, b[p·rsb + j·csb] < k·n, c[i·n + j] < m·n.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// `gemm` with the rows of `c` split across rayon's threads (for tall
/// products, such as a fully connected layer over a batch). `a` must not be
/// transposed, so each block of rows of `c` reads its own rows of `a`.
#[allow(clippy::too_many_arguments)]
pub fn par_gemm(tb: bool, m: usize, n: usize, k: usize, alpha: f32, a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    let threads = rayon::current_num_threads().max(1);
    // Blocks of at least 8 rows keep the micro-kernel busy.
    let rows = m.div_ceil(threads).max(8);
    if rows >= m {
        return gemm(false, tb, m, n, k, alpha, a, b, beta, c);
    }
    c[..m * n].par_chunks_mut(rows * n).zip(a[..m * k].par_chunks(rows * k)).for_each(|(cb, ab)| {
        gemm(false, tb, cb.len() / n, n, k, alpha, ab, b, beta, cb);
    });
}

/// `c (m×n) = alpha · aᵀ · b + beta · c` with `a` k×m and `b` k×n, the
/// rows of `c` split across rayon's threads (a weight gradient: dYᵀ · X).
#[allow(clippy::too_many_arguments)]
pub fn par_gemm_tn(m: usize, n: usize, k: usize, alpha: f32, a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm operands too short");
    let threads = rayon::current_num_threads().max(1);
    let rows = m.div_ceil(threads).max(8);
    if rows >= m || n == 0 {
        return gemm(true, false, m, n, k, alpha, a, b, beta, c);
    }
    c[..m * n].par_chunks_mut(rows * n).enumerate().for_each(|(blk, cb)| {
        let (r0, mb) = (blk * rows, cb.len() / n);
        // SAFETY: op(a) rows r0..r0+mb are columns of the k×m matrix `a`:
        // the largest index reached is (k−1)·m + r0 + mb − 1 < k·m, since
        // r0 + mb ≤ m (asserted above); `b` and `cb` as in `gemm`.
        unsafe {
            matrixmultiply::sgemm(
                mb,
                k,
                n,
                alpha,
                a.as_ptr().add(r0),
                1,
                m as isize,
                b.as_ptr(),
                n as isize,
                1,
                beta,
                cb.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(ta: bool, tb: bool, m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let x = if ta { a[p * m + i] } else { a[i * k + p] };
                    let y = if tb { b[j * k + p] } else { b[p * n + j] };
                    c[i * n + j] += x * y;
                }
            }
        }
        c
    }

    #[test]
    fn every_transpose_matches_the_naive_product() {
        let (m, n, k) = (7, 5, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut c = vec![1.0; m * n];
            gemm(ta, tb, m, n, k, 2.0, &a, &b, 0.5, &mut c);
            let want = naive(ta, tb, m, n, k, &a, &b);
            for (x, w) in c.iter().zip(&want) {
                assert!((x - (2.0 * w + 0.5)).abs() < 1e-5, "{ta} {tb}: {x} vs {w}");
            }
        }
    }

    #[test]
    fn parallel_transposed_rows_match() {
        let (m, n, k) = (45, 6, 5);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.13).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.29).cos()).collect();
        let mut c = vec![0.0; m * n];
        par_gemm_tn(m, n, k, 1.0, &a, &b, 0.0, &mut c);
        for (x, w) in c.iter().zip(naive(true, false, m, n, k, &a, &b)) {
            assert!((x - w).abs() < 1e-5, "{x} vs {w}");
        }
    }

    #[test]
    fn parallel_rows_match() {
        let (m, n, k) = (37, 9, 4);
        let a: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.01).collect();
        let b: Vec<f32> = (0..k * n).map(|i| 1.0 - i as f32 * 0.02).collect();
        let mut c = vec![0.0; m * n];
        par_gemm(true, m, n, k, 1.0, &a, &b, 0.0, &mut c);
        for (x, w) in c.iter().zip(naive(false, true, m, n, k, &a, &b)) {
            assert!((x - w).abs() < 1e-5, "{x} vs {w}");
        }
    }
}
