//! Binary protobuf files through the generated types: read whole, and
//! written atomically (a temporary file beside the target, flushed to disk,
//! renamed over it, and the folder flushed) so a crash or a signal never
//! leaves a half-written `.caffemodel`, `.solverstate` or `.binaryproto`.
//! It owns file handling only; it must never interpret a message.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Reads `path` as message `T`; `what` names the file's kind in errors.
pub fn read<T: prost::Message + Default>(path: &Path, what: &str) -> Result<T> {
    let bytes = fs::read(path).map_err(|e| Error::file(path, format!("cannot read the {what}: {e}")))?;
    T::decode(bytes.as_slice()).map_err(|e| Error::file(path, format!("not a {what} (protobuf): {e}")))
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |tmp| {
        let mut f = File::create(tmp)?;
        f.write_all(bytes)
    })
}

/// Writes `path` atomically through `fill`, which writes the whole file at
/// the temporary path it is given (beside `path`); the file is then flushed
/// to disk and renamed over `path`. The temporary file never outlives a
/// failure.
pub fn write_atomic_with(path: &Path, fill: impl FnOnce(&Path) -> std::io::Result<()>) -> Result<()> {
    let io = |e: std::io::Error| Error::file(path, format!("cannot write: {e}"));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| Error::file(path, "not a file name"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        fill(&tmp)?;
        File::open(&tmp)?.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename itself is durable once the folder is.
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// Removes the temporary files of snapshot writes (`.PREFIX_iter_*.tmp-PID`)
/// that another process, killed while writing, left beside `prefix`.
pub fn remove_stale_temporaries(prefix: &Path) {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Some(stem) = prefix.file_name().map(|s| format!(".{}_iter_", s.to_string_lossy())) else { return };
    let own = format!(".tmp-{}", std::process::id());
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&stem) && name.contains(".tmp-") && !name.ends_with(&own) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Writes message `msg` to `path` atomically.
pub fn write<T: prost::Message>(path: &Path, msg: &T) -> Result<()> {
    write_atomic(path, &msg.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temporaries_of_the_prefix_go_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("caffe-geeps-stale-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let keep = [
            "lenet_iter_40.caffemodel".to_string(),
            ".other_iter_40.caffemodel.tmp-1".to_string(),
            format!(".lenet_iter_40.caffemodel.tmp-{}", std::process::id()),
        ];
        for f in keep.iter().chain([&".lenet_iter_40.caffemodel.tmp-999999".to_string()]) {
            fs::write(dir.join(f), b"x").unwrap();
        }
        remove_stale_temporaries(&dir.join("lenet"));
        let mut left: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        left.sort();
        let mut want = keep.to_vec();
        want.sort();
        assert_eq!(left, want);
        fs::remove_dir_all(&dir).unwrap();
    }
    use crate::proto::caffe::{BlobProto, BlobShape, SolverState};

    #[test]
    fn solverstate_round_trip_and_bad_files() {
        let dir = std::env::temp_dir().join(format!("caffe-geeps-binary-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.solverstate");
        let state = SolverState {
            iter: Some(7),
            learned_net: Some("x.caffemodel".into()),
            history: vec![BlobProto {
                shape: Some(BlobShape { dim: vec![2] }),
                data: vec![1.0, -1.0],
                ..Default::default()
            }],
            current_step: Some(1),
        };
        write(&path, &state).unwrap();
        assert_eq!(read::<SolverState>(&path, "solver state").unwrap(), state);
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::write(&path, [0xff, 0xff, 0xff]).unwrap();
        let e = read::<SolverState>(&path, "solver state").unwrap_err().to_string();
        assert!(e.contains("not a solver state"), "{e}");
        let e = read::<SolverState>(&dir.join("missing"), "solver state").unwrap_err().to_string();
        assert!(e.contains("cannot read the solver state"), "{e}");
        let e = write(&dir.join("no/such/dir/x"), &state).unwrap_err().to_string();
        assert!(e.contains("cannot write"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
