//! The devices a suite runs on. The host device is always there (it is the
//! reference); the CUDA device joins when the crate is built with the `cuda`
//! feature and a driver answers (a GPU, or the emulated driver under
//! `scripts/with-cuda-emu`). Where CUDA is expected (`GEEPS_REQUIRE_CUDA=1`,
//! as CI sets under the emulator) a missing driver fails the test instead of
//! skipping it, so a suite can never pass by running on the host alone.

use std::sync::Arc;

use geeps_core::device::Device;
use geeps_core::HostDevice;

/// A kind of device to run a scenario on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Device memory emulated in host memory (`HostDevice`).
    Host,
    /// GPU 0 through the CUDA driver (`CudaDevice`).
    #[cfg(feature = "cuda")]
    Cuda,
}

/// Whether CUDA runs were asked for, so that their absence is a failure.
fn cuda_required() -> bool {
    std::env::var("GEEPS_REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

impl Backend {
    /// A fresh device of this kind allowing `capacity` bytes.
    pub fn device(self, capacity: usize) -> Arc<dyn Device> {
        match self {
            Backend::Host => Arc::new(HostDevice::new(capacity)),
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                let config = geeps_cuda::CudaConfig::ordinal(0).with_budget(capacity);
                Arc::new(geeps_cuda::CudaDevice::new(config).expect("the probe found a GPU, so it opens"))
            }
        }
    }

    /// The CUDA backend for `test` when a driver answers; `None` (with the
    /// reason on stderr) when it does not and CUDA is not required.
    ///
    /// # Panics
    /// When `GEEPS_REQUIRE_CUDA=1` and there is no usable CUDA device.
    pub fn cuda_for(test: &str) -> Option<Backend> {
        #[cfg(feature = "cuda")]
        let reason = match geeps_cuda::CudaDevice::probe(0) {
            Ok(_) => return Some(Backend::Cuda),
            Err(e) => e.to_string(),
        };
        #[cfg(not(feature = "cuda"))]
        let reason = "geeps-testkit was built without its `cuda` feature".to_string();
        assert!(!cuda_required(), "{test}: GEEPS_REQUIRE_CUDA=1 but there is no CUDA device: {reason}");
        eprintln!("{test}: CUDA variant skipped: {reason}");
        None
    }

    /// The CUDA backend for `test`, which needs `gpus` GPUs: as
    /// [`Backend::cuda_for`], and `None` with a `TEST: NOT RUN: ...` line on
    /// stderr (which the GPU check reports) where a real driver shows fewer.
    /// The emulated driver shows as many as its `GEEPS_CUDA_EMU_DEVICES` asks,
    /// which such a test sets for the processes it starts.
    ///
    /// # Panics
    /// As [`Backend::cuda_for`].
    pub fn cuda_gpus_for(test: &str, gpus: usize) -> Option<Backend> {
        let backend = Self::cuda_for(test)?;
        // Without the feature there is no probe to count GPUs with.
        #[cfg(not(feature = "cuda"))]
        let _ = gpus;
        #[cfg(feature = "cuda")]
        if let Ok(p) = geeps_cuda::CudaDevice::probe(0) {
            if p.devices < gpus && !p.name.contains("emulated") {
                eprintln!("{test}: NOT RUN: needs {gpus} GPUs, {} visible", p.devices);
                return None;
            }
        }
        Some(backend)
    }

    /// The backend named by `GEEPS_TEST_DEVICE` (`host`, the default, or
    /// `cuda`): how a scenario run by another process (geeps-launch's
    /// process tests) is told its device.
    ///
    /// # Panics
    /// On another name, or on `cuda` without a usable CUDA device (see
    /// [`Backend::cuda_for`]): a run asked for CUDA never falls back to the host.
    pub fn from_env() -> Backend {
        match std::env::var("GEEPS_TEST_DEVICE").as_deref() {
            Err(_) | Ok("" | "host") => Backend::Host,
            Ok("cuda") => {
                #[cfg(feature = "cuda")]
                let reason = match geeps_cuda::CudaDevice::probe(0) {
                    Ok(_) => return Backend::Cuda,
                    Err(e) => e.to_string(),
                };
                #[cfg(not(feature = "cuda"))]
                let reason = "geeps-testkit was built without its `cuda` feature".to_string();
                panic!("GEEPS_TEST_DEVICE=cuda but there is no usable CUDA device: {reason}")
            }
            Ok(other) => panic!("GEEPS_TEST_DEVICE={other}: expected `host` or `cuda`"),
        }
    }

    /// Whether buffers of this device can be read as host slices.
    pub fn host_addressable(self) -> bool {
        self == Backend::Host
    }
}

/// The host device, plus the CUDA device when there is one (see
/// [`Backend::cuda_for`] for when its absence fails instead).
pub fn backends(test: &str) -> Vec<Backend> {
    let mut all = vec![Backend::Host];
    all.extend(Backend::cuda_for(test));
    all
}
