//! The hosts a multi-host launch runs on, from `--hosts`: a comma-separated
//! list (`h0,h1:2,node[03-04],...`, `:K` giving K ranks on that host) or a
//! file of one host per line in the forms mpirun, MPICH and PBS write
//! (`NAME [slots=K] [max_slots=M] [addr=ADDRESS] [user=USER]`, `NAME:K`,
//! `#` comments). NAME is what the remote-exec agent is given; ADDRESS,
//! where the other hosts reach this one (default NAME without a `USER@`).
//! A host listed twice is one host with the ranks of both lines, as in a
//! PBS node file. It also lays the ranks out on them, host by host. It owns
//! that syntax and layout; it never starts or resolves anything.

use std::path::Path;

use geeps_net::expand_hostlist;

/// One host of the launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// What the agent is given (`ssh NAME`, a namespace's name).
    pub name: String,
    /// Where the other hosts reach this one.
    pub address: String,
    /// Ranks its lines give by count (`slots=K`, `NAME:K`), summed.
    pub counted: usize,
    /// Its lines that give no count: each places `--ranks-per-host` ranks.
    pub uncounted: usize,
    /// `max_slots=M`: the most ranks it may be given.
    pub max_slots: Option<usize>,
}

impl Host {
    /// Its ranks when a line without a count places `per_host`.
    pub fn ranks(&self, per_host: usize) -> usize {
        self.counted + self.uncounted * per_host
    }
}

/// One rank's place: its host and its index among that host's ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    pub host: usize,
    pub local_rank: usize,
    pub local_world: usize,
}

/// What one line (or list entry) says, before hosts listed twice merge.
#[derive(Default, Clone)]
struct Entry {
    name: String,
    count: Option<usize>,
    max_slots: Option<usize>,
    address: Option<String>,
    user: Option<String>,
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
    if spec.split(',').all(|e| e.trim().is_empty()) {
        return Err(format!("--hosts `{spec}` is neither a file nor a list of hosts (h0,h1,... or h0:2,h1:2)"));
    }
    let mut entries = Vec::new();
    for entry in expand_hostlist(spec).map_err(|e| format!("--hosts: {e}"))? {
        let mut e = Entry::default();
        name_and_count(entry.trim(), &mut e)?;
        entries.push(e);
    }
    merge(entries, |i| format!("entry {}", i + 1))
}

/// `NAME` or `NAME:K`; an IPv6 address is `[ADDRESS]` or `[ADDRESS]:K`
/// (bare, it takes no count).
fn name_and_count(word: &str, entry: &mut Entry) -> Result<(), String> {
    let v6 = word.strip_prefix('[').and_then(|w| w.split_once(']'));
    match (v6, word.rsplit_once(':')) {
        (Some((address, "")), _) => entry.name = address.to_string(),
        (Some((address, count)), _) => {
            entry.name = address.to_string();
            let k = count.strip_prefix(':').ok_or_else(|| format!("`{word}`: after `]` comes `:K` or nothing"))?;
            entry.count = Some(slot_count(k, word)?);
        }
        (None, Some((name, k))) if !name.contains(':') => {
            entry.name = name.to_string();
            entry.count = Some(slot_count(k, word)?);
        }
        (None, _) => entry.name = word.to_string(),
    }
    if entry.name.is_empty() || entry.name.contains('=') {
        return Err(format!("`{word}` does not start with a host name"));
    }
    Ok(())
}

fn slot_count(k: &str, what: &str) -> Result<usize, String> {
    match k.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{what}`: the number of ranks on a host must be a whole number of at least 1")),
    }
}

/// A line's words, with `KEY = VALUE` written apart joined into one.
fn words(line: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for token in line.split_whitespace() {
        match words.last_mut() {
            Some(w) if w.ends_with('=') || token.starts_with('=') => w.push_str(token),
            _ => words.push(token.to_string()),
        }
    }
    words
}

fn parse_file(text: &str) -> Result<Vec<Host>, String> {
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}", i + 1);
        let words = words(line.split('#').next().unwrap_or(""));
        let Some((first, rest)) = words.split_first() else { continue };
        let mut entry = Entry::default();
        name_and_count(first, &mut entry).map_err(at)?;
        for word in rest {
            let (key, value) = word.split_once('=').unwrap_or((word, ""));
            match key.to_ascii_lowercase().as_str() {
                "slots" | "count" | "cpu" => {
                    if entry.count.is_some() {
                        return Err(at(format!("`{word}`: the line already gives its number of ranks")));
                    }
                    entry.count = Some(slot_count(value, word).map_err(at)?);
                }
                "max_slots" | "max-slots" | "slots_max" | "slots-max" => {
                    entry.max_slots = Some(slot_count(value, word).map_err(at)?)
                }
                "addr" | "address" if !value.is_empty() => entry.address = Some(value.to_string()),
                "user" | "username" | "user_name" | "user-name" if !value.is_empty() => {
                    entry.user = Some(value.to_string())
                }
                _ => {
                    return Err(at(format!(
                        "`{word}` is not understood; a line is `NAME[:K] [slots=K] [max_slots=M] [addr=ADDRESS] \
                         [user=USER]`"
                    )))
                }
            }
        }
        for name in expand_hostlist(&entry.name).map_err(at)? {
            entries.push(Entry { name, ..entry.clone() });
            lines.push(i + 1);
        }
    }
    if entries.is_empty() {
        return Err("no hosts listed".into());
    }
    merge(entries, |i| format!("line {}", lines[i]))
}

/// One host per agent name, in the order first listed: ranks add up,
/// an address or a cap given twice must agree. `place(i)` names entry i.
fn merge(entries: Vec<Entry>, place: impl Fn(usize) -> String) -> Result<Vec<Host>, String> {
    let mut hosts: Vec<Host> = Vec::new();
    let mut explicit: Vec<bool> = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        let bare = e.name.rsplit_once('@').map_or(e.name.as_str(), |(_, h)| h).to_string();
        let name = match &e.user {
            Some(user) if !e.name.contains('@') => format!("{user}@{}", e.name),
            _ => e.name.clone(),
        };
        let given_address = e.address.is_some();
        let address = e.address.unwrap_or(bare);
        let (counted, uncounted) = match e.count {
            Some(k) => (k, 0),
            None => (0, 1),
        };
        let Some(h) = hosts.iter().position(|h| h.name == name) else {
            hosts.push(Host { name, address, counted, uncounted, max_slots: e.max_slots });
            explicit.push(given_address);
            continue;
        };
        let host = &mut hosts[h];
        if given_address {
            if explicit[h] && host.address != address {
                return Err(format!(
                    "{}: {name} is listed again with addr={address}, but an earlier line gave addr={}; \
                     a host has one address",
                    place(i),
                    host.address
                ));
            }
            host.address = address;
            explicit[h] = true;
        }
        match (host.max_slots, e.max_slots) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!(
                    "{}: {name} is listed again with max_slots={b}, but an earlier line gave max_slots={a}",
                    place(i)
                ))
            }
            (None, Some(b)) => host.max_slots = Some(b),
            _ => {}
        }
        host.counted += counted;
        host.uncounted += uncounted;
    }
    Ok(hosts)
}

/// The ranks, in order, host by host: `per_host` for each line that gives
/// no count. `expected` (`-n`), when given, takes the first that many, as
/// mpirun fills slots in order; more than the hosts give is refused.
pub(crate) fn layout(hosts: &[Host], per_host: usize, expected: Option<usize>) -> Result<Vec<Placement>, String> {
    let mut ranks = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        let k = host.ranks(per_host);
        if let Some(max) = host.max_slots.filter(|&m| k > m) {
            return Err(format!(
                "{} is given {k} ranks but takes at most {max} (max_slots={max}); lower --ranks-per-host or its slots",
                host.name
            ));
        }
        ranks.extend((0..k).map(|local_rank| Placement { host: h, local_rank, local_world: k }));
    }
    match expected {
        Some(n) if n > ranks.len() => {
            return Err(format!(
                "-n {n} is more ranks than the hosts give: {} hosts give {} (--ranks-per-host {per_host} for a host \
                 that gives no slots=K); raise --ranks-per-host or the hosts' slots, or leave -n out",
                hosts.len(),
                ranks.len()
            ))
        }
        Some(0) => return Err("-n must be at least 1".into()),
        Some(n) => {
            ranks.truncate(n);
            // The last host used may now hold fewer ranks than it offered.
            if let Some(last) = ranks.last().map(|p| p.host) {
                let on_last = ranks.iter().filter(|p| p.host == last).count();
                ranks.iter_mut().filter(|p| p.host == last).for_each(|p| p.local_world = on_last);
            }
        }
        None => {}
    }
    if ranks.is_empty() {
        return Err("the hosts give no ranks".into());
    }
    Ok(ranks)
}

/// How many hosts the ranks use.
pub(crate) fn hosts_used(ranks: &[Placement]) -> usize {
    ranks.last().map_or(0, |p| p.host + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, address: &str, counted: usize, uncounted: usize) -> Host {
        Host { name: name.into(), address: address.into(), counted, uncounted, max_slots: None }
    }

    #[test]
    fn a_list_with_and_without_counts() {
        let hosts = parse("node01, node02:2,,10.0.0.3").unwrap();
        assert_eq!(
            hosts,
            vec![host("node01", "node01", 0, 1), host("node02", "node02", 2, 0), host("10.0.0.3", "10.0.0.3", 0, 1)]
        );
        let e = parse("a:0").unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        assert!(parse(" , ").unwrap_err().contains("neither a file nor a list"));
        let e = parse("/no/such/hosts.txt").unwrap_err();
        assert_eq!(e, "--hosts /no/such/hosts.txt: no such file (a list of hosts holds no `/`)");
        assert!(parse(":2").unwrap_err().contains("does not start with a host name"));
    }

    #[test]
    fn a_list_takes_ranges_users_and_repeats() {
        let hosts = parse("gpu[01-03]:2,bob@login,gpu02").unwrap();
        let names: Vec<(&str, &str, usize)> =
            hosts.iter().map(|h| (h.name.as_str(), h.address.as_str(), h.ranks(1))).collect();
        assert_eq!(
            names,
            vec![("gpu01", "gpu01", 2), ("gpu02", "gpu02", 3), ("gpu03", "gpu03", 2), ("bob@login", "login", 1)]
        );
        let e = parse("gpu[03-01]").unwrap_err();
        assert!(e.contains("runs backwards"), "{e}");
        assert_eq!(parse("::1").unwrap()[0].name, "::1");
        let hosts = parse("[fd00::1]:2,[fd00::2]").unwrap();
        assert_eq!(hosts, vec![host("fd00::1", "fd00::1", 2, 0), host("fd00::2", "fd00::2", 0, 1)]);
        assert!(parse("[fd00::1]x").unwrap_err().contains("after `]` comes `:K`"));
    }

    #[test]
    fn a_file_with_slots_and_addresses() {
        let hosts =
            parse_file("# cluster\ngeeps-h0 addr=10.77.0.1\n\ngeeps-h1 slots=2 addr=10.77.0.2 # two\nnode3\n").unwrap();
        assert_eq!(hosts[0], host("geeps-h0", "10.77.0.1", 0, 1));
        assert_eq!(hosts[1], host("geeps-h1", "10.77.0.2", 2, 0));
        assert_eq!(hosts[2].address, "node3");
        let e = parse_file("a\nb port=3\n").unwrap_err();
        assert!(e.starts_with("line 2: `port=3` is not understood"), "{e}");
        assert!(parse_file("# none\n").is_err());
    }

    #[test]
    fn a_file_in_the_forms_mpirun_mpich_and_pbs_write() {
        // Open MPI: spaces around `=`, max_slots, user; MPICH: NAME:K.
        let hosts = parse_file("n1 slots = 4 max_slots=8\nn2 slots= 2 user=ann\nn3:3\nn4 cpu=1\n").unwrap();
        let got: Vec<(&str, usize, Option<usize>)> =
            hosts.iter().map(|h| (h.name.as_str(), h.ranks(1), h.max_slots)).collect();
        assert_eq!(got, vec![("n1", 4, Some(8)), ("ann@n2", 2, None), ("n3", 3, None), ("n4", 1, None)]);
        assert_eq!(hosts[1].address, "n2");
        // PBS: a host once per rank.
        let hosts = parse_file("c1\nc1\nc2\nc2\nc1\n").unwrap();
        assert_eq!(hosts, vec![host("c1", "c1", 0, 3), host("c2", "c2", 0, 2)]);
        let ranks = layout(&hosts, 1, Some(5)).unwrap();
        assert_eq!(ranks.iter().filter(|p| p.host == 0).map(|p| p.local_world).max(), Some(3));
        // A range on a line, and an address given once for a host listed twice.
        let hosts = parse_file("gpu[1-2] slots=2\ngpu1 addr=10.0.0.1\n").unwrap();
        assert_eq!(hosts, vec![host("gpu1", "10.0.0.1", 2, 1), host("gpu2", "gpu2", 2, 0)]);
    }

    #[test]
    fn a_file_that_contradicts_itself_is_refused() {
        let e = parse_file("n1:2 slots=2\n").unwrap_err();
        assert!(e.starts_with("line 1: `slots=2`: the line already gives"), "{e}");
        let e = parse_file("n1 addr=10.0.0.1\nn1 addr=10.0.0.2\n").unwrap_err();
        assert!(e.starts_with("line 2: n1 is listed again with addr=10.0.0.2"), "{e}");
        let e = parse_file("n1 max_slots=2\nn1 max_slots=4\n").unwrap_err();
        assert!(e.contains("max_slots=4, but an earlier line gave max_slots=2"), "{e}");
        let e = parse_file("n1 slots=x\n").unwrap_err();
        assert!(e.starts_with("line 1: `slots=x`: the number of ranks"), "{e}");
        let e = parse_file("n1 user=\n").unwrap_err();
        assert!(e.contains("`user=` is not understood"), "{e}");
    }

    #[test]
    fn ranks_are_laid_out_host_by_host() {
        let hosts = parse("a,b:3,c").unwrap();
        let ranks = layout(&hosts, 2, None).unwrap();
        let on: Vec<(usize, usize)> = ranks.iter().map(|p| (p.host, p.local_rank)).collect();
        assert_eq!(on, vec![(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]);
        assert_eq!(ranks[3].local_world, 3);
        assert!(layout(&hosts, 2, Some(7)).is_ok());
        let e = layout(&hosts, 2, Some(8)).unwrap_err();
        assert!(e.contains("-n 8 is more ranks than the hosts give: 3 hosts give 7"), "{e}");
        assert!(layout(&hosts, 2, Some(0)).is_err());
    }

    #[test]
    fn fewer_ranks_than_slots_fill_the_hosts_in_order() {
        let hosts = parse("a:4,b:4,c:4").unwrap();
        let ranks = layout(&hosts, 1, Some(6)).unwrap();
        let on: Vec<(usize, usize, usize)> = ranks.iter().map(|p| (p.host, p.local_rank, p.local_world)).collect();
        assert_eq!(on, vec![(0, 0, 4), (0, 1, 4), (0, 2, 4), (0, 3, 4), (1, 0, 2), (1, 1, 2)]);
        assert_eq!(hosts_used(&ranks), 2);
        assert_eq!(hosts_used(&layout(&hosts, 1, None).unwrap()), 3);
    }

    #[test]
    fn max_slots_caps_a_host() {
        let hosts = parse_file("n1 max_slots=2\nn2\n").unwrap();
        assert_eq!(layout(&hosts, 2, None).unwrap().len(), 4);
        let e = layout(&hosts, 3, None).unwrap_err();
        assert_eq!(e, "n1 is given 3 ranks but takes at most 2 (max_slots=2); lower --ranks-per-host or its slots");
    }
}
