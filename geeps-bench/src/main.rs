//! geeps-bench: the GeePS paper's evaluation on this machine. GPU compute is
//! emulated (a layer's compute is a sleep of its scaled duration); every
//! geeps mechanism runs for real on the host device, across worker
//! processes on loopback. Every figure is a ratio against a baseline measured
//! in the same run. Results go to `<out>/<figure>.json` and `<figure>.png`.
//!
//! ```text
//! geeps-bench all [--quick] [--out results]   # every figure
//! geeps-bench stall|memory|large|transport|sync|scaling [--quick] [--repeats N] [--out results]
//! geeps-bench plot [--out results]            # redraw the PNGs from the JSON
//! geeps-bench check [--out results]           # validate JSON and PNGs
//! geeps-bench tables [--out results]          # the figures as Markdown tables
//! ```
//!
//! This file owns the command line and the rank dispatch; it never measures.

mod calibrate;
mod check;
mod device;
mod emulated_gpu;
mod engine_exchange;
mod engine_sync;
mod error;
mod external;
mod large;
mod memory;
mod plot;
mod probe;
mod profile;
mod ranks;
mod raw_tcp;
mod results;
mod ring;
mod scaling;
mod settings;
mod socket_bytes;
mod stall;
mod summary;
mod sync;
mod sync_job;
mod tables;
mod train_job;
mod trainer;
mod transport;
mod workload;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};

use crate::error::{BenchError, Result};
use crate::ranks::RankEnv;
use crate::results::{Calibration, Paths};
use crate::settings::Settings;

#[derive(Parser)]
#[command(name = "geeps-bench", about = "The GeePS paper's evaluation on this machine, with plots")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// A short run (under two minutes) that proves the suite works; not figures.
    #[arg(long)]
    quick: bool,
    /// Results folder.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Worker processes (the figures use 4).
    #[arg(long, default_value_t = settings::WORKERS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    workers: usize,
    /// Run only the stall configurations whose "model config slack" label,
    /// or the memory budgets whose "NN%" label, contains this (for
    /// diagnosis; the figure is then incomplete).
    #[arg(long)]
    filter: Option<String>,
    /// Use this host factor instead of the one measured from raw TCP (to
    /// compare runs on the same emulated machine).
    #[arg(long)]
    host_factor: Option<f64>,
    /// Where the workers keep their rows: `host` (the figures) or `cuda`
    /// (GPU 0; under the emulated driver a functional check, not figures).
    #[arg(long, value_enum, default_value_t = device::BenchDevice::Host)]
    device: device::BenchDevice,
    /// Table size of the sync scenario in MB (default: GoogLeNet's 57 MB;
    /// 4 MB with --quick).
    #[arg(long)]
    sync_mb: Option<f64>,
    /// Numbers of ranks of the sync scenario, comma-separated (default 2,4;
    /// across a namespace cluster, at most its hosts).
    #[arg(long, value_delimiter = ',')]
    sync_ranks: Option<Vec<usize>>,
    /// Compute per clock of the scaling projection in ms (default: GoogLeNet's
    /// mini-batch on the paper's GPU, 355 ms).
    #[arg(long)]
    compute_ms: Option<f64>,
    /// Runs of every configuration, interleaved; each figure is their median
    /// (default 3, 1 with --quick). More runs narrow the spread on a shared machine.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100))]
    repeats: Option<usize>,
}

#[derive(Args, Clone)]
struct OutArgs {
    /// Results folder.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Every figure: transport, sync, scaling, stall (Fig. 14), memory (Fig. 12), large models (Fig. 13).
    All(RunArgs),
    /// One BSP clock of a table through the engine at 2 and 4 ranks (f32 and
    /// bf16 wire), beside a ring all-reduce over raw TCP (and gloo and MPI
    /// when installed).
    Sync(RunArgs),
    /// A per-clock cost model fitted to sync runs at 2 and 4 ranks, projected
    /// to 64 machines on 10 and 100 Gb/s links.
    Scaling(RunArgs),
    /// BSP clock exchange: engine vs raw TCP and vs memcpy threads.
    Transport(RunArgs),
    /// Figure 14: stall time of GeePS, GeePS-single-table and CPU-PS at slack 0, 1, inf.
    Stall(RunArgs),
    /// Figure 12: throughput as the device budget shrinks.
    Memory(RunArgs),
    /// Figure 13: models several times the device budget.
    Large(RunArgs),
    /// Redraws every PNG from the JSON in the results folder.
    Plot(OutArgs),
    /// Validates the results folder (well-formed JSON and PNGs; never timings).
    Check(OutArgs),
    /// Prints the results folder's figures as Markdown tables.
    Tables(OutArgs),
}

fn rank_main(env: RankEnv) -> Result<()> {
    match env.role.as_str() {
        train_job::ROLE => ranks::report(&train_job::rank_main(&env)?),
        raw_tcp::ROLE => ranks::report(&raw_tcp::rank_main(&env)?),
        engine_exchange::ROLE => ranks::report(&engine_exchange::rank_main(&env)?),
        engine_sync::ROLE | engine_sync::ROLE_BF16 | engine_sync::ROLE_BF16_BOTH | engine_sync::ROLE_SHM => {
            ranks::report(&engine_sync::rank_main(&env)?)
        }
        ring::ROLE => ranks::report(&ring::rank_main(&env)?),
        other => Err(BenchError::msg(format!("unknown rank role `{other}`"))),
    }
}

fn transport(s: &Settings, c: &Calibration, paths: &Paths) -> Result<()> {
    let f = transport::run(s, c)?;
    results::write(&paths.json("transport"), &f)?;
    plot::transport(&f, &paths.png("transport"))?;
    summary::transport(&f);
    Ok(())
}

fn sync(s: &Settings, c: &Calibration, paths: &Paths) -> Result<()> {
    let f = sync::run(s, c)?;
    results::write(&paths.json("sync"), &f)?;
    plot::sync(&f, &paths.png("sync"))?;
    summary::sync(&f);
    Ok(())
}

fn scaling(s: &Settings, c: &Calibration, paths: &Paths) -> Result<()> {
    let f = scaling::run(s, c)?;
    results::write(&paths.json("scaling"), &f)?;
    plot::scaling(&f, &paths.png("scaling"))?;
    summary::scaling(&f);
    Ok(())
}

fn stall(s: &Settings, c: &Calibration, paths: &Paths) -> Result<()> {
    let f = stall::run(s, c)?;
    results::write(&paths.json("stall"), &f)?;
    plot::stall(&f, &paths.png("stall"))?;
    summary::stall(&f);
    Ok(())
}

fn memory(s: &Settings, c: &Calibration, paths: &Paths) -> Result<()> {
    let f = memory::run(s, c)?;
    results::write(&paths.json("memory"), &f)?;
    plot::memory(&f, &paths.png("memory"))?;
    summary::memory(&f);
    Ok(())
}

fn large(s: &Settings, c: &Calibration, paths: &Paths) -> Result<()> {
    let f = large::run(s, c)?;
    results::write(&paths.json("large"), &f)?;
    plot::large(&f, &paths.png("large"))?;
    summary::large(&f);
    Ok(())
}

type Figure = fn(&Settings, &Calibration, &Paths) -> Result<()>;

/// The run's settings: the defaults (full or quick) with what the command line overrides.
fn settings_of(args: &RunArgs) -> Result<Settings> {
    if let Some(h) = args.host_factor.filter(|h| !(h.is_finite() && *h > 0.0)) {
        return Err(BenchError::msg(format!("--host-factor {h}: give a positive number")));
    }
    let mut s = Settings {
        filter: args.filter.clone(),
        host_factor: args.host_factor,
        ..Settings::new(args.quick, args.workers)
    };
    if let Some(mb) = args.sync_mb {
        if !(mb.is_finite() && mb * 1e6 >= (workload::ROW_WIDTH * 4) as f64) {
            return Err(BenchError::msg(format!("--sync-mb {mb}: give a size of at least one 512-byte row")));
        }
        s.sync.bytes = (mb * 1e6) as usize;
    }
    if let Some(worlds) = &args.sync_ranks {
        if worlds.is_empty() || worlds.iter().any(|&w| w < 2) {
            return Err(BenchError::msg(format!("--sync-ranks {worlds:?}: give numbers of ranks of at least 2")));
        }
        s.sync_worlds = worlds.clone();
    }
    if let Some(repeats) = args.repeats {
        s.repeats = repeats;
    }
    if let Some(ms) = args.compute_ms {
        if !(ms.is_finite() && ms > 0.0) {
            return Err(BenchError::msg(format!("--compute-ms {ms}: give a positive number of milliseconds")));
        }
        s.scaling_compute_ms = Some(ms);
    }
    Ok(s)
}

fn run_figures(args: &RunArgs, figures: &[Figure], sync_only: bool) -> Result<()> {
    let s = settings_of(args)?;
    let start = Instant::now();
    args.device.export();
    if let Some(caveat) = args.device.caveat(s.workers) {
        println!("{caveat}");
    }
    let paths = Paths { dir: args.out.clone() };
    std::fs::create_dir_all(&paths.dir)?;
    let c = calibrate::run(&s, calibration_ranks(&s, sync_only, ranks::across_hosts()))?;
    for figure in figures {
        figure(&s, &c, &paths)?;
    }
    println!("results in {} ({:.0} s)", paths.dir.display(), start.elapsed().as_secs_f64());
    if let Some(caveat) = args.device.caveat(s.workers) {
        println!("{caveat}");
    }
    Ok(())
}

/// The calibration's processes: `workers`; but rank r runs on host r, and
/// across hosts a run of the sync figure alone may have no more hosts than
/// its largest world.
fn calibration_ranks(s: &Settings, sync_only: bool, across_hosts: bool) -> usize {
    match s.sync_worlds.iter().max() {
        Some(&most) if sync_only && across_hosts => s.workers.min(most),
        _ => s.workers,
    }
}

/// Redraws the PNG of every figure whose JSON the folder holds (a folder of
/// one scenario's run holds only that one); none at all is an error.
fn redraw(dir: &Path) -> Result<()> {
    let paths = Paths { dir: dir.to_path_buf() };
    let mut drawn = 0;
    let mut draw = |name: &str, plot: &dyn Fn(&Path, &Path) -> Result<()>| -> Result<()> {
        let json = paths.json(name);
        if json.exists() {
            plot(&json, &paths.png(name))?;
            drawn += 1;
        }
        Ok(())
    };
    draw("transport", &|j, p| plot::transport(&results::read(j)?, p))?;
    draw("stall", &|j, p| plot::stall(&results::read(j)?, p))?;
    draw("memory", &|j, p| plot::memory(&results::read(j)?, p))?;
    draw("large", &|j, p| plot::large(&results::read(j)?, p))?;
    draw("sync", &|j, p| plot::sync(&results::read(j)?, p))?;
    draw("scaling", &|j, p| plot::scaling(&results::read(j)?, p))?;
    if drawn == 0 {
        return Err(BenchError::msg(format!("{}: no figure's JSON to draw from", dir.display())));
    }
    Ok(())
}

fn main() -> ExitCode {
    // The memory sweep runs single-buffered budgets on purpose; the plan of
    // each is in the results, so the planner's warning about it is not logged.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,geeps_core::plan::planner=error"));
    // Colour only for a person at a terminal, and never under NO_COLOR.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    let result = match RankEnv::from_env() {
        Some(env) => env.and_then(rank_main),
        None => match Cli::parse().command {
            Command::All(a) => run_figures(&a, &[transport, sync, scaling, stall, memory, large], false),
            Command::Sync(a) => run_figures(&a, &[sync], true),
            Command::Scaling(a) => run_figures(&a, &[scaling], false),
            Command::Transport(a) => run_figures(&a, &[transport], false),
            Command::Stall(a) => run_figures(&a, &[stall], false),
            Command::Memory(a) => run_figures(&a, &[memory], false),
            Command::Large(a) => run_figures(&a, &[large], false),
            Command::Plot(a) => redraw(&a.out),
            Command::Tables(a) => tables::run(&a.out),
            Command::Check(a) => check::run(&a.out).map(|()| println!("{}: results are well-formed", a.out.display())),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("geeps-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(line: &[&str]) -> std::result::Result<RunArgs, String> {
        let cli = Cli::try_parse_from([&["geeps-bench", "sync"], line].concat()).map_err(|e| e.to_string())?;
        match cli.command {
            Command::Sync(a) => Ok(a),
            _ => Err("not the sync command".into()),
        }
    }

    #[test]
    fn calibration_ranks_fit_the_hosts_of_a_sync_run_across_hosts() {
        let two = settings_of(&run_args(&["--sync-ranks", "2"]).unwrap()).unwrap();
        assert_eq!(two.workers, 4);
        // Across hosts, a sync run of 2 ranks may have 2 hosts only.
        assert_eq!(calibration_ranks(&two, true, true), 2);
        // On one host, or with the other figures (which need `workers` hosts), the default.
        assert_eq!(calibration_ranks(&two, true, false), 4);
        assert_eq!(calibration_ranks(&two, false, true), 4);
        let eight = settings_of(&run_args(&["--sync-ranks", "2,8"]).unwrap()).unwrap();
        assert_eq!(calibration_ranks(&eight, true, true), 4);
    }

    #[test]
    fn repeats_default_per_mode_and_are_overridden_within_bounds() {
        assert_eq!(settings_of(&run_args(&[]).unwrap()).unwrap().repeats, 3);
        assert_eq!(settings_of(&run_args(&["--quick"]).unwrap()).unwrap().repeats, 1);
        assert_eq!(settings_of(&run_args(&["--repeats", "7"]).unwrap()).unwrap().repeats, 7);
        assert_eq!(settings_of(&run_args(&["--quick", "--repeats", "2"]).unwrap()).unwrap().repeats, 2);
        for bad in ["0", "101", "three"] {
            let e = run_args(&["--repeats", bad]).err().unwrap_or_default();
            assert!(e.contains("--repeats"), "--repeats {bad}: {e}");
        }
    }

    #[test]
    fn sizes_and_factors_out_of_range_are_refused_with_what_to_give() {
        let e = |line: &[&str]| settings_of(&run_args(line).unwrap()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e(&["--sync-mb", "0"]).contains("give a size of at least one 512-byte row"));
        assert!(e(&["--host-factor=-1"]).contains("give a positive number"));
        assert!(e(&["--compute-ms", "0"]).contains("give a positive number of milliseconds"));
        assert_eq!(settings_of(&run_args(&["--sync-mb", "8"]).unwrap()).unwrap().sync.bytes, 8_000_000);
    }
}
