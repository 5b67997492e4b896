//! Row-major matrix products on the GPU through cuBLAS (column-major): the
//! product C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ, which is the
//! same memory. Batched products take each operand with its own leading
//! dimension and a stride between batch entries (0: one matrix shared by
//! every entry). It owns the shape checks that make the call sound; it must
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

/// One operand of a batched product: a row-major matrix at the start of
/// `at` whose rows are `ld` floats apart, the next batch entry's `stride`
/// floats further on.
#[derive(Debug, Clone, Copy)]
pub struct Strided {
    pub at: DevSlice,
    pub ld: usize,
    pub stride: usize,
}

impl Strided {
    /// A packed matrix of `cols` columns, one per batch entry at `stride`.
    pub fn packed(at: DevSlice, cols: usize, stride: usize) -> Strided {
        Strided { at, ld: cols, stride }
    }

    /// Checks that `batch` matrices of `rows` × `cols` (as stored) fit.
    fn check(&self, rows: usize, cols: usize, batch: usize, what: &str) -> Result<()> {
        if self.ld < cols {
            return Err(Error::Gpu(format!("GEMM {what}: rows {} floats apart hold {cols} columns", self.ld)));
        }
        let one = if rows == 0 || cols == 0 { 0 } else { (rows - 1) * self.ld + cols };
        let need = if one == 0 { 0 } else { (batch - 1) * self.stride + one };
        if self.at.len < need {
            return Err(Error::Gpu(format!(
                "GEMM {what}: {batch} matrices of {rows}×{cols} (rows {} apart, {} between matrices) \
                 need {need} floats, the operand has {}",
                self.ld, self.stride, self.at.len
            )));
        }
        Ok(())
    }
}

fn int(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::Gpu(format!("GEMM {what} = {n} exceeds cuBLAS's 32-bit sizes")))
}

fn long(n: usize, what: &str) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::Gpu(format!("GEMM {what} = {n} exceeds cuBLAS's 64-bit strides")))
}

fn op(t: Transpose) -> cublasOperation_t {
    match t {
        Transpose::No => cublasOperation_t::CUBLAS_OP_N,
        Transpose::Yes => cublasOperation_t::CUBLAS_OP_T,
    }
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
        let lda = if ta == Transpose::Yes { m } else { k };
        let ldb = if tb == Transpose::Yes { k } else { n };
        self.gemm_batched(
            (ta, tb),
            (m, n, k, 1),
            alpha,
            Strided::packed(a, lda, 0),
            Strided::packed(b, ldb, 0),
            beta,
            Strided::packed(c, n, 0),
        )
    }

    /// `batch` products `c_i (m×n) = alpha · op(a_i) · op(b_i) + beta · c_i`
    /// in one cuBLAS call, each operand as [`Strided`] says. Enqueued on the
    /// stream.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_batched(
        &self,
        (ta, tb): (Transpose, Transpose),
        (m, n, k, batch): (usize, usize, usize, usize),
        alpha: f32,
        a: Strided,
        b: Strided,
        beta: f32,
        c: Strided,
    ) -> Result<()> {
        let (a_rows, a_cols) = if ta == Transpose::Yes { (k, m) } else { (m, k) };
        let (b_rows, b_cols) = if tb == Transpose::Yes { (n, k) } else { (k, n) };
        if m == 0 || n == 0 || batch == 0 {
            return Ok(());
        }
        a.check(a_rows, a_cols, batch, &format!("{m}×{n}×{k} operand A"))?;
        b.check(b_rows, b_cols, batch, &format!("{m}×{n}×{k} operand B"))?;
        c.check(m, n, batch, &format!("{m}×{n}×{k} product"))?;
        let blas: &CudaBlas = &self.blas;
        let (n32, m32, k32) = (int(n, "n")?, int(m, "m")?, int(k, "k")?);
        let (ldb, lda, ldc) = (int(b.ld.max(1), "ldb")?, int(a.ld.max(1), "lda")?, int(c.ld.max(1), "ldc")?);
        // SAFETY: the checks above bound every element cuBLAS touches; the
        // scalars are host values read at the call (host pointer mode).
        unsafe {
            if batch == 1 {
                // The plain call: cuBLAS's own choice of kernel for one product.
                result::sgemm(
                    *blas.handle(),
                    op(tb),
                    op(ta),
                    n32,
                    m32,
                    k32,
                    &alpha,
                    b.at.ptr as *const f32,
                    ldb,
                    a.at.ptr as *const f32,
                    lda,
                    &beta,
                    c.at.ptr as *mut f32,
                    ldc,
                )
            } else {
                result::sgemm_strided_batched(
                    *blas.handle(),
                    op(tb),
                    op(ta),
                    n32,
                    m32,
                    k32,
                    &alpha,
                    b.at.ptr as *const f32,
                    ldb,
                    long(b.stride, "stride of B")?,
                    a.at.ptr as *const f32,
                    lda,
                    long(a.stride, "stride of A")?,
                    &beta,
                    c.at.ptr as *mut f32,
                    ldc,
                    long(c.stride, "stride of C")?,
                    int(batch, "batch")?,
                )
            }
        }
        .map_err(|e| Error::Gpu(format!("cuBLAS sgemm {m}×{n}×{k} ×{batch}: {e:?}")))
    }
}
