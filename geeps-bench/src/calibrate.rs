//! Measures this machine's network the way the figures use it: raw TCP
//! between `Settings::workers` processes (4 by default) on loopback, or
//! across a cluster's hosts (one per host, no more than the run uses), and
//! derives the host factor that stretches emulated compute so each worker
//! has the paper's ratio of compute time to network time. It never looks at
//! geeps' own speed: the factor is fixed before geeps runs, from the best of
//! the repeats.

use crate::error::Result;
use crate::ranks;
use crate::raw_tcp::{self, Rate};
use crate::results::{mean, Calibration};
use crate::settings::Settings;

/// The paper's network per machine: 12 Gbit/s measured (iperf), each way.
pub const PAPER_BYTES_PER_SECOND: f64 = 2.0 * 12e9 / 8.0;

/// Measures with `processes` ranks (`Settings::workers`, unless the run's hosts are fewer).
pub fn run(s: &Settings, processes: usize) -> Result<Calibration> {
    let mut samples = Vec::with_capacity(s.repeats);
    for _ in 0..s.repeats {
        let rates: Vec<Rate> = ranks::run(raw_tcp::ROLE, processes, &s.calibration, s.limit)?;
        samples.push(mean(&rates.iter().map(|r| r.bytes_per_second).collect::<Vec<_>>()));
    }
    // The best repeat: load from elsewhere only ever lowers it, and a lower
    // rate would stretch compute and flatter geeps.
    let raw = samples.iter().copied().fold(0.0, f64::max);
    let c = Calibration {
        raw_tcp_samples: samples,
        raw_tcp_bytes_per_second: raw,
        paper_bytes_per_second: PAPER_BYTES_PER_SECOND,
        host_factor: s.host_factor.unwrap_or(PAPER_BYTES_PER_SECOND / raw),
    };
    if let Some(h) = s.host_factor {
        eprintln!("calibration: host factor {h:.2} as given (raw TCP still measured: {:.0} MB/s)", raw / 1e6);
        return Ok(c);
    }
    eprintln!(
        "calibration: raw TCP {:.0} MB/s per rank ({} processes) vs the paper's {:.0} MB/s: host factor {:.2}",
        raw / 1e6,
        processes,
        PAPER_BYTES_PER_SECOND / 1e6,
        c.host_factor
    );
    Ok(c)
}
