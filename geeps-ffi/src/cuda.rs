//! What C may ask about CUDA before creating an instance on a GPU
//! (`geeps_config_set_cuda_device`): whether GPU N is usable. Marshalling
//! only; the probe is geeps-cuda's.

use std::ffi::c_char;

use geeps_cuda::CudaDevice;

use crate::guard::guard;
use crate::marshal::write_string;
use crate::status::{Failure, GeepsStatus};

/// Whether CUDA GPU `ordinal` is usable by geeps, without opening it: the
/// driver library loads and is recent enough, and the GPU exists and is
/// recent enough. On success it writes a description ("CUDA device 0 of 1:
/// NAME (compute capability 8.0, 81050 MiB), driver CUDA 12.4") like
/// `snprintf` (`buf` may be NULL when `cap` is 0; `*len` gets the full
/// length). Otherwise `GEEPS_STATUS_DEVICE`, and the message says what is
/// missing; nothing is written to `buf`.
#[no_mangle]
pub extern "C" fn geeps_cuda_probe(ordinal: usize, buf: *mut c_char, cap: usize, len: *mut usize) -> GeepsStatus {
    guard(|| {
        crate::marshal::require(len, "len")?;
        let probe = CudaDevice::probe(ordinal).map_err(|e| {
            let e = match e {
                geeps_core::Error::Device(text) => text,
                other => other.to_string(),
            };
            Failure::new(GeepsStatus::Device, format!("geeps_cuda_probe({ordinal}): {e}"))
        })?;
        write_string(&probe.to_string(), buf, cap, len)
    })
}
