//! Running a published Caffe file on substituted data, changing only what
//! any user must change to run it elsewhere: every `source:` becomes an LMDB
//! of random images of the size the net was published for, every
//! `mean_file:` that LMDB's mean image, every `batch_size:` a small batch;
//! a published solver keeps its update settings and has its schedule,
//! paths and mode rewritten (`max_iter`, `test_iter`, `test_interval`,
//! `display`, `snapshot_prefix`, `solver_mode`); a deploy file gets a small
//! batch for its first input. It owns these rewrites; it never edits a
//! layer or a field beyond them.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use caffe_geeps::data::datum::{Image, Values};
use caffe_geeps::data::lmdb::LmdbWriter;
use caffe_geeps::tools::mean::compute_image_mean;

/// The data a net was published for: channels × height × width images
/// with labels below `classes`.
#[derive(Debug, Clone, Copy)]
pub struct Images {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub classes: i32,
}

pub const IMAGENET: Images = Images { channels: 3, height: 256, width: 256, classes: 1000 };
pub const CIFAR10: Images = Images { channels: 3, height: 32, width: 32, classes: 10 };
pub const MNIST: Images = Images { channels: 1, height: 28, width: 28, classes: 10 };
/// Caffe's siamese MNIST data: two images a record (one per channel), label 1 for a similar pair.
pub const MNIST_PAIRS: Images = Images { channels: 2, height: 28, width: 28, classes: 2 };

/// `records` random images of `images`' size, as `convert_imageset` writes them.
pub fn random_lmdb(path: &Path, images: Images, records: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = LmdbWriter::create(path).expect("create the LMDB");
    let n = images.channels * images.height * images.width;
    for i in 0..records {
        let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        let img = Image {
            channels: images.channels,
            height: images.height,
            width: images.width,
            values: Values::Bytes(bytes),
            label: rng.gen_range(0..images.classes),
        };
        db.put(format!("{i:08}_random").as_bytes(), &img.to_datum_bytes()).expect("write a record");
    }
    assert_eq!(db.finish().expect("close the LMDB"), records);
}

/// Every `field:` line of `src` gets `value` (its indentation kept; a
/// comment after the old value goes with it).
pub fn rewrite_all(src: &str, field: &str, value: &str) -> String {
    let key = format!("{field}:");
    let mut out: String = src
        .lines()
        .map(|line| match line.trim_start().strip_prefix(&key) {
            Some(_) => format!("{}{key} {value}\n", &line[..line.len() - line.trim_start().len()]),
            None => format!("{line}\n"),
        })
        .collect();
    if !src.ends_with('\n') {
        out.pop();
    }
    out
}

/// `deploy` (a published deploy file's text) at batch `batch`: the first
/// `input_dim:` or `dim:` line, the batch of its first input (net-level
/// `input_dim` or `input_shape`, or an Input layer's `shape`), gets `batch`
/// (its indentation kept); every other line is left as published.
pub fn deploy_at_batch(deploy: &str, batch: usize) -> String {
    let mut done = false;
    let mut out: String = deploy
        .lines()
        .map(|line| {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            match ["input_dim:", "dim:"].iter().find(|k| body.starts_with(*k)) {
                Some(key) if !done => {
                    done = true;
                    format!("{indent}{key} {batch}\n")
                }
                _ => format!("{line}\n"),
            }
        })
        .collect();
    assert!(done, "the deploy file declares no input shape");
    if !deploy.ends_with('\n') {
        out.pop();
    }
    out
}

/// `net` (a published file's text) on random data of `images` under `dir`:
/// its sources, mean files and batch sizes rewritten. Returns the new text.
pub fn net_on_random_data(net: &str, dir: &Path, images: Images, batch: usize) -> String {
    let quote = |p: &Path| format!("\"{}\"", p.display());
    let db = dir.join("random_lmdb");
    if !db.exists() {
        random_lmdb(&db, images, 2 * batch.max(2), 1);
    }
    let mut net = rewrite_all(net, "source", &quote(&db));
    net = rewrite_all(&net, "batch_size", &batch.to_string());
    if net.contains("mean_file:") {
        let mean = dir.join("mean.binaryproto");
        compute_image_mean(&db, &mean).expect("mean image");
        net = rewrite_all(&net, "mean_file", &quote(&mean));
    }
    net
}

/// A solver for `net_file` training `iterations` iterations and testing
/// one batch at the end: the published `solver` (its update settings
/// kept) or, without one, Caffe's ImageNet settings.
pub fn solver_for(solver: Option<&str>, net_file: &Path, dir: &Path, iterations: u64) -> String {
    let base = solver.unwrap_or(
        "base_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: \"step\"\ngamma: 0.1\nstepsize: 100000\n\
         test_iter: 1\n",
    );
    let mut s = base.to_string();
    for field in [
        "net",
        "train_net",
        "test_net",
        "max_iter",
        "test_interval",
        "display",
        "snapshot_prefix",
        "solver_mode",
        "snapshot_after_train",
        "random_seed",
    ] {
        s = s.lines().filter(|l| !l.trim_start().starts_with(&format!("{field}:"))).map(|l| format!("{l}\n")).collect();
    }
    s = rewrite_all(&s, "test_iter", "1");
    s.push_str(&format!(
        "net: \"{}\"\nmax_iter: {iterations}\ntest_interval: {iterations}\ndisplay: 1\nsnapshot_prefix: \"{}\"\n\
         solver_mode: CPU\nsnapshot_after_train: false\nrandom_seed: 5\n",
        net_file.display(),
        dir.join("snap").display()
    ));
    s
}

/// Writes the substituted net and its solver into `dir`; the solver's path.
pub fn prepare(net: &str, solver: Option<&str>, dir: &Path, images: Images, batch: usize, iterations: u64) -> PathBuf {
    let net_file = dir.join("net.prototxt");
    std::fs::write(&net_file, net_on_random_data(net, dir, images, batch)).expect("write the net");
    let path = dir.join("solver.prototxt");
    std::fs::write(&path, solver_for(solver, &net_file, dir, iterations)).expect("write the solver");
    path
}
