//! Local data never waits behind parameter work: with the reclaimer's
//! parameter lane held inside an update (a device whose `scatter_add` blocks
//! until the test opens a gate), local accesses served in place and local
//! saves that move data still go through, and see every earlier write. And
//! an unfilled local buffer never waits behind a save held in
//! `scatter_assign`: nothing is read into it.
//! Nothing here is timed: a wait that should not happen fails the test
//! through the instance's wait deadline.
//! On every device (`geeps_testkit::device_test!`): the gate wraps the
//! backend's device, and buffer contents move through its copies.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use geeps::device::{EventId, IndexId, PinnedBuf, RowOp, RowPair, StreamId};
use geeps::{keys, Config, Device, DeviceInfo, DevicePtr, Geeps, Result, Slack};
use geeps_testkit::{device_test, Backend, Fixture};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Gated {
    /// Updates (the parameter lane).
    ScatterAdd,
    /// Saves into device-resident local rows (the local lane).
    ScatterAssign,
}

/// A backend's device, with one kernel held (before it is enqueued) until
/// `open` is called.
struct GatedDevice {
    inner: Arc<dyn Device>,
    gated: Gated,
    open: Mutex<bool>,
    cond: Condvar,
    blocked: Mutex<u32>,
}

impl GatedDevice {
    fn new(inner: Arc<dyn Device>, gated: Gated) -> Arc<Self> {
        Arc::new(GatedDevice { inner, gated, open: Mutex::new(false), cond: Condvar::new(), blocked: Mutex::new(0) })
    }

    fn hold_if(&self, kernel: Gated) {
        if kernel == self.gated {
            *self.blocked.lock().unwrap() += 1;
            let open = self.open.lock().unwrap();
            drop(self.cond.wait_while(open, |open| !*open).unwrap());
        }
    }

    /// Waits (a bounded while) until a call is held in the gated kernel.
    fn until_held(&self) {
        let start = std::time::Instant::now();
        while *self.blocked.lock().unwrap() == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "nothing reached the gated kernel");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cond.notify_all();
    }

    /// Holds the gated kernel again, from a count of zero.
    fn close(&self) {
        *self.open.lock().unwrap() = false;
        *self.blocked.lock().unwrap() = 0;
    }
}

/// Opens the gate when dropped, so a failing test reports instead of
/// hanging in the instance's shutdown (which joins the held lane).
struct OpenOnDrop(Arc<GatedDevice>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl Device for GatedDevice {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn used_bytes(&self) -> usize {
        self.inner.used_bytes()
    }
    fn alloc(&self, floats: usize) -> Result<DevicePtr> {
        self.inner.alloc(floats)
    }
    fn alloc_scratch(&self, floats: usize) -> Result<DevicePtr> {
        self.inner.alloc_scratch(floats)
    }
    unsafe fn free(&self, ptr: DevicePtr) {
        self.inner.free(ptr)
    }
    fn alloc_pinned(&self, floats: usize) -> Result<PinnedBuf> {
        self.inner.alloc_pinned(floats)
    }
    fn create_stream(&self) -> Result<StreamId> {
        self.inner.create_stream()
    }
    fn upload_index(&self, pairs: &[RowPair]) -> Result<IndexId> {
        self.inner.upload_index(pairs)
    }
    fn free_index(&self, index: IndexId) {
        self.inner.free_index(index)
    }
    unsafe fn copy_h2d(&self, stream: StreamId, src: *const f32, dst: DevicePtr, floats: usize) -> Result<()> {
        self.inner.copy_h2d(stream, src, dst, floats)
    }
    unsafe fn copy_d2h(&self, stream: StreamId, src: DevicePtr, dst: *mut f32, floats: usize) -> Result<()> {
        self.inner.copy_d2h(stream, src, dst, floats)
    }
    unsafe fn copy_d2d(&self, stream: StreamId, src: DevicePtr, dst: DevicePtr, floats: usize) -> Result<()> {
        self.inner.copy_d2d(stream, src, dst, floats)
    }
    unsafe fn fill_zero(&self, stream: StreamId, dst: DevicePtr, floats: usize) -> Result<()> {
        self.inner.fill_zero(stream, dst, floats)
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
            RowOp::ScatterAssign => self.hold_if(Gated::ScatterAssign),
            RowOp::ScatterAdd => self.hold_if(Gated::ScatterAdd),
            RowOp::Gather => {}
        }
        self.inner.rows(stream, op, store, index, buffer, row_width)
    }
    fn record_event(&self, stream: StreamId) -> Result<EventId> {
        self.inner.record_event(stream)
    }
    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        self.inner.stream_wait_event(stream, event)
    }
    fn synchronize_event(&self, event: EventId) -> Result<()> {
        self.inner.synchronize_event(event)
    }
    fn synchronize(&self, stream: StreamId) -> Result<()> {
        self.inner.synchronize(stream)
    }
}

const WIDTH: usize = 4;

/// A builder on `backend`'s device gating `gated`, with a deadline well
/// below the test's own patience: a wrong wait fails fast; the fixture to
/// look into its buffers.
fn gated_builder(backend: Backend, gated: Gated) -> (Arc<GatedDevice>, geeps::GeepsBuilder, Fixture) {
    let device = GatedDevice::new(backend.device(1 << 20), gated);
    let fx = Fixture::wrapping(backend, device.clone());
    let config =
        Config::default().with_row_width(WIDTH).with_device_memory(1 << 20).with_wait_deadline(Duration::from_secs(3));
    let mut b = Geeps::builder(config);
    b.device(device.clone());
    (device, b, fx)
}

device_test!(local_data_does_not_wait_behind_a_held_update, |backend| {
    let (device, mut b, fx) = gated_builder(backend, Gated::ScatterAdd);
    let w = b.parameter_table("w", 4);
    let act = b.local_table("act", 2);
    let ps = b.build().unwrap();
    let _gate = OpenOnDrop(device.clone());

    let forward = keys(act, 0..2);
    let reversed = [forward[1], forward[0]];
    let u = ps.virtual_pre_update(&keys(w, 0..4)).unwrap();
    ps.virtual_update(u).unwrap();
    // `a` is the unit's own key list (served in place); `r` names the same
    // rows in another order (copied through a buffer, saved by the local lane).
    let a = ps.virtual_local_access(&forward, true).unwrap();
    ps.virtual_post_local_access(a, true).unwrap();
    let r = ps.virtual_local_access(&reversed, true).unwrap();
    ps.virtual_post_local_access(r, true).unwrap();
    let a2 = ps.virtual_local_access(&forward, true).unwrap();
    ps.virtual_post_local_access(a2, true).unwrap();
    ps.virtual_table_clock(w).unwrap();
    ps.finish_virtual_iteration().unwrap();
    let plan = ps.plan().unwrap();
    assert_eq!(plan.local_host_bytes, 0, "{plan}");
    assert_eq!(plan.param_host_bytes, 0, "{plan}");

    // An update scatter-adds into a host-reachable cache only once a read
    // has caught the cache up with this clock's deltas (otherwise the
    // deltas go to the outgoing accumulator alone); a GPU-resident cache
    // always takes it on the device. Catch up first, with the gate open.
    device.open();
    let early = ps.pre_update_keys(&keys(w, 0..4)).unwrap();
    fx.fill(&early, 0.5);
    early.update().unwrap();
    let seen = ps.read_keys(&keys(w, 0..4), Slack::Unbounded).unwrap();
    assert!(fx.get(&seen).iter().all(|v| *v == 0.5));
    seen.post().unwrap();
    device.close();

    // The update goes to the parameter lane, which blocks in scatter_add.
    let up = ps.pre_update(u).unwrap();
    fx.fill(&up, 1.0);
    up.update().unwrap();
    device.until_held();

    let la = ps.local_access(a).unwrap();
    fx.set(&la, &[1., 1., 1., 1., 2., 2., 2., 2.]);
    la.post().unwrap();
    // Copied: needs the in-place save above, counted by the local lane.
    let lr = ps.local_access(r).unwrap();
    assert_eq!(fx.get(&lr), [2., 2., 2., 2., 1., 1., 1., 1.]);
    fx.modify(&lr, |s| s[..WIDTH].fill(5.0));
    lr.post().unwrap();
    // In place again: needs the local lane to have moved the copy's rows back.
    let la2 = ps.local_access(a2).unwrap();
    assert_eq!(fx.get(&la2), [1., 1., 1., 1., 5., 5., 5., 5.]);
    la2.post().unwrap();
    assert_eq!(*device.blocked.lock().unwrap(), 1, "the update should still be held in scatter_add");

    device.open();
    ps.table_clock(w).unwrap();
    let read = ps.read_keys(&keys(w, 0..4), Slack::BSP).unwrap();
    let v = fx.get(&read);
    assert!(v.iter().all(|v| *v == 1.5), "{v:?}");
    read.post().unwrap();
    ps.shutdown().unwrap();
});

device_test!(an_unfilled_local_buffer_does_not_wait_behind_a_held_save, |backend| {
    let (device, mut b, fx) = gated_builder(backend, Gated::ScatterAssign);
    let act = b.local_table("act", 4);
    let ps = b.build().unwrap();
    let _gate = OpenOnDrop(device.clone());

    // Rows 0..2 (A) and 2..4 (B), each first named in order (their units,
    // served in place), then reversed (copied through a buffer: a save is a
    // scatter_assign into the device-resident rows).
    let (a, bk) = (keys(act, 0..2), keys(act, 2..4));
    let mut in_order = Vec::new();
    for k in [&a, &bk] {
        let h = ps.virtual_local_access(k, true).unwrap();
        ps.virtual_post_local_access(h, false).unwrap();
        in_order.push(h);
    }
    let write_a = ps.virtual_local_access(&[a[1], a[0]], false).unwrap();
    ps.virtual_post_local_access(write_a, true).unwrap();
    let write_b = ps.virtual_local_access(&[bk[1], bk[0]], false).unwrap();
    ps.virtual_post_local_access(write_b, true).unwrap();
    ps.finish_virtual_iteration().unwrap();
    let plan = ps.plan().unwrap();
    assert_eq!(plan.local_host_bytes, 0, "{plan}");

    for h in in_order {
        ps.local_access(h).unwrap().post().unwrap();
    }
    let wa = ps.local_access(write_a).unwrap();
    fx.set(&wa, &[1., 1., 1., 1., 2., 2., 2., 2.]);
    wa.post().unwrap();
    device.until_held();
    // The local lane is now held in A's save; B's buffer is filled with
    // nothing, so it must not wait for that save.
    let wb = ps.local_access(write_b).unwrap();
    fx.set(&wb, &[3., 3., 3., 3., 4., 4., 4., 4.]);
    wb.post().unwrap();
    assert_eq!(*device.blocked.lock().unwrap(), 1, "A's save should still be held in scatter_assign");

    device.open();
    let all = ps.local_access_keys(&keys(act, 0..4), true).unwrap();
    assert_eq!(fx.get(&all), [2., 2., 2., 2., 1., 1., 1., 1., 4., 4., 4., 4., 3., 3., 3., 3.]);
    all.post_with(false).unwrap();
    ps.shutdown().unwrap();
});
