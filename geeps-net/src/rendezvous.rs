//! Rendezvous for launchers that know ranks but not addresses (torchrun,
//! mpirun, geeps-launch): every rank registers where its keeper listens with
//! a rendezvous server (rank 0 or the launcher) and receives the full roster.
//! Token and protocol version are checked here too.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use geeps_core::{Error, Result};
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};

use crate::frame::{read_frame, write_frame};
use crate::wire::{Body, Header, Register, Roster, PROTOCOL_VERSION};

/// Serves one rendezvous of `world` ranks on `listener`; returns the roster.
pub async fn serve(listener: TcpListener, world: usize, token: String, timeout: Duration) -> Result<Vec<String>> {
    let deadline = Instant::now() + timeout;
    let mut pending: HashMap<usize, (TcpStream, String)> = HashMap::new();
    while pending.len() < world {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let missing: Vec<usize> = (0..world).filter(|r| !pending.contains_key(r)).collect();
        let (stream, addr) = match tokio::time::timeout(remaining, listener.accept()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Error::Io(e.to_string())),
            Err(_) => {
                return Err(Error::Timeout {
                    what: format!("ranks {missing:?} to register at the rendezvous"),
                    waited_ms: timeout.as_millis() as u64,
                })
            }
        };
        let mut stream = stream;
        let reg = match tokio::time::timeout(Duration::from_secs(10), read_frame(&mut stream, 0)).await {
            Ok(Ok((Header { body: Some(Body::Register(r)), .. }, _))) => r,
            other => {
                tracing::warn!(%addr, "rendezvous: bad registration ({:?}); ignored", other.map(|r| r.map(|(h, _)| h.body)));
                continue;
            }
        };
        let refusal = if reg.protocol != PROTOCOL_VERSION {
            Some(format!("protocol version {} but the rendezvous speaks {PROTOCOL_VERSION}", reg.protocol))
        } else if reg.token != token {
            Some("cluster token mismatch; give every rank the same GEEPS_TOKEN".to_string())
        } else if reg.world as usize != world || reg.rank as usize >= world {
            Some(format!("rank {} of world {} does not fit this rendezvous of {world} ranks", reg.rank, reg.world))
        } else if pending.contains_key(&(reg.rank as usize)) {
            Some(format!("rank {} registered twice", reg.rank))
        } else {
            None
        };
        if let Some(reason) = refusal {
            tracing::warn!(%addr, rank = reg.rank, %reason, "rendezvous: registration refused");
            let _ = write_frame(&mut stream, Header::new(Body::Refused(crate::wire::Refused { reason })), None).await;
            continue;
        }
        pending.insert(reg.rank as usize, (stream, reg.address));
    }
    let addresses: Vec<String> = (0..world).map(|r| pending[&r].1.clone()).collect();
    for (_, (mut stream, _)) in pending {
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
