//! The access buffer pool: a byte budget of device memory handed out as
//! buffers for reads, pre-updates and local accesses. Buffers are recycled by
//! exact size (an iteration asks for the same sizes every time), so there is
//! no fragmentation to deadlock on and no allocation in steady state.
//! Part of the budget may be reserved for buffers held elsewhere (an
//! outgoing pre-update buffer, host memory the device addresses) while the
//! application holds them, so they count as a pool buffer would.
//! It never decides who may wait or for how long; callers pass that in.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::device::{Device, DevicePtr};
use crate::error::{Error, Result};

/// A buffer from the pool; must go back through [`BufferPool::release`].
#[derive(Debug)]
pub(crate) struct PoolBuf {
    pub(crate) ptr: DevicePtr,
    pub(crate) floats: usize,
}

#[derive(Default)]
struct PoolState {
    /// Bytes allocated from the device, held or cached.
    allocated: usize,
    /// Bytes handed out and not yet released.
    held: usize,
    held_count: usize,
    /// Bytes reserved for buffers the pool does not allocate.
    reserved: usize,
    free: HashMap<usize, Vec<DevicePtr>>,
}

pub(crate) struct BufferPool {
    device: Arc<dyn Device>,
    capacity: usize,
    state: Mutex<PoolState>,
    cond: Condvar,
}

impl BufferPool {
    pub(crate) fn new(device: Arc<dyn Device>, capacity: usize) -> Self {
        BufferPool { device, capacity, state: Mutex::new(PoolState::default()), cond: Condvar::new() }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Frees cached buffers until `bytes` more fit; whether they do.
    fn make_room(&self, st: &mut PoolState, bytes: usize) -> bool {
        while st.allocated + st.reserved + bytes > self.capacity {
            let Some((size, ptr)) = st.free.iter_mut().find_map(|(s, l)| l.pop().map(|p| (*s, p))) else {
                break;
            };
            // SAFETY: cached buffers are owned by the pool and idle.
            unsafe { self.device.free(ptr) };
            st.allocated -= size * 4;
        }
        st.allocated + st.reserved + bytes <= self.capacity
    }

    fn try_reserve(&self, st: &mut PoolState, floats: usize) -> Option<()> {
        let bytes = floats * 4;
        self.make_room(st, bytes).then(|| {
            st.reserved += bytes;
            st.held += bytes;
            st.held_count += 1;
        })
    }

    fn try_take(&self, st: &mut PoolState, floats: usize) -> Result<Option<PoolBuf>> {
        let bytes = floats * 4;
        if let Some(ptr) = st.free.get_mut(&floats).and_then(|v| v.pop()) {
            st.held += bytes;
            st.held_count += 1;
            return Ok(Some(PoolBuf { ptr, floats }));
        }
        // Give back cached buffers of other sizes until the new one fits.
        if !self.make_room(st, bytes) {
            return Ok(None);
        }
        let ptr = self.device.alloc_scratch(floats)?;
        st.allocated += bytes;
        st.held += bytes;
        st.held_count += 1;
        Ok(Some(PoolBuf { ptr, floats }))
    }

    /// Takes a buffer of `floats` floats, waiting for space. `abort` is polled
    /// while waiting; `deadline` bounds the wait.
    pub(crate) fn acquire(
        &self,
        floats: usize,
        deadline: Option<Instant>,
        abort: &dyn Fn() -> Option<Error>,
    ) -> Result<PoolBuf> {
        self.wait_for(floats, deadline, abort, |pool, st| pool.try_take(st, floats))
    }

    /// Reserves room for a buffer of `floats` floats held outside the pool,
    /// waiting as [`BufferPool::acquire`] does; [`BufferPool::unreserve`]
    /// gives it back.
    pub(crate) fn reserve(
        &self,
        floats: usize,
        deadline: Option<Instant>,
        abort: &dyn Fn() -> Option<Error>,
    ) -> Result<()> {
        self.wait_for(floats, deadline, abort, |pool, st| Ok(pool.try_reserve(st, floats)))
    }

    pub(crate) fn unreserve(&self, floats: usize) {
        let mut st = self.state.lock();
        st.reserved -= floats * 4;
        st.held -= floats * 4;
        st.held_count -= 1;
        drop(st);
        self.cond.notify_all();
    }

    fn wait_for<T>(
        &self,
        floats: usize,
        deadline: Option<Instant>,
        abort: &dyn Fn() -> Option<Error>,
        mut attempt: impl FnMut(&Self, &mut PoolState) -> Result<Option<T>>,
    ) -> Result<T> {
        let bytes = floats * 4;
        if bytes > self.capacity {
            return Err(Error::BudgetTooSmall {
                budget: self.capacity,
                needed: bytes,
                what: "one access buffer (the pool's share of the budget)",
            });
        }
        let start = Instant::now();
        let mut st = self.state.lock();
        loop {
            if let Some(got) = attempt(self, &mut st)? {
                return Ok(got);
            }
            if let Some(e) = abort() {
                return Err(e);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Error::Timeout {
                    what: format!(
                        "{bytes} bytes of access buffer pool: {} bytes in {} buffers are still held; release buffers (post_read, update, post_local_access) before acquiring more",
                        st.held, st.held_count
                    ),
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            self.cond.wait_for(&mut st, Duration::from_millis(20));
        }
    }

    pub(crate) fn release(&self, buf: PoolBuf) {
        let mut st = self.state.lock();
        st.held -= buf.floats * 4;
        st.held_count -= 1;
        st.free.entry(buf.floats).or_default().push(buf.ptr);
        drop(st);
        self.cond.notify_all();
    }

    pub(crate) fn wake(&self) {
        self.cond.notify_all();
    }

    /// Bytes allocated from the device, held or cached.
    pub(crate) fn allocated(&self) -> usize {
        self.state.lock().allocated
    }

    /// (bytes held, buffers held)
    pub(crate) fn held(&self) -> (usize, usize) {
        let st = self.state.lock();
        (st.held, st.held_count)
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        for (_, list) in self.state.get_mut().free.drain() {
            for ptr in list {
                // SAFETY: cached buffers are owned by the pool and idle.
                unsafe { self.device.free(ptr) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::host::HostDevice;

    #[test]
    fn recycles_by_size_and_respects_capacity() {
        let dev: Arc<dyn Device> = Arc::new(HostDevice::new(1 << 20));
        let pool = BufferPool::new(dev.clone(), 400);
        let never = || None;
        let a = pool.acquire(50, None, &never).unwrap();
        let b = pool.acquire(50, None, &never).unwrap();
        assert_eq!(pool.held(), (400, 2));
        let soon = Some(Instant::now() + Duration::from_millis(30));
        assert!(matches!(pool.acquire(1, soon, &never), Err(Error::Timeout { .. })));
        let a_ptr = a.ptr;
        pool.release(a);
        let c = pool.acquire(50, None, &never).unwrap();
        assert_eq!(c.ptr, a_ptr, "same-size buffer reused");
        pool.release(b);
        pool.release(c);
        // A different size evicts cached buffers to fit.
        let d = pool.acquire(100, None, &never).unwrap();
        assert_eq!(dev.used_bytes(), 400);
        pool.release(d);
        assert!(matches!(pool.acquire(101, None, &never), Err(Error::BudgetTooSmall { needed: 404, .. })));
    }

    #[test]
    fn reservations_count_against_the_capacity() {
        let dev: Arc<dyn Device> = Arc::new(HostDevice::new(1 << 20));
        let pool = BufferPool::new(dev.clone(), 400);
        let never = || None;
        let cached = pool.acquire(60, None, &never).unwrap();
        pool.release(cached);
        // Room is made by freeing the cached buffer; nothing is allocated.
        pool.reserve(50, None, &never).unwrap();
        assert_eq!((pool.allocated(), dev.used_bytes()), (0, 0));
        assert_eq!(pool.held(), (200, 1));
        pool.reserve(50, None, &never).unwrap();
        let soon = Some(Instant::now() + Duration::from_millis(30));
        assert!(matches!(pool.acquire(1, soon, &never), Err(Error::Timeout { .. })));
        assert!(matches!(pool.reserve(1, soon, &never), Err(Error::Timeout { .. })));
        pool.unreserve(50);
        let b = pool.acquire(50, None, &never).unwrap();
        assert_eq!(pool.held(), (400, 2));
        pool.release(b);
        pool.unreserve(50);
        assert_eq!(pool.held(), (0, 0));
    }

    #[test]
    fn abort_stops_a_wait() {
        let dev: Arc<dyn Device> = Arc::new(HostDevice::new(1 << 20));
        let pool = BufferPool::new(dev, 8);
        let _held = pool.acquire(2, None, &|| None).unwrap();
        let err = pool.acquire(2, None, &|| Some(Error::ShutDown("stop".into()))).unwrap_err();
        assert_eq!(err, Error::ShutDown("stop".into()));
    }
}
