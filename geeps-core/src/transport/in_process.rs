//! The in-process transport: N workers in one process share keeper shards,
//! each shard served by its own thread. Messages are moved, not copied; the
//! row bytes of a publication are shared by every worker that receives it.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::keeper::KeeperShard;
use crate::table::TableSpec;
use crate::transport::messages::{Inbound, Inbox, Publish, UpdateBatch};
use crate::transport::transport_trait::Transport;

enum KeeperMsg {
    Join { rank: usize, row_width: usize, tables: Vec<TableSpec>, inbox: Inbox },
    Update(UpdateBatch),
    Leave(usize),
}

struct Declared {
    row_width: usize,
    tables: Vec<TableSpec>,
}

struct Cluster {
    workers: usize,
    shards: Vec<Sender<KeeperMsg>>,
    declared: Mutex<Option<Declared>>,
    /// Ranks whose transport is alive: one worker per rank.
    claimed: Mutex<Vec<bool>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A cluster of `workers` workers and keeper shards inside one process: one
/// geeps instance per thread, each given its rank's transport.
///
/// ```
/// use std::thread;
/// use geeps_core::{keys, Config, Geeps, InProcessCluster, Slack};
///
/// let cluster = InProcessCluster::new(2)?;
/// let workers: Vec<_> = (0..2)
///     .map(|rank| {
///         let transport = cluster.transport(rank).unwrap();
///         thread::spawn(move || -> geeps_core::Result<f32> {
///             let mut b = Geeps::builder(Config::default().with_row_width(4).with_device_memory(1 << 20));
///             let w = b.parameter_table("w", 2);
///             b.transport(transport);
///             let ps = b.build()?;
///             ps.finish_virtual_iteration()?; // nothing recorded: keyed calls only
///             let mut delta = ps.pre_update_keys(&keys(w, 0..2))?;
///             delta.as_mut_slice()?.fill(1.0);
///             delta.update()?;
///             ps.clock()?;
///             // BSP: clock 1 sees every worker's clock-0 updates.
///             let params = ps.read_keys(&keys(w, 0..2), Slack::BSP)?;
///             let v = params.as_slice()?[0];
///             params.post()?;
///             ps.shutdown()?;
///             Ok(v)
///         })
///     })
///     .collect();
/// for w in workers {
///     assert_eq!(w.join().unwrap()?, 2.0);
/// }
/// # Ok::<(), geeps_core::Error>(())
/// ```
#[derive(Clone)]
pub struct InProcessCluster {
    inner: Arc<Cluster>,
}

impl InProcessCluster {
    /// A cluster with one keeper shard per worker.
    pub fn new(workers: usize) -> Result<Self> {
        Self::with_shards(workers, workers)
    }

    /// A cluster with an explicit number of keeper shards.
    pub fn with_shards(workers: usize, shards: usize) -> Result<Self> {
        if workers == 0 {
            return Err(Error::InvalidConfig {
                field: "workers",
                reason: "0; a cluster needs at least one worker".into(),
            });
        }
        if shards == 0 {
            return Err(Error::InvalidConfig {
                field: "shards",
                reason: "0; a cluster needs at least one keeper shard".into(),
            });
        }
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for shard in 0..shards {
            let (tx, rx) = unbounded();
            senders.push(tx);
            let t = std::thread::Builder::new()
                .name(format!("geeps-keeper-{shard}"))
                .spawn(move || keeper_loop(shard, shards, workers, rx))?;
            threads.push(t);
        }
        Ok(InProcessCluster {
            inner: Arc::new(Cluster {
                workers,
                shards: senders,
                declared: Mutex::new(None),
                claimed: Mutex::new(vec![false; workers]),
                threads: Mutex::new(threads),
            }),
        })
    }

    /// The transport of worker `rank`; one per rank while it lives.
    pub fn transport(&self, rank: usize) -> Result<Arc<dyn Transport>> {
        if rank >= self.inner.workers {
            return Err(Error::InvalidConfig {
                field: "rank",
                reason: format!("{rank}; this cluster has ranks 0..{}", self.inner.workers),
            });
        }
        let mut claimed = self.inner.claimed.lock();
        if claimed[rank] {
            return Err(Error::InvalidConfig {
                field: "rank",
                reason: format!("{rank} already has a transport; each worker needs its own rank"),
            });
        }
        claimed[rank] = true;
        Ok(Arc::new(InProcessTransport { rank, cluster: self.inner.clone() }))
    }

    /// The number of workers (and keeper shards).
    pub fn num_workers(&self) -> usize {
        self.inner.workers
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shards.clear();
        for t in self.threads.get_mut().drain(..) {
            let _ = t.join();
        }
    }
}

fn keeper_loop(shard: usize, shards: usize, workers: usize, rx: Receiver<KeeperMsg>) {
    let mut keeper: Option<KeeperShard> = None;
    let mut inboxes: Vec<Option<Inbox>> = vec![None; workers];
    let publish = |inboxes: &[Option<Inbox>], p: Publish| {
        for inbox in inboxes.iter().flatten() {
            inbox(Inbound::Rows(p.clone()));
        }
    };
    for msg in rx {
        match msg {
            KeeperMsg::Join { rank, row_width, tables, inbox } => {
                let k = keeper.get_or_insert_with(|| KeeperShard::new(shard, shards, workers, row_width, &tables));
                for p in k.all_publications() {
                    inbox(Inbound::Rows(p));
                }
                inboxes[rank] = Some(inbox);
            }
            KeeperMsg::Update(batch) => {
                let Some(k) = keeper.as_mut() else {
                    tracing::error!(shard, "update before any worker joined; dropped");
                    continue;
                };
                match k.apply(&batch) {
                    Ok(Some(p)) => publish(&inboxes, p),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(shard, worker = batch.worker, error = %e, "update batch rejected");
                        if let Some(Some(inbox)) = inboxes.get(batch.worker as usize) {
                            inbox(Inbound::Failed(e));
                        }
                    }
                }
            }
            KeeperMsg::Leave(rank) => {
                inboxes[rank] = None;
                if let Some(k) = keeper.as_mut() {
                    for p in k.depart(rank) {
                        publish(&inboxes, p);
                    }
                }
            }
        }
    }
}

struct InProcessTransport {
    rank: usize,
    cluster: Arc<Cluster>,
}

impl InProcessTransport {
    fn send(&self, shard: usize, msg: KeeperMsg) -> Result<()> {
        self.cluster.shards[shard].send(msg).map_err(|_| Error::PeerLost {
            rank: self.rank,
            address: format!("in-process keeper {shard}"),
            reason: "keeper thread has stopped".into(),
        })
    }
}

impl Drop for InProcessTransport {
    fn drop(&mut self) {
        self.cluster.claimed.lock()[self.rank] = false;
    }
}

impl Transport for InProcessTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn num_workers(&self) -> usize {
        self.cluster.workers
    }

    fn num_shards(&self) -> usize {
        self.cluster.shards.len()
    }

    fn join(&self, row_width: usize, tables: &[TableSpec], inbox: Inbox) -> Result<()> {
        {
            let mut declared = self.cluster.declared.lock();
            match declared.as_ref() {
                None => *declared = Some(Declared { row_width, tables: tables.to_vec() }),
                Some(d) if d.row_width != row_width => {
                    return Err(Error::Mismatch(format!(
                        "worker {} has row width {row_width}, the cluster uses {}",
                        self.rank, d.row_width
                    )))
                }
                Some(d) if d.tables != tables => {
                    return Err(Error::Mismatch(format!(
                        "worker {} declares tables {:?}, the cluster has {:?}",
                        self.rank,
                        tables.iter().map(|t| (&t.name, t.kind, t.rows)).collect::<Vec<_>>(),
                        d.tables.iter().map(|t| (&t.name, t.kind, t.rows)).collect::<Vec<_>>()
                    )))
                }
                Some(_) => {}
            }
        }
        for shard in 0..self.cluster.shards.len() {
            self.send(
                shard,
                KeeperMsg::Join { rank: self.rank, row_width, tables: tables.to_vec(), inbox: inbox.clone() },
            )?;
        }
        Ok(())
    }

    fn push(&self, batch: UpdateBatch) -> Result<()> {
        let shard = batch.partition as usize;
        if shard >= self.cluster.shards.len() {
            return Err(Error::InvalidKeys(format!("partition {shard} has no keeper shard")));
        }
        self.send(shard, KeeperMsg::Update(batch))
    }

    fn leave(&self) {
        for shard in 0..self.cluster.shards.len() {
            let _ = self.send(shard, KeeperMsg::Leave(self.rank));
        }
    }
}
