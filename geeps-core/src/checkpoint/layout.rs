//! Where checkpoints live in their folder and how they get there without
//! ever leaving a torn one: files are written to a temporary name, synced
//! and renamed; a checkpoint is assembled in `.staging-<clock>/`, renamed
//! whole to `ckpt-<clock>/`, and only then named by `LATEST` (itself
//! replaced by a rename). A crash at any instant leaves `LATEST` naming a
//! complete checkpoint or the one before it. It owns paths, atomic writes
//! and pruning; it must never read rows from an instance.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::checkpoint::manifest::{verify, Manifest};
use crate::error::{Error, Result};

const LATEST: &str = "LATEST";
pub(crate) const MANIFEST: &str = "MANIFEST";
const DONE_PREFIX: &str = "ckpt-";
const STAGING_PREFIX: &str = ".staging-";

fn io_error(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Checkpoint { path: path.display().to_string(), reason: format!("cannot {what}: {e}") }
}

fn clock_name(prefix: &str, clock: u64) -> String {
    format!("{prefix}{clock:012}")
}

/// The folder a checkpoint of `clock` is assembled in.
pub(crate) fn staging(dir: &Path, clock: u64) -> PathBuf {
    dir.join(clock_name(STAGING_PREFIX, clock))
}

/// Flushes a folder's entries (a rename is durable only once its folder is).
fn sync_dir(dir: &Path) -> Result<()> {
    // Opening a folder read-only and syncing it is how POSIX makes its
    // entries durable; other systems do not allow it and do not need it.
    if cfg!(unix) {
        fs::File::open(dir).and_then(|f| f.sync_all()).map_err(|e| io_error(dir, "sync the folder", e))?;
    }
    Ok(())
}

/// Writes `bytes` as `path` so that a reader sees the old file or the whole
/// new one, never a part: temporary name, fsync, rename, fsync of the folder.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(io_error(&tmp, &format!("write {} bytes", bytes.len()), e));
    }
    fs::rename(&tmp, path).map_err(|e| io_error(path, "rename the finished file into place", e))?;
    sync_dir(dir)
}

/// Creates the checkpoint folder and a staging folder for `clock`.
pub(crate) fn prepare(dir: &Path, clock: u64) -> Result<PathBuf> {
    let stage = staging(dir, clock);
    fs::create_dir_all(&stage).map_err(|e| io_error(&stage, "create the folder", e))?;
    Ok(stage)
}

/// Turns a filled staging folder into the latest checkpoint and keeps the
/// `keep` newest (at least this one). Returns the checkpoint's folder.
pub(crate) fn publish(dir: &Path, clock: u64, keep: usize) -> Result<PathBuf> {
    let stage = staging(dir, clock);
    sync_dir(&stage)?;
    let done = dir.join(clock_name(DONE_PREFIX, clock));
    if done.exists() {
        // An earlier run reached the same clock; LATEST may name it, so it
        // goes only after LATEST names something else.
        let _ = fs::remove_dir_all(&done);
    }
    fs::rename(&stage, &done).map_err(|e| io_error(&done, "rename the staging folder into place", e))?;
    sync_dir(dir)?;
    write_atomically(&dir.join(LATEST), format!("{}\n", clock_name(DONE_PREFIX, clock)).as_bytes())?;
    prune(dir, clock, keep.max(1));
    Ok(done)
}

/// Clocks of the complete (`ckpt-`) and staging folders in `dir`.
fn folders(dir: &Path) -> (Vec<u64>, Vec<u64>) {
    let (mut done, mut staging) = (Vec::new(), Vec::new());
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(c) = name.strip_prefix(DONE_PREFIX).and_then(|c| c.parse().ok()) {
                done.push(c);
            } else if let Some(c) = name.strip_prefix(STAGING_PREFIX).and_then(|c| c.parse().ok()) {
                staging.push(c);
            }
        }
    }
    done.sort_unstable();
    staging.sort_unstable();
    (done, staging)
}

/// Removes complete checkpoints beyond the `keep` newest and every staging
/// folder (abandoned by a crash; none is in progress while one publishes).
fn prune(dir: &Path, latest: u64, keep: usize) {
    let (done, stale) = folders(dir);
    let older: Vec<u64> = done.into_iter().filter(|&c| c != latest).collect();
    let drop_count = (older.len() + 1).saturating_sub(keep);
    for c in older.into_iter().take(drop_count) {
        let _ = fs::remove_dir_all(dir.join(clock_name(DONE_PREFIX, c)));
    }
    for c in stale {
        let _ = fs::remove_dir_all(staging(dir, c));
    }
}

/// Removes staging folders left by a crashed run (before a restored
/// cluster writes new ones).
pub(crate) fn remove_staging(dir: &Path) {
    for c in folders(dir).1 {
        let _ = fs::remove_dir_all(staging(dir, c));
    }
}

/// Reads and checks a complete checkpoint folder: its manifest and every
/// file it lists.
pub(crate) fn open(folder: &Path) -> Result<Manifest> {
    let path = folder.join(MANIFEST);
    let text = fs::read_to_string(&path).map_err(|e| io_error(&path, "read the manifest", e))?;
    let m = Manifest::parse(&text, &path)?;
    for f in m.tables.iter().map(|t| &t.data).chain(&m.rank_states) {
        verify(folder, f)?;
    }
    Ok(m)
}

/// The newest complete checkpoint in `dir`: the one `LATEST` names, or, if
/// it does not check out, the newest `ckpt-` folder that does.
pub(crate) fn latest(dir: &Path) -> Result<(PathBuf, Manifest)> {
    if !dir.is_dir() {
        return Err(Error::Checkpoint {
            path: dir.display().to_string(),
            reason: "no such folder; pass the folder given to `checkpoint`".into(),
        });
    }
    if dir.join(MANIFEST).is_file() {
        // A checkpoint folder itself, not the folder of checkpoints.
        return open(dir).map(|m| (dir.to_path_buf(), m));
    }
    let named = fs::read_to_string(dir.join(LATEST)).ok().map(|s| dir.join(s.trim()));
    let mut tried = Vec::new();
    if let Some(folder) = named {
        match open(&folder) {
            Ok(m) => return Ok((folder, m)),
            Err(e) => tried.push(e.to_string()),
        }
    }
    for c in folders(dir).0.into_iter().rev() {
        let folder = dir.join(clock_name(DONE_PREFIX, c));
        match open(&folder) {
            Ok(m) => {
                tracing::warn!(folder = %folder.display(), "LATEST did not name a usable checkpoint; using the newest one that checks out");
                return Ok((folder, m));
            }
            Err(e) => tried.push(e.to_string()),
        }
    }
    Err(Error::Checkpoint {
        path: dir.display().to_string(),
        reason: if tried.is_empty() {
            "holds no checkpoint".into()
        } else {
            format!("holds no usable checkpoint: {}", tried.join("; "))
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::manifest::entry_of;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("geeps-layout-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn write_checkpoint(dir: &Path, clock: u64, keep: usize) {
        let stage = prepare(dir, clock).unwrap();
        let body = clock.to_le_bytes();
        write_atomically(&stage.join("rank-0.state"), &body).unwrap();
        let m = Manifest {
            clock,
            workers: 1,
            row_width: 1,
            tables: vec![],
            rank_states: vec![entry_of("rank-0.state", &body)],
        };
        write_atomically(&stage.join(MANIFEST), m.to_text().as_bytes()).unwrap();
        publish(dir, clock, keep).unwrap();
    }

    #[test]
    fn latest_is_the_newest_and_old_ones_are_pruned() {
        let dir = temp("prune");
        for c in [1, 2, 3, 4] {
            write_checkpoint(&dir, c, 2);
        }
        assert_eq!(latest(&dir).unwrap().1.clock, 4);
        assert_eq!(folders(&dir).0, vec![3, 4]);
        // An abandoned staging folder does not count and goes at the next publish.
        prepare(&dir, 5).unwrap();
        assert_eq!(latest(&dir).unwrap().1.clock, 4);
        write_checkpoint(&dir, 6, 2);
        assert_eq!(folders(&dir), (vec![4, 6], vec![]));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_latest_falls_back_to_an_older_checkpoint() {
        let dir = temp("fallback");
        write_checkpoint(&dir, 1, 3);
        write_checkpoint(&dir, 2, 3);
        fs::write(dir.join("ckpt-000000000002/rank-0.state"), b"torn").unwrap();
        let (folder, m) = latest(&dir).unwrap();
        assert_eq!((m.clock, folder.file_name().unwrap().to_str().unwrap()), (1, "ckpt-000000000001"));
        fs::write(dir.join("ckpt-000000000001/MANIFEST"), b"geeps checkpoint 1\n").unwrap();
        let e = latest(&dir).unwrap_err().to_string();
        assert!(e.contains("no usable checkpoint") && e.contains("bytes where the manifest says"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
        assert!(latest(&dir).unwrap_err().to_string().contains("no such folder"));
    }
}
