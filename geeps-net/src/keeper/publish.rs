//! Publishing: a fresh publication goes to every connected worker (the
//! attached one in process, exact), in the encoding the keeper's
//! `publish_wire` names for the others, and control frames go to every
//! connection. It never decides when to publish: applying batches does.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use geeps_core::transport::{Inbound, Publish};

use super::service::{KeeperService, State};
use crate::conn::writer::Outgoing;
use crate::options::WireEncoding;
use crate::wire::bf16_rows::Encoded;
use crate::wire::{Body, Encoding, PublishHeader};

/// A publication's frame carrying `rows` in `encoding`; `base` when bf16
/// changes will follow these f32 rows.
fn frame(p: &Publish, rows: Bytes, encoding: Encoding, base: bool) -> Outgoing {
    Outgoing::new(
        Body::Publish(PublishHeader {
            table: p.table,
            partition: p.partition,
            age: p.age,
            included: p.included.clone(),
            encoding: encoding.into(),
            base,
        }),
        Some(rows),
    )
}

impl KeeperService {
    /// The frame that gives a worker joining now `p` (the table as of its
    /// data age): exact f32 rows, or, when publications go as bf16
    /// changes, what the other workers hold, as the base to add them to.
    pub(super) fn joining_frame(&self, st: &mut State, p: &Publish) -> Outgoing {
        if self.opts.publish_wire == WireEncoding::Bf16 {
            let held = st.sent.base_for((p.table, p.partition), &p.rows);
            frame(p, held, Encoding::F32, true)
        } else {
            frame(p, p.rows.clone(), Encoding::F32, false)
        }
    }

    /// Sends `p` to every connected worker: the attached one in process,
    /// the others over their connections (as one bf16 change shared by all
    /// when the publication wire is bf16).
    pub(super) fn publish(&self, st: &mut State, p: &Publish) {
        let remote = st
            .peers
            .iter()
            .enumerate()
            .any(|(r, peer)| peer.queue.is_some() && !matches!(&st.local, Some((local, _)) if *local == r));
        let out = match self.opts.publish_wire {
            WireEncoding::Bf16 if remote => match st.sent.encode((p.table, p.partition), &p.rows) {
                Encoded::Change(q) => (q, Encoding::Bf16, false),
                Encoded::Base => (p.rows.clone(), Encoding::F32, true),
            },
            // With nobody to send to, the workers' copy is unchanged: the
            // next change (or a joiner's base) carries this publication too.
            WireEncoding::Bf16 => (p.rows.clone(), Encoding::F32, true),
            WireEncoding::F32 => (p.rows.clone(), Encoding::F32, false),
        };
        for (r, peer) in st.peers.iter().enumerate() {
            let Some(q) = &peer.queue else { continue };
            match &st.local {
                Some((local, inbox)) if *local == r => inbox(Inbound::Rows(p.clone())),
                _ => {
                    peer.bytes_out.fetch_add(out.0.len() as u64, Ordering::Relaxed);
                    let _ = q.send(frame(p, out.0.clone(), out.1, out.2));
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
