//! The shared-memory offer: a segment for a worker on this host that asked
//! for one, sent in the welcome; the connection moves onto it once the
//! worker proves it mapped it, and stays on TCP otherwise. It never offers
//! a segment over TLS nor to this process's own worker.

use std::sync::Arc;

use super::service::KeeperService;
use crate::conn::peer_stream::{self, ReadSide, WriteSide};
use crate::shm::segment::{Created, Segment};
use crate::wire::frame::{read_frame_within, write_frame};
use crate::wire::{Body, Header, Hello, Welcome};

impl KeeperService {
    /// A segment for a worker on this host that asked for one (shared
    /// memory on here too, no TLS); `None` when there is none to offer.
    fn offer(&self, hello: &Hello) -> Option<(Arc<Segment>, Created)> {
        // This process's own worker sends its data in process: its
        // connection carries control frames only and needs no segment.
        let own = hello.rank as usize == self.shard;
        if own || !self.opts.shared_memory || self.tls.is_some() || hello.host.is_empty() || hello.host != *self.host {
            return None;
        }
        match Segment::create(&self.opts.shm_dir, self.opts.shm_ring_bytes) {
            Ok((seg, created)) => Some((Arc::new(seg), created)),
            Err(e) => {
                tracing::debug!(shard = self.shard, rank = hello.rank, dir = %self.opts.shm_dir.display(), error = %e,
                    "cannot create a shared-memory segment; this connection stays on TCP");
                None
            }
        }
    }

    /// Sends the welcome (offering a segment when the worker is on this
    /// host) and settles the connection's transport: shared memory when the
    /// worker proves it mapped the segment, TCP otherwise. `Err`: the
    /// worker is gone (the reason).
    pub(super) async fn settle(
        &self,
        hello: &Hello,
        mut rd: ReadSide,
        mut wr: WriteSide,
    ) -> Result<(ReadSide, WriteSide), String> {
        let offer = self.offer(hello);
        let shm_name = offer.as_ref().map(|(_, c)| c.name.clone()).unwrap_or_default();
        let welcome = Welcome { shard: self.shard as u32, shm_name };
        write_frame(&mut wr, Header::new(Body::Welcome(welcome)), None)
            .await
            .map_err(|e| format!("could not send the welcome: {e}"))?;
        let Some((seg, created)) = offer else { return Ok((rd, wr)) };
        let answer = read_frame_within(&mut rd, 1024, 0);
        let nonce = match tokio::time::timeout(self.opts.handshake_timeout, answer).await {
            Ok(Ok((Header { body: Some(Body::ShmAttached(a)), .. }, _))) => a.nonce,
            Ok(Ok((h, _))) => return Err(format!("expected the answer to the shared-memory offer, got {:?}", h.body)),
            Ok(Err(e)) => return Err(format!("no answer to the shared-memory offer: {e}")),
            Err(_) => return Err("no answer to the shared-memory offer within the handshake timeout".into()),
        };
        created.unlink();
        if nonce != seg.nonce() {
            tracing::debug!(
                shard = self.shard,
                rank = hello.rank,
                "the worker could not map the segment; staying on TCP"
            );
            return Ok((rd, wr));
        }
        Ok(peer_stream::onto_shm(rd, wr, seg, true).unwrap_or_else(|sides| sides))
    }
}
