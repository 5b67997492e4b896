//! Layer profiles of the paper's models at full scale: parameters, the
//! activation blob each layer writes, and multiply-adds per image, from which
//! compute time follows. It owns the shapes and the sources of every number;
//! it never scales, times or runs anything (see `workload.rs`).
//!
//! Sources (GeePS paper §5.1 and §5.3):
//! - AdamLike: 5 conv + 3 FC layers, 470 MB of parameters, 2.4 billion
//!   connections per image, 200 images per batch, 123 MB of input and 2.6 GB
//!   of intermediate states, peak of parameter buffers 528 MB, largest layer
//!   about 17% of 4.73 GB. The exact shapes are not published: conv layers
//!   are AlexNet's (multiply-adds scaled to the 2.4 billion), the FC layers
//!   are sized to the 470 MB and the 528 MB peak (21,841 ImageNet22K classes),
//!   blob sizes to the input, intermediate and largest-layer figures.
//! - GoogLeNet: the 22 parameterised layers of Szegedy et al. (conv1, conv2's
//!   reduce and 3x3, each inception as its 1x1 convs then its 3x3/5x5 convs,
//!   the classifier), shapes from that paper's Table 1; the two auxiliary
//!   classifiers are folded into the layers they branch from; parameter counts
//!   are scaled uniformly to the 57 MB the GeePS paper gives; 32 images per batch.
//! - Synthetic FC (Figure 13): square layers of about 373 MB of weights, one
//!   weight per connection; the batch is set so that local data is 50 GB for
//!   the 56-layer (20 GB) model, the paper's "over 70 GB total".

use serde::Serialize;

/// Bytes of an `f32`.
pub const FLOAT: u64 = 4;

/// Multiply-adds per image per second of the emulated GPU, training
/// (forward + backward). The paper: 4 GeePS machines train more than the 570
/// billion connections per second of 108-machine ProjectAdam on AdamLike, so
/// one K20 trains at least 570e9 / 4 connections (multiply-adds) per second.
pub const PAPER_CONNECTIONS_PER_SECOND: f64 = 570e9 / 4.0;

/// One layer of a model, full scale.
#[derive(Debug, Clone, Serialize)]
pub struct Layer {
    pub name: String,
    /// Parameter floats (weights and biases); 0 for layers without parameters.
    pub params: u64,
    /// Floats per image of the blob this layer writes (data; its diff doubles it).
    pub blob: u64,
    /// Multiply-adds per image, forward.
    pub macs: u64,
}

/// A model at full scale.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub name: String,
    pub batch: u64,
    /// Floats per image of the input blob.
    pub input: u64,
    pub layers: Vec<Layer>,
}

impl Model {
    pub fn param_bytes(&self) -> u64 {
        self.layers.iter().map(|l| l.params).sum::<u64>() * FLOAT
    }

    /// Input plus every blob, data and diff, for one batch.
    pub fn local_bytes(&self) -> u64 {
        (self.input + self.layers.iter().map(|l| 2 * l.blob).sum::<u64>()) * self.batch * FLOAT
    }

    pub fn macs_per_image(&self) -> u64 {
        self.layers.iter().map(|l| l.macs).sum()
    }

    /// Seconds per batch (forward + backward) on the paper's GPU.
    pub fn paper_seconds_per_batch(&self) -> f64 {
        (self.macs_per_image() * self.batch) as f64 / PAPER_CONNECTIONS_PER_SECOND
    }
}

fn layer(name: &str, params: u64, blob: u64, macs: u64) -> Layer {
    Layer { name: name.to_string(), params, blob, macs }
}

/// Blob floats per image that hold `mb` megabytes (data + diff) for `batch` images.
fn blob_of_mb(mb: f64, batch: u64) -> u64 {
    (mb * 1e6 / (2 * batch * FLOAT) as f64).round() as u64
}

/// AdamLike on ImageNet22K (paper Table 2: 200 images per batch).
pub fn adamlike() -> Model {
    let batch = 200;
    // AlexNet conv multiply-adds (ungrouped), scaled so the model has 2.4e9
    // connections per image with its FC layers.
    let fc = [(12_544u64, 3_022u64), (3_022, 3_022), (3_022, 21_841)];
    let fc_macs: u64 = fc.iter().map(|(i, o)| i * o).sum();
    let alexnet_conv = [105_415_200u64, 447_897_600, 149_520_384, 224_280_576, 149_520_384];
    let k = (2.4e9 - fc_macs as f64) / alexnet_conv.iter().sum::<u64>() as f64;
    let conv = |i: usize| (alexnet_conv[i] as f64 * k).round() as u64;
    let b = |mb: f64| blob_of_mb(mb, batch);
    let fc_layer = |name: &str, (i, o): (u64, u64), mb: f64| layer(name, i * o + o, b(mb), i * o);
    let layers = vec![
        layer("conv1", 96 * 363 + 96, b(400.0), conv(0)),
        layer("norm1", 0, b(400.0), 5 * b(400.0)),
        layer("pool1", 0, b(240.0), 9 * b(240.0)),
        layer("conv2", 256 * 2_400 + 256, b(380.0), conv(1)),
        layer("norm2", 0, b(380.0), 5 * b(380.0)),
        layer("pool2", 0, b(170.0), 9 * b(170.0)),
        layer("conv3", 384 * 2_304 + 384, b(180.0), conv(2)),
        layer("conv4", 384 * 3_456 + 384, b(180.0), conv(3)),
        layer("conv5", 256 * 3_456 + 256, b(120.0), conv(4)),
        layer("pool5", 0, b(60.0), 9 * b(60.0)),
        fc_layer("fc6", fc[0], 4.8),
        layer("drop6", 0, 3_022, 3_022),
        fc_layer("fc7", fc[1], 4.8),
        layer("drop7", 0, 3_022, 3_022),
        fc_layer("fc8", fc[2], 35.0),
        layer("loss", 0, 21_841, 21_841),
    ];
    Model { name: "AdamLike".into(), batch, input: 3 * 224 * 224, layers }
}

/// An inception module: spatial size and channels (Szegedy et al., Table 1).
struct Inception {
    name: &'static str,
    hw: u64,
    cin: u64,
    c1: u64,
    c3r: u64,
    c3: u64,
    c5r: u64,
    c5: u64,
    pp: u64,
    /// Floats of a pooling layer or auxiliary classifier that follows, folded in.
    extra_blob: u64,
    /// Parameters of an auxiliary classifier branching here, folded in.
    aux_params: u64,
}

impl Inception {
    /// The 1x1 convolutions (and the pool projection) as one layer, then the
    /// 3x3 and 5x5 convolutions with the concatenation as the second.
    fn layers(&self) -> [Layer; 2] {
        let reduce_out = self.c1 + self.c3r + self.c5r + self.pp;
        let a = layer(
            &format!("{}.1x1", self.name),
            self.cin * reduce_out + reduce_out,
            self.hw * (reduce_out + self.cin),
            self.hw * self.cin * reduce_out,
        );
        let out = self.c1 + self.c3 + self.c5 + self.pp;
        let b = layer(
            &format!("{}.3x3", self.name),
            self.c3r * 9 * self.c3 + self.c5r * 25 * self.c5 + self.c3 + self.c5 + self.aux_params,
            self.hw * (self.c3 + self.c5 + out) + self.extra_blob,
            self.hw * (self.c3r * 9 * self.c3 + self.c5r * 25 * self.c5),
        );
        [a, b]
    }
}

/// GoogLeNet on ILSVRC12 (paper Table 2: 32 images per batch).
pub fn googlenet() -> Model {
    // Auxiliary classifier: 1x1 conv to 128, FC 2048 -> 1024, FC 1024 -> 1000.
    let aux = 512 * 128 + 128 + 2_048 * 1_024 + 1_024 + 1_024 * 1_000 + 1_000;
    let aux_blob = 4 * 4 * 512 + 2_048 + 1_024 + 1_000;
    let inc = |name, hw: u64, cin, c: [u64; 6], extra_blob, aux_params| Inception {
        name,
        hw: hw * hw,
        cin,
        c1: c[0],
        c3r: c[1],
        c3: c[2],
        c5r: c[3],
        c5: c[4],
        pp: c[5],
        extra_blob,
        aux_params,
    };
    let modules = [
        inc("inception3a", 28, 192, [64, 96, 128, 16, 32, 32], 0, 0),
        inc("inception3b", 28, 256, [128, 128, 192, 32, 96, 64], 14 * 14 * 480, 0),
        inc("inception4a", 14, 480, [192, 96, 208, 16, 48, 64], aux_blob, aux),
        inc("inception4b", 14, 512, [160, 112, 224, 24, 64, 64], 0, 0),
        inc("inception4c", 14, 512, [128, 128, 256, 24, 64, 64], 0, 0),
        inc("inception4d", 14, 512, [112, 144, 288, 32, 64, 64], aux_blob, aux),
        inc("inception4e", 14, 528, [256, 160, 320, 32, 128, 128], 7 * 7 * 832, 0),
        inc("inception5a", 7, 832, [256, 160, 320, 32, 128, 128], 0, 0),
        inc("inception5b", 7, 832, [384, 192, 384, 48, 128, 128], 1_024, 0),
    ];
    let mut layers = vec![
        // conv1 7x7/2 with its pool and LRN.
        layer("conv1", 7 * 7 * 3 * 64 + 64, 112 * 112 * 64 + 2 * 56 * 56 * 64, 112 * 112 * 64 * 7 * 7 * 3),
        layer("conv2.reduce", 64 * 64 + 64, 56 * 56 * 64, 56 * 56 * 64 * 64),
        // conv2 3x3 with its LRN and pool.
        layer("conv2.3x3", 64 * 9 * 192 + 192, 2 * 56 * 56 * 192 + 28 * 28 * 192, 56 * 56 * 64 * 9 * 192),
    ];
    for m in &modules {
        layers.extend(m.layers());
    }
    // Dropout, classifier and softmax.
    layers.push(layer("classifier", 1_024 * 1_000 + 1_000, 1_024 + 2 * 1_000, 1_024 * 1_000));
    // Scale parameter counts to the paper's 57 MB.
    let total: u64 = layers.iter().map(|l| l.params).sum();
    let k = 57e6 / (total * FLOAT) as f64;
    for l in &mut layers {
        l.params = (l.params as f64 * k).round() as u64;
    }
    Model { name: "GoogLeNet".into(), batch: 32, input: 3 * 224 * 224, layers }
}

/// Width of a synthetic FC layer: about 373 MB of weights.
pub const SYNTHETIC_WIDTH: u64 = 9_656;

/// Batch of the synthetic model: 50 GB of local data over 56 layers.
pub fn synthetic_batch() -> u64 {
    (50e9 / 56.0 / (2 * SYNTHETIC_WIDTH * FLOAT) as f64).round() as u64
}

/// The synthetic fully connected model of Figure 13 with `layers` layers.
pub fn synthetic_fc(layers: usize) -> Model {
    let n = SYNTHETIC_WIDTH;
    Model {
        name: format!("FC x{layers}"),
        batch: synthetic_batch(),
        input: n,
        layers: (0..layers).map(|i| layer(&format!("fc{i}"), n * n, n, n * n)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mb(bytes: u64) -> f64 {
        bytes as f64 / 1e6
    }

    #[test]
    fn adamlike_matches_the_papers_totals() {
        let m = adamlike();
        assert_eq!(m.layers.iter().filter(|l| l.params > 0).count(), 8);
        assert!((mb(m.param_bytes()) - 470.0).abs() < 10.0, "{}", mb(m.param_bytes()));
        let input = mb(m.input * m.batch * FLOAT);
        assert!((input - 123.0).abs() < 5.0, "{input}");
        let intermediate = mb(m.local_bytes()) - input;
        assert!((intermediate - 2_600.0).abs() < 50.0, "{intermediate}");
        assert!((m.macs_per_image() as f64 - 2.4e9).abs() < 1e7);
        // fc8's read + update: the paper's 528 MB minimal peak.
        let fc8 = m.layers.iter().find(|l| l.name == "fc8").unwrap();
        assert!((mb(2 * fc8.params * FLOAT) - 528.0).abs() < 10.0);
    }

    #[test]
    fn googlenet_matches_the_papers_totals() {
        let m = googlenet();
        assert_eq!(m.layers.iter().filter(|l| l.params > 0).count(), 22);
        assert!((mb(m.param_bytes()) - 57.0).abs() < 0.5);
        let macs = m.macs_per_image() as f64;
        assert!((1.4e9..1.7e9).contains(&macs), "{macs}");
    }

    #[test]
    fn synthetic_layers_are_373_mb() {
        let m = synthetic_fc(56);
        assert!((mb(m.param_bytes()) / 56.0 - 373.0).abs() < 1.0);
        assert!((mb(m.local_bytes()) / 1e3 - 50.0).abs() < 1.5);
    }
}
