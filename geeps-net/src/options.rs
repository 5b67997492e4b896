//! Network options shared by keepers, workers and the rendezvous. Defaults
//! are production values; every wait they bound ends in an error naming the
//! peer, never in a silent hang.

use std::time::Duration;

use geeps_core::{Error, Result};

use crate::security::tls::TlsFiles;

/// How update deltas cross the network ([`NetOptions::wire`]). Publications
/// (parameter values) are f32 either way, and a rank's updates to its own
/// keeper shard are applied in process, exactly.
///
/// ```
/// use geeps_net::WireEncoding;
///
/// assert_eq!("bf16".parse::<WireEncoding>(), Ok(WireEncoding::Bf16));
/// assert!("fp8".parse::<WireEncoding>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WireEncoding {
    /// Little-endian f32: exact.
    #[default]
    F32,
    /// bf16 (round to nearest even), half the bytes of f32, with error
    /// feedback: each sender keeps, per table partition, what rounding left
    /// out and adds it to the next clock's deltas, so no update is lost over
    /// clocks; the keeper's rows trail the exact sum by at most half a bf16
    /// step (2^-9 relative) of the last values sent.
    Bf16,
}

impl std::str::FromStr for WireEncoding {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" => Ok(WireEncoding::F32),
            "bf16" => Ok(WireEncoding::Bf16),
            _ => Err(format!(
                "`{s}` is not a wire encoding; write f32 (exact, the default) or bf16 (half the bytes, with error feedback)"
            )),
        }
    }
}

impl std::fmt::Display for WireEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WireEncoding::F32 => "f32",
            WireEncoding::Bf16 => "bf16",
        })
    }
}

/// The most partitions of a table one keeper may own ([`NetOptions::stripes`]).
pub(crate) const MAX_STRIPES: usize = 64;

/// Options of a networked cluster member: start from
/// [`NetOptions::default`] and change what differs (fields may be added in a
/// minor release).
///
/// ```
/// use std::time::Duration;
/// use geeps_net::NetOptions;
///
/// let options = NetOptions::default().with_token("s3cret").with_peer_timeout(Duration::from_secs(60));
/// assert_eq!(options.heartbeat, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NetOptions {
    /// Shared secret: a peer with another token is refused at join.
    /// Required (non-empty) whenever a keeper or rendezvous listens beyond
    /// loopback; `GEEPS_TOKEN` sets it.
    pub token: String,
    /// A peer silent for this long (no data, no heartbeat) is lost; at
    /// least twice [`NetOptions::heartbeat`]. `GEEPS_PEER_TIMEOUT_MS` sets it.
    pub peer_timeout: Duration,
    /// How long to keep retrying to reach a peer that has not started yet.
    pub connect_timeout: Duration,
    /// Idle connections send a heartbeat this often. `GEEPS_HEARTBEAT_MS`
    /// sets it.
    pub heartbeat: Duration,
    /// Largest frame payload accepted, bytes.
    pub max_message_bytes: u64,
    /// How long shutdown waits for the other workers to leave.
    pub shutdown_timeout: Duration,
    /// A connection that has not completed its handshake (hello or
    /// rendezvous registration, token checked) within this long is dropped.
    pub handshake_timeout: Duration,
    /// Largest frame accepted before the handshake completes, bytes: all an
    /// unauthenticated peer can make a keeper or rendezvous allocate. Give
    /// every rank the same value.
    pub max_handshake_bytes: u32,
    /// Connections accepted but not yet through the handshake, per keeper or
    /// rendezvous; more are closed at once (and logged once).
    pub max_pending_connections: usize,
    /// TLS for keeper connections (mutual, against the cluster's CA): needs
    /// the `tls` feature; `GEEPS_TLS_CERT`, `GEEPS_TLS_KEY` and
    /// `GEEPS_TLS_CA` set it. Give every rank the same choice.
    pub tls: Option<TlsFiles>,
    /// Where rank 0 serves the admin endpoint (`host:port`, or a port on
    /// 127.0.0.1): gRPC status and drain; needs the `admin` feature.
    /// `GEEPS_ADMIN` sets it. Other ranks ignore it.
    pub admin: Option<String>,
    /// How this rank sends its update deltas to the other ranks' keepers:
    /// f32 (exact, the default) or bf16 (half the bytes, error feedback).
    /// Keepers accept either from any rank, so ranks may differ.
    /// `GEEPS_WIRE` (`f32` or `bf16`) sets it.
    pub wire: WireEncoding,
    /// How this rank's keeper sends publications (parameter rows) to the
    /// other ranks' workers: f32 (exact, the default) or bf16 (half the
    /// bytes). In bf16 a keeper sends each publication as the bf16 change
    /// since the last one, with error feedback: its own rows stay exact f32,
    /// it remembers what the workers hold, and what rounding held back goes
    /// out with the next publication, so a worker's rows trail the keeper's
    /// by half a bf16 step of one clock's change, never more. Workers
    /// accept either from any keeper, so ranks may differ; this process's
    /// own worker always gets exact rows. `GEEPS_PUBLISH_WIRE` sets it.
    pub publish_wire: WireEncoding,
    /// How many partitions of each table every keeper owns (at least 1,
    /// at most 64; default 1): with S, a table splits into S·world
    /// partitions, which workers send in order, so a keeper publishes its
    /// first stripe while the later ones still arrive, and the links carry
    /// updates and publications at once. More stripes mean more, smaller
    /// frames. Give every rank the same value (a keeper refuses a rank
    /// that differs). `GEEPS_STRIPES` sets it.
    pub stripes: usize,
    /// How many stripes ahead of its slowest TCP keeper connection a
    /// worker's update frames may go (default 2; 0 lets every connection
    /// run as far ahead as its socket allows). Where the links are the
    /// limit, TCP shares a host's uplink unevenly between the flows to its
    /// keepers, and the keeper whose updates come last publishes last while
    /// the other links idle; a window holds the flows within a few stripes
    /// of each other (`docs/network.md`). It matters with
    /// [`stripes`](Self::stripes) above it. `GEEPS_SEND_WINDOW` sets it.
    pub send_window: usize,
    /// Whether a worker and a keeper on the same host move their frames
    /// through a shared-memory segment instead of the socket (which then
    /// only rings doorbells and carries liveness); on by default, off with
    /// `GEEPS_SHM=0`. Connections that cannot use it (other host, other
    /// user, TLS, no shared-memory directory) stay on TCP. A keeper offers
    /// it only when its own option is on too.
    pub shared_memory: bool,
    /// Bytes of each of a shared-memory connection's two rings (rounded up
    /// to pages, 64 KiB at least; frames larger stream through). The keeper's
    /// value counts. `GEEPS_SHM_RING_BYTES` sets it.
    pub shm_ring_bytes: usize,
    /// Where shared-memory segments are created and looked for (default
    /// `/dev/shm`); a segment's file lives only until both ends mapped it.
    pub shm_dir: std::path::PathBuf,
    /// The TCP congestion control of this rank's keeper connections, both
    /// the ones its worker opens and the ones its keeper accepts (Linux,
    /// for example `cubic`); `None` (the default) keeps the system's
    /// (`net.ipv4.tcp_congestion_control`). Where the links and not the
    /// CPUs are the limit, every worker's flows to every keeper share each
    /// link: a loss-based control keeps a link busy as flows start and
    /// end, where BBR leaves it partly idle (`docs/network.md`).
    /// `GEEPS_TCP_CONGESTION` sets it.
    pub tcp_congestion: Option<String>,
}

impl Default for NetOptions {
    fn default() -> Self {
        NetOptions {
            token: String::new(),
            peer_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(60),
            heartbeat: Duration::from_secs(1),
            max_message_bytes: 1 << 30,
            shutdown_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(5),
            max_handshake_bytes: 64 << 10,
            max_pending_connections: 64,
            tls: None,
            admin: None,
            wire: WireEncoding::F32,
            publish_wire: WireEncoding::F32,
            stripes: 1,
            send_window: 2,
            shared_memory: true,
            shm_ring_bytes: 4 << 20,
            shm_dir: std::path::PathBuf::from("/dev/shm"),
            tcp_congestion: None,
        }
    }
}

/// An admin listen address as given (`host:port`), or a bare port on loopback.
pub(crate) fn admin_listen(given: &str) -> String {
    if given.parse::<u16>().is_ok() {
        format!("127.0.0.1:{given}")
    } else {
        given.to_string()
    }
}

impl NetOptions {
    /// Sets [`NetOptions::token`].
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = token.into();
        self
    }

    /// Sets [`NetOptions::peer_timeout`].
    pub fn with_peer_timeout(mut self, timeout: Duration) -> Self {
        self.peer_timeout = timeout;
        self
    }

    /// Sets [`NetOptions::connect_timeout`].
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`NetOptions::heartbeat`].
    pub fn with_heartbeat(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// Sets [`NetOptions::max_message_bytes`].
    pub fn with_max_message_bytes(mut self, bytes: u64) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets [`NetOptions::shutdown_timeout`].
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Sets [`NetOptions::handshake_timeout`].
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Sets [`NetOptions::max_handshake_bytes`].
    pub fn with_max_handshake_bytes(mut self, bytes: u32) -> Self {
        self.max_handshake_bytes = bytes;
        self
    }

    /// Sets [`NetOptions::max_pending_connections`].
    pub fn with_max_pending_connections(mut self, connections: usize) -> Self {
        self.max_pending_connections = connections;
        self
    }

    /// Sets [`NetOptions::tls`]: keeper connections use TLS with these files.
    pub fn with_tls(mut self, files: TlsFiles) -> Self {
        self.tls = Some(files);
        self
    }

    /// Sets [`NetOptions::wire`]: how this rank's update deltas cross the network.
    pub fn with_wire(mut self, wire: WireEncoding) -> Self {
        self.wire = wire;
        self
    }

    /// Sets [`NetOptions::stripes`].
    pub fn with_stripes(mut self, stripes: usize) -> Self {
        self.stripes = stripes;
        self
    }

    /// Sets [`NetOptions::send_window`].
    pub fn with_send_window(mut self, stripes: usize) -> Self {
        self.send_window = stripes;
        self
    }

    /// Sets [`NetOptions::publish_wire`].
    pub fn with_publish_wire(mut self, wire: WireEncoding) -> Self {
        self.publish_wire = wire;
        self
    }

    /// Sets [`NetOptions::shared_memory`]: same-host connections through
    /// shared memory (`true`, the default) or always TCP.
    pub fn with_shared_memory(mut self, on: bool) -> Self {
        self.shared_memory = on;
        self
    }

    /// Sets [`NetOptions::shm_ring_bytes`].
    pub fn with_shm_ring_bytes(mut self, bytes: usize) -> Self {
        self.shm_ring_bytes = bytes;
        self
    }

    /// Sets [`NetOptions::shm_dir`].
    pub fn with_shm_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.shm_dir = dir.into();
        self
    }

    /// Sets [`NetOptions::tcp_congestion`]: the congestion control of
    /// keeper connections (`cubic`, `reno`, `bbr`, ... as the kernel has them).
    pub fn with_tcp_congestion(mut self, name: impl Into<String>) -> Self {
        self.tcp_congestion = Some(name.into());
        self
    }

    /// Sets [`NetOptions::admin`]: rank 0 serves the admin endpoint there.
    pub fn with_admin(mut self, listen: impl Into<String>) -> Self {
        self.admin = Some(listen.into());
        self
    }

    /// Checks that the options can work together: every duration that
    /// bounds a wait is non-zero, and a healthy idle peer (one heartbeat
    /// every `heartbeat`) is never taken for lost.
    ///
    /// ```
    /// use std::time::Duration;
    /// use geeps_net::NetOptions;
    ///
    /// assert!(NetOptions::default().validate().is_ok());
    /// let twitchy = NetOptions::default().with_heartbeat(Duration::from_secs(2)).with_peer_timeout(Duration::from_secs(3));
    /// assert!(twitchy.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, reason: String| Err(Error::InvalidConfig { field, reason });
        for (field, d) in [
            ("heartbeat", self.heartbeat),
            ("peer_timeout", self.peer_timeout),
            ("connect_timeout", self.connect_timeout),
            ("handshake_timeout", self.handshake_timeout),
        ] {
            if d.is_zero() {
                return bad(field, "zero; it bounds a wait and must be positive".into());
            }
        }
        if self.peer_timeout < self.heartbeat * 2 {
            return bad(
                "peer_timeout",
                format!(
                    "{:?} is less than two heartbeats ({:?} each): a healthy idle peer would be taken for lost; raise GEEPS_PEER_TIMEOUT_MS or lower GEEPS_HEARTBEAT_MS",
                    self.peer_timeout, self.heartbeat
                ),
            );
        }
        if self.max_message_bytes == 0 {
            return bad("max_message_bytes", "zero; no update could be sent".into());
        }
        if !(1..=MAX_STRIPES).contains(&self.stripes) {
            return bad(
                "stripes",
                format!("{} stripes per keeper; use 1 to {MAX_STRIPES} (GEEPS_STRIPES)", self.stripes),
            );
        }
        if self.max_handshake_bytes < 1024 {
            return bad(
                "max_handshake_bytes",
                format!("{} bytes cannot hold a handshake; use at least 1024", self.max_handshake_bytes),
            );
        }
        if self.max_pending_connections == 0 {
            return bad("max_pending_connections", "zero; no peer could connect".into());
        }
        if let Some(name) = &self.tcp_congestion {
            crate::conn::socket_options::check_congestion(name)
                .map_err(|reason| Error::InvalidConfig { field: "tcp_congestion", reason })?;
        }
        Ok(())
    }

    /// Applies the environment's overrides: `GEEPS_TOKEN`,
    /// `GEEPS_HEARTBEAT_MS`, `GEEPS_PEER_TIMEOUT_MS`, `GEEPS_ADMIN`, `GEEPS_WIRE`,
    /// `GEEPS_PUBLISH_WIRE`, `GEEPS_STRIPES`, `GEEPS_SEND_WINDOW`, `GEEPS_SHM` (`0` or `1`), `GEEPS_SHM_RING_BYTES`, `GEEPS_TCP_CONGESTION`, and `GEEPS_TLS_CERT`,
    /// `GEEPS_TLS_KEY`, `GEEPS_TLS_CA` (all three or none) (`env` looks a
    /// variable up). An unparsable value is an error naming the variable.
    pub(crate) fn with_env(mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        if let Some(token) = env("GEEPS_TOKEN") {
            self.token = token;
        }
        let millis = |name: &'static str| -> Result<Option<Duration>> {
            match env(name) {
                None => Ok(None),
                Some(v) => v.trim().parse::<u64>().map(|ms| Some(Duration::from_millis(ms))).map_err(|_| {
                    Error::InvalidConfig { field: name, reason: format!("`{v}` is not a number of milliseconds") }
                }),
            }
        };
        if let Some(d) = millis("GEEPS_HEARTBEAT_MS")? {
            self.heartbeat = d;
        }
        if let Some(d) = millis("GEEPS_PEER_TIMEOUT_MS")? {
            self.peer_timeout = d;
        }
        if let Some(admin) = env("GEEPS_ADMIN") {
            self.admin = Some(admin);
        }
        if let Some(wire) = env("GEEPS_WIRE") {
            self.wire = wire.parse().map_err(|reason: String| Error::InvalidConfig { field: "GEEPS_WIRE", reason })?;
        }
        if let Some(wire) = env("GEEPS_PUBLISH_WIRE") {
            self.publish_wire =
                wire.parse().map_err(|reason: String| Error::InvalidConfig { field: "GEEPS_PUBLISH_WIRE", reason })?;
        }
        if let Some(v) = env("GEEPS_SHM") {
            self.shared_memory = match v.trim() {
                "1" => true,
                "0" => false,
                _ => {
                    return Err(Error::InvalidConfig {
                        field: "GEEPS_SHM",
                        reason: format!("`{v}` is neither 1 (shared memory between same-host ranks) nor 0 (TCP only)"),
                    })
                }
            };
        }
        if let Some(v) = env("GEEPS_STRIPES") {
            self.stripes = v.trim().parse().map_err(|_| Error::InvalidConfig {
                field: "GEEPS_STRIPES",
                reason: format!("`{v}` is not a number of partitions per keeper (1 to {MAX_STRIPES})"),
            })?;
        }
        if let Some(v) = env("GEEPS_SEND_WINDOW") {
            self.send_window = v.trim().parse().map_err(|_| Error::InvalidConfig {
                field: "GEEPS_SEND_WINDOW",
                reason: format!("`{v}` is not a number of stripes (0 for no window)"),
            })?;
        }
        if let Some(name) = env("GEEPS_TCP_CONGESTION") {
            let name = name.trim();
            self.tcp_congestion = (!name.is_empty()).then(|| name.to_string());
        }
        if let Some(v) = env("GEEPS_SHM_RING_BYTES") {
            self.shm_ring_bytes = v.trim().parse().map_err(|_| Error::InvalidConfig {
                field: "GEEPS_SHM_RING_BYTES",
                reason: format!("`{v}` is not a number of bytes"),
            })?;
        }
        match (env("GEEPS_TLS_CERT"), env("GEEPS_TLS_KEY"), env("GEEPS_TLS_CA")) {
            (None, None, None) => {}
            (Some(cert), Some(key), Some(ca)) => self.tls = Some(TlsFiles::new(cert, key, ca)),
            (cert, key, ca) => {
                let missing: Vec<&str> = [("GEEPS_TLS_CERT", cert), ("GEEPS_TLS_KEY", key), ("GEEPS_TLS_CA", ca)]
                    .into_iter()
                    .filter(|(_, v)| v.is_none())
                    .map(|(k, _)| k)
                    .collect();
                return Err(Error::InvalidConfig {
                    field: "tls",
                    reason: format!(
                        "TLS needs GEEPS_TLS_CERT, GEEPS_TLS_KEY and GEEPS_TLS_CA; {} unset",
                        missing.join(", ")
                    ),
                });
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn environment_names_the_congestion_control_and_a_blank_keeps_the_systems() {
        let o = NetOptions::default().with_env(&env_of(&[("GEEPS_TCP_CONGESTION", " reno ")])).unwrap();
        assert_eq!(o.tcp_congestion.as_deref(), Some("reno"));
        let o = NetOptions::default()
            .with_tcp_congestion("reno")
            .with_env(&env_of(&[("GEEPS_TCP_CONGESTION", "")]))
            .unwrap();
        assert_eq!(o.tcp_congestion, None);
        // The kernel's answer: reno is in every Linux kernel; warp9 in none.
        if cfg!(target_os = "linux") {
            NetOptions::default().with_tcp_congestion("reno").validate().unwrap();
        }
        let e = NetOptions::default().with_tcp_congestion("warp9").validate().unwrap_err().to_string();
        assert!(e.contains("tcp_congestion") && e.contains("warp9"), "{e}");
    }

    #[test]
    fn environment_sets_heartbeat_peer_timeout_and_token() {
        let o = NetOptions::default()
            .with_env(&env_of(&[
                ("GEEPS_HEARTBEAT_MS", "250"),
                ("GEEPS_PEER_TIMEOUT_MS", "4000"),
                ("GEEPS_TOKEN", "s"),
            ]))
            .unwrap();
        assert_eq!(
            (o.heartbeat, o.peer_timeout, o.token.as_str()),
            (Duration::from_millis(250), Duration::from_secs(4), "s")
        );
        o.validate().unwrap();
        let o = NetOptions::default().with_env(&env_of(&[])).unwrap();
        assert_eq!((o.heartbeat, o.peer_timeout), (Duration::from_secs(1), Duration::from_secs(30)));
        let e = NetOptions::default().with_env(&env_of(&[("GEEPS_HEARTBEAT_MS", "1s")])).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { field: "GEEPS_HEARTBEAT_MS", .. }), "{e}");
    }

    #[test]
    fn environment_sets_the_wire_and_refuses_other_encodings() {
        assert_eq!(NetOptions::default().wire, WireEncoding::F32);
        let o = NetOptions::default().with_env(&env_of(&[("GEEPS_WIRE", "bf16")])).unwrap();
        assert_eq!(o.wire, WireEncoding::Bf16);
        let o =
            NetOptions::default().with_wire(WireEncoding::Bf16).with_env(&env_of(&[("GEEPS_WIRE", " F32 ")])).unwrap();
        assert_eq!(o.wire, WireEncoding::F32);
        let e = NetOptions::default().with_env(&env_of(&[("GEEPS_WIRE", "fp16")])).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { field: "GEEPS_WIRE", .. }), "{e}");
        assert!(e.to_string().contains("`fp16` is not a wire encoding; write f32"), "{e}");
    }

    #[test]
    fn stripes_come_from_the_environment_and_stay_in_range() {
        assert_eq!(NetOptions::default().stripes, 1);
        let o = NetOptions::default().with_env(&env_of(&[("GEEPS_STRIPES", " 4 ")])).unwrap();
        assert_eq!(o.stripes, 4);
        o.validate().unwrap();
        let e = NetOptions::default().with_env(&env_of(&[("GEEPS_STRIPES", "four")])).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { field: "GEEPS_STRIPES", .. }), "{e}");
        for bad in [0, MAX_STRIPES + 1] {
            let e = NetOptions::default().with_stripes(bad).validate().unwrap_err();
            assert!(e.to_string().contains("use 1 to 64 (GEEPS_STRIPES)"), "{e}");
        }
    }

    #[test]
    fn the_send_window_comes_from_the_environment() {
        assert_eq!(NetOptions::default().send_window, 2);
        let o = NetOptions::default().with_env(&env_of(&[("GEEPS_SEND_WINDOW", " 0 ")])).unwrap();
        assert_eq!(o.send_window, 0);
        o.validate().unwrap();
        assert_eq!(NetOptions::default().with_send_window(5).send_window, 5);
        let e = NetOptions::default().with_env(&env_of(&[("GEEPS_SEND_WINDOW", "-1")])).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { field: "GEEPS_SEND_WINDOW", .. }), "{e}");
        assert!(e.to_string().contains("`-1` is not a number of stripes (0 for no window)"), "{e}");
    }

    #[test]
    fn environment_sets_the_publication_wire_apart_from_the_updates() {
        assert_eq!(NetOptions::default().publish_wire, WireEncoding::F32);
        let o = NetOptions::default().with_env(&env_of(&[("GEEPS_PUBLISH_WIRE", "bf16")])).unwrap();
        assert_eq!((o.wire, o.publish_wire), (WireEncoding::F32, WireEncoding::Bf16));
        let o = NetOptions::default()
            .with_publish_wire(WireEncoding::Bf16)
            .with_env(&env_of(&[("GEEPS_WIRE", "bf16"), ("GEEPS_PUBLISH_WIRE", "f32")]))
            .unwrap();
        assert_eq!((o.wire, o.publish_wire), (WireEncoding::Bf16, WireEncoding::F32));
        let e = NetOptions::default().with_env(&env_of(&[("GEEPS_PUBLISH_WIRE", "half")])).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { field: "GEEPS_PUBLISH_WIRE", .. }), "{e}");
    }

    #[test]
    fn environment_turns_shared_memory_off_and_sizes_its_rings() {
        let o = NetOptions::default();
        assert!(o.shared_memory);
        let o = o.with_env(&env_of(&[("GEEPS_SHM", "0"), ("GEEPS_SHM_RING_BYTES", "1048576")])).unwrap();
        assert_eq!((o.shared_memory, o.shm_ring_bytes), (false, 1 << 20));
        let o = o.with_env(&env_of(&[("GEEPS_SHM", " 1")])).unwrap();
        assert!(o.shared_memory);
        let e = NetOptions::default().with_env(&env_of(&[("GEEPS_SHM", "yes")])).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { field: "GEEPS_SHM", .. }), "{e}");
    }

    #[test]
    fn environment_sets_tls_files_all_three_or_none() {
        let o = NetOptions::default()
            .with_env(&env_of(&[("GEEPS_TLS_CERT", "c.pem"), ("GEEPS_TLS_KEY", "k.pem"), ("GEEPS_TLS_CA", "ca.pem")]))
            .unwrap();
        assert_eq!(o.tls, Some(TlsFiles::new("c.pem", "k.pem", "ca.pem")));
        let e = NetOptions::default().with_env(&env_of(&[("GEEPS_TLS_CERT", "c.pem")])).unwrap_err().to_string();
        assert!(e.contains("GEEPS_TLS_KEY, GEEPS_TLS_CA unset"), "{e}");
    }

    #[test]
    fn inconsistent_options_are_refused_naming_the_field() {
        let field = |o: NetOptions| match o.validate() {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(NetOptions::default().with_heartbeat(Duration::ZERO)), "heartbeat");
        assert_eq!(field(NetOptions::default().with_peer_timeout(Duration::from_millis(1500))), "peer_timeout");
        assert_eq!(field(NetOptions::default().with_handshake_timeout(Duration::ZERO)), "handshake_timeout");
        assert_eq!(field(NetOptions::default().with_max_pending_connections(0)), "max_pending_connections");
        assert_eq!(field(NetOptions::default().with_max_handshake_bytes(10)), "max_handshake_bytes");
        assert_eq!(field(NetOptions::default().with_max_message_bytes(0)), "max_message_bytes");
    }
}
