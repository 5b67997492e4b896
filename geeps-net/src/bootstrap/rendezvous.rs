//! Rendezvous for launchers that know ranks but not addresses (torchrun,
//! mpirun, geeps-launch): every rank registers where its keeper listens with
//! a rendezvous server (rank 0 or the launcher) and receives the full roster.
//! Token and protocol version are checked here too.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use geeps_core::{Error, Result};
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::bootstrap::reachability::unreachable_advert;
use crate::conn::accept_backoff::{accept_backing_off, AcceptBackoff};
use crate::options::NetOptions;
use crate::security::auth::{token_matches, PendingGate};
use crate::wire::frame::{read_frame, read_frame_within, write_frame};
use crate::wire::{Body, Header, Refused, Register, Roster, PROTOCOL_VERSION};

/// Serves one rendezvous of `world` ranks on `listener` with the default
/// [`NetOptions`], the cluster `token` and `timeout` for every rank to
/// register; returns the roster. See [`serve_with`].
pub async fn serve(listener: TcpListener, world: usize, token: String, timeout: Duration) -> Result<Vec<String>> {
    serve_with(listener, world, NetOptions::default().with_token(token).with_connect_timeout(timeout)).await
}

async fn refuse(stream: &mut TcpStream, reason: String) {
    let _ = write_frame(stream, Header::new(Body::Refused(Refused { reason })), None).await;
}

/// Serves one rendezvous of `world` ranks on `listener`; returns the roster.
///
/// Every rank must register within `options.connect_timeout`. A connection
/// gets `options.handshake_timeout` and a frame of
/// `options.max_handshake_bytes` to register; at most
/// `options.max_pending_connections` are read at once (ranks whose
/// connection is closed for that retry, see [`register`]). While accepts
/// fail for want of descriptors or memory it backs off (up to a second
/// between tries, logging once a second) until the timeout; only a listener
/// that cannot accept at all fails it at once.
///
/// Strangers never touch the real ranks: an idle or garbage connection, or
/// a registration without the cluster token, is refused and logged (at most
/// once a second, with a count), and the rendezvous goes on. A registration
/// with the token that does not fit (protocol version, rank, world size, a
/// rank twice from two addresses, a loopback keeper address from a rank
/// that reached the rendezvous over the network) is a real rank that cannot run: it fails
/// the start at once, and the refused rank, every rank already registered
/// and every rank that registers later is told which rank was refused and
/// why. The same rank registering again from the same keeper address is a
/// retry, and replaces its first registration.
pub async fn serve_with(listener: TcpListener, world: usize, options: NetOptions) -> Result<Vec<String>> {
    let timeout = options.connect_timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    let (limit, within) = (options.max_handshake_bytes as usize, options.handshake_timeout);
    let mut gate = PendingGate::new(options.max_pending_connections, "rendezvous");
    let mut backoff = AcceptBackoff::new("rendezvous");
    let mut reading = JoinSet::new();
    let mut registered: BTreeMap<usize, (TcpStream, String)> = BTreeMap::new();
    let mut strangers = StrangerLog::default();
    // Once a registration is refused: why the start failed, and who knows.
    let mut failed: Option<String> = None;
    let mut told = BTreeSet::new();
    loop {
        match &failed {
            None if registered.len() == world => break,
            Some(why) if told.len() == world => return Err(Error::Mismatch(why.clone())),
            _ => {}
        }
        tokio::select! {
            accepted = accept_backing_off(&mut backoff, || listener.accept()) => {
                let (stream, addr) = accepted.map_err(|e| Error::Io(format!("the rendezvous cannot accept: {e}")))?;
                let Some(permit) = gate.admit(addr) else { continue };
                reading.spawn(async move {
                    let _permit = permit;
                    let mut stream = stream;
                    let reg = match tokio::time::timeout(within, read_frame_within(&mut stream, limit, 0)).await {
                        Ok(Ok((Header { body: Some(Body::Register(r)), .. }, _))) => Ok(r),
                        Ok(Ok((h, _))) => Err(format!("first frame is not a registration ({:?})", h.body)),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err(format!("no registration within {within:?} (handshake_timeout)")),
                    };
                    (stream, addr, reg)
                });
            }
            Some(done) = reading.join_next() => {
                let Ok((mut stream, addr, reg)) = done else { continue };
                let reg = match reg {
                    Ok(r) => r,
                    Err(why) => {
                        strangers.refused(addr, &why);
                        continue;
                    }
                };
                let rank = reg.rank as usize;
                if !token_matches(&options.token, &reg.token) {
                    // Whoever lacks the token is no rank of this job: told, logged, and otherwise ignored.
                    strangers.refused(addr, &format!("a registration as rank {rank} without the cluster token"));
                    strangers.wrong_token.insert(rank);
                    refuse(&mut stream, "cluster token mismatch; give every rank the same GEEPS_TOKEN".into()).await;
                    continue;
                }
                if let Some((old, address)) = registered.get_mut(&rank) {
                    if *address == reg.address {
                        // A retry of a registration whose connection this rank lost: the newer one answers.
                        *old = stream;
                        continue;
                    }
                }
                let refusal = if reg.protocol != PROTOCOL_VERSION {
                    Some(format!("protocol version {} but the rendezvous speaks {PROTOCOL_VERSION}; run the same geeps version on every rank", reg.protocol))
                } else if reg.world as usize != world || rank >= world {
                    Some(format!("rank {} of world {} does not fit this rendezvous of {world} ranks", reg.rank, reg.world))
                } else if let Some(why) =
                    stream.local_addr().ok().and_then(|reached| unreachable_advert(rank, &reg.address, reached))
                {
                    Some(why)
                } else if registered.contains_key(&rank) {
                    Some(format!(
                        "rank {rank} registered twice, from keeper addresses {} and {} (two processes with the same rank?)",
                        registered[&rank].1, reg.address
                    ))
                } else {
                    None
                };
                let Some(reason) = refusal else {
                    match &failed {
                        None => {
                            registered.insert(rank, (stream, reg.address));
                        }
                        Some(why) => {
                            told.insert(rank);
                            refuse(&mut stream, why.clone()).await;
                        }
                    }
                    continue;
                };
                if rank < world {
                    told.insert(rank);
                }
                if failed.is_some() {
                    refuse(&mut stream, reason).await;
                    continue;
                }
                let why = format!(
                    "rank {rank} (registering from {addr}) was refused at the rendezvous: {reason}; the cluster cannot start without it"
                );
                tracing::error!(%addr, rank, %reason, "rendezvous: registration refused; telling every rank");
                refuse(&mut stream, reason).await;
                for (r, (mut s, _)) in std::mem::take(&mut registered) {
                    refuse(&mut s, why.clone()).await;
                    told.insert(r);
                }
                failed = Some(why);
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Err(match failed {
                    Some(why) => Error::Mismatch(why),
                    None => Error::Timeout {
                        what: format!(
                            "ranks {:?} to register at the rendezvous{}",
                            (0..world).filter(|r| !registered.contains_key(r)).collect::<Vec<_>>(),
                            strangers.summary()
                        ),
                        waited_ms: timeout.as_millis() as u64,
                    },
                });
            }
        }
    }
    let addresses: Vec<String> = registered.values().map(|(_, a)| a.clone()).collect();
    for (_, (mut stream, _)) in registered {
        let _ =
            write_frame(&mut stream, Header::new(Body::Roster(Roster { addresses: addresses.clone() })), None).await;
    }
    Ok(addresses)
}

/// Registers this rank's keeper address and waits for the roster.
///
/// A rendezvous not up yet, or one that closes the connection before it
/// answers (it admits only so many unregistered connections at once, and
/// strangers may hold them), is tried again with back-off (50 ms doubling
/// to a second) until `timeout`; a refusal or a timeout while registered
/// ends it at once.
pub async fn register(
    server: &str,
    rank: usize,
    world: usize,
    token: &str,
    address: &str,
    timeout: Duration,
) -> Result<Vec<String>> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(50);
    let mut tries = 0u32;
    loop {
        tries += 1;
        let failed =
            match register_once(server, rank, world, token, address, timeout.saturating_sub(start.elapsed())).await {
                Attempt::Done(result) => return result,
                Attempt::Retry(failed) => failed,
            };
        if start.elapsed() + pause >= timeout {
            let resolved = match tokio::net::lookup_host(server).await {
                Ok(addrs) => addrs.map(|a| a.to_string()).collect::<Vec<_>>().join(", "),
                Err(e) => format!("not resolved: {e}"),
            };
            return Err(Error::PeerLost {
                rank: 0,
                address: server.to_string(),
                reason: format!(
                    "rendezvous failed: {} ({tries} tries in {:.0} s; {server} is {resolved}). {}",
                    failed.why(),
                    start.elapsed().as_secs_f64(),
                    failed.hint(server)
                ),
            });
        }
        tracing::debug!(%server, why = %failed.why(), tries, "rendezvous: trying again");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

enum Attempt {
    Done(Result<Vec<String>>),
    Retry(Failed),
}

/// Why one try at the rendezvous failed, for the message once tries run out.
enum Failed {
    /// No connection: nothing listens there, or the host is not reached.
    Connect(std::io::Error),
    /// Connected, but closed before the roster (the rendezvous admits only
    /// so many unregistered connections at once).
    Closed(String),
}

impl Failed {
    fn why(&self) -> String {
        match self {
            Failed::Connect(e) => format!("cannot connect: {e}"),
            Failed::Closed(why) => why.clone(),
        }
    }

    /// What to check, by what went wrong.
    fn hint(&self, server: &str) -> String {
        match self {
            Failed::Connect(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => format!(
                "Nothing listens at {server}: rank 0 serves the rendezvous there once it starts. Check that rank 0 \
                 runs, with the same MASTER_ADDR and MASTER_PORT (GEEPS_RENDEZVOUS), and that on rank 0's host \
                 that name does not resolve to a loopback address (Debian's /etc/hosts gives a host's own name \
                 127.0.1.1), where no other host reaches it: then give MASTER_ADDR as an address the other hosts \
                 reach"
            ),
            Failed::Connect(_) => format!(
                "Check that {server} is an address of rank 0's host that this host reaches, and that no firewall \
                 drops its port"
            ),
            Failed::Closed(_) => "The rendezvous admits only so many unregistered connections at once: is \
                                  something else connecting to it?"
                .into(),
        }
    }
}

async fn register_once(server: &str, rank: usize, world: usize, token: &str, address: &str, left: Duration) -> Attempt {
    let stream = match TcpStream::connect(server).await {
        Ok(s) => s,
        Err(e) => return Attempt::Retry(Failed::Connect(e)),
    };
    let (rd, mut wr) = stream.into_split();
    let reg = Register {
        protocol: PROTOCOL_VERSION,
        token: token.to_string(),
        rank: rank as u32,
        world: world as u32,
        address: address.to_string(),
    };
    if let Err(e) = write_frame(&mut wr, Header::new(Body::Register(reg)), None).await {
        return Attempt::Retry(Failed::Closed(format!("registration not sent: {e}")));
    }
    let mut rd = BufReader::new(rd);
    Attempt::Done(match tokio::time::timeout(left.max(Duration::from_secs(1)), read_frame(&mut rd, 0)).await {
        Ok(Ok((Header { body: Some(Body::Roster(r)), .. }, _))) if r.addresses.len() == world => Ok(r.addresses),
        Ok(Ok((Header { body: Some(Body::Refused(r)), .. }, _))) => {
            Err(Error::Mismatch(format!("rendezvous at {server} refused rank {rank}: {}", r.reason)))
        }
        Ok(Ok((h, _))) => Err(Error::Mismatch(format!("rendezvous at {server} answered {:?}", h.body))),
        Ok(Err(e)) => return Attempt::Retry(Failed::Closed(format!("connection closed before an answer ({e})"))),
        Err(_) => Err(Error::Timeout {
            what: format!("the other ranks to register at the rendezvous {server}"),
            waited_ms: left.as_millis() as u64,
        }),
    })
}

/// Connections refused as strangers (idle, garbage, no token), logged at
/// most once a second with a count, and remembered for the timeout's
/// message.
#[derive(Default)]
struct StrangerLog {
    refused: u64,
    unlogged: u64,
    last_log: Option<Instant>,
    wrong_token: BTreeSet<usize>,
}

impl StrangerLog {
    fn refused(&mut self, addr: std::net::SocketAddr, why: &str) {
        self.refused += 1;
        self.unlogged += 1;
        if self.last_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            tracing::warn!(%addr, %why, refused = self.unlogged, "rendezvous: refused a connection that is no rank of this job");
            self.unlogged = 0;
            self.last_log = Some(Instant::now());
        }
    }

    /// What the timeout adds: how many strangers were turned away, and the
    /// ranks claimed without the token (a rank started with the wrong one).
    fn summary(&self) -> String {
        if self.refused == 0 {
            return String::new();
        }
        let mut s = format!("; {} connection(s) were refused as no rank of this job", self.refused);
        if !self.wrong_token.is_empty() {
            s += &format!(
                ", among them registrations as ranks {:?} without the cluster token (give every rank the same GEEPS_TOKEN)",
                self.wrong_token
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn nobody_at_the_rendezvous_is_said_with_what_to_check() {
        // A port just freed: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = format!("127.0.0.1:{port}");
        let e = runtime()
            .block_on(register(&server, 1, 2, "t", "127.0.0.1:9", Duration::from_millis(300)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot connect") && e.contains(&format!("{server} is {server}")), "{e}");
        assert!(e.contains(&format!("Nothing listens at {server}")) && e.contains("127.0.1.1"), "{e}");
        assert!(!e.contains("admits only so many"), "{e}");
    }

    #[test]
    fn a_rendezvous_that_hangs_up_is_said_to_admit_only_so_many() {
        let rt = runtime();
        let e = rt
            .block_on(async {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let server = listener.local_addr().unwrap().to_string();
                tokio::spawn(async move {
                    while let Ok((stream, _)) = listener.accept().await {
                        drop(stream);
                    }
                });
                register(&server, 1, 2, "t", "127.0.0.1:9", Duration::from_millis(300)).await
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("admits only so many") && !e.contains("Nothing listens"), "{e}");
    }

    #[test]
    fn a_name_that_does_not_resolve_says_so() {
        let e = runtime()
            .block_on(register("no-such-host.invalid:29500", 1, 2, "t", "127.0.0.1:9", Duration::from_millis(200)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no-such-host.invalid:29500 is not resolved"), "{e}");
        assert!(e.contains("Check that no-such-host.invalid:29500 is an address of rank 0's host"), "{e}");
    }
}
