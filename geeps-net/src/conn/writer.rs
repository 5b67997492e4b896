//! One TCP connection's writer: a task that drains a queue of frames onto the
//! socket, batching small frames into one flush and sending a heartbeat when
//! the queue stays idle; a frame may ask to be told once it is flushed, or
//! carry a guard dropped then (or when it is discarded unsent). It never
//! reads and never interprets what it sends.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;

use crate::conn::peer_stream::WriteSide;
use crate::wire::frame::write_frame;
use crate::wire::{Body, Header, Ping};

/// A frame waiting to be written.
pub(crate) struct Outgoing {
    pub(crate) header: Header,
    pub(crate) payload: Option<Bytes>,
    /// Told once the frame is flushed to the socket (dropped unsent if the
    /// connection fails first).
    pub(crate) flushed: Option<oneshot::Sender<()>>,
    /// Dropped once the frame is flushed, or with the frame if it never is.
    done: Option<Box<dyn Send>>,
}

impl Outgoing {
    pub(crate) fn new(body: Body, payload: Option<Bytes>) -> Self {
        Outgoing { header: Header::new(body), payload, flushed: None, done: None }
    }

    /// This frame, dropping `guard` once it is flushed or discarded.
    pub(crate) fn guarded(mut self, guard: impl Send + 'static) -> Self {
        self.done = Some(Box::new(guard));
        self
    }

    /// This frame, and a receiver told once it is flushed.
    pub(crate) fn tracked(mut self) -> (Self, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        self.flushed = Some(tx);
        (self, rx)
    }
}

pub(crate) type Queue = UnboundedSender<Outgoing>;

/// Writes one frame; its payload is kept alive for the writer (which may
/// then hand it over by reference).
async fn send(
    w: &mut BufWriter<WriteSide>,
    mut m: Outgoing,
    flushed: &mut Flushed,
) -> Result<(), crate::wire::frame::FrameError> {
    if let Some(p) = &m.payload {
        w.get_mut().keep_alive(p);
    }
    flushed.told.extend(m.flushed.take());
    flushed.guards.extend(m.done.take());
    write_frame(w, m.header, m.payload.as_ref()).await
}

/// What waits for the next flush: senders to tell, guards to drop.
#[derive(Default)]
struct Flushed {
    told: Vec<oneshot::Sender<()>>,
    guards: Vec<Box<dyn Send>>,
}

/// Writes queued frames until the queue closes, then shuts the socket's write half.
pub(crate) async fn writer(wr: WriteSide, mut rx: UnboundedReceiver<Outgoing>, heartbeat: Duration) {
    let mut w = BufWriter::with_capacity(64 * 1024, wr);
    let mut flushed = Flushed::default();
    loop {
        let next = tokio::select! {
            m = rx.recv() => m,
            _ = tokio::time::sleep(heartbeat) => Some(Outgoing::new(Body::Ping(Ping {}), None)),
        };
        let Some(first) = next else { break };
        if send(&mut w, first, &mut flushed).await.is_err() {
            return;
        }
        // Drain what is already queued before paying for a flush.
        while let Ok(m) = rx.try_recv() {
            if send(&mut w, m, &mut flushed).await.is_err() {
                return;
            }
        }
        if w.flush().await.is_err() {
            return;
        }
        for tx in flushed.told.drain(..) {
            let _ = tx.send(());
        }
        flushed.guards.clear();
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}
