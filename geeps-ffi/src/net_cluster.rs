//! The network cluster constructors: this process becomes one rank of a
//! geeps-net cluster (its keeper shard starts listening; the other ranks are
//! found from the environment or a fixed address list). Marshalling only;
//! bootstrap, rendezvous and keepers are geeps-net's.

use std::ffi::c_char;

use geeps_net::{ClusterSpec, NetCluster};

use crate::cluster::{GeepsCluster, CLUSTERS};
use crate::guard::guard;
use crate::marshal::{array, clear_out, require, string, write_out};
use crate::net_options::{net_options, GeepsNetOptions};
use crate::status::{FfiResult, GeepsStatus};

fn publish(cluster: NetCluster, out: *mut *mut GeepsCluster) -> FfiResult {
    write_out(out, "out", CLUSTERS.insert(GeepsCluster::net(cluster)))
}

/// Joins the network cluster described by the environment, as this
/// process's rank: a hosts file (`GEEPS_HOSTFILE`), `GEEPS_RANK`,
/// `GEEPS_WORLD_SIZE` with `GEEPS_HOSTS` or `GEEPS_RENDEZVOUS` (as
/// geeps-launch sets them), Slurm, Open MPI / PMI or torchrun variables.
/// `GEEPS_TOKEN` and `GEEPS_LISTEN` are honoured. Starts this rank's keeper
/// and, with a rendezvous, waits until every rank has registered (up to the
/// connect timeout). Give the instance's config this cluster and
/// `geeps_cluster_rank`'s value with `geeps_config_set_cluster`.
/// `GEEPS_STATUS_INVALID_CONFIG` says what is missing or inconsistent.
#[no_mangle]
pub extern "C" fn geeps_cluster_from_env(out: *mut *mut GeepsCluster) -> GeepsStatus {
    geeps_cluster_from_env_with(std::ptr::null(), out)
}

/// `geeps_cluster_from_env` with network options (NULL: the defaults).
#[no_mangle]
pub extern "C" fn geeps_cluster_from_env_with(
    options: *const GeepsNetOptions,
    out: *mut *mut GeepsCluster,
) -> GeepsStatus {
    guard(|| {
        clear_out(out);
        require(out, "out")?;
        let spec = ClusterSpec::from_env(net_options(options)?)?;
        publish(NetCluster::start(spec)?, out)
    })
}

/// Joins a network cluster of `world` ranks as rank `rank`, where
/// `addresses[r]` (`"host:port"`, UTF-8) is the address of rank `r`'s
/// keeper. This rank's keeper listens on `addresses[rank]`; the others are
/// reached when the instance joins (retried up to the connect timeout).
/// Every rank must be given the same list. World 0, a rank not below
/// `world` or an address this process cannot listen on:
/// `GEEPS_STATUS_INVALID_CONFIG`.
#[no_mangle]
pub extern "C" fn geeps_cluster_connect(
    rank: usize,
    addresses: *const *const c_char,
    world: usize,
    out: *mut *mut GeepsCluster,
) -> GeepsStatus {
    geeps_cluster_connect_with(rank, addresses, world, std::ptr::null(), out)
}

/// `geeps_cluster_connect` with network options (NULL: the defaults).
#[no_mangle]
pub extern "C" fn geeps_cluster_connect_with(
    rank: usize,
    addresses: *const *const c_char,
    world: usize,
    options: *const GeepsNetOptions,
    out: *mut *mut GeepsCluster,
) -> GeepsStatus {
    guard(|| {
        clear_out(out);
        require(out, "out")?;
        let list = array(addresses, world, "addresses")?
            .iter()
            .enumerate()
            .map(|(r, &a)| string(a, &format!("addresses[{r}]")).map(str::to_string))
            .collect::<FfiResult<Vec<String>>>()?;
        let spec = ClusterSpec::fixed(rank, list, net_options(options)?);
        publish(NetCluster::start(spec)?, out)
    })
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::cluster_calls::{geeps_cluster_free, geeps_cluster_rank, geeps_cluster_shutdown, geeps_cluster_world};
    use crate::config::{
        geeps_config_free, geeps_config_new, geeps_config_set_cluster, geeps_config_set_device_memory,
        geeps_config_set_row_width,
    };
    use crate::instance::GeepsInstance;
    use crate::lifecycle::{
        geeps_finish_virtual_iteration, geeps_free, geeps_new, geeps_parameter_table, geeps_shutdown,
    };
    use crate::net_options::{
        geeps_net_options_free, geeps_net_options_new, geeps_net_options_set_shutdown_timeout_ms,
    };
    use crate::real_calls::{geeps_clock, geeps_post_read, geeps_pre_update, geeps_read, geeps_update};
    use crate::virtual_calls::{
        geeps_virtual_clock, geeps_virtual_post_read, geeps_virtual_pre_update, geeps_virtual_read,
        geeps_virtual_update,
    };

    fn free_port_address() -> std::ffi::CString {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        std::ffi::CString::new(format!("127.0.0.1:{port}")).unwrap()
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_starts() {
        let a = free_port_address();
        let list = [a.as_ptr(), a.as_ptr()];
        let mut c = std::ptr::NonNull::<GeepsCluster>::dangling().as_ptr();
        assert_eq!(geeps_cluster_connect(0, list.as_ptr(), 1, std::ptr::null_mut()), GeepsStatus::NullPointer);
        assert_eq!(geeps_cluster_connect(0, std::ptr::null(), 2, &mut c), GeepsStatus::NullPointer);
        assert!(c.is_null(), "the out-pointer is cleared on failure");
        assert_eq!(geeps_cluster_connect(0, list.as_ptr(), 0, &mut c), GeepsStatus::InvalidConfig);
        assert_eq!(geeps_cluster_connect(2, list.as_ptr(), 2, &mut c), GeepsStatus::InvalidConfig);
        let holes = [a.as_ptr(), std::ptr::null()];
        assert_eq!(geeps_cluster_connect(0, holes.as_ptr(), 2, &mut c), GeepsStatus::NullPointer);
        let no_port = c"127.0.0.1";
        assert_eq!(geeps_cluster_connect(0, &no_port.as_ptr(), 1, &mut c), GeepsStatus::InvalidConfig);
        assert!(c.is_null());
    }

    /// A network cluster of one, shutting down after at most `ms`.
    fn cluster_of_one(address: &std::ffi::CStr, ms: u64) -> *mut GeepsCluster {
        let mut o = std::ptr::null_mut();
        assert_eq!(geeps_net_options_new(&mut o), GeepsStatus::Ok);
        assert_eq!(geeps_net_options_set_shutdown_timeout_ms(o, ms), GeepsStatus::Ok);
        let mut c = std::ptr::null_mut();
        assert_eq!(geeps_cluster_connect_with(0, &address.as_ptr(), 1, o, &mut c), GeepsStatus::Ok);
        assert_eq!(geeps_net_options_free(o), GeepsStatus::Ok);
        c
    }

    #[test]
    fn a_cluster_of_one_answers_its_shape_and_holds_its_address() {
        let a = free_port_address();
        let c = cluster_of_one(&a, 100);
        let (mut rank, mut world) = (9, 9);
        assert_eq!(geeps_cluster_rank(c, &mut rank), GeepsStatus::Ok);
        assert_eq!(geeps_cluster_world(c, &mut world), GeepsStatus::Ok);
        assert_eq!((rank, world), (0, 1));
        let mut twin = std::ptr::null_mut();
        assert_eq!(geeps_cluster_connect(0, &a.as_ptr(), 1, &mut twin), GeepsStatus::InvalidConfig);
        // No instance of this rank ever joined: shutdown tells the others at
        // once and stops, without waiting for anyone.
        assert_eq!(geeps_cluster_shutdown(c), GeepsStatus::Ok);
        assert_eq!(geeps_cluster_shutdown(c), GeepsStatus::Ok, "idempotent");
        assert_eq!(geeps_cluster_free(c), GeepsStatus::Ok);
        assert_eq!(geeps_cluster_shutdown(c), GeepsStatus::InvalidArgument, "freed");
    }

    /// Two iterations of an instance adding 2.5 to a row of one table over
    /// `cluster`; the instance is left joined and running.
    fn train_twice(cluster: *const GeepsCluster, rank: usize) -> *mut GeepsInstance {
        let mut cfg = std::ptr::null_mut();
        assert_eq!(geeps_config_new(&mut cfg), GeepsStatus::Ok);
        assert_eq!(geeps_config_set_row_width(cfg, 4), GeepsStatus::Ok);
        assert_eq!(geeps_config_set_device_memory(cfg, 1 << 20), GeepsStatus::Ok);
        assert_eq!(geeps_config_set_cluster(cfg, cluster, rank + 1), GeepsStatus::InvalidConfig);
        assert_eq!(geeps_config_set_cluster(cfg, cluster, rank), GeepsStatus::Ok);
        let mut ps = std::ptr::null_mut();
        assert_eq!(geeps_new(cfg, &mut ps), GeepsStatus::Ok);
        assert_eq!(geeps_config_free(cfg), GeepsStatus::Ok);
        let (mut w, mut read, mut grad) = (0, 0, 0);
        assert_eq!(geeps_parameter_table(ps, c"w".as_ptr(), 2, &mut w), GeepsStatus::Ok);
        let row = [1u32];
        assert_eq!(geeps_virtual_read(ps, w, row.as_ptr(), 1, 0, &mut read), GeepsStatus::Ok);
        assert_eq!(geeps_virtual_pre_update(ps, w, row.as_ptr(), 1, &mut grad), GeepsStatus::Ok);
        assert_eq!(geeps_virtual_update(ps, grad), GeepsStatus::Ok);
        assert_eq!(geeps_virtual_post_read(ps, read), GeepsStatus::Ok);
        assert_eq!(geeps_virtual_clock(ps), GeepsStatus::Ok);
        assert_eq!(geeps_finish_virtual_iteration(ps), GeepsStatus::Ok);
        for it in 0..2 {
            let (mut params, mut delta) = (crate::buffers::EMPTY, crate::buffers::EMPTY);
            assert_eq!(geeps_read(ps, read, &mut params), GeepsStatus::Ok);
            assert_eq!(geeps_pre_update(ps, grad, &mut delta), GeepsStatus::Ok);
            assert_eq!((params.rows, params.floats, delta.rows), (1, 4, 1));
            // SAFETY: both buffers hold one row of 4 floats until their posts.
            unsafe {
                assert_eq!(params.data.read(), 2.5 * it as f32, "BSP: every earlier clock's update");
                delta.data.write(2.5);
            }
            assert_eq!(geeps_update(ps, grad), GeepsStatus::Ok);
            assert_eq!(geeps_post_read(ps, read), GeepsStatus::Ok);
            assert_eq!(geeps_clock(ps), GeepsStatus::Ok);
        }
        ps
    }

    #[test]
    fn the_cluster_stops_after_its_instance_whatever_the_order_of_frees() {
        // Shutting the keeper down before the worker left would wait the
        // whole timeout (and fail); the right order takes milliseconds.
        let timeout = Duration::from_secs(5);
        let a = free_port_address();
        let c = cluster_of_one(&a, timeout.as_millis() as u64);
        let ps = train_twice(c, 0);
        assert_eq!(geeps_cluster_shutdown(c), GeepsStatus::InvalidState, "its instance still runs");
        assert_eq!(geeps_cluster_free(c), GeepsStatus::Ok);
        let start = Instant::now();
        assert_eq!(geeps_free(ps), GeepsStatus::Ok, "the last release shuts the cluster down");
        assert!(start.elapsed() < timeout, "waited {:?}", start.elapsed());
        // The address is free again: the keeper has stopped.
        let c = cluster_of_one(&a, timeout.as_millis() as u64);
        let ps = train_twice(c, 0);
        assert_eq!(geeps_shutdown(ps), GeepsStatus::Ok);
        let start = Instant::now();
        assert_eq!(geeps_cluster_shutdown(c), GeepsStatus::Ok);
        assert!(start.elapsed() < timeout, "waited {:?}", start.elapsed());
        let mut again = std::ptr::null_mut();
        let mut cfg = std::ptr::null_mut();
        assert_eq!(geeps_config_new(&mut cfg), GeepsStatus::Ok);
        assert_eq!(geeps_config_set_cluster(cfg, c, 0), GeepsStatus::ShutDown);
        assert_eq!(geeps_new(cfg, &mut again), GeepsStatus::Ok);
        assert_eq!(geeps_free(again), GeepsStatus::Ok);
        assert_eq!(geeps_config_free(cfg), GeepsStatus::Ok);
        assert_eq!(geeps_free(ps), GeepsStatus::Ok);
        assert_eq!(geeps_cluster_free(c), GeepsStatus::Ok);
    }
}
