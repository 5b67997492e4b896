//! `GeepsBuilder`: declares an instance's tables, takes its device and
//! transport, validates them and joins the cluster. Records nothing and
//! starts no thread (that is `finish_virtual_iteration`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_channel::unbounded;
use parking_lot::Mutex;

use crate::config::Config;
use crate::device::host::HostDevice;
use crate::device::Device;
use crate::engine::puller::PullMsg;
use crate::engine::write_counts::WriteCounts;
use crate::error::{Error, Result};
use crate::plan::recorder::Recorder;
use crate::table::{TableId, TableKind, TableSpec};
use crate::transport::InProcessCluster;
use crate::transport::{Inbound, Inbox, Transport};

use crate::api::instance::{AppState, DropLog, Geeps, Phase};

static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

/// Declares tables and connects an instance.
///
/// ```
/// use std::sync::Arc;
/// use geeps_core::{Config, Geeps, HostDevice, InProcessCluster};
///
/// let mut b = Geeps::builder(Config::default().with_device_memory(64 << 20));
/// let weights = b.parameter_table("conv1.weights", 300); // shared, summed across workers
/// let blobs = b.local_table("conv1.top", 40); // this worker's activations
/// b.device(Arc::new(HostDevice::new(64 << 20))); // the default; a GPU in production
/// b.transport(InProcessCluster::new(1)?.transport(0)?); // the default, one worker
/// let ps = b.build()?;
/// assert_eq!(ps.tables()[weights.0 as usize].rows, 300);
/// # let _ = blobs;
/// # Ok::<(), geeps_core::Error>(())
/// ```
pub struct GeepsBuilder {
    config: Config,
    tables: Vec<TableSpec>,
    device: Option<Arc<dyn Device>>,
    transport: Option<Arc<dyn Transport>>,
}

impl GeepsBuilder {
    /// A builder with `config` and no tables yet (same as [`Geeps::builder`]).
    pub fn new(config: Config) -> Self {
        GeepsBuilder { config, tables: Vec::new(), device: None, transport: None }
    }

    /// Declares a parameter table of `rows` rows.
    pub fn parameter_table(&mut self, name: &str, rows: u32) -> TableId {
        self.table(name, TableKind::Parameter, rows)
    }

    /// Declares a local table of `rows` rows.
    pub fn local_table(&mut self, name: &str, rows: u32) -> TableId {
        self.table(name, TableKind::Local, rows)
    }

    fn table(&mut self, name: &str, kind: TableKind, rows: u32) -> TableId {
        self.tables.push(TableSpec { name: name.to_string(), kind, rows });
        TableId(self.tables.len() as u32 - 1)
    }

    /// The device to keep rows on (default: a host device with the budget).
    pub fn device(&mut self, device: Arc<dyn Device>) -> &mut Self {
        self.device = Some(device);
        self
    }

    /// The cluster connection (default: a single-worker in-process cluster).
    pub fn transport(&mut self, transport: Arc<dyn Transport>) -> &mut Self {
        self.transport = Some(transport);
        self
    }

    /// Validates the configuration and the tables, opens the default device and transport where none was given, and joins the cluster. The instance then records its virtual iteration.
    pub fn build(self) -> Result<Geeps> {
        self.config.validate()?;
        for (i, t) in self.tables.iter().enumerate() {
            if t.rows == 0 {
                return Err(Error::InvalidConfig { field: "tables", reason: format!("table `{}` has 0 rows", t.name) });
            }
            if t.rows >= 1 << 31 {
                return Err(Error::InvalidConfig {
                    field: "tables",
                    reason: format!("table `{}` has more than 2^31 rows", t.name),
                });
            }
            if self.tables[..i].iter().any(|o| o.name == t.name) {
                return Err(Error::InvalidConfig {
                    field: "tables",
                    reason: format!("table name `{}` is declared twice", t.name),
                });
            }
        }
        let device = match self.device {
            Some(d) => d,
            None => Arc::new(HostDevice::new(self.config.device_memory)),
        };
        let transport = match self.transport {
            Some(t) => t,
            None => InProcessCluster::new(1)?.transport(0)?,
        };
        let parts = transport.num_shards();
        if parts == 0 {
            return Err(Error::InvalidConfig { field: "transport", reason: "it reports 0 keeper shards".into() });
        }
        let (pull_tx, pull_rx): (Vec<_>, Vec<_>) = (0..parts).map(|_| unbounded::<PullMsg>()).unzip();
        let route = pull_tx.clone();
        let inbox: Inbox = Arc::new(move |msg: Inbound| {
            let part = match &msg {
                Inbound::Rows(p) => p.partition as usize,
                Inbound::Failed(_) => 0,
            };
            let msg = match msg {
                Inbound::Rows(p) if part >= route.len() => Inbound::Failed(Error::Mismatch(format!(
                    "publication for partition {} of {} partitions",
                    p.partition,
                    route.len()
                ))),
                m => m,
            };
            let _ = route[part.min(route.len() - 1)].send(PullMsg::Inbound(msg));
        });
        let tables: Arc<[TableSpec]> = Arc::from(self.tables);
        transport.join(self.config.row_width, &tables, inbox)?;
        let app = AppState {
            cursor: 0,
            clocks: vec![0; tables.len()],
            writes: WriteCounts::new(tables.len()),
            live: HashMap::new(),
            next_ticket: 1,
        };
        let wait_deadline_ns = u64::try_from(self.config.wait_deadline.as_nanos()).unwrap_or(u64::MAX);
        Ok(Geeps {
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            config: self.config,
            tables,
            device,
            transport,
            parts,
            phase: Mutex::new(Phase::Recording { recorder: Recorder::default(), pull_rx }),
            running: OnceLock::new(),
            app: Mutex::new(app),
            pull_tx,
            reclaim_tx: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            wait_deadline_ns: AtomicU64::new(wait_deadline_ns),
            drop_log: Mutex::new(DropLog::default()),
            restored_clock: Mutex::new(None),
        })
    }
}

impl Geeps {
    /// Starts declaring an instance.
    pub fn builder(config: Config) -> GeepsBuilder {
        GeepsBuilder::new(config)
    }
}
