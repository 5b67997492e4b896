//! The sync scenario on the libraries a user would pick instead: PyTorch's
//! gloo `all_reduce` and MPI's `Allreduce` (mpi4py under `mpirun`, over TCP
//! and over shared memory), run through the Python scripts in
//! `scripts/bench/` (compiled in). Each runs only when installed
//! (`scripts/bench-baselines.sh` sets them up); otherwise it is skipped with
//! a message saying why. Across hosts (`GEEPS_BENCH_RANK_EXEC`) gloo's ranks
//! start on their hosts as the engine's do and meet at this host's
//! reachable address, on the interface `GLOO_SOCKET_IFNAME` names; mpirun
//! starts its ranks on the hosts `GEEPS_BENCH_MPI_HOSTS` lists, through
//! the agent and interfaces Open MPI's own `OMPI_MCA_*` variables name;
//! shared memory does not cross hosts. It owns those child processes and
//! kills them on overrun; it never interprets their timings.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::ranks;
use crate::sync_job::{ClockTimes, SyncJob};

const INSTALL: &str = "; scripts/bench-baselines.sh installs it";

/// Hosts of mpirun's ranks across hosts, comma-separated, rank r on the r-th.
const MPI_HOSTS: &str = "GEEPS_BENCH_MPI_HOSTS";

const GLOO: &str = include_str!("../../scripts/bench/sync_gloo.py");
const MPI: &str = include_str!("../../scripts/bench/sync_mpi.py");

/// A baseline outside geeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum External {
    Gloo,
    MpiTcp,
    MpiShm,
}

impl External {
    pub const ALL: [External; 3] = [External::Gloo, External::MpiTcp, External::MpiShm];

    pub fn label(self) -> &'static str {
        match self {
            External::Gloo => "gloo (PyTorch)",
            External::MpiTcp => "MPI over TCP",
            External::MpiShm => "MPI over shared memory",
        }
    }

    /// `Err(why)` when this baseline cannot run here.
    pub fn available(self) -> std::result::Result<(), String> {
        let python = |module: &str| {
            Command::new(python()).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success())
        };
        match self {
            External::Gloo if !python("torch") => Err(format!("PyTorch is not installed{INSTALL}")),
            External::MpiTcp | External::MpiShm if which("mpirun").is_none() => {
                Err(format!("mpirun is not installed{INSTALL}"))
            }
            External::MpiTcp | External::MpiShm if !python("mpi4py, numpy") => {
                Err(format!("mpi4py (or numpy) is not installed{INSTALL}"))
            }
            _ if !ranks::across_hosts() => Ok(()),
            External::Gloo if std::env::var_os("GLOO_SOCKET_IFNAME").is_none() => Err(
                "across hosts gloo needs GLOO_SOCKET_IFNAME, the hosts' interface (eth0 on a namespace cluster)".into(),
            ),
            External::MpiTcp if std::env::var_os(MPI_HOSTS).is_none() => Err(format!(
                "across hosts mpirun needs {MPI_HOSTS}, its ranks' hosts (rank r on the r-th), and Open MPI's \
                 OMPI_MCA_plm_rsh_agent and OMPI_MCA_btl_tcp_if_include where ssh and the default interface do not serve"
            )),
            External::MpiShm => Err("shared memory does not cross hosts".into()),
            _ => Ok(()),
        }
    }

    /// Runs `job` on `world` ranks; one result per rank.
    pub fn run(self, world: usize, job: &SyncJob, limit: Duration) -> Result<Vec<ClockTimes>> {
        let dir = std::env::temp_dir().join(format!("geeps-bench-sync-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let args = [job.bytes.to_string(), job.clocks.to_string()];
        match self {
            External::Gloo => {
                let script = write(&dir, "sync_gloo.py", GLOO)?;
                let port = free_port()?;
                let children = (0..world)
                    .map(|rank| {
                        ranks::rank_command(rank, python())
                            .arg(&script)
                            .args(&args)
                            .env("RANK", rank.to_string())
                            .env("WORLD_SIZE", world.to_string())
                            .env("MASTER_ADDR", ranks::reachable_host())
                            .env("MASTER_PORT", port.to_string())
                            .env("OMP_NUM_THREADS", "1")
                            .stdin(Stdio::null())
                            .stdout(Stdio::piped())
                            .spawn()
                    })
                    .collect::<std::io::Result<Vec<_>>>()?;
                collect(self, children, limit)
            }
            External::MpiTcp | External::MpiShm => {
                let script = write(&dir, "sync_mpi.py", MPI)?;
                let btl = if self == External::MpiTcp { "tcp,self".to_string() } else { shared_memory_btl() + ",self" };
                let mut cmd = Command::new("mpirun");
                // Root runs need the flag; as any other user it is harmless.
                cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", &world.to_string()])
                    .args(["--mca", "pml", "ob1", "--mca", "btl", &btl]);
                match std::env::var(MPI_HOSTS) {
                    Ok(hosts) if ranks::across_hosts() => {
                        let hosts: Vec<&str> = hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).collect();
                        if hosts.len() < world {
                            return Err(BenchError::msg(format!(
                                "{MPI_HOSTS} lists {} hosts; {world} ranks need one each",
                                hosts.len()
                            )));
                        }
                        cmd.args(["-H", &hosts[..world].join(",")]);
                    }
                    _ => {
                        cmd.args(["--mca", "btl_tcp_if_include", "lo"]);
                    }
                }
                cmd.arg(python())
                    .arg(&script)
                    .args(&args)
                    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped());
                collect(self, vec![cmd.spawn()?], limit)
            }
        }
    }
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}

/// Open MPI 5 names its shared-memory transport `sm`, earlier ones `vader`.
fn shared_memory_btl() -> String {
    let info = Command::new("ompi_info").output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if info.is_ok_and(|i| i.contains("MCA btl: vader")) {
        "vader".into()
    } else {
        "sm".into()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits for `children` (killing them past `limit`) and parses every JSON
/// line they printed, one per rank.
fn collect(system: External, mut children: Vec<Child>, limit: Duration) -> Result<Vec<ClockTimes>> {
    let readers: Vec<_> = children
        .iter_mut()
        .map(|c| {
            let mut out = c.stdout.take().expect("piped");
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut out, &mut s);
                s
            })
        })
        .collect();
    let deadline = Instant::now() + limit;
    let mut failed = None;
    for c in children.iter_mut() {
        loop {
            match c.try_wait()? {
                Some(status) if !status.success() => failed = Some(status.to_string()),
                Some(_) => {}
                None if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                None => failed = Some(format!("did not finish within {} s", limit.as_secs())),
            }
            break;
        }
        if failed.is_some() {
            break;
        }
    }
    if let Some(why) = failed {
        for c in children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        return Err(BenchError::msg(format!("{}: {why}; see its output above", system.label())));
    }
    let mut results = Vec::new();
    for r in readers {
        let out = r.join().map_err(|_| BenchError::msg("output reader panicked"))?;
        for line in out.lines().filter(|l| l.starts_with('{')) {
            results.push(
                serde_json::from_str(line)
                    .map_err(|e| BenchError::msg(format!("{}: bad result line ({e}): {line}", system.label())))?,
            );
        }
    }
    Ok(results)
}
