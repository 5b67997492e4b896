//! The data layers beside `Data`, as a prototxt names them: `ImageData`
//! reading a list of PNG, JPEG and BMP files this test writes (root_folder,
//! new_height/new_width, is_color, shuffle), `DummyData` filling its tops
//! (constant, uniform, gaussian), each training and timed through the
//! command line; the bad lists and images named with their line; and a
//! `MemoryData` layer without its settings refused at its line (fed
//! arrays: `tests/memory_data.rs`). With a CUDA device (the emulated
//! driver here) ImageData also trains with `-gpu 0`.

mod common;

use std::path::{Path, PathBuf};

use caffe_geeps::data::DataCache;
use caffe_geeps::net::plain::Plain;
use caffe_geeps::net::Net;
use caffe_geeps::proto::net::{NetParam, Phase};

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Six images of one colour each (RGB), in three formats and two sizes,
/// under `dir/img`, and the list naming them with labels 0..3.
fn write_images(dir: &Path) -> PathBuf {
    let img = dir.join("img");
    std::fs::create_dir_all(&img).unwrap();
    let mut list = String::new();
    for (i, ext) in ["png", "jpg", "bmp", "png", "jpg", "bmp"].iter().enumerate() {
        let (w, h) = if i % 2 == 0 { (12, 10) } else { (7, 9) };
        let rgb = [(40 * i) as u8, 200, 10];
        let pic = image::RgbImage::from_pixel(w, h, image::Rgb(rgb));
        let name = format!("pic {i}.{ext}");
        pic.save(img.join(&name)).unwrap();
        list.push_str(&format!("{name} {}\n", i % 3));
    }
    let path = dir.join("list.txt");
    std::fs::write(&path, list).unwrap();
    path
}

fn image_net(params: &str) -> String {
    format!(
        r#"name: "images"
layer {{ name: "data" type: "ImageData" top: "data" top: "label"
  transform_param {{ scale: 0.00390625 }}
  image_data_param {{ source: "list.txt" batch_size: 2 root_folder: "img" {params} }} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param {{ num_output: 3 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }}
"#
    )
}

/// The data and label blobs of the first TRAIN batch of `net` (written in `dir`).
fn first_batch(dir: &Path, net: &str) -> (Vec<usize>, Vec<f32>, Vec<f32>) {
    let path = dir.join("probe.prototxt");
    std::fs::write(&path, net).unwrap();
    let param = NetParam::load(&path).unwrap();
    let net = Net::build(&param, Phase::Train, &DataCache::default()).unwrap();
    let mut plain = Plain::new(&net, 0, 1).unwrap();
    plain.forward_one(0, &[], true, 0).unwrap();
    let data = net.blob("data").unwrap();
    let label = net.blob("label").unwrap();
    let values = plain.output_values_of(&[data, label]);
    (net.blobs[data].shape.clone(), values[0].clone(), values[1].clone())
}

#[test]
fn image_data_reads_resizes_and_trains() {
    let dir = common::scratch("image-data");
    write_images(&dir);
    // Resized to 8x6, colour: BGR, as Caffe's OpenCV reads them.
    let (shape, data, label) = first_batch(&dir, &image_net("new_height: 6 new_width: 8"));
    assert_eq!(shape, [2, 3, 6, 8]);
    assert_eq!(label, [0.0, 1.0]);
    let at = |img: usize, c: usize| data[img * 144 + c * 48 + 5] * 256.0;
    // Image 0 is RGB (0, 200, 10) as PNG: exact. Image 1 (JPEG) within its loss.
    assert_eq!((at(0, 0), at(0, 1), at(0, 2)), (10.0, 200.0, 0.0));
    assert!((at(1, 2) - 40.0).abs() < 8.0 && (at(1, 1) - 200.0).abs() < 8.0, "{} {}", at(1, 2), at(1, 1));
    // Grey: one channel.
    let (shape, ..) = first_batch(&dir, &image_net("new_height: 6 new_width: 8 is_color: false"));
    assert_eq!(shape, [2, 1, 6, 8]);
    // Shuffled: the same images, in another order.
    let (_, _, shuffled) = first_batch(&dir, &image_net("new_height: 6 new_width: 8 shuffle: true"));
    assert_eq!(shuffled.len(), 2);

    let net = dir.join("net.prototxt");
    std::fs::write(&net, image_net("new_height: 6 new_width: 8")).unwrap();
    let solver = dir.join("solver.prototxt");
    std::fs::write(&solver, common::solver("net.prototxt", 3, 0, 0, "")).unwrap();
    let out = common::caffe_ok(&["train", "-solver", &s(&solver), "-workers", "1", "-no_progress"]);
    assert!(out.contains("Optimization done: 3 iterations"), "{out}");
    let out = common::caffe_ok(&["time", "-model", &s(&net), "-iterations", "1"]);
    assert!(out.contains("      data\tforward: "), "{out}");
    if geeps_testkit::Backend::cuda_for("image_data_reads_resizes_and_trains").is_some() {
        let out = common::caffe_ok(&["train", "-solver", &s(&solver), "-workers", "1", "-no_progress", "-gpu", "0"]);
        assert!(out.contains("Using GPUs 0") && out.contains("Optimization done: 3 iterations"), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_lists_and_images_are_named_with_their_line() {
    let dir = common::scratch("image-data-bad");
    let list = write_images(&dir);
    let net = dir.join("net.prototxt");
    let time = |params: &str| {
        std::fs::write(&net, image_net(params)).unwrap();
        let out = common::caffe(&["time", "-model", &s(&net), "-iterations", "1"]);
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Two sizes and no resize: the first image of another size is named.
    let err = time("");
    assert!(err.contains("line 2") && err.contains("pic 1.jpg") && err.contains("new_height and new_width"), "{err}");
    let err = time("new_height: 6");
    assert!(err.contains("set both new_height and new_width"), "{err}");
    std::fs::write(&list, "pic 0.png 0\nmissing.png 1\n").unwrap();
    let err = time("new_height: 6 new_width: 8");
    assert!(err.contains("line 2") && err.contains("missing.png") && err.contains("cannot read the image"), "{err}");
    std::fs::write(&list, "pic 0.png 0\npic 1.jpg\n").unwrap();
    let err = time("new_height: 6 new_width: 8");
    assert!(err.contains("line 2: expected `path label`"), "{err}");
    std::fs::write(dir.join("img/bad.png"), b"not a png").unwrap();
    std::fs::write(&list, "bad.png 0\n").unwrap();
    let err = time("new_height: 6 new_width: 8");
    assert!(err.contains("bad.png") && err.contains("cannot read the image"), "{err}");
    let (line, msg) = common::net_err(
        "layer { name: \"d\" type: \"ImageData\" top: \"data\" top: \"label\"\n image_data_param { source: \"l\" \
         crop_size: 3 } }",
    );
    assert!(line == 2 && msg.contains("transform_param { crop_size }"), "{line}: {msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

const DUMMY_NET: &str = r#"name: "dummy"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 2 dim: 3 dim: 3 } shape { dim: 4 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"#;

#[test]
fn dummy_data_fills_its_tops_and_trains() {
    let dir = common::scratch("dummy-data");
    let net = dir.join("net.prototxt");
    std::fs::write(&net, DUMMY_NET).unwrap();
    let (shape, data, label) = first_batch(&dir, DUMMY_NET);
    assert_eq!(shape, [4, 2, 3, 3]);
    assert_eq!(label, [1.0; 4]);
    let mean = data.iter().sum::<f32>() / data.len() as f32;
    assert!(data.iter().any(|v| *v != data[0]) && mean.abs() < 0.5, "{mean}");
    let solver = dir.join("solver.prototxt");
    std::fs::write(&solver, common::solver("net.prototxt", 2, 0, 0, "")).unwrap();
    let out = common::caffe_ok(&["train", "-solver", &s(&solver), "-workers", "1", "-no_progress"]);
    assert!(out.contains("Optimization done: 2 iterations on 1 worker(s) x batch 4"), "{out}");
    let out = common::caffe_ok(&["time", "-model", &s(&net), "-iterations", "1"]);
    assert!(out.contains("Testing for 1 iterations of batch 4."), "{out}");
    // The legacy spelling, one filler for all tops (constant 0 without one).
    let legacy =
        "layer { name: \"d\" type: \"DummyData\" top: \"a\" top: \"b\"\n dummy_data_param { num: 2 channels: 3 \
                  height: 4 width: 5 num: 2 channels: 1 height: 1 width: 1 } }\n\
                  layer { name: \"r\" type: \"ReLU\" bottom: \"a\" top: \"r\" }\n";
    let p = NetParam::parse(legacy, Path::new("l.prototxt")).unwrap();
    let n = Net::build(&p, Phase::Train, &DataCache::default()).unwrap();
    assert_eq!((n.blobs[0].shape.clone(), n.blobs[1].shape.clone(), n.batch), (vec![2, 3, 4, 5], vec![2, 1, 1, 1], 2));
    for (src, words) in [
        ("dummy_data_param { shape { dim: 2 } shape { dim: 2 } shape { dim: 2 } }", "3 shapes for 2 tops"),
        ("dummy_data_param { num: 2 channels: 3 }", "as many num, channels, height and width"),
        ("dummy_data_param { shape { dim: 2 dim: 0 } }", "at least 1"),
        ("dummy_data_param { shape { dim: 2 } data_filler { type: \"xavier\" } }", "constant, uniform or gaussian"),
    ] {
        let net = format!(
            "layer {{ name: \"d\" type: \"DummyData\" top: \"a\" top: \"b\" {src} }}\n\
                           layer {{ name: \"r\" type: \"ReLU\" bottom: \"a\" top: \"r\" }}\n"
        );
        let err = match NetParam::parse(&net, Path::new("d.prototxt")) {
            Err(e) => e.to_string(),
            Ok(p) => {
                Net::build(&p, Phase::Train, &DataCache::default()).err().map(|e| e.to_string()).unwrap_or_default()
            }
        };
        assert!(err.contains(words), "{src}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn memory_data_without_memory_data_param_is_refused_at_its_line() {
    let (line, msg) =
        common::net_err("name: \"m\"\nlayer { name: \"d\" type: \"MemoryData\" top: \"data\" top: \"label\" }\n");
    assert_eq!(line, 2);
    assert!(msg.contains("memory_data_param { batch_size channels height width }"), "{msg}");
    let (line, msg) = common::net_err(
        "name: \"m\"\nlayer { name: \"d\" type: \"MemoryData\" top: \"data\" top: \"label\"\n  memory_data_param { \
         batch_size: 2 channels: 0 height: 2 width: 2 } }\n",
    );
    assert_eq!((line, msg.as_str()), (3, "memory_data_param needs `channels` of at least 1"));
    let (line, msg) = common::net_err(
        "name: \"m\"\nlayer { name: \"d\" type: \"MemoryData\" top: \"data\"\n  memory_data_param { \
         batch_size: 2 channels: 1 height: 2 width: 2 } }\n",
    );
    assert_eq!((line, msg.as_str()), (2, "a MemoryData layer has two tops: the data and the label"));
}
