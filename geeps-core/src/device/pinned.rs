//! Page-locked host memory for transfers, owned like a boxed slice and freed
//! through the device that gave it. It never knows which device that is.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// Page-locked host memory for transfers; frees itself through its device.
pub struct PinnedBuf {
    ptr: *mut f32,
    len: usize,
    release: Option<Box<dyn FnOnce(*mut f32, usize) + Send + Sync>>,
}

// SAFETY: a PinnedBuf owns its memory exclusively, like a Box<[f32]>.
unsafe impl Send for PinnedBuf {}
unsafe impl Sync for PinnedBuf {}

impl PinnedBuf {
    /// Wraps memory of `len` floats at `ptr`, released by `release`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` initialised floats
    /// until `release` runs, and owned by nothing else.
    pub unsafe fn from_raw(ptr: *mut f32, len: usize, release: Box<dyn FnOnce(*mut f32, usize) + Send + Sync>) -> Self {
        PinnedBuf { ptr, len, release: Some(release) }
    }

    /// Ordinary host memory standing in for page-locked memory.
    pub fn zeroed_host(len: usize) -> Self {
        let boxed: Box<[f32]> = vec![0.0f32; len].into_boxed_slice();
        let ptr = Box::into_raw(boxed) as *mut f32;
        PinnedBuf {
            ptr,
            len,
            // SAFETY: rebuilds the Box leaked just above, once.
            release: Some(Box::new(|p, n| unsafe {
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)));
            })),
        }
    }

    /// The first float.
    pub fn as_ptr(&self) -> *const f32 {
        self.ptr
    }

    /// The first float, writable.
    pub fn as_mut_ptr(&mut self) -> *mut f32 {
        self.ptr
    }
}

impl Deref for PinnedBuf {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: from_raw's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for PinnedBuf {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: from_raw's contract; &mut self gives exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release(self.ptr, self.len);
        }
    }
}

impl fmt::Debug for PinnedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PinnedBuf({} floats)", self.len)
    }
}
