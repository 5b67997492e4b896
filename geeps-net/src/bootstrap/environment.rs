//! Works out this process's rank, the world size and where every keeper
//! listens, from (in order of precedence) an explicit spec, a hosts file,
//! `GEEPS_*` variables, Slurm, Open MPI / PMI, or torchrun-style variables.
//! Reads the environment through a lookup function so it can be tested; it
//! never binds or connects.

use std::collections::BTreeMap;

use geeps_core::{Error, Result};

use crate::bootstrap::hostlist::{expand_hostlist, expand_tasks_per_node};

/// Default first port when ports are derived (Slurm).
pub const DEFAULT_PORT: u16 = 29_600;

/// Where the keepers of a cluster listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addresses {
    /// `host:port` of every rank's keeper, by rank.
    Fixed(Vec<String>),
    /// Learn them at a rendezvous server.
    Rendezvous {
        /// The server's `host:port`.
        server: String,
        /// Whether rank 0 runs the server in process.
        hosted_by_rank0: bool,
    },
}

/// The result of bootstrapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    /// This process's rank.
    pub rank: usize,
    /// The number of ranks.
    pub world: usize,
    /// Where the keepers listen, or how to find out.
    pub addresses: Addresses,
    /// Which source decided (for the log).
    pub source: &'static str,
}

fn invalid(field: &'static str, reason: String) -> Error {
    Error::InvalidConfig { field, reason }
}

fn number(env: &dyn Fn(&str) -> Option<String>, name: &'static str) -> Result<Option<usize>> {
    match env(name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| invalid(name, format!("`{v}` is not a number"))),
    }
}

/// The first of several variables that is set.
fn first_number(env: &dyn Fn(&str) -> Option<String>, names: &[&'static str]) -> Result<Option<(usize, &'static str)>> {
    for n in names {
        if let Some(v) = number(env, n)? {
            return Ok(Some((v, n)));
        }
    }
    Ok(None)
}

const RANK_VARS: [&str; 5] = ["GEEPS_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"];
const WORLD_VARS: [&str; 5] = ["GEEPS_WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"];

fn rank_and_world(env: &dyn Fn(&str) -> Option<String>) -> Result<(usize, usize)> {
    let rank = first_number(env, &RANK_VARS)?;
    let world = first_number(env, &WORLD_VARS)?;
    match (rank, world) {
        (Some((r, _)), Some((w, _))) if r < w => Ok((r, w)),
        (Some((r, rv)), Some((w, wv))) => Err(invalid("rank", format!("{rv}={r} is not below {wv}={w}"))),
        _ => Err(invalid(
            "rank",
            format!("no rank and world size found; set GEEPS_RANK and GEEPS_WORLD_SIZE (or run under geeps-launch, srun, mpirun or torchrun); looked at {RANK_VARS:?} and {WORLD_VARS:?}"),
        )),
    }
}

/// `host:port`, an IPv6 address in brackets (`[fd00::1]:29500`).
fn host_port(host: &str, port: impl std::fmt::Display) -> String {
    match host.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("[{host}]:{port}"),
        Err(_) => format!("{host}:{port}"),
    }
}

/// Parses a hosts file: `rank host port` per line, `#` comments.
pub fn parse_hostfile(text: &str) -> Result<Vec<String>> {
    let mut by_rank = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad =
            |why: &str| invalid("hostfile", format!("line {}: `{line}`: {why}; expected `rank host port`", i + 1));
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts.len() != 3 {
            return Err(bad("three fields needed"));
        }
        let rank: usize = parts[0].parse().map_err(|_| bad("rank is not a number"))?;
        let port: u16 = parts[2].parse().map_err(|_| bad("port is not a number below 65536"))?;
        if by_rank.insert(rank, host_port(parts[1], port)).is_some() {
            return Err(bad("rank listed twice"));
        }
    }
    if by_rank.is_empty() {
        return Err(invalid("hostfile", "no hosts listed".into()));
    }
    if let Some((missing, _)) = (0..by_rank.len()).zip(by_rank.keys()).find(|(i, r)| i != *r) {
        return Err(invalid("hostfile", format!("rank {missing} is missing; ranks must be 0..{}", by_rank.len())));
    }
    Ok(by_rank.into_values().collect())
}

fn check_world(addresses: &[String], world: usize, source: &str) -> Result<()> {
    if addresses.len() != world {
        return Err(invalid(
            "world",
            format!("{source} lists {} ranks but the world size is {world}", addresses.len()),
        ));
    }
    Ok(())
}

/// Bootstraps from the environment (`env` looks a variable up).
pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Bootstrap> {
    if let Some(path) = env("GEEPS_HOSTFILE") {
        let text = std::fs::read_to_string(&path).map_err(|e| invalid("hostfile", format!("{path}: {e}")))?;
        let addresses = parse_hostfile(&text)?;
        let rank = first_number(env, &RANK_VARS)?
            .map(|(r, _)| r)
            .ok_or_else(|| invalid("rank", format!("hosts file {path} given but no rank; set GEEPS_RANK")))?;
        let world = addresses.len();
        if let Some((w, v)) = first_number(env, &WORLD_VARS)? {
            if w != world {
                return Err(invalid("world", format!("{v}={w} but {path} lists {world} ranks")));
            }
        }
        if rank >= world {
            return Err(invalid("rank", format!("rank {rank} is not in {path} (ranks 0..{world})")));
        }
        return Ok(Bootstrap { rank, world, addresses: Addresses::Fixed(addresses), source: "hosts file" });
    }
    if let Some(hosts) = env("GEEPS_HOSTS") {
        let (rank, world) = rank_and_world(env)?;
        let addresses: Vec<String> = hosts.split(',').map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).collect();
        check_world(&addresses, world, "GEEPS_HOSTS")?;
        if let Some(bad) = addresses.iter().find(|a| !a.contains(':')) {
            return Err(invalid("GEEPS_HOSTS", format!("`{bad}` needs a port (host:port)")));
        }
        return Ok(Bootstrap { rank, world, addresses: Addresses::Fixed(addresses), source: "GEEPS_HOSTS" });
    }
    if let Some(server) = env("GEEPS_RENDEZVOUS") {
        let (rank, world) = rank_and_world(env)?;
        let hosted_by_rank0 = match env("GEEPS_RENDEZVOUS_AT_RANK0").as_deref().map(str::trim) {
            None | Some("" | "0") => false,
            Some("1") => true,
            Some(other) => {
                return Err(invalid(
                    "GEEPS_RENDEZVOUS_AT_RANK0",
                    format!(
                    "`{other}`: write 1 (rank 0 serves the rendezvous at GEEPS_RENDEZVOUS) or 0 (someone else does)"
                ),
                ))
            }
        };
        return Ok(Bootstrap {
            rank,
            world,
            addresses: Addresses::Rendezvous { server, hosted_by_rank0 },
            source: "GEEPS_RENDEZVOUS",
        });
    }
    if let (Some(rank), Some(world), Some(nodes)) = (
        number(env, "SLURM_PROCID")?,
        number(env, "SLURM_NTASKS")?,
        env("SLURM_JOB_NODELIST").or_else(|| env("SLURM_NODELIST")),
    ) {
        let hosts = expand_hostlist(&nodes).map_err(|e| invalid("SLURM_JOB_NODELIST", e))?;
        let per_node = match env("SLURM_TASKS_PER_NODE") {
            Some(s) => expand_tasks_per_node(&s).map_err(|e| invalid("SLURM_TASKS_PER_NODE", e))?,
            None => vec![world.div_ceil(hosts.len()); hosts.len()],
        };
        let base = number(env, "GEEPS_PORT")?.unwrap_or(DEFAULT_PORT as usize);
        let mut addresses = Vec::with_capacity(world);
        'nodes: for (host, &n) in hosts.iter().zip(&per_node) {
            for local in 0..n {
                if addresses.len() == world {
                    break 'nodes;
                }
                addresses.push(host_port(host, base + local));
            }
        }
        check_world(&addresses, world, "SLURM_JOB_NODELIST with SLURM_TASKS_PER_NODE")?;
        if rank >= world {
            return Err(invalid("rank", format!("SLURM_PROCID={rank} is not below SLURM_NTASKS={world}")));
        }
        return Ok(Bootstrap { rank, world, addresses: Addresses::Fixed(addresses), source: "Slurm" });
    }
    let (rank, world) = rank_and_world(env)?;
    let master = match (env("MASTER_ADDR"), env("MASTER_PORT")) {
        (Some(a), Some(p)) => host_port(&a, p),
        _ => {
            return Err(invalid(
                "MASTER_ADDR",
                "rank and world size are known but not where the keepers are: set GEEPS_HOSTS, GEEPS_HOSTFILE, or MASTER_ADDR and MASTER_PORT for a rendezvous at rank 0".into(),
            ))
        }
    };
    let source = if env("OMPI_COMM_WORLD_RANK").is_some() || env("PMI_RANK").is_some() { "MPI" } else { "torchrun" };
    Ok(Bootstrap { rank, world, addresses: Addresses::Rendezvous { server: master, hosted_by_rank0: true }, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_hosts_get_brackets_before_their_port() {
        assert_eq!(parse_hostfile("0 fd00::1 7000\n1 node1 7000\n").unwrap(), vec!["[fd00::1]:7000", "node1:7000"]);
        let b = from_env(&env_of(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "fd00::1"),
            ("MASTER_PORT", "29500"),
        ]))
        .unwrap();
        assert!(matches!(b.addresses, Addresses::Rendezvous { ref server, .. } if server == "[fd00::1]:29500"));
        let b =
            from_env(&env_of(&[("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "1"), ("RANK", "0"), ("WORLD_SIZE", "1")]))
                .unwrap();
        assert!(matches!(b.addresses, Addresses::Rendezvous { ref server, .. } if server == "10.0.0.1:1"));
    }

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn geeps_hosts() {
        let b =
            from_env(&env_of(&[("GEEPS_RANK", "1"), ("GEEPS_WORLD_SIZE", "2"), ("GEEPS_HOSTS", "a:1,b:2")])).unwrap();
        assert_eq!(b.rank, 1);
        assert_eq!(b.addresses, Addresses::Fixed(vec!["a:1".into(), "b:2".into()]));
        let e = from_env(&env_of(&[("GEEPS_RANK", "1"), ("GEEPS_WORLD_SIZE", "3"), ("GEEPS_HOSTS", "a:1,b:2")]));
        assert!(matches!(e, Err(Error::InvalidConfig { field: "world", .. })));
        let e = from_env(&env_of(&[("GEEPS_RANK", "x"), ("GEEPS_WORLD_SIZE", "2"), ("GEEPS_HOSTS", "a:1,b:2")]));
        assert!(matches!(e, Err(Error::InvalidConfig { field: "GEEPS_RANK", .. })));
        let e = from_env(&env_of(&[("GEEPS_RANK", "0"), ("GEEPS_WORLD_SIZE", "1"), ("GEEPS_HOSTS", "a")]));
        assert!(matches!(e, Err(Error::InvalidConfig { field: "GEEPS_HOSTS", .. })));
    }

    #[test]
    fn slurm_with_several_tasks_per_node() {
        let b = from_env(&env_of(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "5"),
            ("SLURM_JOB_NODELIST", "gpu[01-03]"),
            ("SLURM_TASKS_PER_NODE", "2(x2),1"),
        ]))
        .unwrap();
        assert_eq!(b.source, "Slurm");
        assert_eq!(
            b.addresses,
            Addresses::Fixed(
                vec!["gpu01:29600", "gpu01:29601", "gpu02:29600", "gpu02:29601", "gpu03:29600"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
        assert_eq!(b.rank, 3);
    }

    #[test]
    fn torchrun_and_mpi_use_a_rendezvous_at_rank_0() {
        let b = from_env(&env_of(&[
            ("RANK", "2"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "10.1.1.1"),
            ("MASTER_PORT", "29500"),
        ]))
        .unwrap();
        assert_eq!(b.source, "torchrun");
        assert_eq!(b.addresses, Addresses::Rendezvous { server: "10.1.1.1:29500".into(), hosted_by_rank0: true });
        let b = from_env(&env_of(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "1"),
        ]))
        .unwrap();
        assert_eq!(b.source, "MPI");
        let e = from_env(&env_of(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")]));
        assert!(matches!(e, Err(Error::InvalidConfig { field: "MASTER_ADDR", .. })));
        assert!(from_env(&env_of(&[])).is_err());
        assert!(from_env(&env_of(&[("RANK", "4"), ("WORLD_SIZE", "4"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "1")]))
            .is_err());
    }

    #[test]
    fn a_rendezvous_served_by_rank_0_when_asked() {
        let vars = [("GEEPS_RANK", "1"), ("GEEPS_WORLD_SIZE", "2"), ("GEEPS_RENDEZVOUS", "10.77.0.1:29500")];
        let b = from_env(&env_of(&vars)).unwrap();
        assert_eq!(b.addresses, Addresses::Rendezvous { server: "10.77.0.1:29500".into(), hosted_by_rank0: false });
        let b = from_env(&env_of(&[vars[0], vars[1], vars[2], ("GEEPS_RENDEZVOUS_AT_RANK0", "1")])).unwrap();
        assert_eq!(b.addresses, Addresses::Rendezvous { server: "10.77.0.1:29500".into(), hosted_by_rank0: true });
        let e = from_env(&env_of(&[vars[0], vars[1], vars[2], ("GEEPS_RENDEZVOUS_AT_RANK0", "yes")]));
        assert!(matches!(e, Err(Error::InvalidConfig { field: "GEEPS_RENDEZVOUS_AT_RANK0", .. })), "{e:?}");
    }

    #[test]
    fn precedence_hostfile_then_geeps_then_slurm() {
        let dir = std::env::temp_dir().join(format!("geeps-hostfile-{}", std::process::id()));
        std::fs::write(&dir, "# cluster\n0 10.0.0.1 7000\n1 10.0.0.2 7000 # second\n").unwrap();
        let path = dir.to_string_lossy().to_string();
        let b = from_env(&env_of(&[
            ("GEEPS_HOSTFILE", &path),
            ("GEEPS_RANK", "1"),
            ("GEEPS_HOSTS", "x:1,y:2,z:3"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_NODELIST", "n[1-2]"),
        ]))
        .unwrap();
        assert_eq!(b.source, "hosts file");
        assert_eq!(b.addresses, Addresses::Fixed(vec!["10.0.0.1:7000".into(), "10.0.0.2:7000".into()]));
        let b = from_env(&env_of(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_NODELIST", "n[1-2]"),
            ("GEEPS_PORT", "5000"),
        ]))
        .unwrap();
        assert_eq!(b.addresses, Addresses::Fixed(vec!["n1:5000".into(), "n2:5000".into()]));
        std::fs::remove_file(dir).unwrap();
    }

    #[test]
    fn hostfile_errors_name_the_line() {
        assert!(
            matches!(parse_hostfile("0 a 1\n1 b\n"), Err(Error::InvalidConfig { reason, .. }) if reason.contains("line 2"))
        );
        assert!(
            matches!(parse_hostfile("0 a 1\n0 b 2\n"), Err(Error::InvalidConfig { reason, .. }) if reason.contains("twice"))
        );
        assert!(
            matches!(parse_hostfile("1 a 1\n"), Err(Error::InvalidConfig { reason, .. }) if reason.contains("rank 0 is missing"))
        );
        assert!(matches!(parse_hostfile("0 a 99999\n"), Err(Error::InvalidConfig { .. })));
        assert!(parse_hostfile("# nothing\n").is_err());
    }
}
