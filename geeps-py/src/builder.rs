//! `Builder`: the configuration and tables of an instance, its device
//! (`"host"` or `"cuda:N"`) and the cluster it joins; `build` connects it.
//! It validates Python arguments only; geeps validates the rest.

use std::sync::Arc;
use std::time::Duration;

use geeps_core::{Config, Device, GeepsBuilder, HostDevice, TableKind, Transport};
use geeps_cuda::{CudaConfig, CudaDevice};
use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::cluster::{Cluster, LocalCluster};
use crate::dlpack::{Place, DEVICE_CPU, DEVICE_CUDA};
use crate::errors::{blocking, ArgumentError, StateError};
use crate::instance::Instance;
use crate::table::Table;

/// Declares an instance: configuration, tables, device; `build` joins the cluster.
#[pyclass(module = "geeps._geeps", frozen, subclass)]
pub struct Builder {
    config: Config,
    device: String,
    inner: Mutex<Option<(GeepsBuilder, Vec<Table>)>>,
}

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    if value.is_finite() && value > 0.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(ArgumentError::new_err(format!("{name} is a positive number of seconds, not {value}")))
    }
}

/// The device a spec names: `"host"` (memory with an enforced capacity of
/// `budget` bytes) or `"cuda:N"`.
fn open_device(spec: &str, budget: usize) -> PyResult<(Option<Arc<dyn Device>>, Place)> {
    if spec == "host" || spec == "cpu" {
        return Ok((Some(Arc::new(HostDevice::new(budget))), Place { device_type: DEVICE_CPU, device_id: 0 }));
    }
    let ordinal = match spec.strip_prefix("cuda") {
        Some("") => Some(0),
        Some(rest) => rest.strip_prefix(':').and_then(|n| n.parse::<usize>().ok()),
        None => None,
    }
    .ok_or_else(|| ArgumentError::new_err(format!("device is \"host\" or \"cuda:N\", not {spec:?}")))?;
    let device = CudaDevice::new(CudaConfig::ordinal(ordinal).with_budget(budget)).map_err(crate::errors::to_py)?;
    Ok((Some(Arc::new(device)), Place { device_type: DEVICE_CUDA, device_id: ordinal as i32 }))
}

impl Builder {
    fn declare(&self, name: &str, kind: TableKind, rows: u32) -> PyResult<Table> {
        let mut inner = self.inner.lock();
        let (b, tables) = inner.as_mut().ok_or_else(|| StateError::new_err("this builder has built its instance"))?;
        let id = match kind {
            TableKind::Parameter => b.parameter_table(name, rows),
            _ => b.local_table(name, rows),
        };
        let t = Table::new(id, name, kind, rows);
        tables.push(t.clone());
        Ok(t)
    }
}

#[pymethods]
impl Builder {
    /// A builder: `row_width` floats per row (the same on every worker),
    /// `device_memory` bytes of budget, `device` `"host"` or `"cuda:N"`.
    #[new]
    #[pyo3(signature = (*, row_width=128, device_memory=1 << 30, device="host".to_string(), read_my_writes=true, wait_deadline=120.0, slow_wait_log=5.0))]
    fn new(
        row_width: usize,
        device_memory: usize,
        device: String,
        read_my_writes: bool,
        wait_deadline: f64,
        slow_wait_log: f64,
    ) -> PyResult<Builder> {
        let config = Config::default()
            .with_row_width(row_width)
            .with_device_memory(device_memory)
            .with_read_my_writes(read_my_writes)
            .with_wait_deadline(seconds("wait_deadline", wait_deadline)?)
            .with_slow_wait_log(seconds("slow_wait_log", slow_wait_log)?);
        config.validate().map_err(crate::errors::to_py)?;
        let inner = GeepsBuilder::new(config.clone());
        Ok(Builder { config, device, inner: Mutex::new(Some((inner, Vec::new()))) })
    }

    /// Declares a parameter table of `rows` rows (shared; updates are summed).
    fn parameter_table(&self, name: &str, rows: u32) -> PyResult<Table> {
        self.declare(name, TableKind::Parameter, rows)
    }

    /// Declares a local table of `rows` rows (this worker's own data).
    fn local_table(&self, name: &str, rows: u32) -> PyResult<Table> {
        self.declare(name, TableKind::Local, rows)
    }

    /// Opens the device, joins the cluster and returns the instance. The
    /// cluster: None (a single worker), a `Cluster` (this process's rank of
    /// a network cluster) or a `LocalCluster` with `rank`.
    #[pyo3(signature = (cluster=None, rank=None))]
    fn build(&self, py: Python<'_>, cluster: Option<&Bound<'_, PyAny>>, rank: Option<usize>) -> PyResult<Instance> {
        let (mut b, tables) =
            self.inner.lock().take().ok_or_else(|| StateError::new_err("this builder has built its instance"))?;
        let mut net: Option<Py<Cluster>> = None;
        let transport: Option<Arc<dyn Transport>> = match cluster {
            None if rank.is_some_and(|r| r != 0) => {
                return Err(ArgumentError::new_err("rank= without a cluster: a single worker is rank 0"))
            }
            None => None,
            Some(c) => {
                if let Ok(net_cluster) = c.downcast::<Cluster>() {
                    if rank.is_some_and(|r| r != net_cluster.get().rank_of()) {
                        return Err(ArgumentError::new_err("a network cluster's rank is its own: pass no rank"));
                    }
                    net = Some(net_cluster.clone().unbind());
                    Some(net_cluster.get().transport()?)
                } else if let Ok(local) = c.downcast::<LocalCluster>() {
                    let rank = match (rank, local.get().workers_count()) {
                        (Some(r), _) => r,
                        (None, 1) => 0,
                        (None, n) => {
                            return Err(ArgumentError::new_err(format!(
                                "a LocalCluster of {n} workers needs rank= (one instance per worker)"
                            )))
                        }
                    };
                    Some(local.get().transport(rank)?)
                } else {
                    return Err(ArgumentError::new_err(format!(
                        "cluster is a geeps.Cluster, a geeps.LocalCluster or None, not {c}"
                    )));
                }
            }
        };
        let (device, place) = open_device(&self.device, self.config.device_memory)?;
        if let Some(d) = device {
            b.device(d);
        }
        if let Some(t) = transport {
            b.transport(t);
        }
        let ps = Arc::new(blocking(py, move || b.build())?);
        if let Some(c) = &net {
            c.get().adopt(&ps);
        }
        Ok(Instance { ps, place, tables, cluster: net })
    }
}
