//! The tables of live objects behind the C ABI's opaque pointers. A pointer
//! handed to C is the address of an object this registry keeps alive; every
//! call looks the address up before using it, so NULL, freed and foreign
//! pointers are errors instead of undefined behaviour. The registry never
//! dereferences a pointer that came from C.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::status::{Failure, FfiResult};

/// Live objects of one C type, keyed by the address handed out.
pub(crate) struct Registry<T> {
    live: RwLock<BTreeMap<usize, Arc<T>>>,
    /// The C type name, for messages.
    what: &'static str,
}

impl<T> Registry<T> {
    pub(crate) const fn new(what: &'static str) -> Self {
        Registry { live: parking_lot::const_rwlock(BTreeMap::new()), what }
    }

    /// Keeps `value` alive and returns the pointer that names it.
    pub(crate) fn insert(&self, value: T) -> *mut T {
        let value = Arc::new(value);
        // The address is unique while the Arc lives, and it lives here until
        // `remove`.
        let ptr = Arc::as_ptr(&value).cast_mut();
        self.live.write().insert(ptr as usize, value);
        ptr
    }

    /// The object named by `ptr`; `arg` names the argument in messages.
    pub(crate) fn get(&self, ptr: *const T, arg: &str) -> FfiResult<Arc<T>> {
        if ptr.is_null() {
            return Err(Failure::null(arg));
        }
        self.live.read().get(&(ptr as usize)).cloned().ok_or_else(|| self.stale(ptr, arg))
    }

    /// Forgets `ptr`; the object is dropped once no running call holds it.
    pub(crate) fn remove(&self, ptr: *const T, arg: &str) -> FfiResult<Arc<T>> {
        if ptr.is_null() {
            return Err(Failure::null(arg));
        }
        self.live.write().remove(&(ptr as usize)).ok_or_else(|| self.stale(ptr, arg))
    }

    fn stale(&self, ptr: *const T, arg: &str) -> Failure {
        Failure::invalid(format!(
            "`{arg}` ({ptr:p}) is not a live {}: it was freed, or was not created by geeps",
            self.what
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::GeepsStatus;

    #[test]
    fn lookups_fail_for_null_freed_and_foreign_pointers() {
        static R: Registry<u32> = Registry::new("thing");
        let p = R.insert(7);
        assert_eq!(*R.get(p, "p").unwrap(), 7);
        assert_eq!(R.get(std::ptr::null(), "p").unwrap_err().status, GeepsStatus::NullPointer);
        let foreign = 0x1000 as *const u32;
        assert_eq!(R.get(foreign, "p").unwrap_err().status, GeepsStatus::InvalidArgument);
        let held = R.get(p, "p").unwrap();
        R.remove(p, "p").unwrap();
        assert_eq!(*held, 7, "a running call keeps the object alive");
        let e = R.remove(p, "p").unwrap_err();
        assert_eq!(e.status, GeepsStatus::InvalidArgument, "double free");
        assert!(e.message.contains("not a live thing"), "{}", e.message);
    }
}
