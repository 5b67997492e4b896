//! The smallest geeps program (the paper's "hello world"): one parameter
//! table with a single row, shared by `--workers` in-process workers, each on
//! its own thread. Every clock each worker reads the row, adds 1.0 to every
//! value and ends its clock. Under BSP a worker at clock `c` sees every update
//! of clocks `< c`, so at least `c * workers` in every value (a worker that
//! joins late may also see the first clock of faster ones: never more than
//! `(c + 1) * workers`); the program prints what each worker read and exits
//! non-zero if any value breaks that bound.
//!
//! ```text
//! cargo run --release --example helloworld -- --workers 4 --clocks 5
//! ```

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;

use clap::Parser;
use geeps::{keys, Config, Geeps, InProcessCluster, Slack, Stats, Transport};

/// A narrow row keeps the printout readable; real trainers use the default 128.
const ROW_WIDTH: usize = 4;

#[derive(Parser, Debug)]
#[command(about = "geeps hello world: N workers add 1.0 to a shared row every clock (BSP)")]
struct Args {
    /// In-process workers, one thread each.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Clocks (iterations) each worker runs.
    #[arg(long, default_value_t = 5)]
    clocks: u32,
}

/// What one worker read at each clock, and its geeps counters.
struct WorkerLog {
    reads: Vec<Vec<f32>>,
    stats: Stats,
}

fn worker(transport: Arc<dyn Transport>, clocks: u32) -> geeps::Result<WorkerLog> {
    let mut builder = Geeps::builder(Config::default().with_row_width(ROW_WIDTH).with_device_memory(1 << 20));
    let table = builder.parameter_table("hello", 1);
    builder.transport(transport);
    let ps = builder.build()?;
    let row = keys(table, 0..1);

    // The virtual iteration: nothing runs, the calls are only recorded so that
    // geeps can build its indexes and prefetch the real calls below.
    let read = ps.virtual_read(&row, Slack::BSP)?;
    let pre_update = ps.virtual_pre_update(&row)?;
    ps.virtual_update(pre_update)?;
    ps.virtual_post_read(read)?;
    ps.virtual_table_clock(table)?;
    ps.finish_virtual_iteration()?;

    let mut reads = Vec::with_capacity(clocks as usize);
    for _ in 0..clocks {
        let buf = ps.read(read)?;
        reads.push(buf.as_slice()?.to_vec());
        let mut delta = ps.pre_update(pre_update)?;
        delta.as_mut_slice()?.fill(1.0);
        delta.update()?;
        buf.post()?;
        ps.table_clock(table)?;
    }
    let stats = ps.stats();
    ps.shutdown()?;
    Ok(WorkerLog { reads, stats })
}

fn run(args: &Args) -> Result<(), String> {
    let cluster = InProcessCluster::new(args.workers).map_err(|e| e.to_string())?;
    let mut threads = Vec::with_capacity(args.workers);
    for rank in 0..args.workers {
        let transport = cluster.transport(rank).map_err(|e| e.to_string())?;
        let clocks = args.clocks;
        let t = thread::Builder::new()
            .name(format!("worker-{rank}"))
            .spawn(move || worker(transport, clocks))
            .map_err(|e| format!("cannot start worker {rank}: {e}"))?;
        threads.push(t);
    }
    // Join every worker before judging, so one failure does not hide another.
    let logs: Vec<Result<WorkerLog, String>> = threads
        .into_iter()
        .enumerate()
        .map(|(rank, t)| match t.join() {
            Ok(Ok(log)) => Ok(log),
            Ok(Err(e)) => Err(format!("worker {rank}: {e}")),
            Err(_) => Err(format!("worker {rank} panicked")),
        })
        .collect();

    let mut wrong = 0;
    for (rank, log) in logs.iter().enumerate() {
        let log = log.as_ref().map_err(Clone::clone)?;
        for (clock, values) in log.reads.iter().enumerate() {
            // Every worker adds 1.0 per clock; BSP makes all clocks < c visible.
            let floor = (clock * args.workers) as f32;
            let ceiling = floor + args.workers as f32;
            let ok = values.iter().all(|v| *v >= floor && *v <= ceiling);
            wrong += usize::from(!ok);
            let mark = if ok { String::new() } else { format!("   <- expected {floor} to {ceiling}") };
            println!("worker {rank} clock {clock}: read {values:?}{mark}");
        }
        // No compute between the calls, so the stall fraction says nothing here.
        println!(
            "worker {rank}: prefetch hits {}, slow-path calls {}",
            log.stats.prefetch_hits, log.stats.slow_path_calls
        );
    }
    if wrong > 0 {
        return Err(format!("{wrong} read(s) missed updates that BSP guarantees"));
    }
    println!("ok: at every clock c every worker saw all updates of clocks < c (c x {})", args.workers);
    Ok(())
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    // Colour only for a person at a terminal, and never under NO_COLOR.
    let ansi = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).init();
    let args = Args::parse();
    if args.workers == 0 {
        eprintln!("helloworld: --workers must be at least 1");
        return ExitCode::FAILURE;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("helloworld: {e}");
            ExitCode::FAILURE
        }
    }
}
