//! InfogainLoss's matrix H read from its `infogain_loss_param.source` (a
//! `.binaryproto` BlobProto, as Caffe writes it) into the layer's settings
//! before the layer is built, a relative path tried against the current
//! directory, then the net file's. It owns that one read; it must never
//! build a layer.

use crate::proto::caffe;
use crate::proto::layer_spec::LayerSpec;
use crate::proto::net::LayerKind;
use crate::proto::solver::resolve;

/// `kind` with H loaded when it is an InfogainLoss reading H from a file
/// (`None`: nothing to load).
pub fn with_matrix(kind: &LayerKind) -> Result<Option<LayerKind>, String> {
    let LayerKind::Spec(LayerSpec::InfogainLoss(c)) = kind else { return Ok(None) };
    let Some(source) = &c.source else { return Ok(None) };
    let path = resolve(source, &c.base_dir);
    let blob: caffe::BlobProto = crate::proto::binary::read(&path, "the infogain matrix")
        .map_err(|e| format!("infogain_loss_param.source: {e}"))?;
    let matrix: Vec<f32> =
        if blob.data.is_empty() { blob.double_data.iter().map(|&v| v as f32).collect() } else { blob.data.clone() };
    let mut c = c.clone();
    c.matrix = matrix;
    Ok(Some(LayerKind::Spec(LayerSpec::InfogainLoss(c))))
}
