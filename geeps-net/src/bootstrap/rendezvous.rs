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
/// `options.max_pending_connections` are read at once. While accepts fail
/// for want of descriptors or memory it backs off (up to a second between
/// tries, logging once a second) until the timeout; only a listener that
/// cannot accept at all fails it at once. A registration that
/// is refused (token, protocol version, rank, world size, a rank twice)
/// fails the start at once: the refused rank, every rank already
/// registered and every rank that registers later is told which rank was
/// refused and why, instead of waiting for the timeout.
pub async fn serve_with(listener: TcpListener, world: usize, options: NetOptions) -> Result<Vec<String>> {
    let timeout = options.connect_timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    let (limit, within) = (options.max_handshake_bytes as usize, options.handshake_timeout);
    let mut gate = PendingGate::new(options.max_pending_connections, "rendezvous");
    let mut backoff = AcceptBackoff::new("rendezvous");
    let mut reading = JoinSet::new();
    let mut registered: BTreeMap<usize, (TcpStream, String)> = BTreeMap::new();
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
                        tracing::warn!(%addr, %why, "rendezvous: bad registration; closed");
                        continue;
                    }
                };
                let rank = reg.rank as usize;
                let refusal = if !token_matches(&options.token, &reg.token) {
                    Some("cluster token mismatch; give every rank the same GEEPS_TOKEN".to_string())
                } else if reg.protocol != PROTOCOL_VERSION {
                    Some(format!("protocol version {} but the rendezvous speaks {PROTOCOL_VERSION}; run the same geeps version on every rank", reg.protocol))
                } else if reg.world as usize != world || rank >= world {
                    Some(format!("rank {} of world {} does not fit this rendezvous of {world} ranks", reg.rank, reg.world))
                } else if registered.contains_key(&rank) {
                    Some(format!("rank {rank} registered twice (two processes with the same rank?)"))
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
                            "ranks {:?} to register at the rendezvous",
                            (0..world).filter(|r| !registered.contains_key(r)).collect::<Vec<_>>()
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
pub async fn register(
    server: &str,
    rank: usize,
    world: usize,
    token: &str,
    address: &str,
    timeout: Duration,
) -> Result<Vec<String>> {
    let start = Instant::now();
    let stream = loop {
        match TcpStream::connect(server).await {
            Ok(s) => break s,
            Err(e) if start.elapsed() < timeout => {
                tracing::debug!(%server, error = %e, "rendezvous not up yet");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => {
                return Err(Error::PeerLost {
                    rank: 0,
                    address: server.to_string(),
                    reason: format!("rendezvous unreachable for {} s: {e}", timeout.as_secs()),
                })
            }
        }
    };
    let (rd, mut wr) = stream.into_split();
    let reg = Register {
        protocol: PROTOCOL_VERSION,
        token: token.to_string(),
        rank: rank as u32,
        world: world as u32,
        address: address.to_string(),
    };
    write_frame(&mut wr, Header::new(Body::Register(reg)), None).await.map_err(|e| Error::Io(e.to_string()))?;
    let mut rd = BufReader::new(rd);
    let remaining = timeout.saturating_sub(start.elapsed()).max(Duration::from_secs(1));
    match tokio::time::timeout(remaining, read_frame(&mut rd, 0)).await {
        Ok(Ok((Header { body: Some(Body::Roster(r)), .. }, _))) if r.addresses.len() == world => Ok(r.addresses),
        Ok(Ok((Header { body: Some(Body::Refused(r)), .. }, _))) => {
            Err(Error::Mismatch(format!("rendezvous at {server} refused rank {rank}: {}", r.reason)))
        }
        Ok(Ok((h, _))) => Err(Error::Mismatch(format!("rendezvous at {server} answered {:?}", h.body))),
        Ok(Err(e)) => {
            Err(Error::PeerLost { rank: 0, address: server.to_string(), reason: format!("rendezvous failed: {e}") })
        }
        Err(_) => Err(Error::Timeout {
            what: format!("the other ranks to register at the rendezvous {server}"),
            waited_ms: timeout.as_millis() as u64,
        }),
    }
}
