//! The scaling model: calibrates a per-clock cost model of the engine (and
//! of the ring all-reduce baseline) from sync runs it makes itself, then
//! projects time per clock and speedup to 2–64 machines on a stated link.
//! It owns the model's arithmetic and the projection; it never judges a
//! projection against a target (the paper's figure is printed beside it).
//!
//! Traffic per rank per clock, each way, for a table of `S` bytes on `N`
//! machines (zero for `N = 1`):
//!
//! ```text
//! geeps:  X(N, S) = (N-1)/N·S  (updates to the other keepers' shards)
//!                 + (N-1)/N·S  (its own shard's publications to the others)
//!                 = 2(N-1)/N·S
//! ring:   X(N, S) = 2(N-1)/N·S  (N-1 reduce-scatter + N-1 all-gather steps of S/N)
//! ```
//!
//! A rank's own shard is served in process, so neither term counts it. The
//! two move the same bytes; they differ in how many sequential hops a clock
//! takes, `L(N)`: geeps 1 (a round of updates, then a round of
//! publications, each to all peers at once, counted as one fixed cost), the
//! ring `2(N-1)` steps, each waiting for the previous one.
//!
//! Communication time per clock, fitted by least squares (coefficients kept
//! non-negative) to the measured `(N, S)` points at 2 and 4 ranks and two
//! table sizes, each first divided by its oversubscription `max(1, N/cores)`
//! (4 ranks on 2 cores each get half a core; a projected machine has its
//! own, and left in, the contention would pass for wire cost):
//!
//! ```text
//! comm(N, S) = a·L(N) + c·S + w·X(N, S)
//! ```
//!
//! `a` is the fixed latency per hop, `c` the per-byte CPU cost of the
//! table's passes (merging, gathering, summing), `w` the per-byte cost of
//! moving a byte through loopback TCP (kernel copies on the same cores). To
//! project onto a network of `B` bytes/s each way, `w` becomes `1/B` and `a`
//! and `c` are kept as measured. With compute time `C` per clock:
//!
//! ```text
//! T(1)           = C                          (one machine: no exchange)
//! T(N) no overlap = C + comm(N, S)
//! T(N) overlap    = max(C, comm(N, S))         (the paper overlaps)
//! speedup(N)      = N·C / T(N)
//! ```
//!
//! The overlapped time is a bound: some of a clock's exchange (the last
//! layer's update, the first layer's read) cannot hide behind compute.

use crate::error::{BenchError, Result};
use crate::profile;
use crate::results::{median, Calibration, Meta, ScalingFigure, ScalingFit, ScalingPoint, ScalingRow};
use crate::settings::Settings;
use crate::sync::{self, ENGINE, RING, WORLDS};
use crate::sync_job::SyncJob;
use crate::workload::ROW_WIDTH;
use crate::{engine_sync, ranks, ring};

/// Machines the projection covers.
pub const MACHINES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Links of the projection, Gbit/s each way.
pub const NETWORKS_GBPS: [f64; 2] = [10.0, 100.0];
/// The paper's point: GoogLeNet on 16 machines (§5.2, Figure 8(b)).
pub const PAPER_MACHINES: usize = 16;
pub const PAPER_SPEEDUP: f64 = 13.0;
pub const PAPER_SETTING: &str = "GeePS paper §5.2 (Figure 8): \"Compared to the single-machine optimized Caffe, \
GeePS achieves 13× speedups on both GoogLeNet and AdamLike model with 16 machines\" (BSP, one K20C GPU per machine, \
40 Gbps Ethernet measured at 12 Gbps with iperf, 32 images per GoogLeNet mini-batch per machine)";

/// Which exchange a cost model describes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum System {
    Geeps,
    Ring,
}

impl System {
    pub const ALL: [System; 2] = [System::Geeps, System::Ring];

    pub fn label(self) -> &'static str {
        match self {
            System::Geeps => ENGINE,
            System::Ring => RING,
        }
    }

    /// Sequential hops of one clock, `L(N)`.
    pub fn hops(self, n: usize) -> f64 {
        match (self, n) {
            (_, 0 | 1) => 0.0,
            (System::Geeps, _) => 1.0,
            (System::Ring, n) => 2.0 * (n as f64 - 1.0),
        }
    }

    /// Bytes a rank sends (and receives) per clock, `X(N, S)`.
    pub fn bytes(self, n: usize, s: f64) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        let share = (n as f64 - 1.0) / n as f64 * s;
        match self {
            // Its updates to the other shards, and its shard's publications to the other ranks.
            System::Geeps => share + share,
            System::Ring => sync::ring_bytes(n, 1) * s,
        }
    }
}

/// The fitted coefficients of `comm(N, S) = a·L(N) + c·S + w·X(N, S)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coefficients {
    pub latency_s: f64,
    pub cpu_s_per_byte: f64,
    pub wire_s_per_byte: f64,
}

impl Coefficients {
    /// Communication time of a clock with `w` replaced by `1 / link` (bytes/s
    /// each way), or as measured when `link` is `None`.
    pub fn comm(&self, system: System, n: usize, s: f64, link: Option<f64>) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        let w = link.map_or(self.wire_s_per_byte, |b| 1.0 / b);
        self.latency_s * system.hops(n) + self.cpu_s_per_byte * s + w * system.bytes(n, s)
    }
}

/// One measured clock: machines, table bytes, seconds.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub n: usize,
    pub bytes: f64,
    pub seconds: f64,
}

fn features(system: System, x: &Sample) -> [f64; 3] {
    [system.hops(x.n), x.bytes, system.bytes(x.n, x.bytes)]
}

/// Least squares over the features in `keep` (the others held at zero), by
/// the normal equations; `None` when they are singular on these points.
fn solve(system: System, points: &[Sample], keep: &[usize]) -> Option<[f64; 3]> {
    let k = keep.len();
    let mut m = vec![vec![0.0; k + 1]; k];
    for p in points {
        let f = features(system, p);
        for (i, &fi) in keep.iter().enumerate() {
            for (j, &fj) in keep.iter().enumerate() {
                m[i][j] += f[fi] * f[fj];
            }
            m[i][k] += f[fi] * p.seconds;
        }
    }
    // Gaussian elimination with partial pivoting on k ≤ 3 unknowns.
    for col in 0..k {
        let pivot = (col..k).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        m.swap(col, pivot);
        let scale = m.iter().map(|r| r[col].abs()).fold(0.0, f64::max);
        if m[col][col].abs() <= 1e-12 * scale.max(f64::MIN_POSITIVE) {
            return None;
        }
        let pivot_row = m[col].clone();
        for (row, r) in m.iter_mut().enumerate() {
            if row != col {
                let f = r[col] / pivot_row[col];
                r.iter_mut().zip(&pivot_row).skip(col).for_each(|(x, p)| *x -= f * p);
            }
        }
    }
    let mut out = [0.0; 3];
    for (i, &fi) in keep.iter().enumerate() {
        out[fi] = m[i][k] / m[i][i];
    }
    Some(out)
}

fn residual(system: System, points: &[Sample], c: &[f64; 3]) -> f64 {
    let sq: f64 = points
        .iter()
        .map(|p| {
            let f = features(system, p);
            (f[0] * c[0] + f[1] * c[1] + f[2] * c[2] - p.seconds).powi(2)
        })
        .sum();
    (sq / points.len().max(1) as f64).sqrt()
}

/// The non-negative least-squares fit of the model to `points`: every
/// subset of the three terms is solved and the best fit whose
/// coefficients are all non-negative wins (a negative cost is noise, not a
/// machine). Returns the coefficients and the RMS residual in seconds.
pub fn fit(system: System, points: &[Sample]) -> Result<(Coefficients, f64)> {
    const SUBSETS: [&[usize]; 7] = [&[0, 1, 2], &[0, 1], &[0, 2], &[1, 2], &[0], &[1], &[2]];
    let best = SUBSETS
        .iter()
        .filter_map(|keep| solve(system, points, keep))
        .filter(|c| c.iter().all(|v| v.is_finite() && *v >= 0.0))
        .map(|c| (residual(system, points, &c), c))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let (rms, c) = best.ok_or_else(|| {
        BenchError::msg(format!(
            "scaling: no non-negative cost model fits the {} measured points of {}",
            points.len(),
            system.label()
        ))
    })?;
    Ok((Coefficients { latency_s: c[0], cpu_s_per_byte: c[1], wire_s_per_byte: c[2] }, rms))
}

/// Seconds per clock on `n` machines: compute `c_s`, exchange on a link of
/// `link` bytes/s each way, overlapped or not.
pub fn clock_seconds(m: &Coefficients, system: System, n: usize, s: f64, link: f64, c_s: f64, overlap: bool) -> f64 {
    if n <= 1 {
        return c_s;
    }
    let comm = m.comm(system, n, s, Some(link));
    if overlap {
        c_s.max(comm)
    } else {
        c_s + comm
    }
}

/// Throughput on `n` machines over one machine with the same compute per clock.
pub fn speedup(n: usize, c_s: f64, clock_s: f64) -> f64 {
    n as f64 * c_s / clock_s
}

/// Ranks per core of this machine, at least 1: the factor by which a rank's
/// CPU work is slowed here against a machine of its own.
fn oversubscription(workers: usize) -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (workers as f64 / cores as f64).max(1.0)
}

/// Table sizes of the calibration: the sync size and a quarter of it (at
/// least one row), so the fixed cost separates from the per-byte ones.
fn sizes(bytes: usize) -> [usize; 2] {
    let row = ROW_WIDTH * 4;
    [bytes, (bytes / 4 / row).max(1) * row]
}

/// Measures the engine and the ring at 2 and 4 ranks and two sizes, fits
/// both models, and projects them.
pub fn run(s: &Settings, calibration: &Calibration) -> Result<ScalingFigure> {
    let mut points: Vec<ScalingPoint> = Vec::new();
    let mut record = |system: System, workers: usize, bytes: usize, secs: f64| {
        match points.iter_mut().find(|p| p.system == system.label() && p.workers == workers && p.table_bytes == bytes) {
            Some(p) => p.samples_ms.push(secs * 1e3),
            None => points.push(ScalingPoint {
                system: system.label().into(),
                workers,
                table_bytes: bytes,
                ms_per_clock: f64::NAN,
                samples_ms: vec![secs * 1e3],
                model_ms: f64::NAN,
                oversubscription: oversubscription(workers),
            }),
        }
        eprintln!(
            "scaling: {workers} ranks, {:.1} MB, {}: {:.1} ms per clock",
            bytes as f64 / 1e6,
            system.label(),
            secs * 1e3
        );
    };
    for _ in 0..s.repeats {
        for workers in WORLDS {
            for bytes in sizes(s.sync.bytes) {
                let job = SyncJob { bytes, clocks: s.sync.clocks };
                record(
                    System::Geeps,
                    workers,
                    bytes,
                    sync::reduce(&ranks::run(engine_sync::ROLE, workers, &job, s.limit)?).0,
                );
                record(System::Ring, workers, bytes, sync::reduce(&ranks::run(ring::ROLE, workers, &job, s.limit)?).0);
            }
        }
    }
    for p in &mut points {
        p.ms_per_clock = median(&p.samples_ms);
    }
    let compute_s = s.scaling_compute_ms.map_or_else(|| profile::googlenet().paper_seconds_per_batch(), |ms| ms / 1e3);
    let table = s.sync.bytes as f64;
    let mut fits = Vec::new();
    let mut rows = Vec::new();
    for system in System::ALL {
        let samples: Vec<Sample> = points
            .iter()
            .filter(|p| p.system == system.label())
            .map(|p| Sample {
                n: p.workers,
                bytes: p.table_bytes as f64,
                seconds: p.ms_per_clock / 1e3 / p.oversubscription,
            })
            .collect();
        let (m, rms) = fit(system, &samples)?;
        for p in points.iter_mut().filter(|p| p.system == system.label()) {
            p.model_ms = m.comm(system, p.workers, p.table_bytes as f64, None) * p.oversubscription * 1e3;
        }
        fits.push(ScalingFit {
            system: system.label().into(),
            latency_s: m.latency_s,
            cpu_s_per_byte: m.cpu_s_per_byte,
            wire_s_per_byte: m.wire_s_per_byte,
            rms_residual_ms: rms * 1e3,
        });
        for gbps in NETWORKS_GBPS {
            for overlap in [true, false] {
                for n in MACHINES {
                    let t = clock_seconds(&m, system, n, table, gbps * 1e9 / 8.0, compute_s, overlap);
                    rows.push(ScalingRow {
                        system: system.label().into(),
                        network_gbps: gbps,
                        overlap,
                        machines: n,
                        ms_per_clock: t * 1e3,
                        speedup: speedup(n, compute_s, t),
                    });
                }
            }
        }
    }
    Ok(ScalingFigure {
        meta: Meta::new(s, calibration),
        clocks: s.sync.clocks,
        table_bytes: s.sync.bytes,
        compute_ms: compute_s * 1e3,
        compute_source: match s.scaling_compute_ms {
            Some(_) => "given with --compute-ms".into(),
            None => "GoogLeNet's multiply-adds × 32 images at 142.5 billion connections/s \
                     (geeps-bench/src/profile.rs; docs/performance.md, Method: Time)"
                .into(),
        },
        points,
        fits,
        rows,
        paper_machines: PAPER_MACHINES,
        paper_speedup: PAPER_SPEEDUP,
        paper_setting: PAPER_SETTING.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUE: Coefficients = Coefficients { latency_s: 2e-3, cpu_s_per_byte: 1.5e-9, wire_s_per_byte: 0.8e-9 };

    fn synthetic(system: System) -> Vec<Sample> {
        let mut v = Vec::new();
        for n in [2, 4] {
            for bytes in [57e6, 57e6 / 4.0] {
                v.push(Sample { n, bytes, seconds: TRUE.comm(system, n, bytes, None) });
            }
        }
        v
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1e-12)
    }

    #[test]
    fn fit_recovers_known_parameters() {
        for system in System::ALL {
            let (m, rms) = fit(system, &synthetic(system)).unwrap();
            assert!(close(m.latency_s, TRUE.latency_s), "{system:?} latency {m:?}");
            assert!(close(m.cpu_s_per_byte, TRUE.cpu_s_per_byte), "{system:?} cpu {m:?}");
            assert!(close(m.wire_s_per_byte, TRUE.wire_s_per_byte), "{system:?} wire {m:?}");
            assert!(rms < 1e-9, "{rms}");
        }
    }

    #[test]
    fn fit_drops_a_term_that_would_be_negative() {
        // Times that fall with size ask for a negative per-byte cost; the
        // fit must refuse it rather than project a network that pays back.
        let points: Vec<Sample> = [(2, 1e6, 0.010), (2, 4e6, 0.009), (4, 1e6, 0.011), (4, 4e6, 0.010)]
            .iter()
            .map(|&(n, bytes, seconds)| Sample { n, bytes, seconds })
            .collect();
        let (m, _) = fit(System::Geeps, &points).unwrap();
        assert!(m.latency_s >= 0.0 && m.cpu_s_per_byte >= 0.0 && m.wire_s_per_byte >= 0.0, "{m:?}");
        assert!(m.latency_s > 0.0, "{m:?}");
    }

    #[test]
    fn one_machine_moves_nothing() {
        for system in System::ALL {
            assert_eq!(system.bytes(1, 57e6), 0.0);
            assert_eq!(system.hops(1), 0.0);
            assert_eq!(TRUE.comm(system, 1, 57e6, Some(1.25e9)), 0.0);
            assert_eq!(clock_seconds(&TRUE, system, 1, 57e6, 1.25e9, 0.35, false), 0.35);
            assert_eq!(speedup(1, 0.35, 0.35), 1.0);
        }
    }

    #[test]
    fn bytes_match_the_ring_and_the_sharded_server() {
        assert_eq!(System::Geeps.bytes(2, 100.0), 100.0);
        assert_eq!(System::Geeps.bytes(4, 100.0), 150.0);
        for n in [2, 4, 8, 16, 64] {
            assert!(close(System::Geeps.bytes(n, 57e6), System::Ring.bytes(n, 57e6)), "{n}");
        }
        assert_eq!(System::Ring.hops(4), 6.0);
        assert_eq!(System::Geeps.hops(64), 1.0);
    }

    #[test]
    fn projections_are_monotone() {
        let (s, c) = (57e6, 0.35);
        for overlap in [true, false] {
            let mut last_t = 0.0;
            let mut last_speedup = 0.0;
            for n in MACHINES {
                let slow = clock_seconds(&TRUE, System::Geeps, n, s, 1.25e9, c, overlap);
                let fast = clock_seconds(&TRUE, System::Geeps, n, s, 12.5e9, c, overlap);
                assert!(fast <= slow, "a faster link is slower at {n}");
                assert!(slow >= last_t, "time per clock falls at {n} machines");
                let up = speedup(n, c, slow);
                assert!(up >= last_speedup && up <= n as f64 + 1e-12, "speedup {up} at {n}");
                let no_overlap = clock_seconds(&TRUE, System::Geeps, n, s, 1.25e9, c, false);
                assert!(slow <= no_overlap + 1e-15);
                last_t = slow;
                last_speedup = up;
            }
        }
        // The ring's hops grow with N, so its time per clock must too.
        let ring: Vec<f64> = MACHINES.iter().map(|&n| TRUE.comm(System::Ring, n, s, Some(12.5e9))).collect();
        assert!(ring.windows(2).all(|w| w[1] > w[0]), "{ring:?}");
    }
}
