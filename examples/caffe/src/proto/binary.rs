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
    let io = |e: std::io::Error| Error::file(path, format!("cannot write: {e}"));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| Error::file(path, "not a file name"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename itself is durable once the folder is.
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// Writes message `msg` to `path` atomically.
pub fn write<T: prost::Message>(path: &Path, msg: &T) -> Result<()> {
    write_atomic(path, &msg.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
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
