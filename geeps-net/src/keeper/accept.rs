//! Accepting worker connections: the back-off while accepts fail, the
//! bound on connections in their handshake, the TLS handshake and the hello
//! within one handshake deadline, then admission, the connection's transport, and its session
//! until the worker leaves or is lost. It never applies a batch itself.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

use super::admission::Refusal;
use super::service::KeeperService;
use crate::conn::accept_backoff::{accept_backing_off, AcceptBackoff};
use crate::conn::peer_stream;
use crate::conn::writer::{writer, Outgoing};
use crate::security::auth::PendingGate;
use crate::wire::frame::{read_frame_within, write_frame};
use crate::wire::{Body, Failure, FailureKind, Header, Refused};

impl KeeperService {
    /// Accepts connections until `stop` turns true; at most
    /// `max_pending_connections` of them wait for their handshake at once.
    /// While accepts fail for want of descriptors or memory it backs off
    /// (up to a second between tries) and logs once a second.
    pub(crate) async fn serve(self: Arc<Self>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
        let mut gate = PendingGate::new(self.opts.max_pending_connections, "keeper");
        let mut backoff = AcceptBackoff::new(format!("keeper shard {}", self.shard));
        loop {
            tokio::select! {
                accepted = accept_backing_off(&mut backoff, || listener.accept()) => match accepted {
                    Ok((stream, addr)) => {
                        let Some(permit) = gate.admit(addr) else {
                            drop(stream);
                            continue;
                        };
                        let me = self.clone();
                        tokio::spawn(async move { me.handle(stream, addr, permit).await });
                    }
                    Err(e) => {
                        tracing::error!(
                            shard = self.shard,
                            error = %e,
                            "the keeper's listener is unusable; it accepts no more workers"
                        );
                        return;
                    }
                },
                _ = stop.changed() => return,
            }
        }
    }

    async fn handle(self: Arc<Self>, stream: TcpStream, addr: SocketAddr, permit: OwnedSemaphorePermit) {
        crate::conn::socket_options::tune(&stream, self.opts.tcp_congestion.as_deref());
        // One deadline for the TLS handshake and the hello together: a
        // stranger holds its descriptor and permit no longer than this.
        let deadline = tokio::time::Instant::now() + self.opts.handshake_timeout;
        let (mut rd, mut wr) = match &self.tls {
            None => peer_stream::plain(stream),
            Some(tls) => match tokio::time::timeout_at(deadline, tls.accept(stream)).await {
                Ok(Ok(sides)) => sides,
                Ok(Err(e)) => {
                    tracing::warn!(shard = self.shard, %addr, error = %e, "TLS handshake refused; closing");
                    return;
                }
                Err(_) => {
                    tracing::warn!(shard = self.shard, %addr, "no TLS handshake within the handshake timeout; closing");
                    return;
                }
            },
        };
        // Until the token is checked: a small frame, no payload, a short
        // deadline, and no buffer of ours (read_exact never reads past the hello).
        let handshake = read_frame_within(&mut rd, self.opts.max_handshake_bytes as usize, 0);
        let hello = match tokio::time::timeout_at(deadline, handshake).await {
            Ok(Ok((Header { body: Some(Body::Hello(h)), .. }, _))) => h,
            Ok(Ok((h, _))) => {
                tracing::warn!(shard = self.shard, %addr, "first frame is not a hello ({:?}); closing", h.body);
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(shard = self.shard, %addr, error = %e, "bad handshake; closing");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    shard = self.shard,
                    %addr,
                    "no handshake within {:?} (handshake_timeout); closing",
                    self.opts.handshake_timeout
                );
                return;
            }
        };
        let rank = hello.rank as usize;
        let (tx, rx) = mpsc::unbounded_channel();
        // Check and register under one lock: two connections claiming one rank
        // cannot both get in.
        let refused = self.admit(&hello, addr, tx).err();
        drop(permit);
        if let Some(refusal) = refused {
            let reason = match refusal {
                Refusal::Unauthenticated(reason) => {
                    tracing::warn!(shard = self.shard, %addr, claimed_rank = rank, %reason, "join refused");
                    reason
                }
                Refusal::Config(reason) => {
                    // The cluster cannot run without this rank: every worker
                    // that joined hears why at once, instead of waiting.
                    tracing::error!(shard = self.shard, %addr, rank, %reason, "join refused; telling every worker");
                    let failure = Failure {
                        kind: FailureKind::RefusedAtJoin.into(),
                        rank: rank as u32,
                        address: addr.to_string(),
                        message: reason.clone(),
                    };
                    let st = self.state.lock();
                    self.broadcast(&st, || Outgoing::new(Body::Failure(failure.clone()), None), None);
                    reason
                }
            };
            let _ = write_frame(&mut wr, Header::new(Body::Refused(Refused { reason })), None).await;
            return;
        }
        let reason = match self.settle(&hello, rd, wr).await {
            Err(reason) => reason,
            Ok((rd, wr)) => {
                tracing::debug!(shard = self.shard, rank, %addr, shm = rd.is_shm(), "worker joined");
                self.changed.notify_waiters();
                tokio::spawn(writer(wr, rx, self.opts.heartbeat));
                match self.serve_worker(rank, rd).await {
                    Some(reason) => reason,
                    None => return,
                }
            }
        };
        self.lose(rank, reason);
    }
}
