//! The sync scenario: one BSP clock in which each of N ranks (2 and 4, one
//! process each, loopback TCP) adds its deltas to a table (GoogLeNet's 57 MB
//! unless told otherwise) and reads back the sum — through the whole engine
//! over TCP (with f32 on the wire, with bf16 update deltas, and with bf16
//! both ways, publications too; shared memory off) and over shared memory (f32), beside a ring all-reduce over
//! raw TCP written here (the in-run baseline)
//! and, when installed, gloo and MPI. Runs are interleaved per repeat so
//! load from elsewhere hits every system alike. Per run, a clock's time is
//! the slowest rank's; the run's figure is the median over its clocks; the
//! row's figure the median over repeats. It owns the sweep; it never judges.

use crate::error::Result;
use crate::external::External;
use crate::ranks;
use crate::results::{median, Calibration, Meta, SyncFigure, SyncRow};
use crate::settings::Settings;
use crate::sync_job::{ClockTimes, SyncJob};
use crate::{engine_sync, ring};

pub const ENGINE: &str = "geeps engine";
/// The engine with bf16 update deltas on the wire (`GEEPS_WIRE=bf16`).
pub const ENGINE_BF16: &str = "geeps engine, bf16 wire";
/// The engine with bf16 both ways: update deltas and publications
/// (`GEEPS_WIRE=bf16 GEEPS_PUBLISH_WIRE=bf16`).
pub const ENGINE_BF16_BOTH: &str = "geeps engine, bf16 both ways";
/// The engine with same-host connections through shared memory (`GEEPS_SHM=1`).
pub const ENGINE_SHM: &str = "geeps engine, shared memory";
pub const RING: &str = "ring all-reduce (raw TCP)";
pub use crate::settings::SYNC_WORLDS as WORLDS;

/// One run's figures: its median clock (slowest rank per clock) and TCP
/// bytes received per rank per clock, where counted.
pub fn reduce(ranks: &[ClockTimes]) -> (f64, Option<f64>) {
    let n = ranks.iter().map(|r| r.seconds.len()).min().unwrap_or(0);
    let slowest: Vec<f64> = (0..n).map(|i| ranks.iter().map(|r| r.seconds[i]).fold(0.0, f64::max)).collect();
    let counted: Option<Vec<f64>> = ranks.iter().map(|r| r.received_bytes_per_clock).collect();
    let bytes = counted.map(|c| c.iter().sum::<f64>() / c.len().max(1) as f64);
    (median(&slowest), bytes)
}

struct Samples {
    system: String,
    workers: usize,
    seconds: Vec<f64>,
    bytes: Vec<f64>,
}

pub fn run(s: &Settings, calibration: &Calibration) -> Result<SyncFigure> {
    let job: &SyncJob = &s.sync;
    let mut externals = Vec::new();
    let mut skipped = Vec::new();
    for x in External::ALL {
        match x.available() {
            Ok(()) => externals.push(x),
            Err(why) => {
                let line = format!("{}: skipped ({why})", x.label());
                eprintln!("sync: {line}");
                skipped.push(line);
            }
        }
    }
    let mut samples: Vec<Samples> = Vec::new();
    let mut record = |system: &str, workers: usize, (secs, bytes): (f64, Option<f64>)| {
        let i = match samples.iter().position(|x| x.system == system && x.workers == workers) {
            Some(i) => i,
            None => {
                samples.push(Samples { system: system.into(), workers, seconds: vec![], bytes: vec![] });
                samples.len() - 1
            }
        };
        samples[i].seconds.push(secs);
        samples[i].bytes.extend(bytes);
        eprintln!("sync: {workers} ranks, {system}: {:.1} ms per clock", secs * 1e3);
    };
    for _ in 0..s.repeats {
        for &workers in &s.sync_worlds {
            record(ENGINE, workers, reduce(&ranks::run(engine_sync::ROLE, workers, job, s.limit)?));
            record(ENGINE_BF16, workers, reduce(&ranks::run(engine_sync::ROLE_BF16, workers, job, s.limit)?));
            let both = reduce(&ranks::run(engine_sync::ROLE_BF16_BOTH, workers, job, s.limit)?);
            record(ENGINE_BF16_BOTH, workers, both);
            // Hosts of a namespace cluster share one /dev/shm: no shared-memory row there.
            if !ranks::across_hosts() {
                record(ENGINE_SHM, workers, reduce(&ranks::run(engine_sync::ROLE_SHM, workers, job, s.limit)?));
            }
            record(RING, workers, reduce(&ranks::run(ring::ROLE, workers, job, s.limit)?));
            for x in &externals {
                // A baseline that fails (mpirun's daemons now and then, across
                // hosts) loses its own sample, not the run's other figures.
                match x.run(workers, job, s.limit) {
                    Ok(ranks) => record(x.label(), workers, reduce(&ranks)),
                    Err(e) => {
                        let line =
                            format!("{}, {workers} ranks: one run failed ({e}); its row has the others", x.label());
                        eprintln!("sync: {line}");
                        skipped.push(line);
                    }
                }
            }
        }
    }
    let mut rows = Vec::new();
    for &workers in &s.sync_worlds {
        let engine = samples.iter().find(|x| x.system == ENGINE && x.workers == workers).map(|x| median(&x.seconds));
        for x in samples.iter().filter(|x| x.workers == workers) {
            let ms = median(&x.seconds) * 1e3;
            rows.push(SyncRow {
                workers,
                system: x.system.clone(),
                ms_per_clock: ms,
                samples_ms: x.seconds.iter().map(|v| v * 1e3).collect(),
                engine_over_this: engine.map_or(f64::NAN, |e| e * 1e3 / ms),
                bytes_per_rank_per_clock: (!x.bytes.is_empty()).then(|| median(&x.bytes)),
            });
        }
    }
    let connections = connections();
    Ok(SyncFigure {
        meta: Meta::new(s, calibration),
        table_bytes: job.bytes,
        clocks: job.clocks,
        rows,
        skipped,
        connections,
    })
}

/// What the engine's and the ring's connections were set to, in words.
fn connections() -> String {
    let system = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "engine and ring: congestion control {} (GEEPS_TCP_CONGESTION), {} stripe(s) per keeper (GEEPS_STRIPES); engine: send window {} (GEEPS_SEND_WINDOW); gloo and MPI: the system's {system}",
        crate::ranks::tcp_congestion().unwrap_or_else(|| format!("the system's {system}")),
        crate::ranks::stripes().unwrap_or(1),
        match crate::ranks::send_window() {
            0 => "none".to_string(),
            w => format!("{w} stripe(s)"),
        },
    )
}

/// A ring all-reduce's bytes sent (and received) per rank per clock.
pub fn ring_bytes(workers: usize, table_bytes: usize) -> f64 {
    2.0 * (workers as f64 - 1.0) / workers as f64 * table_bytes as f64
}
