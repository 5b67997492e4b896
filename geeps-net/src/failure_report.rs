//! Each rank's account of why the job failed, for the launcher that
//! started it: a launcher sets `GEEPS_FAILURE_REPORTS` to a folder, and the
//! first failure a rank sees — its own (the program ended with an error) or
//! a peer lost — is written there as `rank-<R>`, once. The launcher then
//! names the rank that failed by the ranks' own account, not by which
//! process happened to exit first. This file owns the format; it never
//! decides whom to blame (the launcher does) and never fails the caller:
//! a report that cannot be written is logged and dropped.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The variable naming the folder reports go to.
pub const ENV: &str = "GEEPS_FAILURE_REPORTS";

/// One rank's account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReport {
    /// The rank that wrote it.
    pub reporter: usize,
    /// The rank it says failed: itself, or the peer it lost.
    pub failed: usize,
    /// That rank's keeper address, as the cluster knows it.
    pub address: String,
    /// Why, in the reporter's words.
    pub cause: String,
}

impl FailureReport {
    /// Whether the reporter failed on its own (not because a peer was lost).
    pub fn is_own(&self) -> bool {
        self.reporter == self.failed
    }

    fn encode(&self) -> String {
        // One field per line; the cause last, so it may hold anything but a newline.
        format!(
            "reporter {}\nfailed {}\naddress {}\ncause {}\n",
            self.reporter,
            self.failed,
            self.address,
            self.cause.replace('\n', " ")
        )
    }

    fn decode(text: &str) -> Option<FailureReport> {
        let field = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' '))).map(str::to_string)
        };
        Some(FailureReport {
            reporter: field("reporter")?.parse().ok()?,
            failed: field("failed")?.parse().ok()?,
            address: field("address")?,
            cause: field("cause")?,
        })
    }
}

/// Writes `report` into the folder the launcher named, unless this rank
/// already reported (its first account stands).
pub(crate) fn write(report: &FailureReport) {
    let Some(dir) = std::env::var_os(ENV).map(PathBuf::from) else { return };
    if let Err(e) = write_into(&dir, report) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            tracing::warn!(dir = %dir.display(), error = %e, "could not write this rank's failure report");
        }
    }
}

fn write_into(dir: &Path, report: &FailureReport) -> std::io::Result<()> {
    // Written whole under a private name, then linked into place: a reader
    // never sees half a report, and the first account wins.
    let path = dir.join(format!("rank-{}", report.reporter));
    let staging = dir.join(format!(".rank-{}.{}", report.reporter, std::process::id()));
    std::fs::File::create(&staging)?.write_all(report.encode().as_bytes())?;
    let linked = std::fs::hard_link(&staging, &path);
    let _ = std::fs::remove_file(&staging);
    linked
}

/// Every report in `dir`, by reporter; unreadable files are skipped.
pub fn read_all(dir: &Path) -> Vec<FailureReport> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut reports: Vec<FailureReport> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rank-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| FailureReport::decode(&t))
        .collect();
    reports.sort_by_key(|r| r.reporter);
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(reporter: usize, failed: usize, cause: &str) -> FailureReport {
        FailureReport { reporter, failed, address: "127.0.0.1:4000".into(), cause: cause.into() }
    }

    #[test]
    fn a_report_reads_back_as_written_and_the_first_account_stands() {
        let dir = std::env::temp_dir().join(format!("geeps-failure-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        write_into(&dir, &report(2, 2, "snapshot: No space left on device\nsecond line")).unwrap();
        let again = write_into(&dir, &report(2, 0, "peer rank 0 lost"));
        assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        write_into(&dir, &report(0, 2, "peer rank 2 at 127.0.0.1:4000 is lost")).unwrap();
        std::fs::write(dir.join("rank-9"), "not a report").unwrap();
        let all = read_all(&dir);
        assert_eq!(
            all,
            [
                report(0, 2, "peer rank 2 at 127.0.0.1:4000 is lost"),
                report(2, 2, "snapshot: No space left on device second line")
            ]
        );
        assert!(all[1].is_own() && !all[0].is_own());
        // No staging file is left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
