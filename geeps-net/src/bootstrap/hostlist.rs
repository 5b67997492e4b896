//! Slurm's compressed host lists (`node[01-03,07],gpu-[1-2]-ib`; a bracketed
//! IPv6 address is kept as written) and task counts per node (`2(x3),1`).
//! Pure parsing; errors say which part is wrong.

/// Expands a Slurm host list into host names, in order.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for item in split_top_level(list)? {
        if item.is_empty() {
            continue;
        }
        hosts.extend(expand_item(&item)?);
    }
    if hosts.is_empty() {
        return Err(format!("host list `{list}` names no host"));
    }
    Ok(hosts)
}

fn split_top_level(list: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced brackets in host list `{list}`"));
        }
        if c == ',' && depth == 0 {
            items.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced brackets in host list `{list}`"));
    }
    items.push(cur);
    Ok(items.into_iter().map(|s| s.trim().to_string()).collect())
}

/// Expands the first bracket group of `item`, then the rest recursively.
fn expand_item(item: &str) -> Result<Vec<String>, String> {
    let Some(open) = item.find('[') else { return Ok(vec![item.to_string()]) };
    let close = item[open..].find(']').map(|c| open + c).ok_or_else(|| format!("missing `]` in `{item}`"))?;
    let (prefix, ranges, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    if ranges.parse::<std::net::Ipv6Addr>().is_ok() {
        // `[fd00::1]:2` is an address, not a range.
        return Ok(expand_item(suffix)?.into_iter().map(|rest| format!("{prefix}[{ranges}]{rest}")).collect());
    }
    let mut out = Vec::new();
    for part in ranges.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let width = lo.len();
        let parse = |s: &str| s.parse::<u64>().map_err(|_| format!("`{s}` in `{item}` is not a number"));
        let (a, b) = (parse(lo)?, parse(hi)?);
        if b < a {
            return Err(format!("range `{part}` in `{item}` runs backwards"));
        }
        if b - a > 100_000 {
            return Err(format!("range `{part}` in `{item}` is implausibly large"));
        }
        for n in a..=b {
            for rest in expand_item(suffix)? {
                out.push(format!("{prefix}{n:0width$}{rest}"));
            }
        }
    }
    Ok(out)
}

/// Expands `SLURM_TASKS_PER_NODE` (`2(x3),1`) into a count per node.
pub fn expand_tasks_per_node(spec: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("`{part}` in tasks-per-node `{spec}` is not N or N(xM)");
        match part.split_once("(x") {
            Some((n, rep)) => {
                let n: usize = n.parse().map_err(|_| bad())?;
                let rep: usize = rep.strip_suffix(')').ok_or_else(bad)?.parse().map_err(|_| bad())?;
                out.extend(std::iter::repeat_n(n, rep));
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_slurm_host_lists() {
        assert_eq!(expand_hostlist("node1").unwrap(), vec!["node1"]);
        assert_eq!(
            expand_hostlist("node[01-03,07],login").unwrap(),
            vec!["node01", "node02", "node03", "node07", "login"]
        );
        assert_eq!(expand_hostlist("gpu-[1-2]-ib").unwrap(), vec!["gpu-1-ib", "gpu-2-ib"]);
        assert_eq!(expand_hostlist("r[1-2]n[8-9]").unwrap(), vec!["r1n8", "r1n9", "r2n8", "r2n9"]);
        assert_eq!(expand_hostlist("a[9-10]").unwrap(), vec!["a9", "a10"]);
        assert_eq!(expand_hostlist("[fd00::1]:2,n[1-2]").unwrap(), vec!["[fd00::1]:2", "n1", "n2"]);
        for bad in ["n[1-2", "n]1[", "n[a-b]", "n[3-1]", ""] {
            assert!(expand_hostlist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn expands_tasks_per_node() {
        assert_eq!(expand_tasks_per_node("2(x3),1").unwrap(), vec![2, 2, 2, 1]);
        assert_eq!(expand_tasks_per_node("4").unwrap(), vec![4]);
        assert!(expand_tasks_per_node("2(x3").is_err());
        assert!(expand_tasks_per_node("x").is_err());
    }
}
