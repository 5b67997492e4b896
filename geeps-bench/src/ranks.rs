//! Runs a job on N worker processes: this binary re-run as ranks, each told
//! its role, rank and job through the environment, meeting at a rendezvous
//! served here. Each rank prints one JSON line with its result. With
//! `GEEPS_BENCH_RANK_EXEC` (`ip netns exec geeps-h{rank}`) rank r runs
//! through that command, on a host of a namespace cluster
//! (`scripts/netns-cluster`); the rendezvous then listens on
//! `GEEPS_BENCH_RENDEZVOUS_HOST`, an address of this host the ranks reach,
//! with a fresh token, and the ranks listen where they reach it. It owns
//! the child processes and kills the ones it started when they overrun; it
//! never interprets what a rank measured.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{BenchError, Result};

const ROLE: &str = "GEEPS_BENCH_ROLE";
const RANK: &str = "GEEPS_BENCH_RANK";
const WORLD: &str = "GEEPS_BENCH_WORLD";
const SERVER: &str = "GEEPS_BENCH_SERVER";
const JOB: &str = "GEEPS_BENCH_JOB";
const TOKEN: &str = "GEEPS_BENCH_TOKEN";
const RANK_EXEC: &str = "GEEPS_BENCH_RANK_EXEC";
const RENDEZVOUS_HOST: &str = "GEEPS_BENCH_RENDEZVOUS_HOST";

/// `program` as rank `rank` runs it: on its host through
/// `GEEPS_BENCH_RANK_EXEC` when ranks run across hosts, else here.
pub fn rank_command(rank: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let exec = std::env::var(RANK_EXEC).unwrap_or_default();
    let words: Vec<String> = exec.replace("{rank}", &rank.to_string()).split_whitespace().map(String::from).collect();
    match words.split_first() {
        Some((exec, args)) => {
            let mut c = Command::new(exec);
            c.args(args).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// The address of this host that the ranks reach (`GEEPS_BENCH_RENDEZVOUS_HOST`; loopback by default).
pub fn reachable_host() -> String {
    std::env::var(RENDEZVOUS_HOST).unwrap_or_else(|_| "127.0.0.1".into())
}

/// Whether ranks run on the hosts of a cluster (`GEEPS_BENCH_RANK_EXEC`)
/// rather than as processes of this one.
pub fn across_hosts() -> bool {
    std::env::var_os(RANK_EXEC).is_some_and(|v| !v.is_empty())
}

/// What a rank process was asked to do.
pub struct RankEnv {
    pub role: String,
    pub rank: usize,
    pub world: usize,
    pub server: String,
    pub job: String,
    /// The cluster's token (empty on one host).
    pub token: String,
}

/// The congestion control `GEEPS_TCP_CONGESTION` names for the engine's
/// connections and the bench's own ring (gloo and MPI keep the system's).
pub fn tcp_congestion() -> Option<String> {
    std::env::var("GEEPS_TCP_CONGESTION").ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// The stripes per keeper `GEEPS_STRIPES` gives the engine, to compare them
/// (the library's own default otherwise).
pub fn stripes() -> Option<usize> {
    std::env::var("GEEPS_STRIPES").ok().and_then(|v| v.trim().parse().ok())
}

/// The send window (in stripes) `GEEPS_SEND_WINDOW` gives the engine, or
/// the library's default.
pub fn send_window() -> usize {
    std::env::var("GEEPS_SEND_WINDOW")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(geeps::net::NetOptions::default().send_window)
}

/// Gives one of the bench's own ring sockets [`tcp_congestion`], as the engine's get it.
pub fn tune_socket(s: &std::net::TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    #[cfg(target_os = "linux")]
    if let Some(name) = tcp_congestion() {
        socket2::SockRef::from(s).set_tcp_congestion(name.as_bytes())?;
    }
    Ok(())
}

impl RankEnv {
    /// Joins the rank's cluster: keepers on loopback, found through the
    /// parent's rendezvous.
    pub fn join_cluster(&self) -> Result<geeps::net::NetCluster> {
        self.join_cluster_with(geeps::net::WireEncoding::F32, geeps::net::WireEncoding::F32, false)
    }

    /// [`RankEnv::join_cluster`], sending update deltas as `wire` says and
    /// publications as `publish` does, and
    /// through shared memory between these same-host ranks when `shm` (the
    /// other scenarios keep TCP, so their figures stay about the network).
    pub fn join_cluster_with(
        &self,
        wire: geeps::net::WireEncoding,
        publish: geeps::net::WireEncoding,
        shm: bool,
    ) -> Result<geeps::net::NetCluster> {
        use geeps::net::{Addresses, ClusterSpec, NetCluster, NetOptions};
        let addresses = Addresses::Rendezvous { server: self.server.clone(), hosted_by_rank0: false };
        let mut options = NetOptions::default().with_wire(wire).with_publish_wire(publish).with_shared_memory(shm);
        // Stripes per keeper, to compare them (the library's own default otherwise).
        if let Some(stripes) = stripes() {
            options = options.with_stripes(stripes);
        }
        if let Some(name) = tcp_congestion() {
            options = options.with_tcp_congestion(name);
        }
        // The rings' size, to compare sizes (the library's own default otherwise).
        if let Some(bytes) = std::env::var("GEEPS_SHM_RING_BYTES").ok().and_then(|v| v.trim().parse().ok()) {
            options = options.with_shm_ring_bytes(bytes);
        }
        let spec = ClusterSpec::new(self.rank, self.world, addresses, options.with_token(self.token.clone()));
        // Across hosts a keeper listens where it reaches the rendezvous.
        let spec = if across_hosts() { spec } else { spec.with_listen("127.0.0.1") };
        Ok(NetCluster::start(spec)?)
    }

    /// The address this rank listens on: loopback, or across hosts the one
    /// it reaches the rendezvous from (no packet is sent).
    pub fn listen_host(&self) -> Result<String> {
        if !across_hosts() {
            return Ok("127.0.0.1".into());
        }
        let probe = std::net::UdpSocket::bind("0.0.0.0:0")?;
        probe.connect(&self.server)?;
        Ok(probe.local_addr()?.ip().to_string())
    }

    /// `Some` when this process was started as a rank.
    pub fn from_env() -> Option<Result<Self>> {
        let role = std::env::var(ROLE).ok()?;
        let get = |k: &str| std::env::var(k).map_err(|_| BenchError::msg(format!("rank started without {k}")));
        let num =
            |k: &str| -> Result<usize> { get(k)?.parse().map_err(|_| BenchError::msg(format!("{k} is not a number"))) };
        let token = std::env::var(TOKEN).unwrap_or_default();
        Some((|| {
            Ok(RankEnv { role, rank: num(RANK)?, world: num(WORLD)?, server: get(SERVER)?, job: get(JOB)?, token })
        })())
    }

    pub fn job<J: DeserializeOwned>(&self) -> Result<J> {
        serde_json::from_str(&self.job).map_err(|e| BenchError::msg(format!("bad job for role {}: {e}", self.role)))
    }
}

/// 16 random bytes in hex.
fn fresh_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Serves one rendezvous of `world` ranks with `token` on a loopback port
/// (or `GEEPS_BENCH_RENDEZVOUS_HOST`'s), in a thread.
fn rendezvous(world: usize, token: String, timeout: Duration) -> Result<String> {
    let host = reachable_host();
    let listener = std::net::TcpListener::bind((host.as_str(), 0))
        .map_err(|e| BenchError::msg(format!("rendezvous on {host} ({RENDEZVOUS_HOST}): {e}")))?;
    let addr = listener.local_addr()?.to_string();
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("bench-rendezvous".into()).spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async move {
            let Ok(l) = tokio::net::TcpListener::from_std(listener) else { return };
            if let Err(e) = geeps::net::rendezvous::serve(l, world, token, timeout).await {
                eprintln!("geeps-bench: rendezvous: {e}");
            }
        })
    })?;
    Ok(addr)
}

fn kill_all(children: &mut [Option<Child>]) {
    for c in children.iter_mut().flatten() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Runs `job` as `role` on `world` ranks and returns each rank's result, in
/// rank order. Fails (killing the ranks) if one fails or all overrun `limit`.
pub fn run<J: Serialize, R: DeserializeOwned>(role: &str, world: usize, job: &J, limit: Duration) -> Result<Vec<R>> {
    // Keepers beyond loopback need a token.
    let token = if across_hosts() { fresh_token()? } else { String::new() };
    let server = rendezvous(world, token.clone(), limit)?;
    let exe = std::env::current_exe()?;
    let job = serde_json::to_string(job).map_err(|e| BenchError::msg(format!("job: {e}")))?;
    let mut children: Vec<Option<Child>> = Vec::with_capacity(world);
    for rank in 0..world {
        let spawned = rank_command(rank, &exe)
            .env(TOKEN, &token)
            .env(ROLE, role)
            .env(RANK, rank.to_string())
            .env(WORLD, world.to_string())
            .env(SERVER, &server)
            .env(JOB, &job)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        match spawned {
            Ok(c) => children.push(Some(c)),
            Err(e) => {
                kill_all(&mut children);
                return Err(e.into());
            }
        }
    }
    gather(role, children, limit)
}

/// Waits for the spawned ranks and reads their results. A rank that fails
/// while the others run stops them all at once: they would otherwise wait
/// for it at the rendezvous or in the job until their own timeouts, and
/// then report that wait instead of its failure.
fn gather<R: DeserializeOwned>(role: &str, mut children: Vec<Option<Child>>, limit: Duration) -> Result<Vec<R>> {
    let world = children.len();
    // Read every rank's stdout on its own thread so no pipe fills up.
    let (tx, rx) = mpsc::channel();
    for (rank, child) in children.iter_mut().enumerate() {
        let mut out = child.as_mut().and_then(|c| c.stdout.take()).expect("piped above");
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            let _ = tx.send((rank, s));
        });
    }
    drop(tx);
    let deadline = Instant::now() + limit;
    let mut outputs: Vec<Option<String>> = vec![None; world];
    for _ in 0..world {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((rank, s)) => {
                outputs[rank] = Some(s);
                if let Some(status) = children[rank].as_mut().and_then(exit_status) {
                    if !status.success() {
                        kill_all(&mut children);
                        return Err(BenchError::msg(format!(
                            "{role} rank {rank} failed ({status}) while the other ranks ran; see its log above"
                        )));
                    }
                }
            }
            Err(_) => {
                kill_all(&mut children);
                return Err(BenchError::msg(format!("{role} ranks did not finish within {} s", limit.as_secs())));
            }
        }
    }
    let mut results = Vec::with_capacity(world);
    for (rank, child) in children.iter_mut().enumerate() {
        let status = child.take().expect("spawned").wait()?;
        if !status.success() {
            kill_all(&mut children);
            return Err(BenchError::msg(format!("{role} rank {rank} failed ({status}); see its log above")));
        }
        let out = outputs[rank].take().unwrap_or_default();
        let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or("");
        let r = serde_json::from_str(line)
            .map_err(|e| BenchError::msg(format!("{role} rank {rank} printed no result ({e}): {out:?}")))?;
        results.push(r);
    }
    Ok(results)
}

/// The status of a rank whose output has ended: it exits right after, so
/// this waits a moment for it. `None` for one that still runs (it closed
/// its output itself), which `gather` then waits for as any other.
fn exit_status(child: &mut Child) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            _ => return None,
        }
    }
}

/// Prints a rank's result as the JSON line `run` reads.
pub fn report<R: Serialize>(result: &R) -> Result<()> {
    let line = serde_json::to_string(result).map_err(|e| BenchError::msg(format!("result: {e}")))?;
    println!("{line}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(script: &str) -> Option<Child> {
        Some(Command::new("sh").args(["-c", script]).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap())
    }

    #[test]
    fn a_rank_that_fails_stops_the_others_and_is_named() {
        // Rank 0 would run for the whole limit; rank 1 fails at once.
        let children = vec![spawn("sleep 60; echo '{}'"), spawn("exit 3")];
        let err = gather::<serde_json::Value>("test", children, Duration::from_secs(120)).unwrap_err().to_string();
        assert!(err.contains("test rank 1 failed") && err.contains("while the other ranks ran"), "{err}");
    }

    #[test]
    fn ranks_that_finish_give_their_results_in_rank_order() {
        let children = vec![spawn("sleep 0.2; echo '{\"rank\": 0}'"), spawn("echo '{\"rank\": 1}'")];
        let results = gather::<serde_json::Value>("test", children, Duration::from_secs(60)).unwrap();
        assert_eq!(results, vec![serde_json::json!({"rank": 0}), serde_json::json!({"rank": 1})]);
    }

    #[test]
    fn a_rank_that_prints_no_result_is_named() {
        let children = vec![spawn("echo '{}'"), spawn("echo nothing")];
        let err = gather::<serde_json::Value>("test", children, Duration::from_secs(60)).unwrap_err().to_string();
        assert!(err.contains("test rank 1 printed no result"), "{err}");
    }
}
