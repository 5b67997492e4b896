//! The cuBLAS entry points a program calls through cudarc (`cublas_v2.h`
//! signatures and `cublasStatus_t` codes): handles bound to a stream,
//! pointer and math modes, and single-precision GEMM, strided-batched GEMM
//! and GEMV, enqueued on the handle's stream like any kernel. The same
//! library answers as `libcublas.so` (see `scripts/with-cuda-emu`), so
//! cuBLAS and the driver share one device address space. Arguments are
//! checked as cuBLAS checks them (dimensions, leading dimensions, live
//! device ranges); host pointer mode only. Must never run the product on
//! the calling thread.

use std::ffi::{c_int, c_longlong, c_void};
use std::sync::Arc;

use super::guard::{handle, key};
use crate::blas::{Gemm, Operand, Transpose};
use crate::handles::{Kind, Registry};
use crate::log;
use crate::memory::space;
use crate::ops::Op;
use crate::stream_table::{self, submit};
use crate::{context, result::CUresult};

/// A `cublasStatus_t`.
pub type CublasStatus = u32;

pub const CUBLAS_STATUS_SUCCESS: CublasStatus = 0;
pub const CUBLAS_STATUS_NOT_INITIALIZED: CublasStatus = 1;
pub const CUBLAS_STATUS_ALLOC_FAILED: CublasStatus = 3;
pub const CUBLAS_STATUS_INVALID_VALUE: CublasStatus = 7;
pub const CUBLAS_STATUS_EXECUTION_FAILED: CublasStatus = 13;
pub const CUBLAS_STATUS_INTERNAL_ERROR: CublasStatus = 14;
pub const CUBLAS_STATUS_NOT_SUPPORTED: CublasStatus = 15;

const CUBLAS_POINTER_MODE_HOST: u32 = 0;
/// cuBLAS 12.0's version number, as `cublasGetVersion` gives it.
const VERSION: c_int = 120_001;

/// What a handle keeps: its context and the stream it enqueues on.
#[derive(Clone)]
struct BlasHandle {
    context: u64,
    /// A `CUstream` value (0: the legacy default stream), resolved per call.
    stream: u64,
}

static HANDLES: Registry<Arc<std::sync::Mutex<BlasHandle>>> = Registry::new(Kind::Blas);

type Res<T> = Result<T, CublasStatus>;

fn refuse<T>(code: CublasStatus, why: impl FnOnce() -> String) -> Res<T> {
    log::debug(|| format!("cuBLAS refused ({code}): {}", why()));
    Err(code)
}

/// Runs an export's body; a panic becomes CUBLAS_STATUS_INTERNAL_ERROR.
fn guard(name: &'static str, body: impl FnOnce() -> Res<()>) -> CublasStatus {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => CUBLAS_STATUS_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            log::fault(&format!("{name} panicked inside the emulator; returning CUBLAS_STATUS_INTERNAL_ERROR"));
            CUBLAS_STATUS_INTERNAL_ERROR
        }
    }
}

fn lookup(h: *mut c_void, call: &str) -> Res<Arc<std::sync::Mutex<BlasHandle>>> {
    match HANDLES.get(key(h)) {
        Some(b) => Ok(b),
        None => refuse(CUBLAS_STATUS_NOT_INITIALIZED, || format!("{call}: {h:?} is not a live cuBLAS handle")),
    }
}

fn driver(code: CUresult, call: &str) -> CublasStatus {
    log::debug(|| format!("{call}: the driver refused with {}", crate::result::label(code)));
    CUBLAS_STATUS_EXECUTION_FAILED
}

fn transpose(op: c_int, call: &str) -> Res<Transpose> {
    match op {
        0 => Ok(Transpose::No),
        // CUBLAS_OP_C is CUBLAS_OP_T for real numbers.
        1 | 2 => Ok(Transpose::Yes),
        _ => refuse(CUBLAS_STATUS_INVALID_VALUE, || format!("{call}: operation {op} is not N, T or C")),
    }
}

fn dim(v: impl TryInto<usize> + Copy + std::fmt::Display, what: &str, call: &str) -> Res<usize> {
    v.try_into().or_else(|_| refuse(CUBLAS_STATUS_INVALID_VALUE, || format!("{call}: {what} = {v} is negative")))
}

unsafe fn scalar(p: *const f32, what: &str, call: &str) -> Res<f32> {
    if p.is_null() {
        return refuse(CUBLAS_STATUS_INVALID_VALUE, || format!("{call}: {what} is NULL"));
    }
    if space().is_device_address(p as u64) {
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, || {
            format!("{call}: {what} is a device pointer; the emulator supports CUBLAS_POINTER_MODE_HOST only")
        });
    }
    Ok(p.read())
}

/// Resolves a stored `rows × cols` operand (a batch of them `stride` apart).
fn operand(
    ptr: *const f32,
    (rows, cols, ld, stride, batch): (usize, usize, usize, usize, usize),
    row_stride: usize,
    what: &str,
    call: &str,
) -> Res<Operand> {
    let extent = if rows == 0 || cols == 0 || batch == 0 {
        0
    } else {
        (batch - 1) * stride + (cols - 1) * ld + (rows - 1) * row_stride + 1
    };
    // An operand of no elements is never read: any pointer will do, as in cuBLAS.
    if extent == 0 {
        return Ok(Operand { span: None, ld, stride });
    }
    match space().span(ptr as u64, extent * 4) {
        Ok(span) => Ok(Operand { span: Some(span), ld, stride }),
        Err(why) => refuse(CUBLAS_STATUS_INVALID_VALUE, || format!("{call}: {what}: {why}")),
    }
}

fn enqueue(h: &BlasHandle, gemm: Gemm, call: &str) -> Res<()> {
    let stream = stream_table::resolve(h.stream).map_err(|c| driver(c, call))?;
    if stream.context().handle != h.context {
        return refuse(CUBLAS_STATUS_INVALID_VALUE, || format!("{call}: the handle's stream is of another context"));
    }
    for (what, span) in [("A", &gemm.a.span), ("B", &gemm.b.span), ("C", &gemm.c.span)] {
        if span.as_ref().is_some_and(|s| s.alloc.context != h.context) {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || format!("{call}: {what} belongs to another context"));
        }
    }
    submit(&stream, Op::Gemm(Box::new(gemm))).map(|_| ()).map_err(|c| driver(c, call))
}

#[no_mangle]
pub unsafe extern "C" fn cublasCreate_v2(out: *mut *mut c_void) -> CublasStatus {
    guard("cublasCreate_v2", || {
        if out.is_null() {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || "cublasCreate_v2: NULL output".into());
        }
        let ctx = context::current()
            .or_else(|_| refuse(CUBLAS_STATUS_NOT_INITIALIZED, || "cublasCreate_v2: no current CUDA context".into()))?;
        let h = HANDLES
            .insert(Arc::new(std::sync::Mutex::new(BlasHandle { context: ctx.handle, stream: 0 })))
            .ok_or(CUBLAS_STATUS_ALLOC_FAILED)?;
        out.write(handle(h));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cublasDestroy_v2(h: *mut c_void) -> CublasStatus {
    guard("cublasDestroy_v2", || match HANDLES.remove(key(h)) {
        Some(_) => Ok(()),
        None => refuse(CUBLAS_STATUS_NOT_INITIALIZED, || format!("cublasDestroy_v2: {h:?} is not a live handle")),
    })
}

#[no_mangle]
pub unsafe extern "C" fn cublasGetVersion_v2(h: *mut c_void, version: *mut c_int) -> CublasStatus {
    guard("cublasGetVersion_v2", || {
        lookup(h, "cublasGetVersion_v2")?;
        if version.is_null() {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || "cublasGetVersion_v2: NULL output".into());
        }
        version.write(VERSION);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cublasSetStream_v2(h: *mut c_void, s: *mut c_void) -> CublasStatus {
    guard("cublasSetStream_v2", || {
        let b = lookup(h, "cublasSetStream_v2")?;
        stream_table::resolve(key(s)).map_err(|c| driver(c, "cublasSetStream_v2"))?;
        b.lock().unwrap_or_else(|p| p.into_inner()).stream = key(s);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cublasGetStream_v2(h: *mut c_void, out: *mut *mut c_void) -> CublasStatus {
    guard("cublasGetStream_v2", || {
        let b = lookup(h, "cublasGetStream_v2")?;
        if out.is_null() {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || "cublasGetStream_v2: NULL output".into());
        }
        out.write(handle(b.lock().unwrap_or_else(|p| p.into_inner()).stream));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cublasSetPointerMode_v2(h: *mut c_void, mode: u32) -> CublasStatus {
    guard("cublasSetPointerMode_v2", || {
        lookup(h, "cublasSetPointerMode_v2")?;
        if mode != CUBLAS_POINTER_MODE_HOST {
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, || {
                format!("cublasSetPointerMode_v2({mode}): the emulator supports CUBLAS_POINTER_MODE_HOST only")
            });
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cublasGetPointerMode_v2(h: *mut c_void, mode: *mut u32) -> CublasStatus {
    guard("cublasGetPointerMode_v2", || {
        lookup(h, "cublasGetPointerMode_v2")?;
        if mode.is_null() {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || "cublasGetPointerMode_v2: NULL output".into());
        }
        mode.write(CUBLAS_POINTER_MODE_HOST);
        Ok(())
    })
}

/// Every math mode computes in plain fp32 here (the CPU has no tensor cores).
#[no_mangle]
pub unsafe extern "C" fn cublasSetMathMode(h: *mut c_void, _mode: u32) -> CublasStatus {
    guard("cublasSetMathMode", || lookup(h, "cublasSetMathMode").map(|_| ()))
}

#[allow(clippy::too_many_arguments)]
unsafe fn gemm(
    call: &str,
    h: *mut c_void,
    (transa, transb): (c_int, c_int),
    (m, n, k): (c_int, c_int, c_int),
    (alpha, beta): (*const f32, *const f32),
    (a, lda, stride_a): (*const f32, c_int, c_longlong),
    (b, ldb, stride_b): (*const f32, c_int, c_longlong),
    (c, ldc, stride_c): (*mut f32, c_int, c_longlong),
    batch: c_int,
) -> Res<()> {
    let blas = lookup(h, call)?;
    let blas = blas.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (trans_a, trans_b) = (transpose(transa, call)?, transpose(transb, call)?);
    let (m, n, k) = (dim(m, "m", call)?, dim(n, "n", call)?, dim(k, "k", call)?);
    let (lda, ldb, ldc) = (dim(lda, "lda", call)?, dim(ldb, "ldb", call)?, dim(ldc, "ldc", call)?);
    let (stride_a, stride_b, stride_c) =
        (dim(stride_a, "strideA", call)?, dim(stride_b, "strideB", call)?, dim(stride_c, "strideC", call)?);
    let batch = dim(batch, "batchCount", call)?;
    // Stored shapes: op(A) is m × k, op(B) is k × n.
    let (a_rows, a_cols) = if trans_a == Transpose::No { (m, k) } else { (k, m) };
    let (b_rows, b_cols) = if trans_b == Transpose::No { (k, n) } else { (n, k) };
    for (what, ld, rows) in [("lda", lda, a_rows), ("ldb", ldb, b_rows), ("ldc", ldc, m)] {
        if ld < rows.max(1) {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || {
                format!("{call}: {what} = {ld} is below the operand's {rows} stored rows")
            });
        }
    }
    if m == 0 || n == 0 || batch == 0 {
        return Ok(());
    }
    let (alpha, beta) = (scalar(alpha, "alpha", call)?, scalar(beta, "beta", call)?);
    let used = |rows, cols| if k == 0 { (0, 0) } else { (rows, cols) };
    let (ar, ac) = used(a_rows, a_cols);
    let (br, bc) = used(b_rows, b_cols);
    let gemm = Gemm {
        trans_a,
        trans_b,
        m,
        n,
        k,
        alpha,
        beta,
        a: operand(a, (ar, ac, lda, stride_a, batch), 1, "A", call)?,
        b: operand(b, (br, bc, ldb, stride_b, batch), 1, "B", call)?,
        c: operand(c, (m, n, ldc, stride_c, batch), 1, "C", call)?,
        c_row_stride: 1,
        batch,
    };
    enqueue(&blas, gemm, call)
}

#[no_mangle]
pub unsafe extern "C" fn cublasSgemm_v2(
    h: *mut c_void,
    transa: c_int,
    transb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    a: *const f32,
    lda: c_int,
    b: *const f32,
    ldb: c_int,
    beta: *const f32,
    c: *mut f32,
    ldc: c_int,
) -> CublasStatus {
    guard("cublasSgemm_v2", || {
        gemm("cublasSgemm_v2", h, (transa, transb), (m, n, k), (alpha, beta), (a, lda, 0), (b, ldb, 0), (c, ldc, 0), 1)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cublasSgemmStridedBatched(
    h: *mut c_void,
    transa: c_int,
    transb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    a: *const f32,
    lda: c_int,
    stride_a: c_longlong,
    b: *const f32,
    ldb: c_int,
    stride_b: c_longlong,
    beta: *const f32,
    c: *mut f32,
    ldc: c_int,
    stride_c: c_longlong,
    batch: c_int,
) -> CublasStatus {
    guard("cublasSgemmStridedBatched", || {
        gemm(
            "cublasSgemmStridedBatched",
            h,
            (transa, transb),
            (m, n, k),
            (alpha, beta),
            (a, lda, stride_a),
            (b, ldb, stride_b),
            (c, ldc, stride_c),
            batch,
        )
    })
}

/// `y = α·op(A)·x + β·y`: a product with one column, x and y strided.
#[no_mangle]
pub unsafe extern "C" fn cublasSgemv_v2(
    h: *mut c_void,
    trans: c_int,
    m: c_int,
    n: c_int,
    alpha: *const f32,
    a: *const f32,
    lda: c_int,
    x: *const f32,
    incx: c_int,
    beta: *const f32,
    y: *mut f32,
    incy: c_int,
) -> CublasStatus {
    const CALL: &str = "cublasSgemv_v2";
    guard(CALL, || {
        let blas = lookup(h, CALL)?;
        let blas = blas.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let trans_a = transpose(trans, CALL)?;
        let (m, n, lda) = (dim(m, "m", CALL)?, dim(n, "n", CALL)?, dim(lda, "lda", CALL)?);
        if lda < m.max(1) {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || format!("{CALL}: lda = {lda} is below m = {m}"));
        }
        if incx <= 0 || incy <= 0 {
            return refuse(CUBLAS_STATUS_INVALID_VALUE, || {
                format!("{CALL}: incx = {incx}, incy = {incy}: the emulator supports positive increments")
            });
        }
        let (incx, incy) = (incx as usize, incy as usize);
        // op(A) is rows × inner; x has `inner` elements, y `rows`.
        let (rows, inner) = if trans_a == Transpose::No { (m, n) } else { (n, m) };
        if rows == 0 {
            return Ok(());
        }
        let (alpha, beta) = (scalar(alpha, "alpha", CALL)?, scalar(beta, "beta", CALL)?);
        let (ar, ac) = if inner == 0 { (0, 0) } else { (m, n) };
        let gemm = Gemm {
            trans_a,
            // x as a stored 1 × inner row with leading dimension incx, transposed.
            trans_b: Transpose::Yes,
            m: rows,
            n: 1,
            k: inner,
            alpha,
            beta,
            a: operand(a, (ar, ac, lda, 0, 1), 1, "A", CALL)?,
            b: operand(x, (if inner == 0 { 0 } else { 1 }, inner, incx, 0, 1), 1, "x", CALL)?,
            c: operand(y, (rows, 1, 1, 0, 1), incy, "y", CALL)?,
            c_row_stride: incy,
            batch: 1,
        };
        enqueue(&blas, gemm, CALL)
    })
}
