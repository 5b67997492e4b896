//! One joined worker's session: reads its frames (update batches, status
//! reports, heartbeats, its leave) until it leaves or goes silent or
//! closes. It never writes to the worker: that is the connection's writer.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::io::BufReader;

use super::liveness::silence;
use super::service::KeeperService;
use crate::conn::peer_stream::ReadSide;
use crate::wire::frame::{read_frame_pooled, FrameError};
use crate::wire::recv_pool::RecvPool;
use crate::wire::{Body, Header};

impl KeeperService {
    /// Reads a joined worker's frames until it leaves (`None`) or is lost (the reason).
    pub(super) async fn serve_worker(&self, rank: usize, rd: ReadSide) -> Option<String> {
        let max = self.opts.max_message_bytes;
        let over_shm = rd.is_shm();
        let mut rd = BufReader::with_capacity(256 * 1024, rd);
        let mut last_heard = Instant::now();
        // Update batches return once applied (or once a held batch is).
        let pool = RecvPool::new(2);
        let reason = loop {
            let frame = match tokio::time::timeout(self.opts.peer_timeout, read_frame_pooled(&mut rd, max, &pool)).await
            {
                Ok(Ok(f)) => f,
                Ok(Err(FrameError::Closed)) => break "connection closed without leaving".to_string(),
                Ok(Err(e)) => break format!("bad frame: {e}"),
                Err(_) => break silence(last_heard, &self.opts),
            };
            last_heard = Instant::now();
            match frame {
                (Header { body: Some(Body::Update(u)), .. }, payload) => {
                    let counter = if over_shm { &self.shm_batches } else { &self.socket_batches };
                    counter.fetch_add(1, Ordering::Relaxed);
                    self.apply(rank, u, payload)
                }
                (Header { body: Some(Body::Leave(_)), .. }, _) => {
                    let mut st = self.state.lock();
                    st.peers[rank].left = true;
                    st.peers[rank].queue = None;
                    let pubs = st.keeper.as_mut().map(|k| k.depart(rank)).unwrap_or_default();
                    for p in &pubs {
                        self.publish(&mut st, p);
                    }
                    drop(st);
                    tracing::debug!(shard = self.shard, rank, "worker left");
                    self.changed.notify_waiters();
                    return None;
                }
                (Header { body: Some(Body::Ping(_)), .. }, _) => {}
                (Header { body: Some(Body::Status(s)), .. }, _) => {
                    self.state.lock().peers[rank].status = Some((s, Instant::now()));
                }
                (h, _) => break format!("unexpected frame {:?}", h.body),
            }
        };
        Some(reason)
    }
}
