//! The transport figure: the whole engine's BSP clock exchange with 2 and 4
//! workers, over loopback TCP (one process per worker, beside raw TCP
//! between the same number of processes) and over the in-process transport
//! (one thread per worker, beside threads copying the same bytes). Bytes/s
//! per worker, in + out, medians over repeats. It owns the sweep; it never
//! judges the rates. (geeps-net's `exchange` bench also measures the
//! network transport without the engine.)

use crate::engine_exchange;
use crate::error::Result;
use crate::ranks;
use crate::raw_tcp::{self, Rate};
use crate::results::{mean, median, Calibration, Meta, TransportFigure, TransportRow};
use crate::settings::Settings;

fn rates(v: Vec<Rate>) -> f64 {
    mean(&v.iter().map(|r| r.bytes_per_second).collect::<Vec<_>>())
}

fn row(transport: &str, workers: usize, baseline: &str, base: Vec<f64>, engine: Vec<f64>) -> TransportRow {
    let (b, e) = (median(&base), median(&engine));
    eprintln!(
        "transport: {transport}, {workers} workers: {baseline} {:.0} MB/s, engine {:.0} MB/s ({:.2}x)",
        b / 1e6,
        e / 1e6,
        e / b
    );
    TransportRow {
        transport: transport.into(),
        workers,
        baseline: baseline.into(),
        baseline_bytes_per_second: b,
        engine_bytes_per_second: e,
        ratio: e / b,
    }
}

pub fn run(s: &Settings, calibration: &Calibration) -> Result<TransportFigure> {
    let job = &s.exchange;
    let mut rows = Vec::new();
    for workers in [2usize, 4] {
        let (mut base, mut engine) = (Vec::new(), Vec::new());
        for _ in 0..s.repeats {
            base.push(rates(ranks::run(raw_tcp::ROLE, workers, job, s.limit)?));
            engine.push(rates(ranks::run(engine_exchange::ROLE, workers, job, s.limit)?));
        }
        rows.push(row("loopback TCP", workers, "raw TCP", base, engine));
    }
    for workers in [2usize, 4] {
        let (mut base, mut engine) = (Vec::new(), Vec::new());
        for _ in 0..s.repeats {
            base.push(mean(&engine_exchange::memcpy_threads(workers, job)?));
            engine.push(mean(&engine_exchange::in_process(workers, job)?));
        }
        rows.push(row("in-process", workers, "memcpy threads", base, engine));
    }
    Ok(TransportFigure { meta: Meta::new(s, calibration), table_bytes: job.bytes, clocks: job.rounds, rows })
}
