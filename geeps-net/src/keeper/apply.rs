//! Applying update batches: frames from every connection queue up and
//! whoever holds the keeper next applies them all in one pass; a batch the
//! keeper refuses is reported to its sender. It never blocks a connection
//! on another's batch beyond the keeper's lock.

use bytes::Bytes;
use geeps_core::transport::{DeltaEncoding, UpdateBatch};

use super::service::{KeeperService, State};
use crate::conn::writer::Outgoing;
use crate::wire::{Body, Encoding, Failure, FailureKind, UpdateHeader};

impl KeeperService {
    /// Applies a batch that came from `rank`'s connection (or, in process,
    /// from the attached worker, in push order). bf16 deltas go to the keeper
    /// as they are (it adds them widened, checking their length first).
    /// Returns once the batch went in (by this caller or by another that took
    /// it with its own), so a connection's frames still go in in order.
    pub(crate) fn apply(&self, rank: usize, u: UpdateHeader, payload: Bytes) {
        self.waiting.lock().push((rank, u, payload));
        loop {
            // Holding the keeper means whoever took this batch before has applied it.
            let mut st = self.state.lock();
            let waiting = std::mem::take(&mut *self.waiting.lock());
            if waiting.is_empty() {
                return;
            }
            self.apply_waiting(&mut st, waiting);
        }
    }

    fn apply_waiting(&self, st: &mut State, waiting: Vec<(usize, UpdateHeader, Bytes)>) {
        let mut batches = Vec::with_capacity(waiting.len());
        let mut senders = Vec::with_capacity(waiting.len());
        for (rank, u, payload) in waiting {
            st.peers[rank].bytes_in += payload.len() as u64;
            let batch = if u.worker as usize != rank {
                Err(format!("connection of rank {rank} sent a batch of worker {}", u.worker))
            } else if st.keeper.is_none() {
                Err("no tables declared".into())
            } else {
                batch_of(&u, payload)
            };
            match batch {
                Ok(b) => {
                    batches.push(b);
                    senders.push((rank, u));
                }
                Err(message) => self.refuse(st, rank, &u, message),
            }
        }
        let Some(k) = st.keeper.as_mut() else { return };
        let results = k.apply_many(&batches);
        for ((rank, u), result) in senders.iter().zip(results) {
            match result {
                Ok(Some(p)) => self.publish(st, &p),
                Ok(None) => {}
                Err(e) => self.refuse(st, *rank, u, e.to_string()),
            }
        }
    }

    /// Tells `rank` its batch was refused (and logs why).
    fn refuse(&self, st: &State, rank: usize, u: &UpdateHeader, message: String) {
        tracing::warn!(shard = self.shard, rank, table = u.table, clock = u.clock, %message, "update batch rejected");
        if let Some(q) = &st.peers[rank].queue {
            let f = Failure {
                kind: FailureKind::RejectedBatch.into(),
                rank: self.shard as u32,
                address: String::new(),
                message,
            };
            let _ = q.send(Outgoing::new(Body::Failure(f), None));
        }
    }
}

/// The batch an update frame carries: its deltas present only when the
/// header says so, in the encoding it names. A payload on a batch without
/// deltas, bf16 without deltas, or an unknown encoding is refused (the
/// keeper then checks the length against the partition).
pub(crate) fn batch_of(u: &UpdateHeader, payload: Bytes) -> Result<UpdateBatch, String> {
    let encoding = match Encoding::try_from(u.encoding) {
        Ok(Encoding::F32) => DeltaEncoding::F32,
        Ok(Encoding::Bf16) if u.has_deltas => DeltaEncoding::Bf16,
        Ok(Encoding::Bf16) => return Err("batch without deltas says its deltas are bf16".to_string()),
        Err(other) => {
            return Err(format!(
                "deltas in unknown encoding {other} (this keeper reads {} = f32, {} = bf16); run the same geeps version on every rank",
                u32::from(Encoding::F32),
                u32::from(Encoding::Bf16)
            ))
        }
    };
    if !u.has_deltas && !payload.is_empty() {
        return Err("batch without deltas carries a payload".into());
    }
    Ok(UpdateBatch {
        table: u.table,
        partition: u.partition,
        worker: u.worker,
        clock: u.clock,
        deltas: u.has_deltas.then_some(payload),
        encoding,
    })
}

#[cfg(test)]
mod tests {
    use geeps_core::{TableKind, TableSpec};

    use super::*;
    use crate::keeper::stripes::Stripes;
    use crate::options::NetOptions;

    fn floats(bytes: &Bytes) -> Vec<f32> {
        bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    #[test]
    fn batches_from_many_connections_at_once_all_go_in_before_apply_returns() {
        const WORKERS: usize = 4;
        const CLOCKS: u64 = 40;
        let rows = 8192usize;
        let service = KeeperService::new(0, WORKERS, NetOptions::default(), None);
        let spec = TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: (rows * WORKERS) as u32 };
        // Keeper 0 of WORKERS: its partition holds `rows` rows.
        service.state.lock().keeper = Some(Stripes::new(0, WORKERS, 1, 1, &[spec]));
        std::thread::scope(|s| {
            for w in 0..WORKERS {
                let service = &service;
                s.spawn(move || {
                    for clock in 0..CLOCKS {
                        let u = UpdateHeader {
                            table: 0,
                            partition: 0,
                            worker: w as u32,
                            clock,
                            has_deltas: true,
                            encoding: Encoding::F32.into(),
                        };
                        let deltas: Vec<u8> = (0..rows).flat_map(|_| (w as f32 + 1.0).to_le_bytes()).collect();
                        service.apply(w, u, Bytes::from(deltas));
                        // Applied (or waiting in turn) by the time apply returns.
                        let arrived = service.state.lock().keeper.as_ref().unwrap().worker_clocks(0).unwrap();
                        assert!(arrived[w] > clock, "worker {w} clock {clock} not taken: {arrived:?}");
                    }
                });
            }
        });
        let st = service.state.lock();
        let k = st.keeper.as_ref().unwrap().only();
        // 1 + 2 + 3 + 4 per clock: exact in f32 whatever the order.
        let want = (WORKERS * (WORKERS + 1) / 2) as f32 * CLOCKS as f32;
        assert!(floats(&k.rows(0).unwrap()).iter().all(|&v| v == want));
        assert_eq!(k.publication(0).age, CLOCKS);
        assert!(service.waiting.lock().is_empty());
    }
}
