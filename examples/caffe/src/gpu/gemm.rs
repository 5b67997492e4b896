//! Row-major matrix products on the GPU through cuBLAS (column-major): the
//! product C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ, which is the
//! same memory. It owns the shape checks that make the call sound; it must
//! never allocate.

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{result, CudaBlas};

use super::{DevSlice, Gpu};
use crate::error::{Error, Result};

/// Whether an operand is used transposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transpose {
    No,
    Yes,
}

fn int(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::Gpu(format!("GEMM {what} = {n} exceeds cuBLAS's 32-bit sizes")))
}

impl Gpu {
    /// `c (m×n) = alpha · op(a) · op(b) + beta · c`, all row-major and
    /// packed: `a` is m×k (k×m when transposed), `b` is k×n (n×k when
    /// transposed). Enqueued on the stream.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        ta: Transpose,
        tb: Transpose,
        (m, n, k): (usize, usize, usize),
        alpha: f32,
        a: DevSlice,
        b: DevSlice,
        beta: f32,
        c: DevSlice,
    ) -> Result<()> {
        if a.len < m * k || b.len < k * n || c.len < m * n {
            return Err(Error::Gpu(format!(
                "GEMM {m}×{n}×{k} on operands of {} / {} / {} floats",
                a.len, b.len, c.len
            )));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let op = |t| match t {
            Transpose::No => cublasOperation_t::CUBLAS_OP_N,
            Transpose::Yes => cublasOperation_t::CUBLAS_OP_T,
        };
        // Leading dimensions of the row-major operands as stored.
        let lda = if ta == Transpose::Yes { m } else { k };
        let ldb = if tb == Transpose::Yes { k } else { n };
        let blas: &CudaBlas = &self.blas;
        // SAFETY: the checks above bound every element cuBLAS touches; the
        // scalars are host values read at the call (host pointer mode).
        unsafe {
            result::sgemm(
                *blas.handle(),
                op(tb),
                op(ta),
                int(n, "n")?,
                int(m, "m")?,
                int(k, "k")?,
                &alpha,
                b.ptr as *const f32,
                int(ldb.max(1), "ldb")?,
                a.ptr as *const f32,
                int(lda.max(1), "lda")?,
                &beta,
                c.ptr as *mut f32,
                int(n, "ldc")?,
            )
        }
        .map_err(|e| Error::Gpu(format!("cuBLAS sgemm {m}×{n}×{k}: {e:?}")))
    }
}
