//! The snapshots of a `snapshot_prefix` and whose they are. Every geeps
//! checkpoint folder (`PREFIX_iter_N.geeps`) holds a `JOB` file naming the
//! job that wrote it: the run (one id per launch, kept across the
//! launcher's restarts) and the net (its parameter layers and solver). A
//! restarted rank resumes only its own job's newest complete snapshot; a
//! fresh run whose prefix already holds snapshots refuses to start unless
//! told to resume them or to overwrite them. It owns that choice and the
//! `JOB` format; it never writes weights or checkpoints.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::net::params::ParamLayout;
use crate::proto::solver::SolverParam;

/// The file in a snapshot's `.geeps` folder that names its job.
const JOB_FILE: &str = "JOB";

/// The variables a launcher sets to one id per launch, in the order read.
const RUN_ID_VARS: [&str; 3] = ["GEEPS_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"];

/// What a fresh run (not a launcher's restart) does with the snapshots it
/// finds under its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExistingSnapshots {
    /// Refuse to start, naming them (the default: nothing is lost unasked).
    #[default]
    Refuse,
    /// Resume from the newest complete one, whichever run wrote it (`-resume`).
    Resume,
    /// Remove them and start from iteration 0 (`-overwrite`).
    Overwrite,
}

/// Which job wrote a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobId {
    /// One id per launch, the same for every rank and restart.
    pub run: String,
    /// A fingerprint of the net's parameter layers and the solver type.
    pub net: String,
}

impl JobId {
    /// This run's identity: the launcher's run id (geeps-launch, torchrun,
    /// Slurm) or, without one, an id made now; the net's fingerprint.
    pub fn current(layout: &ParamLayout, solver: &SolverParam) -> JobId {
        let run = RUN_ID_VARS
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| format!("{:016x}", rand::random::<u64>()));
        JobId { run, net: fingerprint(layout, solver) }
    }

    fn encode(&self) -> String {
        format!("run {}\nnet {}\n", self.run, self.net)
    }

    fn decode(text: &str) -> Option<JobId> {
        let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')).map(str::to_string);
        Some(JobId { run: field("run")?, net: field("net")? })
    }

    /// Writes the identity into `folder` (created if need be), whole or not at all.
    pub fn record(&self, folder: &Path) -> Result<()> {
        std::fs::create_dir_all(folder).map_err(|e| Error::file(folder, format!("cannot create the folder: {e}")))?;
        let path = folder.join(JOB_FILE);
        let tmp = folder.join(format!(".{JOB_FILE}.tmp-{}", std::process::id()));
        let written = std::fs::write(&tmp, self.encode()).and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::file(&path, format!("cannot write the snapshot's job identity: {e}")));
        }
        Ok(())
    }

    /// The identity recorded in a snapshot folder, if any.
    pub fn of(folder: &Path) -> Option<JobId> {
        JobId::decode(&std::fs::read_to_string(folder.join(JOB_FILE)).ok()?)
    }
}

/// FNV-1a over the layer names, types, blob shapes and the solver type:
/// what a snapshot's rows mean. Stable across builds and machines.
fn fingerprint(layout: &ParamLayout, solver: &SolverParam) -> String {
    let mut text = String::from(solver.solver_type.name());
    for l in &layout.layers {
        let _ = write!(text, "|{}:{}", l.name, l.type_name);
        for b in &l.blobs {
            let _ = write!(text, ":{:?}", b.shape);
        }
    }
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// The geeps checkpoint folder of the snapshot at `iter`.
pub fn checkpoint_folder(prefix: &str, iter: u64) -> PathBuf {
    PathBuf::from(format!("{prefix}_iter_{iter}.geeps"))
}

/// One `PREFIX_iter_N.geeps` folder.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub iter: u64,
    pub folder: PathBuf,
    /// Its checkpoint was published (a kill while writing leaves it false).
    pub complete: bool,
    pub job: Option<JobId>,
}

/// The snapshot folders of `prefix`, oldest first.
pub fn snapshots(prefix: &str) -> Vec<Snapshot> {
    let prefix_path = Path::new(prefix);
    let dir = match prefix_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(stem) = prefix_path.file_name().map(|s| s.to_string_lossy().into_owned()) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut found: Vec<Snapshot> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let iter = name.strip_prefix(&format!("{stem}_iter_"))?.strip_suffix(".geeps")?.parse().ok()?;
            let folder = e.path();
            Some(Snapshot { iter, complete: folder.join("LATEST").is_file(), job: JobId::of(&folder), folder })
        })
        .collect();
    found.sort_by_key(|s| s.iter);
    found
}

/// The newest `PREFIX_iter_N.geeps` folder whose checkpoint was published.
pub fn newest_snapshot(prefix: &str) -> Option<PathBuf> {
    snapshots(prefix).into_iter().filter(|s| s.complete).map(|s| s.folder).next_back()
}

/// Removes the `PREFIX_iter_N.geeps` folders whose checkpoint was never published.
pub fn remove_incomplete(prefix: &str) {
    for s in snapshots(prefix) {
        if !s.complete {
            let _ = std::fs::remove_dir_all(s.folder);
        }
    }
}

/// Where a run resumes from, and what the log says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub folder: PathBuf,
    /// Whose snapshot it is, for the log.
    pub whose: String,
}

/// What a run starts from. `explicit`: the `-snapshot` asked for;
/// `restarted`: a launcher's restart (`GEEPS_RESTART_COUNT` above 0) with
/// resuming on restart allowed; `existing`: what a fresh run does with
/// snapshots it finds. On a restart this run's own newest snapshot wins;
/// another job's is never taken unasked.
pub fn choose(
    prefix: &str,
    job: &JobId,
    explicit: Option<&Path>,
    restarted: bool,
    existing: ExistingSnapshots,
) -> Result<Option<Resume>> {
    let all = snapshots(prefix);
    let whose = |s: &Snapshot| match &s.job {
        Some(j) if j == job => "this run's snapshot".to_string(),
        Some(j) if j.net == job.net => format!("a snapshot of run {}, not this one", j.run),
        Some(j) => format!("a snapshot of run {} of another net or solver ({})", j.run, j.net),
        None => "a snapshot that names no job".to_string(),
    };
    let own = all.iter().rfind(|s| s.complete && s.job.as_ref() == Some(job));
    if restarted {
        if let Some(s) = own {
            return Ok(Some(Resume { folder: s.folder.clone(), whose: whose(s) }));
        }
    }
    if let Some(p) = explicit {
        let folder = explicit_folder(p)?;
        let whose = match all.iter().find(|s| same_path(&s.folder, &folder)) {
            Some(s) => whose(s),
            None => JobId::of(&folder).map_or("a snapshot that names no job".into(), |j| {
                whose(&Snapshot { iter: 0, folder: folder.clone(), complete: true, job: Some(j) })
            }),
        };
        return Ok(Some(Resume { folder, whose }));
    }
    let complete: Vec<&Snapshot> = all.iter().filter(|s| s.complete).collect();
    match existing {
        _ if complete.is_empty() => Ok(None),
        // A restart of a run that started fresh: the others' snapshots were
        // refused, overwritten or resumed by its first start already.
        _ if restarted => Ok(None),
        ExistingSnapshots::Resume => {
            let s = complete[complete.len() - 1];
            Ok(Some(Resume { folder: s.folder.clone(), whose: whose(s) }))
        }
        ExistingSnapshots::Overwrite => Ok(None),
        ExistingSnapshots::Refuse => {
            let names: Vec<String> = complete.iter().map(|s| s.folder.display().to_string()).collect();
            let newest = complete[complete.len() - 1];
            Err(Error::config(format!(
                "snapshot_prefix `{prefix}` already holds {} snapshot(s) of an earlier run ({}; the newest at iteration {}, {}); \
                 starting afresh would overwrite them. Pass -resume to go on from the newest, -snapshot FILE for another, \
                 or -overwrite to remove them and start from iteration 0 (or change snapshot_prefix)",
                names.len(),
                names.join(", "),
                newest.iter,
                whose(newest)
            )))
        }
    }
}

/// Removes the prefix's snapshot folders (`-overwrite`), so that no later
/// restart can mistake them for this run's.
pub fn remove_all(prefix: &str) -> Result<usize> {
    let all = snapshots(prefix);
    for s in &all {
        std::fs::remove_dir_all(&s.folder)
            .map_err(|e| Error::file(&s.folder, format!("cannot remove the earlier snapshot (-overwrite): {e}")))?;
    }
    Ok(all.len())
}

/// The checkpoint folder a `-snapshot` argument names: a `.solverstate`
/// or `.solverstate.h5` (its `.geeps` folder beside it) or the folder itself.
fn explicit_folder(p: &Path) -> Result<PathBuf> {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if let Some(stem) = name.strip_suffix(".solverstate").or_else(|| name.strip_suffix(".solverstate.h5")) {
        let folder = p.with_file_name(format!("{stem}.geeps"));
        if !p.is_file() {
            return Err(Error::file(p, "no such solver state"));
        }
        if !folder.is_dir() {
            return Err(Error::file(
                p,
                format!(
                    "its geeps checkpoint {} is missing; resume needs both (written together at each snapshot)",
                    folder.display()
                ),
            ));
        }
        return Ok(folder);
    }
    Ok(p.to_path_buf())
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(run: &str) -> JobId {
        JobId { run: run.into(), net: "00000000000000aa".into() }
    }

    fn solver(prefix: &Path) -> String {
        prefix.display().to_string()
    }

    /// A complete snapshot at `iter` written by `writer`.
    fn snapshot(prefix: &Path, iter: u64, writer: Option<&JobId>) -> PathBuf {
        let folder = checkpoint_folder(&prefix.display().to_string(), iter);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("LATEST"), "ckpt-000000000001\n").unwrap();
        if let Some(j) = writer {
            j.record(&folder).unwrap();
        }
        folder
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("caffe-geeps-snapshots-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("lenet")
    }

    #[test]
    fn a_restart_resumes_only_its_own_jobs_newest_snapshot() {
        let prefix = scratch("restart");
        let s = solver(&prefix);
        let (mine, theirs) = (job("new"), job("old"));
        snapshot(&prefix, 280, Some(&theirs));
        // Killed before its first snapshot: starts over, never from iteration 280.
        assert_eq!(choose(&s, &mine, None, true, ExistingSnapshots::Refuse).unwrap(), None);
        let own = snapshot(&prefix, 100, Some(&mine));
        let r = choose(&s, &mine, None, true, ExistingSnapshots::Refuse).unwrap().unwrap();
        assert_eq!((r.folder, r.whose.as_str()), (own, "this run's snapshot"));
        std::fs::remove_dir_all(prefix.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_fresh_run_refuses_earlier_snapshots_unless_told_and_says_whose_it_resumes() {
        let prefix = scratch("fresh");
        let s = solver(&prefix);
        let (mine, theirs) = (job("new"), job("old"));
        assert_eq!(choose(&s, &mine, None, false, ExistingSnapshots::Refuse).unwrap(), None);
        snapshot(&prefix, 100, Some(&theirs));
        let newest = snapshot(&prefix, 280, Some(&theirs));
        let e = choose(&s, &mine, None, false, ExistingSnapshots::Refuse).unwrap_err().to_string();
        assert!(e.contains("already holds 2 snapshot(s)") && e.contains("lenet_iter_280.geeps"), "{e}");
        assert!(e.contains("-resume") && e.contains("-overwrite") && e.contains("run old"), "{e}");
        let r = choose(&s, &mine, None, false, ExistingSnapshots::Resume).unwrap().unwrap();
        assert_eq!(r.folder, newest);
        assert_eq!(r.whose, "a snapshot of run old, not this one");
        assert_eq!(choose(&s, &mine, None, false, ExistingSnapshots::Overwrite).unwrap(), None);
        assert_eq!(remove_all(&s).unwrap(), 2);
        assert!(snapshots(&s).is_empty());
        std::fs::remove_dir_all(prefix.parent().unwrap()).unwrap();
    }

    #[test]
    fn an_explicit_snapshot_may_be_anyones_and_a_restart_prefers_its_own_progress() {
        let prefix = scratch("explicit");
        let s = solver(&prefix);
        let (mine, theirs) = (job("new"), job("old"));
        let old = snapshot(&prefix, 280, Some(&theirs));
        let unnamed = snapshot(&prefix, 300, None);
        let r = choose(&s, &mine, Some(&old), false, ExistingSnapshots::Refuse).unwrap().unwrap();
        assert_eq!((r.folder, r.whose.as_str()), (old.clone(), "a snapshot of run old, not this one"));
        let r = choose(&s, &mine, Some(&unnamed), false, ExistingSnapshots::Refuse).unwrap().unwrap();
        assert_eq!(r.whose, "a snapshot that names no job");
        // Restarted with the same -snapshot, after this run saved its own: its own, not the start again.
        let own = snapshot(&prefix, 400, Some(&mine));
        assert_eq!(choose(&s, &mine, Some(&old), true, ExistingSnapshots::Refuse).unwrap().unwrap().folder, own);
        // Another net's snapshot is named as such.
        let other = JobId { run: "new".into(), net: "00000000000000bb".into() };
        let theirs_net = snapshot(&prefix, 500, Some(&other));
        let r = choose(&s, &mine, Some(&theirs_net), false, ExistingSnapshots::Refuse).unwrap().unwrap();
        assert!(r.whose.contains("of another net or solver"), "{}", r.whose);
        std::fs::remove_dir_all(prefix.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_job_file_round_trips_and_leaves_no_temporary_file() {
        let dir = scratch("job").with_extension("geeps");
        let j = job("r1");
        j.record(&dir).unwrap();
        assert_eq!(JobId::of(&dir), Some(j));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
}
