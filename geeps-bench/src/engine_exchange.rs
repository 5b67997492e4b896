//! The whole engine's BSP clock exchange: per clock, each worker reads its
//! table (BSP), pre-updates and updates all of it, and clocks; its deltas go
//! to the keepers and fresh rows come back — `2 × bytes` per worker per
//! clock, like the raw TCP baseline. Over geeps-net (one rank per process)
//! or over the in-process transport (one thread per worker), the latter
//! beside threads that only copy the same bytes. It owns these loops; it
//! never aggregates or judges rates.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use geeps::{keys, Config, Geeps, InProcessCluster, Slack, Transport};

use crate::device::BenchDevice;
use crate::error::{BenchError, Result};
use crate::ranks::RankEnv;
use crate::raw_tcp::{ExchangeJob, Rate};
use crate::workload::ROW_WIDTH;

pub const ROLE: &str = "engine-exchange";

/// Clocks of the whole engine on `transport`; returns bytes/s in + out.
fn engine_loop(transport: Arc<dyn Transport>, job: &ExchangeJob, rank: usize) -> Result<f64> {
    let rows = (job.bytes / (ROW_WIDTH * 4)) as u32;
    let budget = 8 * job.bytes + (1 << 20);
    let mut b = Geeps::builder(Config::default().with_row_width(ROW_WIDTH).with_device_memory(budget));
    let t = b.parameter_table("w", rows);
    b.transport(transport);
    if let Some(gpu) = BenchDevice::from_env()?.open(budget, rank)? {
        b.device(gpu);
    }
    let ps = b.build()?;
    let k = keys(t, 0..rows);
    let r = ps.virtual_read(&k, Slack::BSP)?;
    let u = ps.virtual_pre_update(&k)?;
    ps.virtual_update(u)?;
    ps.virtual_post_read(r)?;
    ps.virtual_table_clock(t)?;
    ps.finish_virtual_iteration()?;
    let mut start = Instant::now();
    for clock in 0..=job.rounds {
        if clock == 1 {
            start = Instant::now();
        }
        let read = ps.read(r)?;
        ps.pre_update(u)?.update()?;
        read.post()?;
        ps.table_clock(t)?;
    }
    // The last clock's rows must arrive too.
    ps.read(r)?.post()?;
    let rate = (2 * rows as usize * ROW_WIDTH * 4 * job.rounds) as f64 / start.elapsed().as_secs_f64();
    ps.shutdown()?;
    Ok(rate)
}

/// A rank of the networked exchange.
pub fn rank_main(env: &RankEnv) -> Result<Rate> {
    let job: ExchangeJob = env.job()?;
    let mut cluster = env.join_cluster()?;
    let rate = engine_loop(cluster.transport(), &job, env.rank);
    cluster.shutdown()?;
    Ok(Rate { bytes_per_second: rate? })
}

fn join_all(handles: Vec<std::thread::JoinHandle<Result<f64>>>) -> Result<Vec<f64>> {
    handles.into_iter().map(|h| h.join().map_err(|_| BenchError::msg("a worker thread panicked"))?).collect()
}

/// `world` workers as threads of this process over the in-process transport.
pub fn in_process(world: usize, job: &ExchangeJob) -> Result<Vec<f64>> {
    let cluster = InProcessCluster::new(world)?;
    let mut handles = Vec::with_capacity(world);
    for rank in 0..world {
        let transport = cluster.transport(rank)?;
        let job = job.clone();
        handles.push(std::thread::spawn(move || engine_loop(transport, &job, rank)));
    }
    join_all(handles)
}

/// The in-process baseline: `world` threads each copying `2 × bytes` per
/// round (one copy out, one in), with a barrier per round.
pub fn memcpy_threads(world: usize, job: &ExchangeJob) -> Result<Vec<f64>> {
    let barrier = Arc::new(Barrier::new(world));
    let mut handles = Vec::with_capacity(world);
    for _ in 0..world {
        let (barrier, job) = (barrier.clone(), job.clone());
        handles.push(std::thread::spawn(move || {
            let src = vec![1u8; job.bytes];
            let mut mid = vec![0u8; job.bytes];
            let mut dst = vec![0u8; job.bytes];
            let mut start = Instant::now();
            for round in 0..=job.rounds {
                if round == 1 {
                    start = Instant::now();
                }
                mid.copy_from_slice(&src);
                dst.copy_from_slice(std::hint::black_box(&mid));
                barrier.wait();
            }
            std::hint::black_box(&dst);
            Ok((2 * job.bytes * job.rounds) as f64 / start.elapsed().as_secs_f64())
        }));
    }
    join_all(handles)
}
