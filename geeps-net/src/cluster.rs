//! `NetCluster`: this process's membership in a networked geeps cluster. It
//! owns the async runtime, serves this rank's keeper shard, resolves where
//! the other keepers are (bootstrap, rendezvous) and hands out the worker's
//! transport. Shutdown waits for every worker to leave (so no rank pulls a
//! shard away from the others), with a deadline, then joins everything.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use geeps_core::{Error, Result, Transport};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::watch;

use crate::bootstrap::rendezvous;
use crate::bootstrap::{self, Addresses};
use crate::keeper::KeeperService;
use crate::options::NetOptions;
use crate::security::tls;
use crate::worker::NetTransport;

/// Who this process is in the cluster and where everyone listens.
///
/// Made by [`ClusterSpec::from_env`], [`ClusterSpec::fixed`] or
/// [`ClusterSpec::new`]; fields may be added in a minor release.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClusterSpec {
    /// This process's rank, below `world`.
    pub rank: usize,
    /// The number of ranks.
    pub world: usize,
    /// Where the ranks' keepers listen, or how to find out.
    pub addresses: Addresses,
    /// Address to listen on (`host` or `host:port`); by default this rank's
    /// entry in the address list, or the interface that reaches the
    /// rendezvous. Never all interfaces unless asked for.
    pub listen: Option<String>,
    /// Timeouts, token and limits.
    pub options: NetOptions,
}

impl ClusterSpec {
    /// Rank `rank` of `world`, finding the keepers through `addresses`.
    pub fn new(rank: usize, world: usize, addresses: Addresses, options: NetOptions) -> Self {
        ClusterSpec { rank, world, addresses, listen: None, options }
    }

    /// Sets [`ClusterSpec::listen`].
    pub fn with_listen(mut self, listen: impl Into<String>) -> Self {
        self.listen = Some(listen.into());
        self
    }

    /// A cluster whose keeper addresses are known, by rank.
    pub fn fixed(rank: usize, addresses: Vec<String>, options: NetOptions) -> Self {
        ClusterSpec { rank, world: addresses.len(), addresses: Addresses::Fixed(addresses), listen: None, options }
    }

    /// From the environment (hosts file, `GEEPS_*`, Slurm, MPI, torchrun);
    /// `GEEPS_TOKEN`, `GEEPS_HEARTBEAT_MS`, `GEEPS_PEER_TIMEOUT_MS`,
    /// `GEEPS_WIRE` and `GEEPS_LISTEN` override the options.
    pub fn from_env(options: NetOptions) -> Result<Self> {
        let env = |k: &str| std::env::var(k).ok();
        let b = bootstrap::from_env(&env)?;
        let options = options.with_env(&env)?;
        tracing::info!(rank = b.rank, world = b.world, source = b.source, "geeps cluster bootstrap");
        Ok(ClusterSpec { rank: b.rank, world: b.world, addresses: b.addresses, listen: env("GEEPS_LISTEN"), options })
    }
}

/// This process's keeper shard and worker connection.
///
/// Each rank (process) starts one, from the environment that `geeps-launch`,
/// `srun`, `mpirun`, `torchrun` or a hosts file set up, and gives its
/// transport to the instance; the instance shuts down before the cluster.
///
/// ```no_run
/// use geeps_core::{Config, Geeps};
/// use geeps_net::NetCluster;
///
/// let mut cluster = NetCluster::from_env()?;
/// let mut b = Geeps::builder(Config::default());
/// let weights = b.parameter_table("fc1", 64);
/// b.transport(cluster.transport());
/// let ps = b.build()?;
/// // ... record, finish_virtual_iteration, train ...
/// ps.shutdown()?;
/// cluster.shutdown()?;
/// # let _ = weights;
/// # Ok::<(), geeps_core::Error>(())
/// ```
pub struct NetCluster {
    rank: usize,
    addresses: Vec<String>,
    options: NetOptions,
    runtime: Option<Runtime>,
    service: Arc<KeeperService>,
    stop: watch::Sender<bool>,
    transport: Arc<NetTransport>,
    admin: Option<std::net::SocketAddr>,
}

/// Starts rank 0's admin endpoint, or says why it cannot run.
fn start_admin(
    runtime: &Runtime,
    listen: &str,
    service: &Arc<KeeperService>,
    world: usize,
    token: &str,
    stop: &watch::Sender<bool>,
) -> Result<std::net::SocketAddr> {
    let listen = crate::options::admin_listen(listen);
    #[cfg(feature = "admin")]
    {
        let (service, token, stop) = (service.clone(), token.to_string(), stop.subscribe());
        runtime.block_on(crate::admin::start(&listen, service, world, &token, stop))
    }
    #[cfg(not(feature = "admin"))]
    {
        let _ = (runtime, service, world, token, stop);
        Err(Error::InvalidConfig {
            field: "admin",
            reason: format!(
                "an admin endpoint on {listen} was asked for (GEEPS_ADMIN), but geeps-net was built without its \
                 `admin` feature; enable geeps' `admin` feature"
            ),
        })
    }
}

/// The local interface used to reach `server`, over IPv4 or IPv6 as its
/// address is (no packet is sent).
fn interface_towards(server: &str) -> Result<String> {
    let unroutable = |e: std::io::Error| Error::InvalidConfig {
        field: "rendezvous",
        reason: format!("cannot route to `{server}`: {e}; set GEEPS_LISTEN to this host's address"),
    };
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "the name resolves to no address");
    for target in server.to_socket_addrs().map_err(unroutable)? {
        let any: IpAddr = if target.is_ipv6() { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
        let any = SocketAddr::new(any, 0);
        match UdpSocket::bind(any).and_then(|s| s.connect(target).and_then(|()| s.local_addr())) {
            Ok(local) => return Ok(local.ip().to_string()),
            Err(e) => last = e,
        }
    }
    Err(unroutable(last))
}

/// Refuses to listen beyond loopback without a token: anyone who reaches
/// the port could otherwise join the cluster and write its parameters.
fn require_token(opts: &NetOptions, rank: usize, what: &str, listener: &TcpListener) -> Result<()> {
    let addr = listener.local_addr()?;
    if opts.token.is_empty() && !addr.ip().is_loopback() {
        return Err(Error::InvalidConfig {
            field: "token",
            reason: format!(
                "rank {rank}'s {what} would listen on {addr}, beyond loopback, without a cluster token, so anyone who reaches it could join: set GEEPS_TOKEN to the same secret on every rank (for example `export GEEPS_TOKEN=$(openssl rand -hex 16)` before srun or mpirun; geeps-launch makes one per job), or listen on loopback for a one-machine job (GEEPS_LISTEN=127.0.0.1)"
            ),
        });
    }
    if let Some(warning) = no_token_warning(opts, rank, what, addr) {
        tracing::warn!(rank, %addr, "{warning}");
    }
    Ok(())
}

/// What is said of a listener on loopback without a token: loopback keeps
/// other machines out, not other users of this one.
fn no_token_warning(opts: &NetOptions, rank: usize, what: &str, addr: SocketAddr) -> Option<String> {
    opts.token.is_empty().then(|| {
        format!(
            "rank {rank}'s {what} listens on {addr} without a cluster token: any local user could join this job; \
             set GEEPS_TOKEN to the same secret on every rank (geeps-launch makes one per job)"
        )
    })
}

/// What is said when rank 0 serves the rendezvous on a loopback address
/// that a host name resolved to: ranks on other hosts cannot reach it.
fn loopback_rendezvous_warning(server: &str, rendezvous: &TcpListener, world: usize) -> Option<String> {
    let at = rendezvous.local_addr().ok()?;
    (world > 1 && at.ip().is_loopback() && !crate::bootstrap::reachability::is_loopback(server)).then(|| {
        format!(
            "rank 0 serves the rendezvous at {server}, which resolves here to {at}, a loopback address: ranks on \
             other hosts cannot reach it (Debian's /etc/hosts gives a host's own name 127.0.1.1). Unless every rank \
             runs on this host, give MASTER_ADDR (GEEPS_RENDEZVOUS) as an address the other hosts reach"
        )
    })
}

fn with_port(listen: &str, port: u16) -> String {
    if let Ok(ip) = listen.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return SocketAddr::new(ip, port).to_string();
    }
    if listen.parse::<SocketAddr>().is_ok() || (listen.contains(':') && !listen.contains("::")) {
        listen.to_string()
    } else {
        format!("{listen}:{port}")
    }
}

impl NetCluster {
    /// Joins the cluster described by the environment.
    pub fn from_env() -> Result<Self> {
        Self::start(ClusterSpec::from_env(NetOptions::default())?)
    }

    /// Starts this rank's keeper and resolves the other keepers' addresses.
    ///
    /// Refuses (`Error::InvalidConfig`) options that cannot work together
    /// ([`NetOptions::validate`]), and an empty token when the keeper (or
    /// the rendezvous rank 0 hosts) would listen beyond loopback.
    pub fn start(spec: ClusterSpec) -> Result<Self> {
        if spec.world == 0 || spec.rank >= spec.world {
            return Err(Error::InvalidConfig {
                field: "rank",
                reason: format!("rank {} of world {}", spec.rank, spec.world),
            });
        }
        spec.options.validate()?;
        let tls = tls::load(spec.options.tls.as_ref())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("geeps{}-net", spec.rank))
            .enable_all()
            .build()?;
        let opts = spec.options.clone();
        let (listener, addresses) = runtime.block_on(async {
            match &spec.addresses {
                Addresses::Fixed(list) => {
                    if list.len() != spec.world {
                        return Err(Error::InvalidConfig {
                            field: "addresses",
                            reason: format!("{} addresses for {} ranks", list.len(), spec.world),
                        });
                    }
                    let own = &list[spec.rank];
                    let port = own.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(bootstrap::DEFAULT_PORT);
                    let bind = spec.listen.as_deref().map(|l| with_port(l, port)).unwrap_or_else(|| own.clone());
                    let listener = TcpListener::bind(&bind).await.map_err(|e| Error::InvalidConfig {
                        field: "listen",
                        reason: format!("rank {} cannot listen on {bind}: {e}", spec.rank),
                    })?;
                    require_token(&opts, spec.rank, "keeper", &listener)?;
                    Ok((listener, list.clone()))
                }
                Addresses::Rendezvous { server, hosted_by_rank0 } => {
                    let host = match &spec.listen {
                        Some(l) => l.clone(),
                        None => interface_towards(server)?,
                    };
                    let listener = TcpListener::bind(with_port(&host, 0)).await?;
                    require_token(&opts, spec.rank, "keeper", &listener)?;
                    let me = listener.local_addr()?.to_string();
                    let mut hosted = None;
                    if *hosted_by_rank0 && spec.rank == 0 {
                        let rv = TcpListener::bind(server.as_str()).await.map_err(|e| Error::InvalidConfig {
                            field: "MASTER_ADDR",
                            reason: format!("rank 0 hosts the rendezvous but cannot listen on {server}: {e}"),
                        })?;
                        require_token(&opts, spec.rank, "rendezvous", &rv)?;
                        if let Some(warning) = loopback_rendezvous_warning(server, &rv, spec.world) {
                            tracing::warn!("{warning}");
                        }
                        let (world, options) = (spec.world, opts.clone());
                        hosted = Some(tokio::spawn(async move {
                            if let Err(e) = rendezvous::serve_with(rv, world, options).await {
                                tracing::error!(error = %e, "rendezvous failed");
                            }
                        }));
                    }
                    let registered =
                        rendezvous::register(server, spec.rank, spec.world, &opts.token, &me, opts.connect_timeout)
                            .await;
                    if let (Err(Error::Mismatch(_)), Some(task)) = (&registered, hosted) {
                        // A rank was refused: the rendezvous lives in this process, so it
                        // stays up until every rank has been told (or its own deadline),
                        // instead of leaving the ranks still to come knocking at a closed port.
                        tracing::info!("rank 0 keeps serving the rendezvous until every rank has heard of the refusal");
                        let _ = tokio::time::timeout(opts.connect_timeout, task).await;
                    }
                    Ok((listener, registered?))
                }
            }
        })?;
        tracing::info!(rank = spec.rank, listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "keeper listening");
        let service = KeeperService::new(spec.rank, spec.world, opts.clone(), tls.clone());
        service.set_keeper_addresses(addresses.clone());
        let (stop, stop_rx) = watch::channel(false);
        let admin = match (&opts.admin, spec.rank) {
            (Some(listen), 0) => Some(start_admin(&runtime, listen, &service, spec.world, &opts.token, &stop)?),
            _ => None,
        };
        runtime.spawn(service.clone().serve(listener, stop_rx));
        let transport = Arc::new(NetTransport::new(
            spec.rank,
            addresses.clone(),
            opts.clone(),
            tls,
            runtime.handle().clone(),
            Some(service.clone()),
        ));
        Ok(NetCluster {
            rank: spec.rank,
            addresses,
            options: opts,
            runtime: Some(runtime),
            service,
            stop,
            transport,
            admin,
        })
    }

    /// The transport to give this rank's `GeepsBuilder`.
    pub fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    /// Update batches this rank's keeper received over sockets.
    #[cfg(test)]
    pub(crate) fn keeper_socket_batches(&self) -> u64 {
        self.service.socket_batches()
    }

    /// Update batches this rank's keeper received through shared memory.
    #[cfg(test)]
    pub(crate) fn keeper_shm_batches(&self) -> u64 {
        self.service.shm_batches()
    }

    /// Payload bytes of the update batches this rank's keeper received from `rank`.
    #[cfg(test)]
    pub(crate) fn keeper_bytes_from(&self, rank: usize) -> u64 {
        self.service.report().ranks[rank].bytes_received
    }

    /// Payload bytes of the publications and control frames this rank's keeper queued for `rank`.
    #[cfg(test)]
    pub(crate) fn keeper_bytes_to(&self, rank: usize) -> u64 {
        self.service.report().ranks[rank].bytes_sent
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> usize {
        self.addresses.len()
    }

    /// Every rank's keeper address.
    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// Where this rank serves the admin endpoint (rank 0 with
    /// [`NetOptions::admin`] set), as bound (a port 0 resolved).
    pub fn admin_address(&self) -> Option<std::net::SocketAddr> {
        self.admin
    }

    /// Waits (up to the shutdown timeout) until every worker has left this
    /// rank's keeper, then stops it. Shut this rank's `Geeps` down first.
    /// If this rank's worker never joined the cluster (it failed first), the
    /// other ranks are told at once (`PeerLost` naming this rank) and the
    /// keeper stops without waiting: they could never finish without it.
    pub fn shutdown(&mut self) -> Result<()> {
        if self.runtime.is_none() {
            return Ok(());
        }
        if !self.transport.has_joined() {
            // This rank's worker never joined (its process failed before,
            // or never built an instance): the others would wait for its
            // clocks forever. Tell them at once and stop. A refused rank's
            // keeper-side refusal already reached everyone, with the better
            // reason; do not race it with a vaguer one.
            let reason = format!(
                "rank {} stopped before its worker joined the cluster (see that rank's log for why)",
                self.rank
            );
            let tell = (!self.transport.was_refused()).then_some(reason);
            if tell.is_some() {
                tracing::warn!(rank = self.rank, "stopping before this rank's worker joined; telling the other ranks");
            }
            self.stop_now(tell);
            return Ok(());
        }
        let Some(runtime) = self.runtime.take() else { return Ok(()) };
        let service = self.service.clone();
        let timeout = self.options.shutdown_timeout;
        let rank = self.rank;
        let waited = runtime.block_on(async move {
            let start = Instant::now();
            let mut last_log = start;
            loop {
                let (active, absent) = service.pending();
                if active.is_empty() && absent.is_empty() {
                    return Ok(());
                }
                if start.elapsed() >= timeout {
                    return Err((active, absent));
                }
                if last_log.elapsed() >= Duration::from_secs(5) {
                    tracing::warn!(rank, ?active, never_joined = ?absent, "keeper waits for workers to leave before shutting down");
                    last_log = Instant::now();
                }
                let _ = tokio::time::timeout(Duration::from_millis(200), service.changed()).await;
            }
        });
        let _ = self.stop.send(true);
        runtime.shutdown_timeout(Duration::from_secs(2));
        match waited {
            Ok(()) => Ok(()),
            Err((active, absent)) => Err(Error::Timeout {
                what: format!("workers {active:?} to leave (never joined: {absent:?}) before stopping keeper {rank}"),
                waited_ms: timeout.as_millis() as u64,
            }),
        }
    }

    /// Ends this rank's membership because the program failed with `cause`;
    /// call it instead of [`NetCluster::shutdown`] when the program ends
    /// with an error. Unless this rank fails because another was lost first
    /// (the others know that already), every other rank is told at once and
    /// fails with `peer rank R at ADDRESS is lost: rank R failed: CAUSE`;
    /// a launcher that asked for it (`GEEPS_FAILURE_REPORTS`) gets this
    /// rank's account. It stops without waiting for the other workers to
    /// leave, since they may be waiting for this rank's clocks. Shut the
    /// `Geeps` instance down first, or drop it.
    pub fn fail(&mut self, cause: &str) {
        if self.runtime.is_none() {
            return;
        }
        let own = self.addresses.get(self.rank).cloned().unwrap_or_default();
        let tell = match self.transport.first_loss() {
            Some((lost, address, _)) => {
                tracing::info!(rank = self.rank, lost, %address, "stopping: a peer was lost first");
                None
            }
            None if self.transport.was_refused() => None,
            None => {
                tracing::error!(rank = self.rank, %cause, "this rank failed; telling the other ranks");
                crate::failure_report::write(&crate::failure_report::FailureReport {
                    reporter: self.rank,
                    failed: self.rank,
                    address: own,
                    cause: cause.to_string(),
                });
                Some(format!("rank {} failed: {cause}", self.rank))
            }
        };
        self.stop_now(tell);
    }

    /// Stops the keeper without waiting for workers, first telling every
    /// connected worker `reason` (when given) as this rank's loss.
    fn stop_now(&mut self, reason: Option<String>) {
        let Some(runtime) = self.runtime.take() else { return };
        if let Some(reason) = reason {
            let own = self.addresses.get(self.rank).cloned().unwrap_or_default();
            let flushed = self.service.abort(&own, &reason);
            // The news must be on every socket before the runtime (and with
            // it this rank's worker connections) goes: a peer that saw a
            // connection close first would report that instead of the cause.
            runtime.block_on(async {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
                for rx in flushed {
                    let _ = tokio::time::timeout_at(deadline, rx).await;
                }
            });
        }
        let _ = self.stop.send(true);
        runtime.shutdown_timeout(Duration::from_secs(2));
    }
}

impl Drop for NetCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The program is unwinding out of its work: a failure, not a finish.
            self.fail("the program panicked (see this rank's log)");
            return;
        }
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "geeps cluster shutdown");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_without_a_token_is_warned_of_even_on_loopback() {
        let addr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let w = no_token_warning(&NetOptions::default().with_token(""), 1, "keeper", addr).unwrap();
        assert!(
            w.contains("rank 1's keeper listens on 127.0.0.1:4000 without a cluster token")
                && w.contains("GEEPS_TOKEN"),
            "{w}"
        );
        assert_eq!(no_token_warning(&NetOptions::default().with_token("s3cret"), 1, "keeper", addr), None);
    }

    #[test]
    fn a_listen_address_gets_its_port_and_ipv6_its_brackets() {
        assert_eq!(with_port("10.0.0.1", 7), "10.0.0.1:7");
        assert_eq!(with_port("10.0.0.1:5", 7), "10.0.0.1:5");
        assert_eq!(with_port("node1", 7), "node1:7");
        assert_eq!(with_port("node1:5", 7), "node1:5");
        assert_eq!(with_port("fd00::1", 7), "[fd00::1]:7");
        assert_eq!(with_port("[fd00::1]", 7), "[fd00::1]:7");
        assert_eq!(with_port("[fd00::1]:5", 7), "[fd00::1]:5");
    }

    #[test]
    fn a_host_name_that_resolves_to_loopback_is_warned_of_at_rank_0() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let rv = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = rv.local_addr().unwrap().port();
            // A name for this host that is not `localhost` itself.
            let w = loopback_rendezvous_warning(&format!("node01:{port}"), &rv, 4).unwrap();
            assert!(
                w.contains(&format!("rendezvous at node01:{port}, which resolves here to 127.0.0.1:{port}")),
                "{w}"
            );
            assert!(w.contains("MASTER_ADDR"), "{w}");
            // Loopback named as such, or a world of one: nothing to say.
            assert_eq!(loopback_rendezvous_warning(&format!("localhost:{port}"), &rv, 4), None);
            assert_eq!(loopback_rendezvous_warning(&format!("127.0.0.1:{port}"), &rv, 4), None);
            assert_eq!(loopback_rendezvous_warning(&format!("node01:{port}"), &rv, 1), None);
        });
    }

    #[test]
    fn the_interface_towards_a_rendezvous_is_of_its_address_family() {
        assert_eq!(interface_towards("127.0.0.1:29500").unwrap(), "127.0.0.1");
        if UdpSocket::bind("[::1]:0").is_ok() {
            assert_eq!(interface_towards("[::1]:29500").unwrap(), "::1");
        }
        let e = interface_towards("no-such-host.invalid:29500").unwrap_err().to_string();
        assert!(e.contains("cannot route to `no-such-host.invalid:29500`") && e.contains("GEEPS_LISTEN"), "{e}");
    }
}
