//! Admission of a worker by its hello: the token first, then everything a
//! rank must agree on (protocol version, world, rank, row width, tables,
//! partition sizes); an admitted rank is registered under the same lock,
//! with what it missed queued for it. It never touches the connection.

use std::net::SocketAddr;

use super::service::{KeeperService, Peer, State};
use super::stripes::Stripes;
use crate::conn::writer::{Outgoing, Queue};
use crate::security::auth::token_matches;
use crate::wire::{table_specs, Body, CheckpointRequest, Drain, Hello, TableDecl, PROTOCOL_VERSION};

/// Why a hello was refused.
pub(super) enum Refusal {
    /// The token is wrong: only the peer is told (a stranger must not be
    /// able to stop the cluster).
    Unauthenticated(String),
    /// An authenticated rank that cannot take part (version, rank, row
    /// width, tables): every joined worker is told.
    Config(String),
}

impl KeeperService {
    /// Checks a hello: the token first (a refusal before it is told to the
    /// peer alone), then everything a rank must agree on (a refusal after it
    /// is told to every worker: the cluster cannot run without that rank).
    pub(super) fn check_hello(&self, st: &mut State, h: &Hello) -> Result<(), Refusal> {
        if !token_matches(&self.opts.token, &h.token) {
            return Err(Refusal::Unauthenticated(
                "cluster token mismatch; give every rank the same GEEPS_TOKEN".into(),
            ));
        }
        self.check_config(st, h).map_err(Refusal::Config)
    }

    fn check_config(&self, st: &mut State, h: &Hello) -> Result<(), String> {
        if h.protocol != PROTOCOL_VERSION {
            return Err(format!(
                "protocol version {} but this keeper speaks {PROTOCOL_VERSION}; run the same geeps version on every rank",
                h.protocol
            ));
        }
        if h.world as usize != self.world {
            return Err(format!("world size {} but this cluster has {} ranks", h.world, self.world));
        }
        let rank = h.rank as usize;
        if rank >= self.world {
            return Err(format!("rank {rank} is outside 0..{}", self.world));
        }
        if st.peers[rank].joined && !st.peers[rank].left && !st.peers[rank].lost {
            return Err(format!("rank {rank} is already connected (two processes with the same rank?)"));
        }
        if h.stripes.max(1) as usize != self.opts.stripes {
            return Err(format!(
                "{} stripes per keeper but this keeper has {}; give every rank the same GEEPS_STRIPES",
                h.stripes.max(1),
                self.opts.stripes
            ));
        }
        table_specs(&h.tables)?;
        // A partition crosses as one frame each way: one over the limit could
        // never be published, and would only take the keeper's memory.
        let limit = self.opts.max_message_bytes;
        for d in h.tables.iter().filter(|d| d.is_parameter()) {
            let bytes = u64::from(d.rows).div_ceil(self.world as u64).saturating_mul(u64::from(h.row_width) * 4);
            if bytes > limit {
                return Err(format!(
                    "table `{}`: a partition of up to {bytes} bytes ({} rows of {} floats over {} ranks) is over \
                     max_message_bytes ({limit}); raise it on every rank, or spread the table over more ranks",
                    d.name, d.rows, h.row_width, self.world
                ));
            }
        }
        match &st.declared {
            None => st.declared = Some((h.row_width, h.tables.clone())),
            Some((w, _)) if *w != h.row_width => {
                return Err(format!(
                    "row width {} but the cluster uses {w}; set the same row_width on every rank",
                    h.row_width
                ))
            }
            Some((_, t)) if *t != h.tables => {
                let show =
                    |t: &[TableDecl]| t.iter().map(|d| format!("{}:{}x{}", d.name, d.kind, d.rows)).collect::<Vec<_>>();
                return Err(format!(
                    "tables {:?} differ from the cluster's {:?}; declare the same tables on every rank",
                    show(&h.tables),
                    show(t)
                ));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Checks `hello` and, when it passes, registers its rank under the same
    /// lock, creating the keeper shard on the first hello and queueing on `tx`
    /// what the rank missed: every publication so far, a drain, the latest
    /// checkpoint request.
    pub(super) fn admit(&self, hello: &Hello, addr: SocketAddr, tx: Queue) -> Result<(), Refusal> {
        let rank = hello.rank as usize;
        let mut st = self.state.lock();
        self.check_hello(&mut st, hello)?;
        if st.keeper.is_none() {
            let specs = table_specs(&hello.tables).unwrap_or_default();
            let mut keeper = Stripes::new(self.shard, self.world, self.opts.stripes, hello.row_width as usize, &specs);
            if let Some(landing) = &st.landing {
                keeper.publish_into(landing.clone());
            }
            st.keeper = Some(keeper);
        }
        // The welcome goes first, straight on the socket (`offers`);
        // everything queued now follows it on the connection's transport.
        let publications = st.keeper.as_ref().map(|k| k.all_publications()).unwrap_or_default();
        for p in publications {
            let _ = tx.send(self.joining_frame(&mut st, &p));
        }
        if st.draining {
            let _ = tx.send(Outgoing::new(Body::Drain(Drain {}), None));
        }
        if st.checkpoint_requests > 0 {
            let sequence = st.checkpoint_requests;
            let _ = tx.send(Outgoing::new(Body::Checkpoint(CheckpointRequest { sequence }), None));
        }
        st.peers[rank] = Peer {
            queue: Some(tx),
            address: addr.to_string(),
            joined: true,
            left: false,
            lost: false,
            ..Peer::default()
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::NetOptions;
    use crate::wire::DeclaredKind;

    #[test]
    fn a_partition_over_the_message_limit_is_refused_at_hello_and_allocates_nothing() {
        let service = KeeperService::new(0, 2, NetOptions::default().with_max_message_bytes(1 << 20), None);
        let hello = |rows: u32, row_width: u32, kind: DeclaredKind| Hello {
            protocol: PROTOCOL_VERSION,
            rank: 0,
            world: 2,
            row_width,
            tables: vec![TableDecl { name: "w".into(), kind: kind.into(), rows }],
            ..Default::default()
        };
        let mut st = service.state.lock();
        // 2^20 bytes per partition at most: 2048 rows of 128 floats each is exactly that.
        let e = service.check_config(&mut st, &hello(4097, 128, DeclaredKind::Parameter)).unwrap_err();
        assert!(e.contains("table `w`: a partition of up to 1049088 bytes"), "{e}");
        assert!(e.contains("max_message_bytes (1048576)"), "{e}");
        let e = service.check_config(&mut st, &hello(u32::MAX, u32::MAX, DeclaredKind::Parameter)).unwrap_err();
        assert!(e.contains("raise it on every rank"), "{e}");
        assert!(st.declared.is_none() && st.keeper.is_none());
        // Local tables stay on their worker: no limit here.
        service.check_config(&mut st, &hello(u32::MAX, 128, DeclaredKind::Local)).unwrap();
        drop(st);
        let service = KeeperService::new(0, 2, NetOptions::default().with_max_message_bytes(1 << 20), None);
        service.check_config(&mut service.state.lock(), &hello(4096, 128, DeclaredKind::Parameter)).unwrap();
    }
}
