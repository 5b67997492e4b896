//! The sync scenario through the whole engine: one rank per process over
//! geeps-net on loopback; per clock each rank pre-updates and updates its
//! whole table (adding `rank + 1` to every value), clocks, then reads it
//! back under BSP, which waits for every rank's update of the clock; with
//! the bf16 wire (its own role) the deltas cross the sockets as bf16, and
//! with bf16 both ways (another) the publications too, as changes; with
//! shared memory (its own role) the ranks' connections move their frames
//! through shared-memory rings, the sockets only ringing doorbells. The
//! deltas (`rank + 1`) and each clock's change of the sums are exact in
//! bf16, so the sums are checked exactly every way. It owns this loop; it never aggregates times.

use std::time::Instant;

use geeps::net::WireEncoding;
use geeps::{keys, Config, Geeps, Slack, TableId};

use crate::device::BenchDevice;
use crate::error::{BenchError, Result};
use crate::ranks::RankEnv;
use crate::socket_bytes;
use crate::sync_job::{self, ClockTimes, SyncJob};
use crate::workload::ROW_WIDTH;

pub const ROLE: &str = "engine-sync";
/// The same with update deltas on the bf16 wire.
pub const ROLE_BF16: &str = "engine-sync-bf16";
/// The same with update deltas and publications on the bf16 wire.
pub const ROLE_BF16_BOTH: &str = "engine-sync-bf16-both";
/// The same with the ranks' connections through shared memory (f32).
pub const ROLE_SHM: &str = "engine-sync-shm";

/// `host_writes`: the rows live where the host writes the deltas (every
/// one of them, so the pre-update buffer need not come zeroed); on a GPU
/// the host cannot, and the zeros it hands out are the deltas.
fn sync_loop(ps: &Geeps, t: TableId, rows: u32, job: &SyncJob, env: &RankEnv, host_writes: bool) -> Result<ClockTimes> {
    let (rank, world) = (env.rank, env.world);
    let k = keys(t, 0..rows);
    let u = if host_writes { ps.virtual_pre_update_overwrite(&k)? } else { ps.virtual_pre_update(&k)? };
    ps.virtual_update(u)?;
    ps.virtual_table_clock(t)?;
    let r = ps.virtual_read(&k, Slack::BSP)?;
    ps.virtual_post_read(r)?;
    ps.finish_virtual_iteration()?;
    let mut seconds = Vec::with_capacity(job.clocks);
    let mut counter = socket_bytes::Counter::default();
    for clock in 0..=job.clocks {
        counter.at_clock(clock, job.clocks);
        let start = Instant::now();
        let mut update = ps.pre_update(u)?;
        // Writing the deltas is the application's work (untimed), as in the ring's run.
        // On a device the host cannot address (a GPU) the deltas stay the
        // zeros pre_update hands out, and the sums are not checked here.
        let fill = Instant::now();
        let wrote = update.as_mut_slice().map(|d| d.fill((rank + 1) as f32)).is_ok();
        let untimed = fill.elapsed();
        update.update()?;
        ps.table_clock(t)?;
        let read = ps.read(r)?;
        let took = start.elapsed().saturating_sub(untimed);
        if let (true, Ok(values)) = (wrote, read.as_slice()) {
            sync_job::check("engine", values, sync_job::accumulated(world, clock))?;
        }
        read.post()?;
        if clock > 0 {
            seconds.push(took.as_secs_f64());
        }
    }
    Ok(ClockTimes { seconds, received_bytes_per_clock: counter.per_clock() })
}

/// A rank of the sync scenario in the role `env` names: its update deltas
/// and publications crossing as f32 or bf16, through shared memory or over
/// TCP.
pub fn rank_main(env: &RankEnv) -> Result<ClockTimes> {
    let (wire, publish, shm) = match env.role.as_str() {
        ROLE_BF16 => (WireEncoding::Bf16, WireEncoding::F32, false),
        ROLE_BF16_BOTH => (WireEncoding::Bf16, WireEncoding::Bf16, false),
        ROLE_SHM => (WireEncoding::F32, WireEncoding::F32, true),
        _ => (WireEncoding::F32, WireEncoding::F32, false),
    };
    let job: SyncJob = env.job()?;
    let rows = job.bytes / (ROW_WIDTH * 4);
    if rows == 0 {
        return Err(BenchError::msg(format!("sync table of {} bytes holds no {ROW_WIDTH}-float row", job.bytes)));
    }
    let mut cluster = env.join_cluster_with(wire, publish, shm)?;
    let run = || -> Result<ClockTimes> {
        // Room for the read, the update and their double buffers.
        let budget = 6 * rows * ROW_WIDTH * 4 + (1 << 20);
        let mut b = Geeps::builder(Config::default().with_row_width(ROW_WIDTH).with_device_memory(budget));
        let t = b.parameter_table("w", rows as u32);
        b.transport(cluster.transport());
        let gpu = BenchDevice::from_env()?.open(budget, env.rank)?;
        let host_writes = gpu.is_none();
        if let Some(gpu) = gpu {
            b.device(gpu);
        }
        let ps = b.build()?;
        let times = sync_loop(&ps, t, rows as u32, &job, env, host_writes);
        ps.shutdown()?;
        times
    };
    let times = run();
    cluster.shutdown()?;
    times
}
