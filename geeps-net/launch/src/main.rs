//! `geeps-launch -n N -- <program> [args]`: runs N ranks of a geeps program on
//! this machine, like `torchrun --standalone`, hosting the rendezvous the
//! ranks use to find each other's keepers; `geeps-launch --hosts h0,h1,...
//! -- <program> [args]` runs them on those hosts through a remote-exec agent
//! (`ssh` by default), K per host, rank 0 serving the rendezvous on the
//! first host. Either way it prefixes every output line with the rank,
//! forwards SIGINT (Ctrl-C) and SIGTERM to every rank and waits for them to
//! exit (a second signal kills them), and if any rank fails it stops the
//! others and either restarts them all (`--max-restarts`) or exits non-zero.
//! `geeps-launch --serve-rank` is its end on another host
//! (`rank_server.rs`). This file owns the command line and the restart
//! policy; one round of ranks is `generation.rs`'s.

mod blame;
mod generation;
mod hosts;
mod process_group;
mod rank_server;
mod remote;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tokio::signal::unix::{signal as on_signal, SignalKind};

use generation::{Generation, Outcome, RemoteHosts, Signals};

/// Where rank 0 serves the rendezvous of a multi-host launch, unless
/// `--rendezvous` says.
const DEFAULT_RENDEZVOUS_PORT: u16 = 29_500;

#[derive(Parser, Debug)]
#[command(name = "geeps-launch", about = "Run ranks of a geeps program on this machine or on several hosts")]
struct Args {
    /// Number of ranks (processes) to start; with --hosts, at most the
    /// hosts' total, filled host by host (default: that total).
    #[arg(short = 'n', long = "nproc", required_unless_present = "hosts")]
    nproc: Option<usize>,
    /// Run the ranks on these hosts: a file (`NAME[:K] [slots=K]
    /// [max_slots=M] [addr=ADDRESS] [user=USER]` per line, as mpirun's) or a
    /// list `h0,h1:2,node[03-04],...`. NAME is given to the agent; ADDRESS
    /// (default NAME) is where the other hosts reach it; a host listed twice
    /// gets the ranks of both.
    #[arg(long)]
    hosts: Option<String>,
    /// Ranks on each host that does not give its own count.
    #[arg(long, default_value_t = 1, requires = "hosts")]
    ranks_per_host: usize,
    /// The remote-exec agent: its words, then the host (or the host where
    /// `{host}` is written), then one shell command line, as `ssh` takes
    /// it; an agent that takes an argument list ends in `sh -c`, e.g.
    /// `ip netns exec {host} sh -c`.
    #[arg(long, env = "GEEPS_RSH_AGENT", default_value = remote::DEFAULT_AGENT)]
    rsh_agent: String,
    /// `HOST[:PORT]` where rank 0 serves the rendezvous; every host must
    /// reach it (default: the first host's address, port 29500).
    #[arg(long, requires = "hosts")]
    rendezvous: Option<String>,
    /// This program's path on the hosts (default: its path here).
    #[arg(long, requires = "hosts")]
    remote_launcher: Option<String>,
    /// `NAME` or `NAME=VALUE`: a variable every remote rank gets (NAME: its
    /// value here), like mpirun's -x; every GEEPS_* variable set here is
    /// passed on too.
    #[arg(short = 'x', long = "export", requires = "hosts")]
    export: Vec<String>,
    /// Cluster token shared by the ranks (default: a fresh random one).
    #[arg(long)]
    token: Option<String>,
    /// Seconds the ranks have to find each other at start (on one machine;
    /// across hosts rank 0's rendezvous uses the ranks' connect timeout, 60 s).
    #[arg(long, default_value_t = 60)]
    rendezvous_timeout: u64,
    /// How many times all ranks are restarted when one fails (torchrun's
    /// convention). Each restart sees GEEPS_RESTART_COUNT (1, 2, ...) and
    /// should resume from its last checkpoint.
    #[arg(long, default_value_t = 0)]
    max_restarts: u32,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// `HOST[:PORT]` with [`DEFAULT_RENDEZVOUS_PORT`] when it gives none; an
/// IPv6 address goes in brackets (`[fd00::1]:29500`).
fn with_default_port(at: &str) -> String {
    if at.parse::<std::net::SocketAddr>().is_ok() {
        return at.to_string();
    }
    if let Ok(ip) = at.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>() {
        return std::net::SocketAddr::new(ip, DEFAULT_RENDEZVOUS_PORT).to_string();
    }
    match at.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.parse::<u16>().is_ok() => at.to_string(),
        _ => format!("{at}:{DEFAULT_RENDEZVOUS_PORT}"),
    }
}

/// What a multi-host launch needs: the hosts, the ranks on them, the
/// agent, the rendezvous and what each rank is passed.
fn remote_hosts(args: &Args, spec: &str) -> Result<RemoteHosts, String> {
    let hosts = hosts::parse(spec)?;
    let ranks = hosts::layout(&hosts, args.ranks_per_host, args.nproc)?;
    let rendezvous = with_default_port(args.rendezvous.as_deref().unwrap_or(&hosts[0].address));
    let remote_launcher = match &args.remote_launcher {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot tell this program's path ({e}); give --remote-launcher"))?
            .display()
            .to_string(),
    };
    let dir = std::env::current_dir().map_err(|e| format!("cannot tell the current folder: {e}"))?;
    let mut env: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("GEEPS_")).collect();
    for x in &args.export {
        let (name, value) = match x.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => {
                (x.clone(), std::env::var(x).map_err(|_| format!("-x {x}: {x} is not set here; write -x {x}=VALUE"))?)
            }
        };
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    }
    Ok(RemoteHosts {
        hosts,
        ranks,
        agent: args.rsh_agent.clone(),
        rendezvous,
        remote_launcher,
        dir: dir.display().to_string(),
        env,
    })
}

async fn run(args: Args) -> Result<u8, String> {
    let remote = match &args.hosts {
        Some(spec) => Some(remote_hosts(&args, spec)?),
        None => None,
    };
    let world = match (&remote, args.nproc) {
        (Some(r), _) => r.ranks.len(),
        (None, Some(n)) if n >= 1 => n,
        (None, _) => return Err("-n must be at least 1".into()),
    };
    if let Some(r) = &remote {
        eprintln!(
            "geeps-launch: {world} ranks on {} hosts through `{}`; rank 0 serves the rendezvous at {}",
            hosts::hosts_used(&r.ranks),
            r.agent,
            r.rendezvous
        );
    }
    let token = args.token.unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
    // One id for this launch, the same in every generation: what a restarted
    // rank recognises its own snapshots by.
    let run_id = format!("{:016x}", rand::random::<u64>());
    // Listening before any rank starts: a signal that comes early is still forwarded.
    let mut signals = Signals {
        interrupt: on_signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?,
        terminate: on_signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?,
    };
    let mut restart = 0;
    loop {
        let generation = Generation {
            command: &args.command,
            world,
            token: &token,
            run_id: &run_id,
            rendezvous_timeout: Duration::from_secs(args.rendezvous_timeout),
            restart,
            max_restarts: args.max_restarts,
            remote: remote.as_ref(),
        };
        match generation.run(&mut signals).await? {
            Outcome::Succeeded => return Ok(0),
            Outcome::Interrupted { code } => return Ok(code),
            Outcome::Failed { rank, name, what, code } => {
                say_who_failed(rank, &name, &what);
                if restart >= args.max_restarts {
                    if args.max_restarts > 0 {
                        eprintln!("geeps-launch: no restarts are left ({} used); giving up", args.max_restarts);
                    }
                    return Ok(code);
                }
                restart += 1;
                eprintln!(
                    "geeps-launch: all {world} ranks stopped; restarting them (restart {restart} of {})",
                    args.max_restarts
                );
            }
        }
    }
}

/// The one line that says which rank failed and why.
fn say_who_failed(rank: usize, name: &str, what: &str) {
    debug_assert!(name.starts_with(&format!("rank {rank}")));
    eprintln!("geeps-launch: {name} failed: {what}");
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--serve-rank") {
        return rank_server::serve();
    }
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("geeps-launch: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("geeps-launch: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::with_default_port;

    #[test]
    fn the_rendezvous_gets_the_default_port_and_ipv6_its_brackets() {
        assert_eq!(with_default_port("node01"), "node01:29500");
        assert_eq!(with_default_port("node01:7000"), "node01:7000");
        assert_eq!(with_default_port("10.77.0.1"), "10.77.0.1:29500");
        assert_eq!(with_default_port("fd00::1"), "[fd00::1]:29500");
        assert_eq!(with_default_port("[fd00::1]"), "[fd00::1]:29500");
        assert_eq!(with_default_port("[fd00::1]:7000"), "[fd00::1]:7000");
    }
}
