//! `geeps_net_options`: the network settings of a cluster member (token and
//! timeouts), an opaque object with one setter per field, read when a
//! network cluster is created. Setters refuse only values no cluster could
//! run with; every other rule is geeps-net's.

use std::ffi::c_char;
use std::time::Duration;

use geeps_net::NetOptions;
use parking_lot::Mutex;

use crate::guard::guard;
use crate::marshal::{clear_out, require, string, write_out};
use crate::registry::Registry;
use crate::status::{Failure, FfiResult, GeepsStatus};

/// Network settings for `geeps_cluster_from_env_with` and
/// `geeps_cluster_connect_with`. Opaque; create with
/// `geeps_net_options_new`, free with `geeps_net_options_free`. The cluster
/// copies them, so one object can serve several clusters.
pub struct GeepsNetOptions {
    options: Mutex<NetOptions>,
}

pub(crate) static NET_OPTIONS: Registry<GeepsNetOptions> = Registry::new("geeps_net_options");

/// The options named by `options`; NULL means the defaults.
pub(crate) fn net_options(options: *const GeepsNetOptions) -> FfiResult<NetOptions> {
    if options.is_null() {
        return Ok(NetOptions::default());
    }
    Ok(NET_OPTIONS.get(options, "options")?.options.lock().clone())
}

/// A timeout in milliseconds; 0 would fail every wait at once.
fn timeout(ms: u64, field: &str) -> FfiResult<Duration> {
    if ms == 0 {
        return Err(Failure::new(GeepsStatus::InvalidConfig, format!("`{field}` is 0 ms; give it at least 1 ms")));
    }
    Ok(Duration::from_millis(ms))
}

fn set(options: *mut GeepsNetOptions, change: impl FnOnce(&mut NetOptions) -> FfiResult) -> GeepsStatus {
    guard(|| {
        let options = NET_OPTIONS.get(options, "options")?;
        let mut kept = options.options.lock();
        let mut next = kept.clone();
        change(&mut next)?;
        *kept = next;
        Ok(())
    })
}

/// Creates network options with the defaults: no token, peers lost after
/// 30000 ms of silence, connecting retried for 60000 ms, shutdown waiting
/// up to 60000 ms for the other workers.
#[no_mangle]
pub extern "C" fn geeps_net_options_new(out: *mut *mut GeepsNetOptions) -> GeepsStatus {
    guard(|| {
        clear_out(out);
        require(out, "out")?;
        let options = GeepsNetOptions { options: Mutex::new(NetOptions::default()) };
        write_out(out, "out", NET_OPTIONS.insert(options))
    })
}

/// Frees network options; clusters created with them are not affected.
/// Freeing NULL does nothing.
#[no_mangle]
pub extern "C" fn geeps_net_options_free(options: *mut GeepsNetOptions) -> GeepsStatus {
    guard(|| {
        if !options.is_null() {
            NET_OPTIONS.remove(options, "options")?;
        }
        Ok(())
    })
}

/// The cluster's shared secret (UTF-8): a peer with another token is refused
/// when it joins. Under `geeps_cluster_from_env*`, `GEEPS_TOKEN` (set by
/// geeps-launch) overrides it.
#[no_mangle]
pub extern "C" fn geeps_net_options_set_token(options: *mut GeepsNetOptions, token: *const c_char) -> GeepsStatus {
    set(options, |o| {
        o.token = string(token, "token")?.to_string();
        Ok(())
    })
}

/// How long to keep retrying to reach a rendezvous or a keeper that has not
/// started yet, in ms (default 60000); then `GEEPS_STATUS_PEER_LOST`.
#[no_mangle]
pub extern "C" fn geeps_net_options_set_connect_timeout_ms(options: *mut GeepsNetOptions, ms: u64) -> GeepsStatus {
    set(options, |o| {
        o.connect_timeout = timeout(ms, "connect_timeout_ms")?;
        Ok(())
    })
}

/// A peer silent for this long is lost, in ms (default 30000). Idle
/// connections send a heartbeat every second, so it must exceed 1000.
#[no_mangle]
pub extern "C" fn geeps_net_options_set_peer_timeout_ms(options: *mut GeepsNetOptions, ms: u64) -> GeepsStatus {
    set(options, |o| {
        let peer_timeout = timeout(ms, "peer_timeout_ms")?;
        if peer_timeout <= o.heartbeat {
            return Err(Failure::new(
                GeepsStatus::InvalidConfig,
                format!(
                    "`peer_timeout_ms` is {ms} ms, not above the heartbeat interval of {} ms: idle peers would be lost",
                    o.heartbeat.as_millis()
                ),
            ));
        }
        o.peer_timeout = peer_timeout;
        Ok(())
    })
}

/// How long shutting a network cluster down waits for the other workers to
/// leave this rank's keeper, in ms (default 60000); then
/// `GEEPS_STATUS_TIMEOUT` naming them.
#[no_mangle]
pub extern "C" fn geeps_net_options_set_shutdown_timeout_ms(options: *mut GeepsNetOptions, ms: u64) -> GeepsStatus {
    set(options, |o| {
        o.shutdown_timeout = timeout(ms, "shutdown_timeout_ms")?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_refused_and_the_options_kept() {
        let mut o = std::ptr::null_mut();
        assert_eq!(geeps_net_options_new(&mut o), GeepsStatus::Ok);
        assert_eq!(geeps_net_options_set_token(o, c"secret".as_ptr()), GeepsStatus::Ok);
        assert_eq!(geeps_net_options_set_connect_timeout_ms(o, 1500), GeepsStatus::Ok);
        assert_eq!(geeps_net_options_set_connect_timeout_ms(o, 0), GeepsStatus::InvalidConfig);
        assert_eq!(geeps_net_options_set_peer_timeout_ms(o, 1000), GeepsStatus::InvalidConfig);
        assert_eq!(geeps_net_options_set_peer_timeout_ms(o, 5000), GeepsStatus::Ok);
        assert_eq!(geeps_net_options_set_shutdown_timeout_ms(o, 0), GeepsStatus::InvalidConfig);
        assert_eq!(geeps_net_options_set_token(o, std::ptr::null()), GeepsStatus::NullPointer);
        let kept = net_options(o).unwrap();
        assert_eq!(kept.token, "secret");
        assert_eq!(kept.connect_timeout, Duration::from_millis(1500));
        assert_eq!(kept.peer_timeout, Duration::from_secs(5));
        assert_eq!(kept.shutdown_timeout, NetOptions::default().shutdown_timeout);
        assert_eq!(net_options(std::ptr::null()).unwrap().token, "");
        assert_eq!(geeps_net_options_free(o), GeepsStatus::Ok);
        assert_eq!(geeps_net_options_set_token(o, c"x".as_ptr()), GeepsStatus::InvalidArgument);
    }
}
