//! The one list of the trainer's shipped PTX modules, by source file, each
//! beside its `.cu` in the folder of the layer, solver or data code it
//! serves. `gpu::kernels` loads them; the emulator's interpreter tests read
//! this file too (by path), so it names nothing of the crate. Must never
//! hold anything but the list.

/// (source file stem, PTX text) of every shipped module.
pub const MODULES: &[(&str, &str)] = &[
    ("activations", include_str!("../layers/activation/activations.ptx")),
    ("adaptive", include_str!("../solvers/adaptive.ptx")),
    ("batch_norm", include_str!("../layers/batch_norm/batch_norm.ptx")),
    ("bias", include_str!("../layers/inner_product/bias.ptx")),
    ("concat", include_str!("../layers/concat/concat.ptx")),
    ("contrastive_loss", include_str!("../layers/contrastive_loss/contrastive_loss.ptx")),
    ("crop", include_str!("../layers/crop/crop.ptx")),
    ("eltwise", include_str!("../layers/eltwise/eltwise.ptx")),
    ("embed", include_str!("../layers/embed/embed.ptx")),
    ("euclidean_loss", include_str!("../layers/euclidean_loss/euclidean_loss.ptx")),
    ("hinge_loss", include_str!("../layers/hinge_loss/hinge_loss.ptx")),
    ("im2col", include_str!("../layers/im2col/im2col.ptx")),
    ("infogain_loss", include_str!("../layers/infogain_loss/infogain_loss.ptx")),
    ("lrn", include_str!("../layers/lrn/lrn.ptx")),
    ("multinomial_logistic_loss", include_str!("../layers/multinomial_logistic_loss/multinomial_logistic_loss.ptx")),
    ("mvn", include_str!("../layers/mvn/mvn.ptx")),
    ("pointwise", include_str!("../layers/pointwise/pointwise.ptx")),
    ("pointwise_in_place", include_str!("../layers/pointwise_in_place/pointwise_in_place.ptx")),
    ("pooling", include_str!("../layers/pool/pooling.ptx")),
    ("power", include_str!("../layers/power/power.ptx")),
    ("prelu", include_str!("../layers/prelu/prelu.ptx")),
    ("reduction", include_str!("../layers/reduction/reduction.ptx")),
    ("scale", include_str!("../layers/scale/scale.ptx")),
    ("sgd", include_str!("../solvers/sgd.ptx")),
    ("sigmoid_cross_entropy_loss", include_str!("../layers/sigmoid_cross_entropy_loss/sigmoid_cross_entropy_loss.ptx")),
    ("softmax", include_str!("../layers/softmax/softmax.ptx")),
    ("softmax_loss", include_str!("../layers/softmax_loss/softmax_loss.ptx")),
    ("tile", include_str!("../layers/tile/tile.ptx")),
    ("transform", include_str!("../data/transform.ptx")),
];

/// The PTX of source file `stem`, at compile time; a name not in the list
/// does not compile.
#[allow(dead_code)] // for the tests that read this file by path
pub const fn module(stem: &str) -> &'static str {
    let mut i = 0;
    while i < MODULES.len() {
        if same(MODULES[i].0.as_bytes(), stem.as_bytes()) {
            return MODULES[i].1;
        }
        i += 1;
    }
    panic!("no shipped PTX module of that name")
}

#[allow(dead_code)]
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
