//! Conversions between C arguments and Rust values: out-parameters, arrays,
//! strings, versioned structs and handles as integers. Every dereference of
//! a pointer that came from C happens here, after its NULL check; nothing
//! here knows what the values mean.

use std::ffi::{c_char, CStr};

use geeps_core::{Handle, RowKey, TableId};

use crate::handles::{GeepsHandle, GeepsTable};
use crate::status::{Failure, FfiResult, GeepsStatus};

/// Writes `value` through the out-parameter `out` (named `arg`).
pub(crate) fn write_out<T>(out: *mut T, arg: &str, value: T) -> FfiResult {
    if out.is_null() {
        return Err(Failure::null(arg));
    }
    // SAFETY: non-NULL; the C caller promises `out` points to a writable `T`
    // (the documented contract of every out-parameter).
    unsafe { out.write(value) };
    Ok(())
}

/// Checks an out-parameter before a call that does work, so that a NULL one
/// fails before anything happens.
pub(crate) fn require<T>(out: *mut T, arg: &str) -> FfiResult {
    if out.is_null() {
        return Err(Failure::null(arg));
    }
    Ok(())
}

/// Clears an out-pointer to NULL when it is not NULL itself, so that a
/// failed call never leaves a stale buffer pointer behind.
pub(crate) fn clear_out<T>(out: *mut *mut T) {
    if !out.is_null() {
        // SAFETY: as in `write_out`.
        unsafe { out.write(std::ptr::null_mut()) };
    }
}

/// The C array `ptr[0..n]`; NULL is allowed only when `n` is 0.
pub(crate) fn array<'a, T>(ptr: *const T, n: usize, arg: &str) -> FfiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::null(arg));
    }
    if n.checked_mul(std::mem::size_of::<T>()).is_none_or(|b| b > isize::MAX as usize) {
        return Err(Failure::invalid(format!("`{arg}` has {n} elements, more than memory can hold")));
    }
    // SAFETY: non-NULL, size checked; the caller promises `n` readable
    // elements that stay unchanged during the call.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// The row keys of `rows` in `table`.
pub(crate) fn keys(table: GeepsTable, rows: *const u32, n: usize) -> FfiResult<Vec<RowKey>> {
    Ok(array(rows, n, "rows")?.iter().map(|&row| RowKey::new(TableId(table), row)).collect())
}

/// A NUL-terminated UTF-8 string argument.
pub(crate) fn string<'a>(ptr: *const c_char, arg: &str) -> FfiResult<&'a str> {
    if ptr.is_null() {
        return Err(Failure::null(arg));
    }
    // SAFETY: non-NULL; the caller promises a NUL-terminated string that
    // stays unchanged during the call.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|e| Failure::invalid(format!("`{arg}` is not UTF-8: {e}")))
}

/// Copies `text` into `buf[0..cap]` the way `snprintf` does: truncated and
/// always NUL-terminated when `cap > 0`; `*len` gets the full length without
/// the NUL. `buf` may be NULL only when `cap` is 0 (to ask for the length).
pub(crate) fn write_string(text: &str, buf: *mut c_char, cap: usize, len: *mut usize) -> FfiResult {
    require(len, "len")?;
    if cap > 0 {
        if buf.is_null() {
            return Err(Failure::null("buf"));
        }
        let n = text.len().min(cap - 1);
        // SAFETY: `buf` is non-NULL and the caller promises `cap` writable
        // bytes; we write `n + 1 <= cap` of them, from a distinct Rust string.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    write_out(len, "len", text.len())
}

/// A `#[repr(C)]` struct whose first field is `size_t struct_size`.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, start with a `usize` field that holds
/// the struct's size, and hold only plain data (no pointers or Drop).
pub(crate) unsafe trait Versioned: Sized {}

/// Fills `out`, a caller's struct that may be an older, shorter version of
/// `T`: the caller sets `out->struct_size = sizeof(*out)` and gets the
/// fields that fit; `struct_size` is then set to the bytes written.
pub(crate) fn write_versioned<T: Versioned>(out: *mut T, arg: &str, value: T) -> FfiResult {
    require(out, arg)?;
    // SAFETY: non-NULL; every version of the struct starts with its size.
    let size = unsafe { out.cast::<usize>().read_unaligned() };
    let min = std::mem::size_of::<usize>();
    if size < min {
        return Err(Failure::invalid(format!("`{arg}->struct_size` is {size}; set it to sizeof(*{arg})")));
    }
    let n = size.min(std::mem::size_of::<T>());
    // SAFETY: the caller promises `struct_size` writable bytes at `out`, and
    // we write `n <= struct_size` bytes of a plain-data `T` (`Versioned`),
    // then the size field, which every version has.
    unsafe {
        std::ptr::copy_nonoverlapping((&value as *const T).cast::<u8>(), out.cast::<u8>(), n);
        out.cast::<usize>().write_unaligned(n);
    }
    Ok(())
}

/// A handle as C sees it: the instance in the high 32 bits, the recorded
/// position in the low 32. Instance ids start at 1, so no handle is 0.
pub(crate) fn handle_to_c(h: Handle) -> GeepsHandle {
    (u64::from(h.instance()) << 32) | h.position() as u64
}

pub(crate) fn handle_from_c(h: GeepsHandle) -> Handle {
    Handle::from_parts((h >> 32) as u32, h as u32)
}

/// An engine failure about the handle `h`, as C knows it: the engine names
/// a handle by its recorded position (`handle 3`), C by its value
/// (`handle 0x100000003`).
pub(crate) fn name_handle(mut failure: Failure, h: GeepsHandle) -> Failure {
    let named = format!("handle {h:#x}");
    // Handle 0 was refused before the engine saw it, and a message that
    // names the handle already is this crate's own.
    if failure.status != GeepsStatus::InvalidHandle || h == 0 || failure.message.contains(&named) {
        return failure;
    }
    let engine = format!("handle {}", handle_from_c(h).position());
    let mut text = String::with_capacity(failure.message.len() + 16);
    let mut rest = failure.message.as_str();
    while let Some(at) = rest.find(&engine) {
        let after = &rest[at + engine.len()..];
        text.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            // `handle 12` when looking for `handle 1`, or a hex value.
            text.push_str(&engine);
        } else {
            text.push_str(&named);
        }
        rest = after;
    }
    text.push_str(rest);
    failure.message = text;
    failure
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_handles_are_named_as_c_passed_them() {
        let h = handle_to_c(Handle::from_parts(1, 2));
        let f = Failure::new(GeepsStatus::InvalidHandle, "handle 2 (read) was already released; handle 23, handle 2");
        assert_eq!(
            name_handle(f, h).message,
            "handle 0x100000002 (read) was already released; handle 23, handle 0x100000002"
        );
        let other = Failure::new(GeepsStatus::Timeout, "handle 2");
        assert_eq!(name_handle(other, h).message, "handle 2", "only handle failures");
    }

    #[test]
    fn strings_truncate_like_snprintf() {
        let mut buf = [0x55 as c_char; 4];
        let mut len = 0usize;
        write_string("hello", buf.as_mut_ptr(), buf.len(), &mut len).unwrap();
        assert_eq!(len, 5);
        // SAFETY: write_string NUL-terminated the buffer.
        assert_eq!(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap(), "hel");
        write_string("hello", std::ptr::null_mut(), 0, &mut len).unwrap();
        assert_eq!(len, 5);
        let e = write_string("hello", std::ptr::null_mut(), 3, &mut len).unwrap_err();
        assert_eq!(e.status, GeepsStatus::NullPointer);
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct V2 {
        struct_size: usize,
        a: u64,
        b: u64,
    }
    // SAFETY: repr(C), starts with its size, plain data.
    unsafe impl Versioned for V2 {}

    #[repr(C)]
    struct V1 {
        struct_size: usize,
        a: u64,
    }

    #[test]
    fn versioned_structs_fill_what_the_caller_has() {
        let value = V2 { struct_size: std::mem::size_of::<V2>(), a: 1, b: 2 };
        let mut old = [V1 { struct_size: std::mem::size_of::<V1>(), a: 0 }];
        write_versioned(old.as_mut_ptr().cast::<V2>(), "out", value).unwrap();
        assert_eq!((old[0].struct_size, old[0].a), (std::mem::size_of::<V1>(), 1));
        let mut zero = V1 { struct_size: 0, a: 9 };
        let e = write_versioned((&mut zero as *mut V1).cast::<V2>(), "out", value).unwrap_err();
        assert_eq!(e.status, GeepsStatus::InvalidArgument);
        assert_eq!(zero.a, 9);
    }

    #[test]
    fn handles_round_trip() {
        let h = Handle::from_parts(3, 17);
        assert_eq!(handle_to_c(h), (3 << 32) | 17);
        assert_eq!(handle_from_c(handle_to_c(h)), h);
    }
}
