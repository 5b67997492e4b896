//! cuBLAS's single-precision products as stream operations: column-major
//! `C = alpha * op(A) * op(B) + beta * C` (one, or a strided batch), and
//! `y = alpha * op(A) * x + beta * y` as the one-column case, computed on the
//! CPU by `matrixmultiply`. Each operation holds the device ranges it reads
//! and writes (resolved and bounds-checked when enqueued) and alpha, beta by
//! value (host pointer mode reads them at the call). Must never validate at
//! run time what the enqueuing call should have refused, nor hold two
//! allocations' locks at once.

use crate::memory::Span;

/// Whether an operand is used as stored or transposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transpose {
    No,
    Yes,
}

/// One column-major operand: where it lies and its leading dimension.
#[derive(Debug, Clone)]
pub struct Operand {
    /// Covers every element the operation touches, in every batch entry;
    /// None when it touches none (an empty operand is never read).
    pub span: Option<Span>,
    pub ld: usize,
    /// Elements between batch entries.
    pub stride: usize,
}

impl Operand {
    fn read(&self) -> Vec<f32> {
        match &self.span {
            Some(span) => bytes_to_floats(&span.alloc.lock()[span.offset..span.offset + span.len]),
            None => Vec::new(),
        }
    }
}

/// `batch` products `C_i = α·op(A_i)·op(B_i) + β·C_i`, with `op(A)` m × k,
/// `op(B)` k × n and C m × n.
#[derive(Debug, Clone)]
pub struct Gemm {
    pub trans_a: Transpose,
    pub trans_b: Transpose,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub a: Operand,
    pub b: Operand,
    pub c: Operand,
    /// Elements between C's rows: 1 for a matrix, `incy` for gemv's y.
    pub c_row_stride: usize,
    pub batch: usize,
}

fn bytes_to_floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|w| f32::from_ne_bytes([w[0], w[1], w[2], w[3]])).collect()
}

/// Row and column strides of `op(X)` for a column-major X with leading dimension `ld`.
fn strides(trans: Transpose, ld: usize) -> (isize, isize) {
    match trans {
        Transpose::No => (1, ld as isize),
        Transpose::Yes => (ld as isize, 1),
    }
}

impl Gemm {
    pub fn describe(&self) -> String {
        let at = self.c.span.as_ref().map_or(0, |s| s.alloc.base + s.offset as u64);
        format!("a cuBLAS sgemm of {}×{}×{} ({} batch entries) into {at:#x}", self.m, self.n, self.k, self.batch)
    }

    /// Computes the products. A and B are copied out first, so C may share
    /// their allocation (not their elements, as cuBLAS requires).
    pub fn run(self) {
        let Some(c_span) = &self.c.span else { return };
        let a = self.a.read();
        let b = self.b.read();
        let mut guard = c_span.alloc.lock();
        let out = &mut guard[c_span.offset..c_span.offset + c_span.len];
        let mut c = bytes_to_floats(out);
        let (rsa, csa) = strides(self.trans_a, self.a.ld);
        let (rsb, csb) = strides(self.trans_b, self.b.ld);
        for i in 0..self.batch {
            let c_at = i * self.c.stride;
            if self.k == 0 {
                // No products: C = β·C (β = 0 clears C whatever it held).
                for col in 0..self.n {
                    for row in 0..self.m {
                        let e = &mut c[c_at + col * self.c.ld + row * self.c_row_stride];
                        *e = if self.beta == 0.0 { 0.0 } else { self.beta * *e };
                    }
                }
                continue;
            }
            let (a_at, b_at) = (i * self.a.stride, i * self.b.stride);
            // SAFETY: the extents were checked when the operation was
            // enqueued: every (row, col) of op(A), op(B) and C addressed by
            // these strides lies inside the copied vectors; C's elements are
            // not shared with A or B (separate vectors).
            unsafe {
                matrixmultiply::sgemm(
                    self.m,
                    self.k,
                    self.n,
                    self.alpha,
                    a.as_ptr().add(a_at),
                    rsa,
                    csa,
                    b.as_ptr().add(b_at),
                    rsb,
                    csb,
                    self.beta,
                    c.as_mut_ptr().add(c_at),
                    self.c_row_stride as isize,
                    self.c.ld as isize,
                );
            }
        }
        for (word, v) in out.chunks_exact_mut(4).zip(&c) {
            word.copy_from_slice(&v.to_ne_bytes());
        }
    }
}
