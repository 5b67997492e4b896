//! Publishing: a fresh publication goes to every connected worker (the
//! attached one in process), and control frames go to every connection.
//! It never decides when to publish: applying batches does.

use std::sync::atomic::Ordering;

use geeps_core::transport::{Inbound, Publish};

use super::service::{KeeperService, State};
use crate::conn::writer::Outgoing;
use crate::wire::{Body, PublishHeader};

pub(crate) fn publish_frame(p: &Publish) -> Outgoing {
    Outgoing::new(
        Body::Publish(PublishHeader {
            table: p.table,
            partition: p.partition,
            age: p.age,
            included: p.included.clone(),
        }),
        Some(p.rows.clone()),
    )
}

impl KeeperService {
    /// Sends `p` to every connected worker: the attached one in process.
    pub(super) fn publish(&self, st: &State, p: &Publish) {
        for (r, peer) in st.peers.iter().enumerate() {
            let Some(q) = &peer.queue else { continue };
            match &st.local {
                Some((local, inbox)) if *local == r => inbox(Inbound::Rows(p.clone())),
                _ => {
                    let _ = q.send(publish_frame(p));
                }
            }
        }
    }

    pub(super) fn broadcast(&self, st: &State, out: impl Fn() -> Outgoing, except: Option<usize>) {
        for (r, p) in st.peers.iter().enumerate() {
            if Some(r) != except {
                if let Some(q) = &p.queue {
                    let o = out();
                    p.bytes_out.fetch_add(o.payload.as_ref().map_or(0, |b| b.len() as u64), Ordering::Relaxed);
                    let _ = q.send(o);
                }
            }
        }
    }
}
