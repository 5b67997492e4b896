//! [`CudaDevice`]: the `Device` trait over one GPU. Each entry point binds the
//! GPU's context on the calling thread, resolves the engine's ids, and hands
//! the work to the driver edge; copies and kernels are enqueued and return at
//! once. Only allocation, index upload and the explicit synchronise calls wait,
//! and they wait on one stream or event, never on the whole device.

use std::sync::Arc;

use geeps_core::device::{Device, DeviceInfo, DevicePtr, EventId, IndexId, PinnedBuf, RowOp, RowPair, StreamId};
use geeps_core::{Error, Result};

use crate::allocations::{self, DeviceMemory};
use crate::config::CudaConfig;
use crate::driver::{self, Context, Stream};
use crate::kernels::Kernels;
use crate::probe::{self, CudaProbe};
use crate::ptx::RowKernel;
use crate::stream_registry::{Events, Streams};
use crate::uploaded_indexes::Indexes;

/// A GPU as a geeps [`Device`]. Device addresses are GPU addresses
/// (`host_addressable = false`): the engine moves host rows through
/// page-locked staging, and the application passes buffers' `device_ptr()`
/// to its own kernels.
pub struct CudaDevice {
    probe: CudaProbe,
    info: DeviceInfo,
    memory: DeviceMemory,
    kernels: Kernels,
    streams: Streams,
    events: Events,
    indexes: Indexes,
    /// Allocation clears and index uploads, off the engine's streams.
    service: Stream,
    // Last: released after everything above is torn down.
    ctx: Arc<Context>,
}

impl CudaDevice {
    /// Whether GPU `ordinal` is usable, and what it is. Never panics: without
    /// a driver or a GPU, the error says what is missing.
    pub fn probe(ordinal: usize) -> Result<CudaProbe> {
        probe::probe(ordinal).map(|(p, _)| p)
    }

    /// Opens GPU `config.ordinal`: retains its primary context, sizes the
    /// capacity (see [`CudaConfig::capacity`]) and loads the kernels.
    pub fn new(config: CudaConfig) -> Result<CudaDevice> {
        let (probe, handle) = probe::probe(config.ordinal)?;
        let ctx = Context::retain(config.ordinal, handle)?;
        let (free, total) = driver::mem_get_info()?;
        let capacity = config.capacity(free, total);
        if let Some(budget) = config.budget.filter(|b| *b > capacity) {
            tracing::warn!(
                "CUDA budget of {budget} bytes lowered to {capacity}: {free} bytes free, {} reserved",
                config.reserve_for(total)
            );
        }
        let service = Stream::create()?;
        let kernels = match Kernels::load() {
            Ok(k) => k,
            Err(e) => {
                // SAFETY: the stream was just created and has no work.
                let _ = unsafe { service.destroy() };
                return Err(e);
            }
        };
        let (major, minor) = probe.compute_capability;
        let info = DeviceInfo {
            name: format!("cuda:{} {} (sm_{major}{minor})", probe.ordinal, probe.name),
            capacity,
            host_addressable: false,
        };
        tracing::info!("{probe}; geeps may use {} MiB", capacity >> 20);
        Ok(CudaDevice {
            probe,
            info,
            memory: DeviceMemory::new(capacity),
            kernels,
            streams: Streams::default(),
            events: Events::default(),
            indexes: Indexes::default(),
            service,
            ctx,
        })
    }

    /// GPU `ordinal` with the default budget and reserve.
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        CudaDevice::new(CudaConfig::ordinal(ordinal))
    }

    /// What the probe found when the device was opened.
    pub fn probed(&self) -> &CudaProbe {
        &self.probe
    }

    fn stream(&self, id: StreamId) -> Result<Stream> {
        self.ctx.bind()?;
        self.streams.get(id)
    }

    /// Enqueues a row kernel from `src` to `dst` through `index`.
    ///
    /// # Safety
    /// As for [`Device::gather`].
    unsafe fn row_kernel(
        &self,
        kernel: RowKernel,
        stream: StreamId,
        src: DevicePtr,
        index: IndexId,
        dst: DevicePtr,
        width: usize,
    ) -> Result<()> {
        let s = self.stream(stream)?;
        let index = self.indexes.get(index)?;
        self.kernels.run(kernel, s, src.0, index, dst.0, width)
    }
}

fn bytes(floats: usize) -> Result<usize> {
    floats.checked_mul(4).ok_or_else(|| Error::Device(format!("a copy of {floats} floats overflows")))
}

impl Device for CudaDevice {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn used_bytes(&self) -> usize {
        self.memory.used()
    }

    fn alloc(&self, floats: usize) -> Result<DevicePtr> {
        self.ctx.bind()?;
        self.memory.alloc(floats, self.service)
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        if let Err(e) = self.ctx.bind() {
            tracing::error!("{e}");
        }
        self.memory.free(ptr)
    }

    fn alloc_pinned(&self, floats: usize) -> Result<PinnedBuf> {
        allocations::alloc_pinned(&self.ctx, floats)
    }

    fn create_stream(&self) -> Result<StreamId> {
        self.ctx.bind()?;
        self.streams.create()
    }

    fn upload_index(&self, pairs: &[RowPair]) -> Result<IndexId> {
        self.ctx.bind()?;
        self.indexes.upload(pairs, self.service)
    }

    fn free_index(&self, index: IndexId) {
        if let Err(e) = self.ctx.bind() {
            tracing::error!("{e}");
        }
        self.indexes.free(index)
    }

    unsafe fn copy_h2d(&self, stream: StreamId, src: *const f32, dst: DevicePtr, floats: usize) -> Result<()> {
        if floats == 0 {
            return Ok(());
        }
        driver::memcpy_h2d(self.stream(stream)?, dst.0, src.cast(), bytes(floats)?)
    }

    unsafe fn copy_d2h(&self, stream: StreamId, src: DevicePtr, dst: *mut f32, floats: usize) -> Result<()> {
        if floats == 0 {
            return Ok(());
        }
        driver::memcpy_d2h(self.stream(stream)?, dst.cast(), src.0, bytes(floats)?)
    }

    unsafe fn copy_d2d(&self, stream: StreamId, src: DevicePtr, dst: DevicePtr, floats: usize) -> Result<()> {
        if floats == 0 {
            return Ok(());
        }
        driver::memcpy_d2d(self.stream(stream)?, dst.0, src.0, bytes(floats)?)
    }

    unsafe fn fill_zero(&self, stream: StreamId, dst: DevicePtr, floats: usize) -> Result<()> {
        if floats == 0 {
            return Ok(());
        }
        driver::memset_zero(self.stream(stream)?, dst.0, floats)
    }

    unsafe fn rows(
        &self,
        stream: StreamId,
        op: RowOp,
        store: DevicePtr,
        index: IndexId,
        buffer: DevicePtr,
        row_width: usize,
    ) -> Result<()> {
        match op {
            RowOp::Gather => self.row_kernel(RowKernel::Gather, stream, store, index, buffer, row_width),
            RowOp::ScatterAssign => self.row_kernel(RowKernel::ScatterAssign, stream, buffer, index, store, row_width),
            RowOp::ScatterAdd => self.row_kernel(RowKernel::ScatterAdd, stream, buffer, index, store, row_width),
        }
    }

    fn record_event(&self, stream: StreamId) -> Result<EventId> {
        let s = self.stream(stream)?;
        self.events.record(s)
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        let s = self.stream(stream)?;
        s.wait(self.events.get(event)?)
    }

    fn synchronize_event(&self, event: EventId) -> Result<()> {
        self.ctx.bind()?;
        self.events.synchronize_and_release(event)
    }

    fn synchronize(&self, stream: StreamId) -> Result<()> {
        self.stream(stream)?.synchronize()
    }
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("name", &self.info.name)
            .field("capacity", &self.info.capacity)
            .field("used", &self.memory.used())
            .finish()
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind() {
            tracing::error!("tearing down the CUDA device: {e}");
            return;
        }
        // SAFETY: the device is going away: once every stream has drained
        // (destroy_all waits for each), no work uses any of its memory.
        unsafe {
            if let Err(e) = self.service.synchronize() {
                tracing::warn!("{e}");
            }
            self.streams.destroy_all();
            self.indexes.free_all();
            self.memory.free_all();
            self.events.destroy_all();
            if let Err(e) = self.service.destroy() {
                tracing::warn!("{e}");
            }
            self.kernels.unload();
        }
    }
}
