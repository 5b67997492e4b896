//! Which rank a failed generation is blamed on, from the ranks' own
//! accounts (`geeps_net::failure_report`): a rank that says it failed on
//! its own comes first; else the rank the others say they lost; only when
//! no rank said anything, the first rank to exit. Exit order alone misleads:
//! a stopped or cut-off rank never exits first, the ranks that notice it
//! do. It owns that rule and the way a rank is named; it never signals or
//! restarts anything.

use std::collections::BTreeMap;

use geeps_net::failure_report::FailureReport;

/// The rank a generation's failure is put on, and why.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Blame {
    pub rank: usize,
    pub why: String,
}

/// `first_exit`: the first rank that exited unsuccessfully, and how.
pub(crate) fn blame(reports: &[FailureReport], first_exit: (usize, &str)) -> Blame {
    let named = |rank: usize| reports.iter().filter(|r| !r.is_own() && r.failed == rank).count();
    let own: Vec<&FailureReport> = reports.iter().filter(|r| r.is_own()).collect();
    // Of several ranks failing on their own, the one the others lost.
    if let Some(r) = own.iter().max_by_key(|r| (named(r.reporter), std::cmp::Reverse(r.reporter))) {
        return Blame { rank: r.reporter, why: r.cause.clone() };
    }
    let mut lost: BTreeMap<usize, Vec<&FailureReport>> = BTreeMap::new();
    for r in reports {
        lost.entry(r.failed).or_default().push(r);
    }
    if let Some((&rank, accounts)) = lost.iter().max_by_key(|(&rank, a)| (a.len(), std::cmp::Reverse(rank))) {
        let by: Vec<usize> = accounts.iter().map(|r| r.reporter).collect();
        return Blame { rank, why: format!("lost, by the account of rank(s) {by:?}: {}", accounts[0].cause) };
    }
    Blame { rank: first_exit.0, why: format!("{} (the first rank to exit; no rank reported a cause)", first_exit.1) }
}

/// How every launcher message names a rank: its number, its process
/// (`pid 4242`, or its host and agent) and, where a report gave it, its
/// keeper's address.
pub(crate) fn rank_name(rank: usize, process: Option<String>, reports: &[FailureReport]) -> String {
    let mut parts = Vec::new();
    if let Some(process) = process {
        parts.push(process);
    }
    if let Some(r) = reports.iter().find(|r| r.failed == rank && !r.address.is_empty()) {
        parts.push(format!("keeper {}", r.address));
    }
    if parts.is_empty() {
        format!("rank {rank}")
    } else {
        format!("rank {rank} ({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(reporter: usize, failed: usize, cause: &str) -> FailureReport {
        FailureReport { reporter, failed, address: format!("127.0.0.1:{}", 4000 + failed), cause: cause.into() }
    }

    #[test]
    fn a_rank_that_failed_on_its_own_is_blamed_whoever_exited_first() {
        let reports = [
            report(0, 2, "peer rank 2 at 127.0.0.1:4002 is lost: rank 2 failed: disk full"),
            report(2, 2, "snapshot: cannot write 400 bytes: No space left on device"),
            report(3, 2, "peer rank 2 at 127.0.0.1:4002 is lost: rank 2 failed: disk full"),
        ];
        let b = blame(&reports, (0, "exit status: 1"));
        assert_eq!(b, Blame { rank: 2, why: "snapshot: cannot write 400 bytes: No space left on device".into() });
    }

    #[test]
    fn a_silent_rank_is_blamed_by_the_others_accounts_not_by_exit_order() {
        // Rank 1 was stopped (SIGSTOP): it never reports, the others lose it.
        let reports = [report(0, 1, "silent for 30.1 s"), report(2, 1, "silent for 30.0 s"), report(3, 1, "silent")];
        let b = blame(&reports, (2, "exit status: 1"));
        assert_eq!(b.rank, 1);
        assert!(b.why.starts_with("lost, by the account of rank(s) [0, 2, 3]: silent for 30.1 s"), "{}", b.why);
        // A rank that loses the rank that exited after it does not outvote the others.
        let reports = [report(0, 1, "a"), report(2, 1, "b"), report(1, 0, "c")];
        assert_eq!(blame(&reports, (2, "x")).rank, 1);
    }

    #[test]
    fn without_accounts_the_first_exit_is_blamed_and_says_so() {
        let b = blame(&[], (1, "exit status: 7"));
        assert_eq!(b.rank, 1);
        assert_eq!(b.why, "exit status: 7 (the first rank to exit; no rank reported a cause)");
    }

    #[test]
    fn a_rank_is_named_with_its_pid_and_keeper() {
        let reports = [report(0, 2, "lost")];
        assert_eq!(rank_name(2, Some("pid 4242".into()), &reports), "rank 2 (pid 4242, keeper 127.0.0.1:4002)");
        assert_eq!(rank_name(1, Some("on h1, agent pid 7".into()), &reports), "rank 1 (on h1, agent pid 7)");
        assert_eq!(rank_name(1, None, &[]), "rank 1");
    }
}
