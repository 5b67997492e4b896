//! `geeps_config`: an opaque configuration object with one setter per field,
//! so fields can be added without changing the layout of anything C holds.
//! Each setter checks the value with the engine's own validation and leaves
//! the config unchanged when it fails; it never invents a rule of its own.

use std::sync::Arc;
use std::time::Duration;

use geeps_core::Config;
use parking_lot::Mutex;

use crate::cluster::{GeepsCluster, CLUSTERS};
use crate::guard::guard;
use crate::marshal::{clear_out, require, write_out};
use crate::registry::Registry;
use crate::status::{FfiResult, GeepsStatus};

/// The configuration of one instance. Opaque; create with
/// `geeps_config_new`, change with the `geeps_config_set_*` setters, free
/// with `geeps_config_free`. `geeps_new` copies it, so one config can be
/// changed and reused for the next instance.
pub struct GeepsConfig {
    settings: Mutex<Settings>,
}

/// What an instance is created from.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) config: Config,
    /// The cluster and this worker's rank; None: a cluster of one.
    pub(crate) cluster: Option<(Arc<GeepsCluster>, usize)>,
    /// The CUDA device's ordinal; None: the host device.
    pub(crate) cuda: Option<usize>,
}

pub(crate) static CONFIGS: Registry<GeepsConfig> = Registry::new("geeps_config");

impl GeepsConfig {
    pub(crate) fn settings(&self) -> Settings {
        self.settings.lock().clone()
    }

    /// Applies `change` to a copy and keeps it if the engine accepts it.
    fn update(&self, change: impl FnOnce(&mut Config)) -> FfiResult {
        let mut settings = self.settings.lock();
        let mut config = settings.config.clone();
        change(&mut config);
        config.validate()?;
        settings.config = config;
        Ok(())
    }
}

fn set(config: *mut GeepsConfig, change: impl FnOnce(&mut Config)) -> GeepsStatus {
    guard(|| CONFIGS.get(config, "config")?.update(change))
}

/// Creates a configuration with the defaults: rows of 128 floats, 1 GiB of
/// device memory, read-my-writes on, waits logged after 5 s and failed
/// after 120 s (long enough for a slow first iteration), a cluster of one
/// worker.
#[no_mangle]
pub extern "C" fn geeps_config_new(out: *mut *mut GeepsConfig) -> GeepsStatus {
    guard(|| {
        clear_out(out);
        require(out, "out")?;
        let settings = Settings { config: Config::default(), cluster: None, cuda: None };
        write_out(out, "out", CONFIGS.insert(GeepsConfig { settings: Mutex::new(settings) }))
    })
}

/// Frees a configuration. Instances created from it are not affected.
/// Freeing NULL does nothing.
#[no_mangle]
pub extern "C" fn geeps_config_free(config: *mut GeepsConfig) -> GeepsStatus {
    guard(|| {
        if !config.is_null() {
            CONFIGS.remove(config, "config")?;
        }
        Ok(())
    })
}

/// Floats per row (1 to 1048576; default 128). Every worker of a cluster
/// must use the same width.
#[no_mangle]
pub extern "C" fn geeps_config_set_row_width(config: *mut GeepsConfig, floats: usize) -> GeepsStatus {
    set(config, |c| c.row_width = floats)
}

/// The device memory budget in bytes: parameter cache and local data kept
/// on the device, and the access buffer pool (default 1 GiB).
#[no_mangle]
pub extern "C" fn geeps_config_set_device_memory(config: *mut GeepsConfig, bytes: usize) -> GeepsStatus {
    set(config, |c| c.device_memory = bytes)
}

/// Whether a worker sees its own updates as soon as `geeps_update` returns
/// (default true).
#[no_mangle]
pub extern "C" fn geeps_config_set_read_my_writes(config: *mut GeepsConfig, on: bool) -> GeepsStatus {
    set(config, |c| c.read_my_writes = on)
}

/// A blocking wait longer than this logs what it waits for and which worker
/// is behind (default 5000 ms; see `geeps_log_init`).
#[no_mangle]
pub extern "C" fn geeps_config_set_slow_wait_log_ms(config: *mut GeepsConfig, ms: u64) -> GeepsStatus {
    set(config, |c| c.slow_wait_log = Duration::from_millis(ms))
}

/// A blocking wait longer than this fails with `GEEPS_STATUS_TIMEOUT`
/// (default 120000 ms: a first iteration may be slow, with kernels being
/// compiled, caches cold and other ranks still starting). It applies to
/// every blocking call of instances created from this config.
#[no_mangle]
pub extern "C" fn geeps_config_set_wait_deadline_ms(config: *mut GeepsConfig, ms: u64) -> GeepsStatus {
    set(config, |c| c.wait_deadline = Duration::from_millis(ms))
}

/// Puts instances created from this config on CUDA GPU `ordinal` (after
/// `CUDA_VISIBLE_DEVICES` remapping): parameter cache, local data and the
/// access buffer pool live in its memory, within the device memory budget
/// (`geeps_config_set_device_memory`) and the GPU's free memory less a
/// reserve for the application. `geeps_new` opens the GPU and fails with
/// `GEEPS_STATUS_DEVICE`, saying what is missing, when there is no usable
/// driver or no such GPU; it never falls back to the host.
///
/// The `data` of every buffer of such an instance is then a CUDA device
/// pointer (a `CUdeviceptr` as `float *`), not host memory: never
/// dereference it on the host. Pass it to your kernels or `cudaMemcpy`, or
/// copy with `geeps_buffer_copy_to_host` / `geeps_buffer_copy_from_host`.
/// `geeps_host_addressable` tells which kind an instance hands out.
#[no_mangle]
pub extern "C" fn geeps_config_set_cuda_device(config: *mut GeepsConfig, ordinal: usize) -> GeepsStatus {
    guard(|| {
        CONFIGS.get(config, "config")?.settings.lock().cuda = Some(ordinal);
        Ok(())
    })
}

/// Puts instances created from this config on the host device (the
/// default): buffers are host memory. Undoes `geeps_config_set_cuda_device`.
#[no_mangle]
pub extern "C" fn geeps_config_set_host_device(config: *mut GeepsConfig) -> GeepsStatus {
    guard(|| {
        CONFIGS.get(config, "config")?.settings.lock().cuda = None;
        Ok(())
    })
}

/// Makes instances created from this config worker `rank` of `cluster`.
/// In-process: `0 <= rank < workers`. Network: `rank` must be this
/// process's own rank, the value of `geeps_cluster_rank` (else
/// `GEEPS_STATUS_INVALID_CONFIG`). Each rank may be joined by one instance,
/// once. The config keeps the cluster alive.
#[no_mangle]
pub extern "C" fn geeps_config_set_cluster(
    config: *mut GeepsConfig,
    cluster: *const GeepsCluster,
    rank: usize,
) -> GeepsStatus {
    guard(|| {
        let config = CONFIGS.get(config, "config")?;
        let cluster = CLUSTERS.get(cluster, "cluster")?;
        cluster.check_rank(rank)?;
        config.settings.lock().cluster = Some((cluster, rank));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_value_is_refused_and_the_config_kept() {
        let mut cfg = std::ptr::null_mut();
        assert_eq!(geeps_config_new(&mut cfg), GeepsStatus::Ok);
        assert_eq!(geeps_config_set_row_width(cfg, 64), GeepsStatus::Ok);
        assert_eq!(geeps_config_set_row_width(cfg, 0), GeepsStatus::InvalidConfig);
        assert_eq!(geeps_config_set_wait_deadline_ms(cfg, 0), GeepsStatus::InvalidConfig);
        let kept = CONFIGS.get(cfg, "config").unwrap().settings();
        assert_eq!(kept.config.row_width, 64);
        assert_eq!(kept.config.wait_deadline, Config::default().wait_deadline);
        assert_eq!(geeps_config_free(cfg), GeepsStatus::Ok);
        assert_eq!(geeps_config_free(cfg), GeepsStatus::InvalidArgument);
    }

    #[test]
    fn the_device_is_a_setting_until_an_instance_opens_it() {
        let mut cfg = std::ptr::null_mut();
        assert_eq!(geeps_config_new(&mut cfg), GeepsStatus::Ok);
        assert_eq!(geeps_config_set_cuda_device(cfg, 3), GeepsStatus::Ok);
        assert_eq!(CONFIGS.get(cfg, "config").unwrap().settings().cuda, Some(3));
        assert_eq!(geeps_config_set_host_device(cfg), GeepsStatus::Ok);
        assert_eq!(CONFIGS.get(cfg, "config").unwrap().settings().cuda, None);
        assert_eq!(geeps_config_set_cuda_device(std::ptr::null_mut(), 0), GeepsStatus::NullPointer);
        assert_eq!(geeps_config_free(cfg), GeepsStatus::Ok);
    }
}
