//! `geeps_buffer`: what every acquisition hands C (by recorded handle or by
//! keys), and the questions C may ask about a buffer it holds. Marshalling
//! only: the rows, their order and their age are the engine's.

use geeps_core::RawBuffer;

use crate::guard::guard;
use crate::held::{Key, Kind};
use crate::instance::{Direction, GeepsInstance, INSTANCES};
use crate::marshal::{require, write_out};
use crate::status::{Failure, FfiResult, GeepsStatus};

/// A buffer handed out by an acquisition: `geeps_read`,
/// `geeps_pre_update`, `geeps_local_access` (by recorded handle) and their
/// keyed forms. Its memory is valid until its release.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GeepsBuffer {
    /// Names the buffer: in the getters (`geeps_buffer_data_age`) and, for
    /// a keyed call's buffer, in its release (`geeps_post_read_buffer`,
    /// ...); a buffer acquired by handle is released by its handle. Never
    /// 0, never reused by an instance.
    pub id: u64,
    /// `floats` floats in the instance's device memory: `rows` rows of the
    /// row width, in the order of the access's rows. On the host device (the
    /// default) a host pointer. On a CUDA device
    /// (`geeps_config_set_cuda_device`) a CUDA device pointer: never
    /// dereference it on the host; pass it to your kernels or `cudaMemcpy`,
    /// or copy with `geeps_buffer_copy_to_host` /
    /// `geeps_buffer_copy_from_host`.
    pub data: *mut f32,
    /// Rows × row width.
    pub floats: usize,
    /// Rows in the buffer.
    pub rows: usize,
}

/// What a failed acquisition leaves in its out-parameter.
pub(crate) const EMPTY: GeepsBuffer = GeepsBuffer { id: 0, data: std::ptr::null_mut(), floats: 0, rows: 0 };

/// Zeroes the out-parameter `out` first, so that a failure leaves no stale
/// pointer behind, then acquires with `acquire` and writes the buffer.
pub(crate) fn hand_out(
    ps: *mut GeepsInstance,
    out: *mut GeepsBuffer,
    acquire: impl FnOnce(&GeepsInstance) -> FfiResult<RawBuffer>,
) -> FfiResult {
    require(out, "out")?;
    write_out(out, "out", EMPTY)?;
    let ps = INSTANCES.get(ps, "ps")?;
    let raw = acquire(&ps)?;
    let width = ps.shape().2.max(1);
    let buffer = GeepsBuffer {
        id: raw.ticket,
        data: raw.ptr.0 as usize as *mut f32,
        floats: raw.floats,
        rows: raw.floats / width,
    };
    write_out(out, "out", buffer)
}

/// The data age of a read buffer held by C: the clock its rows were read
/// at (the lowest over its tables). Every worker's updates of the clocks
/// below it are in the buffer; with slack `s`, a read at clock `c` has an
/// age of at least `c - s`. `id` is the buffer's `id`, whether it was
/// acquired by handle or by keys. A buffer not held (released, or of
/// another instance): `GEEPS_STATUS_INVALID_HANDLE`; a pre-update or local
/// buffer, or a read of no rows: `GEEPS_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn geeps_buffer_data_age(ps: *const GeepsInstance, id: u64, out: *mut u64) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        let ps = INSTANCES.get(ps, "ps")?;
        let call = "geeps_buffer_data_age";
        let g = ps.joined(call)?;
        let (key, entry) = ps.held_buffer(call, id)?;
        let from = match key {
            Key::Handle(h) => format!("acquired with handle {h:#x}"),
            Key::Buffer(_) => "acquired by keys".to_string(),
        };
        if entry.kind != Kind::Read {
            return Err(Failure::invalid(format!(
                "{call}: buffer {id} ({from}) is a {} buffer; only read buffers have a data age",
                entry.kind.acquired_by()
            )));
        }
        match g.data_age(entry.ticket)? {
            Some(age) => write_out(out, "out", age),
            None => Err(Failure::invalid(format!("{call}: buffer {id} ({from}) holds no rows"))),
        }
    })
}

fn copy(
    ps: *const GeepsInstance,
    call: &str,
    buffer: *const GeepsBuffer,
    host: *mut f32,
    floats: usize,
    direction: Direction,
) -> FfiResult {
    require(buffer.cast_mut(), "buffer")?;
    let host_arg = if direction == Direction::ToHost { "dst" } else { "src" };
    if floats > 0 && host.is_null() {
        return Err(Failure::null(host_arg));
    }
    if floats.checked_mul(std::mem::size_of::<f32>()).is_none_or(|b| b > isize::MAX as usize) {
        return Err(Failure::invalid(format!("{call}: {floats} floats are more than memory can hold")));
    }
    let ps = INSTANCES.get(ps, "ps")?;
    // SAFETY: non-NULL; the caller promises a readable geeps_buffer.
    let buffer = unsafe { buffer.read() };
    // SAFETY: the caller promises `floats` floats at `host`, readable
    // (from host) or writable (to host), for the duration of the call.
    unsafe { ps.copy(call, buffer.id, buffer.data, host, floats, direction) }
}

/// Copies the first `floats` floats of a held buffer to host memory at
/// `dst` (`floats` writable floats), through the instance's device, and
/// returns once they are there: `cudaMemcpy` for programs that do not link
/// the CUDA runtime, and a plain copy on the host device. `buffer` is the
/// `geeps_buffer` an acquisition filled, still held. `floats` above
/// `buffer->floats`, or a `buffer->data` that is not the buffer's:
/// `GEEPS_STATUS_INVALID_ARGUMENT`; a buffer not held:
/// `GEEPS_STATUS_INVALID_HANDLE`. Works after `geeps_shutdown` for buffers
/// still held.
#[no_mangle]
pub extern "C" fn geeps_buffer_copy_to_host(
    ps: *const GeepsInstance,
    buffer: *const GeepsBuffer,
    dst: *mut f32,
    floats: usize,
) -> GeepsStatus {
    guard(|| copy(ps, "geeps_buffer_copy_to_host", buffer, dst, floats, Direction::ToHost))
}

/// Copies `floats` floats from host memory at `src` into the start of a
/// held pre-update or local buffer, through the instance's device, and
/// returns once the copy is done (so `src` may be reused at once, and a
/// following `geeps_update` or post sees the values). Read buffers are
/// read-only (`GEEPS_STATUS_INVALID_ARGUMENT`); otherwise as
/// `geeps_buffer_copy_to_host`.
#[no_mangle]
pub extern "C" fn geeps_buffer_copy_from_host(
    ps: *const GeepsInstance,
    buffer: *const GeepsBuffer,
    src: *const f32,
    floats: usize,
) -> GeepsStatus {
    guard(|| copy(ps, "geeps_buffer_copy_from_host", buffer, src.cast_mut(), floats, Direction::FromHost))
}
