//! The hosts a multi-host launch runs on, from `--hosts`: a comma-separated
//! list (`h0,h1:2,...`, `:K` giving K ranks on that host) or a file of one
//! host per line (`NAME [slots=K] [addr=ADDRESS]`, `#` comments; mpirun's
//! `slots=`). NAME is what the remote-exec agent is given; ADDRESS, where
//! the other hosts reach this one (default NAME). It also lays the ranks
//! out on them, host by host. It owns that syntax and layout; it never
//! starts or resolves anything.

use std::path::Path;

/// One host of the launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// What the agent is given (`ssh NAME`, a namespace's name).
    pub name: String,
    /// Where the other hosts reach this one.
    pub address: String,
    /// Ranks on this host; `None`: `--ranks-per-host`.
    pub slots: Option<usize>,
}

/// One rank's place: its host and its index among that host's ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    pub host: usize,
    pub local_rank: usize,
    pub local_world: usize,
}

/// `--hosts SPEC`: a file when SPEC names one, else a list.
pub(crate) fn parse(spec: &str) -> Result<Vec<Host>, String> {
    if Path::new(spec).is_file() {
        let text = std::fs::read_to_string(spec).map_err(|e| format!("--hosts {spec}: {e}"))?;
        return parse_file(&text).map_err(|e| format!("--hosts {spec}: {e}"));
    }
    if spec.contains('/') {
        return Err(format!("--hosts {spec}: no such file (a list of hosts holds no `/`)"));
    }
    let mut hosts = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, slots) = match entry.rsplit_once(':') {
            Some((name, k)) if !name.contains(':') => (name, Some(slot_count(k, entry)?)),
            _ => (entry, None),
        };
        hosts.push(Host { name: name.to_string(), address: name.to_string(), slots });
    }
    if hosts.is_empty() {
        return Err(format!("--hosts `{spec}` is neither a file nor a list of hosts (h0,h1,... or h0:2,h1:2)"));
    }
    Ok(hosts)
}

fn slot_count(k: &str, what: &str) -> Result<usize, String> {
    match k.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{what}`: the number of ranks on a host must be a whole number of at least 1")),
    }
}

fn parse_file(text: &str) -> Result<Vec<Host>, String> {
    let mut hosts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        let mut host = Host { name: name.to_string(), address: name.to_string(), slots: None };
        for word in words {
            match word.split_once('=') {
                Some(("slots", k)) => {
                    host.slots = Some(slot_count(k, word).map_err(|e| format!("line {}: {e}", i + 1))?)
                }
                Some(("addr", a)) if !a.is_empty() => host.address = a.to_string(),
                _ => {
                    return Err(format!(
                        "line {}: `{word}` is not understood; a line is `NAME [slots=K] [addr=ADDRESS]`",
                        i + 1
                    ))
                }
            }
        }
        hosts.push(host);
    }
    if hosts.is_empty() {
        return Err("no hosts listed".into());
    }
    Ok(hosts)
}

/// The ranks, in order, host by host: `per_host` on each host that does not
/// say its own number. `expected` (`-n`), when given, must be their total.
pub(crate) fn layout(hosts: &[Host], per_host: usize, expected: Option<usize>) -> Result<Vec<Placement>, String> {
    let mut ranks = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        let k = host.slots.unwrap_or(per_host);
        ranks.extend((0..k).map(|local_rank| Placement { host: h, local_rank, local_world: k }));
    }
    match expected {
        Some(n) if n != ranks.len() => Err(format!(
            "-n {n} does not match the hosts: {} hosts give {} ranks (--ranks-per-host {per_host} unless a host says slots=K); \
             leave -n out or make them agree",
            hosts.len(),
            ranks.len()
        )),
        _ if ranks.is_empty() => Err("the hosts give no ranks".into()),
        _ => Ok(ranks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_with_and_without_counts() {
        let hosts = parse("node01, node02:2,,10.0.0.3").unwrap();
        assert_eq!(
            hosts,
            vec![
                Host { name: "node01".into(), address: "node01".into(), slots: None },
                Host { name: "node02".into(), address: "node02".into(), slots: Some(2) },
                Host { name: "10.0.0.3".into(), address: "10.0.0.3".into(), slots: None },
            ]
        );
        let e = parse("a:0").unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        assert!(parse(" , ").unwrap_err().contains("neither a file nor a list"));
        let e = parse("/no/such/hosts.txt").unwrap_err();
        assert_eq!(e, "--hosts /no/such/hosts.txt: no such file (a list of hosts holds no `/`)");
    }

    #[test]
    fn a_file_with_slots_and_addresses() {
        let hosts =
            parse_file("# cluster\ngeeps-h0 addr=10.77.0.1\n\ngeeps-h1 slots=2 addr=10.77.0.2 # two\nnode3\n").unwrap();
        assert_eq!(hosts[0], Host { name: "geeps-h0".into(), address: "10.77.0.1".into(), slots: None });
        assert_eq!(hosts[1], Host { name: "geeps-h1".into(), address: "10.77.0.2".into(), slots: Some(2) });
        assert_eq!(hosts[2].address, "node3");
        let e = parse_file("a\nb port=3\n").unwrap_err();
        assert!(e.starts_with("line 2: `port=3` is not understood"), "{e}");
        assert!(parse_file("# none\n").is_err());
    }

    #[test]
    fn ranks_are_laid_out_host_by_host() {
        let hosts = parse("a,b:3,c").unwrap();
        let ranks = layout(&hosts, 2, None).unwrap();
        let on: Vec<(usize, usize)> = ranks.iter().map(|p| (p.host, p.local_rank)).collect();
        assert_eq!(on, vec![(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]);
        assert_eq!(ranks[3].local_world, 3);
        assert!(layout(&hosts, 2, Some(7)).is_ok());
        let e = layout(&hosts, 2, Some(6)).unwrap_err();
        assert!(e.contains("-n 6 does not match the hosts: 3 hosts give 7 ranks"), "{e}");
    }
}
