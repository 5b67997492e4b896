//! One worker's GPU for layer compute: its context, stream, cuBLAS handle,
//! loaded kernels and scratch, with the copies, memsets and launches every
//! layer uses. It must never treat a device address as a host pointer, and
//! never posts a geeps buffer (the worker does, after [`Gpu::sync`]).
//!
//! The driver and cuBLAS are loaded at run time: without them [`Gpu::open`]
//! returns an error saying so, never panics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaStream};
use parking_lot::Mutex;

use super::dev_slice::DevSlice;
use super::emulated;
use super::kernels::{Arg, Kernels};
use super::scratch::Scratch;
use crate::error::{Error, Result};

/// One worker's GPU: context, stream, cuBLAS handle, loaded kernels, scratch.
pub struct Gpu {
    ordinal: usize,
    stream: Arc<CudaStream>,
    pub(super) blas: CudaBlas,
    kernels: Kernels,
    scratch: Mutex<Scratch>,
    /// Floats of scratch a layer's run of images may take.
    scratch_bound: AtomicUsize,
    // Last: released after everything that uses it.
    ctx: Arc<CudaContext>,
}

/// The default [`Gpu::scratch_bound`]: 64 MiB.
pub const DEFAULT_SCRATCH_BOUND: usize = 16 << 20;

fn gpu_error(what: impl std::fmt::Display) -> Error {
    Error::Gpu(what.to_string())
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// Runs `f`, turning a panic inside the CUDA bindings (a missing library or
/// symbol) into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(Error::Gpu(format!("{what}: {}", panic_text(&*p)))))
}

impl Gpu {
    /// Opens GPU `ordinal` for layer compute: retains its primary context
    /// (the one geeps' CUDA device uses, so buffer addresses are valid here),
    /// creates a stream and a cuBLAS handle and loads the layer kernels.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        guarded("opening the GPU for layer compute", || {
            // SAFETY: only checks whether the libraries can be loaded.
            if !unsafe { cudarc::driver::sys::is_culib_present() } {
                return Err(gpu_error(
                    "no CUDA driver (libcuda.so.1) found: install the NVIDIA driver, or train on the CPU (no --gpu, \
                     solver_mode: CPU)",
                ));
            }
            // SAFETY: as above.
            if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                return Err(gpu_error(
                    "cuBLAS (libcublas.so.12) not found: install the CUDA 12 runtime libraries (e.g. the \
                     nvidia-cublas-cu12 package) and put them on LD_LIBRARY_PATH",
                ));
            }
            let ctx = CudaContext::new(ordinal).map_err(|e| gpu_error(format!("GPU {ordinal}: {e}")))?;
            // Under the emulated driver, its native kernels (before any launch).
            emulated::register_if_emulated();
            let stream = ctx.new_stream().map_err(|e| gpu_error(format!("GPU {ordinal}: a stream: {e}")))?;
            let blas = CudaBlas::new(stream.clone()).map_err(|e| gpu_error(format!("GPU {ordinal}: cuBLAS: {e}")))?;
            let kernels = Kernels::load(&ctx)?;
            Ok(Gpu {
                ordinal,
                stream,
                blas,
                kernels,
                scratch: Mutex::new(Scratch::default()),
                scratch_bound: AtomicUsize::new(DEFAULT_SCRATCH_BOUND),
                ctx,
            })
        })
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Makes the GPU's context current on this thread (allocations need it).
    pub(super) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| gpu_error(format!("GPU {}: binding its context: {e}", self.ordinal)))
    }

    /// Waits until everything enqueued on the stream has run: call before a
    /// geeps buffer the kernels wrote is posted or read on the host.
    pub fn sync(&self) -> Result<()> {
        self.stream.synchronize().map_err(|e| gpu_error(format!("GPU {}: a layer kernel failed: {e}", self.ordinal)))
    }

    /// Errors when work is still queued on the stream: a worker calls it
    /// before it posts the buffers that work touched, since geeps may move
    /// them on its own streams from then on. Costs one stream query.
    pub fn ensure_idle(&self, what: impl FnOnce() -> String) -> Result<()> {
        // SAFETY: the stream is live while `self` is.
        match unsafe { cudarc::driver::sys::cuStreamQuery(self.stream.cu_stream()) } {
            cudarc::driver::sys::CUresult::CUDA_SUCCESS => Ok(()),
            cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY => Err(gpu_error(format!(
                "GPU {}: {}: kernels were still queued on the worker's stream when its buffers went back to \
                 geeps (a synchronise is missing before the post; a bug in caffe-geeps, please report it)",
                self.ordinal,
                what()
            ))),
            e => Err(gpu_error(format!("GPU {}: {}: a layer kernel failed: {e:?}", self.ordinal, what()))),
        }
    }

    /// Copies `src` to the host.
    pub fn download(&self, src: DevSlice) -> Result<Vec<f32>> {
        let mut out = vec![0.0f32; src.len];
        if src.len > 0 {
            // SAFETY: `src` is live device memory of `len` floats (the
            // caller's buffer); the copy is synchronous.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(&mut out, src.ptr, self.stream.cu_stream())
                    .map_err(|e| gpu_error(format!("GPU {}: a copy to the host: {e}", self.ordinal)))?;
            }
            self.sync()?;
        }
        Ok(out)
    }

    /// Copies `src` into device memory `dst` (which must hold it).
    pub fn upload(&self, src: &[f32], dst: DevSlice) -> Result<()> {
        self.upload_words(src, dst.prefix(src.len())?)
    }

    /// Copies the plain values `src` (bytes, words) into `dst`, which must
    /// hold their bytes; synchronous.
    pub fn upload_words<T: Copy>(&self, src: &[T], dst: DevSlice) -> Result<()> {
        let bytes = std::mem::size_of_val(src);
        if bytes > dst.len * 4 {
            return Err(gpu_error(format!("{bytes} bytes do not fit a device range of {} floats", dst.len)));
        }
        if bytes > 0 {
            // SAFETY: `dst` holds `bytes` bytes; synchronous before `src` may go.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(dst.ptr, src, self.stream.cu_stream())
                    .map_err(|e| gpu_error(format!("GPU {}: a copy to the device: {e}", self.ordinal)))?;
            }
            self.sync()?;
        }
        Ok(())
    }

    /// Sets `dst` to zero (enqueued).
    pub fn zero(&self, dst: DevSlice) -> Result<()> {
        if dst.len > 0 {
            // SAFETY: `dst` is live device memory of `len` floats.
            unsafe {
                cudarc::driver::result::memset_d8_async(dst.ptr, 0, dst.len * 4, self.stream.cu_stream())
                    .map_err(|e| gpu_error(format!("GPU {}: a memset: {e}", self.ordinal)))?;
            }
        }
        Ok(())
    }

    /// Copies `src` to `dst` on the device (enqueued); equal lengths.
    pub fn copy(&self, src: DevSlice, dst: DevSlice) -> Result<()> {
        let dst = dst.prefix(src.len)?;
        if src.len > 0 {
            // SAFETY: both are live device memory of `len` floats.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(dst.ptr, src.ptr, src.len * 4, self.stream.cu_stream())
                    .map_err(|e| gpu_error(format!("GPU {}: a device copy: {e}", self.ordinal)))?;
            }
        }
        Ok(())
    }

    /// Launches the grid-stride kernel `name` over `n` elements.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters, and the device ranges they
    /// point to must hold everything the kernel touches for them.
    pub unsafe fn launch_n(&self, name: &str, n: usize, args: &[Arg]) -> Result<()> {
        self.kernels.launch_n(self.stream.cu_stream(), name, n, args)
    }

    /// Launches `name` over `blocks` blocks of `threads` threads.
    ///
    /// # Safety
    /// As [`Gpu::launch_n`].
    pub unsafe fn launch_blocks(&self, name: &str, blocks: usize, threads: u32, args: &[Arg]) -> Result<()> {
        if blocks == 0 {
            return Ok(());
        }
        let grid = u32::try_from(blocks).map_err(|_| Error::Gpu(format!("kernel `{name}`: {blocks} blocks")))?;
        self.kernels.launch(self.stream.cu_stream(), name, (grid, 1, 1), (threads, 1, 1), args)
    }

    /// Floats of device scratch a layer that works through its images a run
    /// at a time (convolution) may take for one run; a layer whose single
    /// image needs more takes what that image needs.
    pub fn scratch_bound(&self) -> usize {
        self.scratch_bound.load(Ordering::Relaxed)
    }

    /// Sets [`Gpu::scratch_bound`] (at least one float).
    pub fn set_scratch_bound(&self, floats: usize) {
        self.scratch_bound.store(floats.max(1), Ordering::Relaxed);
    }

    /// Runs `f` with `floats` floats of device scratch (contents undefined),
    /// valid until `f` returns; enqueued work on it completes first.
    pub fn with_scratch<T>(&self, floats: usize, f: impl FnOnce(DevSlice) -> Result<T>) -> Result<T> {
        let Some(mut scratch) = self.scratch.try_lock() else {
            return Err(Error::Gpu("device scratch asked for twice at once (a layer nests its use)".into()));
        };
        let buf = scratch.at_least(&self.stream, floats)?;
        let out = f(buf);
        // The next user may grow (free) the buffer: nothing may still read it.
        self.sync()?;
        out
    }
}
