//! One TCP connection's writer: a task that drains a queue of frames onto the
//! socket, batching small frames into one flush and sending a heartbeat when
//! the queue stays idle. It never reads and never interprets what it sends.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::conn::peer_stream::WriteSide;
use crate::wire::frame::write_frame;
use crate::wire::{Body, Header, Ping};

/// A frame waiting to be written.
pub(crate) struct Outgoing {
    pub(crate) header: Header,
    pub(crate) payload: Option<Bytes>,
}

impl Outgoing {
    pub(crate) fn new(body: Body, payload: Option<Bytes>) -> Self {
        Outgoing { header: Header::new(body), payload }
    }
}

pub(crate) type Queue = UnboundedSender<Outgoing>;

/// Writes one frame; its payload is kept alive for the writer (which may
/// then hand it over by reference).
async fn send(w: &mut BufWriter<WriteSide>, m: Outgoing) -> Result<(), crate::wire::frame::FrameError> {
    if let Some(p) = &m.payload {
        w.get_mut().keep_alive(p);
    }
    write_frame(w, m.header, m.payload.as_ref()).await
}

/// Writes queued frames until the queue closes, then shuts the socket's write half.
pub(crate) async fn writer(wr: WriteSide, mut rx: UnboundedReceiver<Outgoing>, heartbeat: Duration) {
    let mut w = BufWriter::with_capacity(64 * 1024, wr);
    loop {
        let next = tokio::select! {
            m = rx.recv() => m,
            _ = tokio::time::sleep(heartbeat) => Some(Outgoing::new(Body::Ping(Ping {}), None)),
        };
        let Some(first) = next else { break };
        if send(&mut w, first).await.is_err() {
            return;
        }
        // Drain what is already queued before paying for a flush.
        while let Ok(m) = rx.try_recv() {
            if send(&mut w, m).await.is_err() {
                return;
            }
        }
        if w.flush().await.is_err() {
            return;
        }
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}
