//! The `HDF5Data` layer over `.h5` files this test writes with the crate's
//! own writer (float, double and int datasets): batches exact across files
//! and around the end of the list, shuffle deterministic and grouped by
//! file, tops of any shape, training through the command line (and with
//! `-gpu 0` where a CUDA device, the emulated driver here, is present), and
//! every bad input named with its file, dataset and layer. Without the
//! HDF5 library each test says `NOT RUN` and why (a failure with
//! `GEEPS_REQUIRE_HDF5=1`, as in CI).

mod common;

use std::path::Path;

use caffe_geeps::data::DataCache;
use caffe_geeps::hdf5::H5File;
use caffe_geeps::net::plain::Plain;
use caffe_geeps::net::Net;
use caffe_geeps::proto::net::{NetParam, Phase};

/// Values of item `i` of file `f`: 16 pixels starting at f·100 + i·10.
fn item(f: usize, i: usize) -> Vec<f32> {
    (0..16).map(|k| (f * 100 + i * 10) as f32 + k as f32 * 0.5).collect()
}

/// `a.h5`: 3 items, float data and int labels 0..3; `b.h5`: 2 items, double
/// data and double labels 3, 4. Both hold `extra`, two values an item.
fn write_files(dir: &Path) {
    let a = H5File::create(&dir.join("a.h5")).unwrap();
    let data: Vec<f32> = (0..3).flat_map(|i| item(0, i)).collect();
    a.write_floats("", "data", &[3, 1, 4, 4], &data).unwrap();
    a.write_ints("", "label", &[3], &[0, 1, 2]).unwrap();
    a.write_floats("", "extra", &[3, 2], &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5]).unwrap();
    drop(a);
    let b = H5File::create(&dir.join("b.h5")).unwrap();
    let data: Vec<f64> = (0..2).flat_map(|i| item(1, i)).map(f64::from).collect();
    b.write_doubles("", "data", &[2, 1, 4, 4], &data).unwrap();
    b.write_doubles("", "label", &[2], &[3.0, 4.0]).unwrap();
    b.write_doubles("", "extra", &[2, 2], &[10.0, 10.5, 11.0, 11.5]).unwrap();
    drop(b);
    // Relative paths, found beside the net file; a blank line is skipped.
    std::fs::write(dir.join("files.txt"), "a.h5\n\nb.h5\n").unwrap();
}

fn net(params: &str) -> String {
    format!(
        r#"name: "h5"
layer {{ name: "d" type: "HDF5Data" top: "data" top: "label"
  hdf5_data_param {{ source: "files.txt" batch_size: 4 {params} }} }}
layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param {{ num_output: 2 kernel_size: 3 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param {{ num_output: 5 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }}
"#
    )
}

/// The blobs `names` after each of `batches` forwards of layer 0 (the data layer).
fn batches(dir: &Path, src: &str, names: &[&str], batches: usize) -> Vec<Vec<Vec<f32>>> {
    let path = dir.join("probe.prototxt");
    std::fs::write(&path, src).unwrap();
    let param = NetParam::load(&path).unwrap();
    let net = Net::build(&param, Phase::Train, &DataCache::default()).unwrap();
    net.check_labels().unwrap();
    let blobs: Vec<usize> = names.iter().map(|n| net.blob(n).unwrap()).collect();
    let mut plain = Plain::new(&net, 0, 1).unwrap();
    (0..batches)
        .map(|_| {
            plain.forward_one(0, &[], true, 0).unwrap();
            plain.output_values_of(&blobs)
        })
        .collect()
}

fn build_err(dir: &Path, src: &str) -> String {
    let path = dir.join("bad.prototxt");
    std::fs::write(&path, src).unwrap();
    match NetParam::load(&path) {
        Err(e) => e.to_string(),
        Ok(p) => match Net::build(&p, Phase::Train, &DataCache::default()) {
            Err(e) => e.to_string(),
            Ok(net) => {
                net.check_labels().unwrap();
                let mut plain = Plain::new(&net, 0, 1).unwrap();
                plain.forward_one(0, &[], true, 0).err().map(|e| e.to_string()).unwrap_or_default()
            }
        },
    }
}

#[test]
fn hdf5_data_reads_files_in_order_wraps_around_and_trains() {
    if !caffe_geeps::hdf5::available_for("hdf5_data_reads_files_in_order_wraps_around_and_trains") {
        return;
    }
    let dir = common::scratch("hdf5-data");
    write_files(&dir);
    // Rows a0 a1 a2 b0 b1, then around again; a batch spans two files.
    let rows = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)];
    let got = batches(&dir, &net(""), &["data", "label"], 3);
    for (b, blobs) in got.iter().enumerate() {
        let picked: Vec<(usize, usize)> = (0..4).map(|k| rows[(b * 4 + k) % 5]).collect();
        let data: Vec<f32> = picked.iter().flat_map(|&(f, i)| item(f, i)).collect();
        let label: Vec<f32> = picked.iter().map(|&(f, i)| (f * 3 + i) as f32).collect();
        assert_eq!(blobs[0], data, "batch {b}: data");
        assert_eq!(blobs[1], label, "batch {b}: labels");
    }

    // Shuffled: the same order on every build, files kept together, every row once an epoch.
    let once = batches(&dir, &net("shuffle: true").replace("batch_size: 4", "batch_size: 5"), &["label"], 2);
    let again = batches(&dir, &net("shuffle: true").replace("batch_size: 4", "batch_size: 5"), &["label"], 2);
    assert_eq!(once, again);
    let epoch = &once[0][0];
    assert_eq!(&once[1][0], epoch, "the second epoch repeats the first's order");
    let mut sorted = epoch.clone();
    sorted.sort_by(f32::total_cmp);
    assert_eq!(sorted, [0.0, 1.0, 2.0, 3.0, 4.0]);
    let first_of_a = epoch.iter().position(|&l| l < 3.0).unwrap();
    let a_rows = &epoch[first_of_a..first_of_a + 3];
    assert!(a_rows.iter().all(|&l| l < 3.0), "a.h5's rows are read together: {epoch:?}");

    // A second top read as values (a regression target), not class indices, is not checked as a label.
    let regression = net("")
        .replace("num_output: 5", "num_output: 1")
        .replace("type: \"SoftmaxWithLoss\"", "type: \"EuclideanLoss\"");
    let got = batches(&dir, &regression, &["label"], 1);
    assert_eq!(got[0][0], [0.0, 1.0, 2.0, 3.0]);

    // Tops of any shape: a third dataset of two values an item.
    let three = net("")
        .replace("top: \"label\"\n", "top: \"label\" top: \"extra\"\n")
        .replace("name: \"loss\"", "name: \"s\" type: \"Silence\" bottom: \"extra\" }\nlayer { name: \"loss\"");
    let got = batches(&dir, &three, &["extra"], 1);
    assert_eq!(got[0][0], [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 10.0, 10.5]);

    // Training: three iterations through the command line, on the CPU and on a GPU.
    std::fs::write(dir.join("net.prototxt"), net("shuffle: true")).unwrap();
    let solver = dir.join("solver.prototxt");
    std::fs::write(&solver, common::solver("net.prototxt", 3, 0, 0, "")).unwrap();
    let solver = solver.display().to_string();
    let out = common::caffe_ok(&["train", "-solver", &solver, "-workers", "2", "-no_progress"]);
    assert!(out.contains("Optimization done: 3 iterations"), "{out}");
    if geeps_testkit::Backend::cuda_for("hdf5_data_reads_files_in_order_wraps_around_and_trains").is_some() {
        let out = common::caffe_ok(&["train", "-solver", &solver, "-workers", "1", "-no_progress", "-gpu", "0"]);
        assert!(out.contains("Optimization done: 3 iterations"), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_hdf5_sources_name_the_file_dataset_and_layer() {
    if !caffe_geeps::hdf5::available_for("bad_hdf5_sources_name_the_file_dataset_and_layer") {
        return;
    }
    let dir = common::scratch("hdf5-data-bad");
    write_files(&dir);
    let list = dir.join("files.txt");
    let check = |err: String, words: &[&str]| {
        for w in words {
            assert!(err.contains(w), "expected `{w}` in: {err}");
        }
    };
    let layer = ["bad.prototxt:2:", "layer `d`"];
    std::fs::write(&list, "\n\n").unwrap();
    check(build_err(&dir, &net("")), &[&layer[..], &["files.txt", "lists no .h5 file"]].concat());
    std::fs::write(&list, "a.h5\nmissing.h5\n").unwrap();
    check(build_err(&dir, &net("")), &[&layer[..], &["line 2: no HDF5 file `missing.h5`"]].concat());
    std::fs::write(dir.join("junk.h5"), b"not hdf5").unwrap();
    std::fs::write(&list, "junk.h5\n").unwrap();
    check(build_err(&dir, &net("")), &[&layer[..], &["junk.h5 is not an HDF5 file"]].concat());
    check(
        build_err(&dir, &net("").replace("files.txt", "absent.txt")),
        &[&layer[..], &["hdf5_data_param.source not found", "absent.txt"]].concat(),
    );

    // A file without the top's dataset, with datasets of different lengths, with other item shapes.
    let c = H5File::create(&dir.join("c.h5")).unwrap();
    c.write_floats("", "data", &[2, 1, 4, 4], &[0.0; 32]).unwrap();
    c.write_floats("", "label", &[3], &[0.0; 3]).unwrap();
    c.write_floats("", "other", &[2, 1, 2, 2], &[0.0; 8]).unwrap();
    drop(c);
    std::fs::write(&list, "c.h5\n").unwrap();
    check(
        build_err(&dir, &net("")),
        &[&layer[..], &["c.h5", "dataset `label`", "has 3 items but dataset `data` has 2"]].concat(),
    );
    check(
        build_err(&dir, &net("").replace("top: \"label\"", "top: \"nothing\"")),
        &[&layer[..], &["c.h5 has no dataset nothing"]].concat(),
    );
    std::fs::write(&list, "a.h5\nc.h5\n").unwrap();
    let other = net("").replace("top: \"data\" top: \"label\"", "top: \"data\" top: \"other\"");
    let other = other.replace("bottom: \"label\"", "bottom: \"other\"");
    check(build_err(&dir, &other), &[&layer[..], &["a.h5 has no dataset other"]].concat());
    // Items of a rank the consumer cannot take: the dataset is named with the consumer.
    let flat = H5File::create(&dir.join("flat.h5")).unwrap();
    flat.write_floats("", "data", &[2, 16], &[0.0; 32]).unwrap();
    flat.write_ints("", "label", &[2], &[0, 1]).unwrap();
    drop(flat);
    std::fs::write(&list, "flat.h5\n").unwrap();
    check(
        build_err(&dir, &net("")),
        &[
            "bad.prototxt:4:",
            "Convolution layer `conv`",
            "bottom `data` is HDF5Data layer `d`'s dataset `data`",
            "flat.h5",
        ],
    );
    std::fs::write(&list, "a.h5\nflat.h5\n").unwrap();
    check(
        build_err(&dir, &net("")),
        &[&layer[..], &["flat.h5", "dataset `data`", "items of shape [16]", "every file's items need one shape"]]
            .concat(),
    );

    // A label past the classes the loss scores, named with its file, dataset and row.
    let big = H5File::create(&dir.join("big.h5")).unwrap();
    big.write_floats("", "data", &[2, 1, 4, 4], &[0.0; 32]).unwrap();
    big.write_ints("", "label", &[2], &[1, 7]).unwrap();
    drop(big);
    std::fs::write(&list, "big.h5\n").unwrap();
    check(build_err(&dir, &net("")), &["big.h5", "dataset `label` row 1 has label 7", "layer `loss` scores 5 classes"]);

    // transform_param is refused, as Caffe refuses it, at its line; so are a missing source and batch.
    let (line, msg) = common::net_err(
        "layer { name: \"d\" type: \"HDF5Data\" top: \"data\"\n  transform_param { scale: 0.5 }\n  \
         hdf5_data_param { source: \"f\" batch_size: 2 } }\n",
    );
    assert!(line == 2 && msg.contains("`transform_param` does not apply to a HDF5Data layer"), "{line}: {msg}");
    let (line, msg) = common::net_err(
        "layer { name: \"d\" type: \"HDF5Data\" top: \"data\"\n  hdf5_data_param { batch_size: 2 } }\n",
    );
    assert!(line == 2 && msg.contains("hdf5_data_param has no `source`"), "{line}: {msg}");
    let (line, msg) = common::net_err(
        "layer { name: \"d\" type: \"HDF5Data\" top: \"data\"\n  hdf5_data_param { source: \"f\" } }\n",
    );
    assert!(line == 2 && msg.contains("`batch_size` of at least 1"), "{line}: {msg}");
    let (line, msg) = common::net_err("layer { name: \"d\" type: \"HDF5Output\" bottom: \"data\" }\n");
    assert!(line == 1 && msg.contains("unknown layer type `HDF5Output`"), "{line}: {msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file written while a child process starts (which then shares the open
/// file) reads back at once: HDF5's own file locks, which the child would
/// hold on, are off.
#[test]
fn a_file_written_while_a_child_starts_reads_back_at_once() {
    if !caffe_geeps::hdf5::available_for("a_file_written_while_a_child_starts_reads_back_at_once") {
        return;
    }
    let dir = common::scratch("hdf5-child");
    let path = dir.join("x.h5");
    let f = H5File::create(&path).unwrap();
    f.write_floats("", "x", &[2], &[1.0, 2.0]).unwrap();
    let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    drop(f);
    let back = H5File::open(&path).and_then(|f| f.read_floats("", "x"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(back.unwrap(), (vec![2], vec![1.0, 2.0]));
    let _ = std::fs::remove_dir_all(&dir);
}
