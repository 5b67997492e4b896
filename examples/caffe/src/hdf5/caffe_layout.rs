//! Caffe's HDF5 snapshot layout: a `.caffemodel.h5` holds group `data`
//! with a group per layer and its blobs as float datasets `0`, `1`, … in
//! the blob's shape (`Net::ToHDF5`); a `.solverstate.h5` holds `iter` and
//! `current_step` (one-element ints), `learned_net` (a string) and group
//! `history` with the solver's history blobs `0`, `1`, … (SGDSolver's
//! `SnapshotSolverStateToHDF5`). Files are written atomically. It owns the
//! layout; it must never decide what a layer's blobs are.

use std::path::Path;

use super::file::H5File;
use crate::error::{Error, Result};
use crate::proto::binary::write_atomic_with;
use crate::proto::caffemodel::LayerBlobs;

/// A solver state as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct SolverStateH5 {
    pub iter: i32,
    pub current_step: i32,
    pub learned_net: String,
    /// (shape, values) per history blob.
    pub history: Vec<(Vec<usize>, Vec<f32>)>,
}

fn to_io(e: String) -> std::io::Error {
    std::io::Error::other(e)
}

/// Writes the layers' blobs as a `.caffemodel.h5`.
pub fn write_caffemodel_h5(path: &Path, layers: &[LayerBlobs]) -> Result<()> {
    write_atomic_with(path, |tmp| {
        let f = H5File::create(tmp).map_err(to_io)?;
        for l in layers {
            let group = format!("data/{}", l.name);
            for (k, (shape, data)) in l.blobs.iter().enumerate() {
                f.write_floats(&group, &k.to_string(), shape, data).map_err(to_io)?;
            }
        }
        Ok(())
    })
}

/// The blobs of each layer in `names` that the `.caffemodel.h5` at `path`
/// has (layers it lacks are left out), in `names`' order.
pub fn read_caffemodel_h5(path: &Path, names: &[&str]) -> Result<Vec<LayerBlobs>> {
    let f = H5File::open(path).map_err(|e| Error::file(path, e))?;
    if !f.exists("", "data").map_err(|e| Error::file(path, e))? {
        return Err(Error::file(path, "not a Caffe HDF5 model: it has no group `data`"));
    }
    let mut out = Vec::new();
    for &name in names {
        if !f.exists("data", name).map_err(|e| Error::file(path, e))? {
            continue;
        }
        let group = format!("data/{name}");
        let mut blobs = Vec::new();
        while f.exists(&group, &blobs.len().to_string()).map_err(|e| Error::file(path, e))? {
            blobs.push(f.read_floats(&group, &blobs.len().to_string()).map_err(|e| Error::file(path, e))?);
        }
        out.push(LayerBlobs { name: name.to_string(), type_name: String::new(), blobs });
    }
    Ok(out)
}

/// Writes a `.solverstate.h5`.
pub fn write_solverstate_h5(path: &Path, state: &SolverStateH5) -> Result<()> {
    write_atomic_with(path, |tmp| {
        let f = H5File::create(tmp).map_err(to_io)?;
        f.write_int("iter", state.iter).map_err(to_io)?;
        f.write_string("learned_net", &state.learned_net).map_err(to_io)?;
        f.write_int("current_step", state.current_step).map_err(to_io)?;
        // A solver without history still has the group, as Caffe's does.
        f.create_group("history").map_err(to_io)?;
        for (k, (shape, data)) in state.history.iter().enumerate() {
            f.write_floats("history", &k.to_string(), shape, data).map_err(to_io)?;
        }
        Ok(())
    })
}

/// Reads a `.solverstate.h5`.
pub fn read_solverstate_h5(path: &Path) -> Result<SolverStateH5> {
    let f = H5File::open(path).map_err(|e| Error::file(path, e))?;
    let e = |m: String| Error::file(path, m);
    let mut history = Vec::new();
    while f.exists("history", &history.len().to_string()).map_err(e)? {
        let blob = f.read_floats("history", &history.len().to_string()).map_err(e)?;
        history.push(blob);
    }
    let current_step =
        if f.exists("", "current_step").map_err(e)? { f.read_int("current_step").map_err(e)? } else { 0 };
    Ok(SolverStateH5 {
        iter: f.read_int("iter").map_err(e)?,
        current_step,
        learned_net: f.read_string("learned_net").map_err(e)?,
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("caffe-geeps-{}-h5-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn models_and_solver_states_round_trip() {
        if !super::super::available_for("models_and_solver_states_round_trip") {
            return;
        }
        let d = scratch("round-trip");
        let layers = vec![
            LayerBlobs {
                name: "conv1".into(),
                type_name: "Convolution".into(),
                blobs: vec![(vec![2, 1, 3, 3], (0..18).map(|i| i as f32 * 0.5).collect()), (vec![2], vec![1.0, -1.0])],
            },
            LayerBlobs {
                name: "ip/1".replace('/', "_"),
                type_name: "InnerProduct".into(),
                blobs: vec![(vec![1, 4], vec![4.0; 4])],
            },
        ];
        let model = d.join("m_iter_5.caffemodel.h5");
        write_caffemodel_h5(&model, &layers).unwrap();
        let back = read_caffemodel_h5(&model, &["ip_1", "missing", "conv1"]).unwrap();
        assert_eq!(back.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["ip_1", "conv1"]);
        assert_eq!(back[1].blobs, layers[0].blobs);
        assert_eq!(back[0].blobs, layers[1].blobs);

        let state = SolverStateH5 {
            iter: 5,
            current_step: 1,
            learned_net: model.display().to_string(),
            history: vec![(vec![2, 1, 3, 3], vec![0.25; 18]), (vec![2], vec![0.0, 3.0])],
        };
        let path = d.join("m_iter_5.solverstate.h5");
        write_solverstate_h5(&path, &state).unwrap();
        assert_eq!(read_solverstate_h5(&path).unwrap(), state);
        // No temporary file is left beside them.
        let names: Vec<String> =
            std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn files_that_are_not_caffe_models_are_named_errors() {
        if !super::super::available_for("files_that_are_not_caffe_models_are_named_errors") {
            return;
        }
        let d = scratch("bad");
        let not_h5 = d.join("x.caffemodel.h5");
        std::fs::write(&not_h5, b"not hdf5").unwrap();
        let e = read_caffemodel_h5(&not_h5, &["a"]).unwrap_err().to_string();
        assert!(e.contains("not an HDF5 file"), "{e}");
        let e = read_caffemodel_h5(&d.join("absent.h5"), &["a"]).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        let state = d.join("s.solverstate.h5");
        write_solverstate_h5(
            &state,
            &SolverStateH5 { iter: 1, current_step: 0, learned_net: "m".into(), history: vec![] },
        )
        .unwrap();
        let e = read_caffemodel_h5(&state, &["a"]).unwrap_err().to_string();
        assert!(e.contains("no group `data`"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
