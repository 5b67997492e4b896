//! DLPack export of a held buffer: the `DLManagedTensorVersioned` a
//! `"dltensor_versioned"` capsule carries (DLPack 1.x consumers, with the
//! read-only flag) or the legacy `DLManagedTensor` of a `"dltensor"`
//! capsule (float32, rows × row width, on the CPU or a CUDA GPU), and the
//! deleters, which end the export. It never copies data and never
//! frees the buffer: an export only keeps the instance alive and counts
//! itself, so that a release with live views is refused.

use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use geeps_core::Geeps;
use pyo3::ffi;
use pyo3::prelude::*;

/// `DLDeviceType::kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `DLDeviceType::kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
const FLOAT: u8 = 2;
const NAME: &CStr = c"dltensor";
const NAME_VERSIONED: &CStr = c"dltensor_versioned";
/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
const FLAG_READ_ONLY: u64 = 1;

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

#[repr(C)]
struct DlPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DlManagedTensorVersioned {
    version: DlPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

/// What an export owns until its consumer lets it go.
struct Export {
    shape: [i64; 2],
    live: Arc<AtomicUsize>,
    // Keep the buffer held (it is released on drop) and its memory mapped
    // as long as a view of it exists. Dropped without the GIL, the buffer's
    // reference is released when Python next runs.
    _owner: Py<PyAny>,
    _instance: Arc<Geeps>,
}

impl Drop for Export {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

unsafe extern "C" fn delete_managed(managed: *mut DlManagedTensor) {
    // Called by the consumer, from any thread, with or without the GIL; a
    // panic must not unwind into it.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if managed.is_null() {
            return;
        }
        // SAFETY: `managed` and its context were made by `Box::into_raw` in
        // `capsule`, and DLPack calls the deleter exactly once.
        let managed = unsafe { Box::from_raw(managed) };
        drop(unsafe { Box::from_raw(managed.manager_ctx as *mut Export) });
    }));
}

unsafe extern "C" fn delete_versioned(managed: *mut DlManagedTensorVersioned) {
    // As `delete_managed`.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if managed.is_null() {
            return;
        }
        // SAFETY: as in `delete_managed`.
        let managed = unsafe { Box::from_raw(managed) };
        drop(unsafe { Box::from_raw(managed.manager_ctx as *mut Export) });
    }));
}

unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // A consumer renames the capsule `used_dltensor` and owns the tensor
    // from then on; an unconsumed capsule still owns it.
    // SAFETY: called by Python with the capsule being destroyed.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()) as *mut DlManagedTensor;
            delete_managed(managed);
        }
    }
}

unsafe extern "C" fn capsule_destructor_versioned(capsule: *mut ffi::PyObject) {
    // As `capsule_destructor`, for `used_dltensor_versioned`.
    // SAFETY: as in `capsule_destructor`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME_VERSIONED.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, NAME_VERSIONED.as_ptr()) as *mut DlManagedTensorVersioned;
            delete_versioned(managed);
        }
    }
}

/// Where a buffer's memory is, as DLPack names devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub device_type: i32,
    pub device_id: i32,
}

/// What to export: where, how big, and how.
pub struct View {
    pub ptr: u64,
    pub rows: usize,
    pub width: usize,
    pub place: Place,
    /// DLPack 1.x (`dltensor_versioned`), else the legacy capsule.
    pub versioned: bool,
    pub read_only: bool,
}

/// A capsule viewing `view`; `live` counts it until its consumer deletes it.
pub fn capsule<'py>(
    py: Python<'py>,
    view: View,
    live: &Arc<AtomicUsize>,
    instance: &Arc<Geeps>,
    owner: Py<PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    live.fetch_add(1, Ordering::AcqRel);
    let export = Box::into_raw(Box::new(Export {
        shape: [view.rows as i64, view.width as i64],
        live: live.clone(),
        _owner: owner,
        _instance: instance.clone(),
    }));
    let tensor = DlTensor {
        data: view.ptr as *mut c_void,
        device: DlDevice { device_type: view.place.device_type, device_id: view.place.device_id },
        ndim: 2,
        dtype: DlDataType { code: FLOAT, bits: 32, lanes: 1 },
        // SAFETY: `export` is live until the deleter runs, and so is its shape.
        shape: unsafe { (*export).shape.as_mut_ptr() },
        strides: std::ptr::null_mut(), // compact row-major
        byte_offset: 0,
    };
    let raw = if view.versioned {
        let managed = Box::into_raw(Box::new(DlManagedTensorVersioned {
            version: DlPackVersion { major: 1, minor: 0 },
            manager_ctx: export as *mut c_void,
            deleter: Some(delete_versioned),
            flags: if view.read_only { FLAG_READ_ONLY } else { 0 },
            dl_tensor: tensor,
        }));
        // SAFETY: a valid pointer, a static name and a destructor that frees it.
        let raw = unsafe {
            ffi::PyCapsule_New(managed as *mut c_void, NAME_VERSIONED.as_ptr(), Some(capsule_destructor_versioned))
        };
        if raw.is_null() {
            // SAFETY: the capsule was not made, so nothing else owns `managed`.
            unsafe { delete_versioned(managed) };
        }
        raw
    } else {
        let managed = Box::into_raw(Box::new(DlManagedTensor {
            dl_tensor: tensor,
            manager_ctx: export as *mut c_void,
            deleter: Some(delete_managed),
        }));
        // SAFETY: as above.
        let raw = unsafe { ffi::PyCapsule_New(managed as *mut c_void, NAME.as_ptr(), Some(capsule_destructor)) };
        if raw.is_null() {
            // SAFETY: as above.
            unsafe { delete_managed(managed) };
        }
        raw
    };
    // SAFETY: `raw` is a new reference or null with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, raw) }
}
