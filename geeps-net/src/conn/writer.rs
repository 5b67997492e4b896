//! One TCP connection's writer: a task that drains a queue of frames onto the
//! socket, batching small frames into one flush and sending a heartbeat when
//! the queue stays idle; a frame may ask to be told once it is flushed. It
//! never reads and never interprets what it sends.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;

use std::sync::Arc;

use crate::conn::peer_stream::WriteSide;
use crate::conn::uplink_gate::{InFlight, UplinkGate};
use crate::wire::frame::write_frame;
use crate::wire::{Body, Header, Ping};

/// A frame waiting to be written.
pub(crate) struct Outgoing {
    pub(crate) header: Header,
    pub(crate) payload: Option<Bytes>,
    /// Told once the frame is flushed to the socket (dropped unsent if the
    /// connection fails first).
    pub(crate) flushed: Option<oneshot::Sender<()>>,
    /// An update batch counted by its rank's uplink gate until flushed.
    pub(crate) in_flight: Option<InFlight>,
}

impl Outgoing {
    pub(crate) fn new(body: Body, payload: Option<Bytes>) -> Self {
        Outgoing { header: Header::new(body), payload, flushed: None, in_flight: None }
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
    flushed: &mut Vec<oneshot::Sender<()>>,
    in_flight: &mut Vec<InFlight>,
) -> Result<(), crate::wire::frame::FrameError> {
    if let Some(p) = &m.payload {
        w.get_mut().keep_alive(p);
    }
    flushed.extend(m.flushed.take());
    in_flight.extend(m.in_flight.take());
    write_frame(w, m.header, m.payload.as_ref()).await
}

/// Writes queued frames until the queue closes, then shuts the socket's
/// write half. With `gate` (a keeper's connection to a worker), a
/// publication waits, with the frames queued behind it, while the rank's
/// own worker still writes update batches.
pub(crate) async fn writer(
    wr: WriteSide,
    mut rx: UnboundedReceiver<Outgoing>,
    heartbeat: Duration,
    gate: Option<Arc<UplinkGate>>,
) {
    let mut w = BufWriter::with_capacity(64 * 1024, wr);
    let mut flushed = Vec::new();
    let mut in_flight = Vec::new();
    loop {
        let next = tokio::select! {
            m = rx.recv() => m,
            _ = tokio::time::sleep(heartbeat) => Some(Outgoing::new(Body::Ping(Ping {}), None)),
        };
        let Some(mut m) = next else { break };
        loop {
            if let (Some(gate), Some(Body::Publish(_))) = (&gate, &m.header.body) {
                if gate.updates_pending() {
                    // What is written so far goes out before the wait.
                    if w.flush().await.is_err() {
                        return;
                    }
                    gate.wait_for_updates().await;
                }
            }
            if send(&mut w, m, &mut flushed, &mut in_flight).await.is_err() {
                return;
            }
            // Drain what is already queued before paying for a flush.
            match rx.try_recv() {
                Ok(queued) => m = queued,
                Err(_) => break,
            }
        }
        if w.flush().await.is_err() {
            return;
        }
        for tx in flushed.drain(..) {
            let _ = tx.send(());
        }
        in_flight.clear();
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::peer_stream::plain;
    use crate::wire::frame::read_frame;
    use crate::wire::PublishHeader;

    fn publication() -> Outgoing {
        Outgoing::new(Body::Publish(PublishHeader { table: 0, partition: 0, age: 1, ..Default::default() }), None)
    }

    /// A writer on one end of a loopback connection, and the other end.
    async fn connected(gate: Option<Arc<UplinkGate>>) -> (Queue, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ours = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (theirs, _) = listener.accept().await.unwrap();
        let (_rd, wr) = plain(ours);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(writer(wr, rx, Duration::from_secs(3600), gate));
        (tx, theirs)
    }

    fn is_publication(h: &Header) -> bool {
        matches!(h.body, Some(Body::Publish(_)))
    }

    #[tokio::test]
    async fn a_publication_waits_for_the_ranks_updates_and_keeps_its_place() {
        let gate = UplinkGate::new(Duration::from_secs(3600));
        let update = gate.begin();
        let (q, mut theirs) = connected(Some(gate.clone())).await;
        q.send(publication()).unwrap();
        q.send(Outgoing::new(Body::Ping(Ping {}), None)).unwrap();
        // Held (and the ping behind it) while the update is on its way.
        let early = tokio::time::timeout(Duration::from_millis(300), read_frame(&mut theirs, 1 << 20)).await;
        assert!(early.is_err(), "a publication went out before the rank's update was flushed");
        drop(update);
        let (first, _) = read_frame(&mut theirs, 1 << 20).await.unwrap();
        let (second, _) = read_frame(&mut theirs, 1 << 20).await.unwrap();
        assert!(is_publication(&first) && matches!(second.body, Some(Body::Ping(_))));
    }

    #[tokio::test]
    async fn without_a_gate_or_with_updates_out_a_publication_goes_at_once() {
        for gate in [None, Some(UplinkGate::new(Duration::from_secs(3600)))] {
            let (q, mut theirs) = connected(gate).await;
            q.send(publication()).unwrap();
            let (h, _) = read_frame(&mut theirs, 1 << 20).await.unwrap();
            assert!(is_publication(&h));
        }
    }

    #[tokio::test]
    async fn an_update_counts_until_its_frame_is_flushed() {
        let gate = UplinkGate::new(Duration::from_secs(3600));
        let (q, mut theirs) = connected(None).await;
        let mut o = Outgoing::new(Body::Ping(Ping {}), Some(Bytes::from(vec![0u8; 1 << 16])));
        o.in_flight = Some(gate.begin());
        assert!(gate.updates_pending());
        q.send(o).unwrap();
        read_frame(&mut theirs, 1 << 20).await.unwrap();
        gate.wait_for_updates().await;
        assert!(!gate.updates_pending());
    }
}
