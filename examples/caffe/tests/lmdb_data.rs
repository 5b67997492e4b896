//! Caffe's data tools and the LMDB source end to end: the bundled
//! Fashion-MNIST converted by `convert_mnist` reads back as the IDX files
//! do; `convert_imageset` resizes, greys, shuffles and keeps BGR order;
//! `compute_image_mean` averages; workers' shards are disjoint.

mod common;

use std::path::Path;

use caffe_geeps::data::datum::decode_mean;
use caffe_geeps::data::lmdb_data::LmdbData;
use caffe_geeps::data::pixel_source::PixelSource;
use caffe_geeps::data::transform::{Mean, TransformConf};
use caffe_geeps::data::{Cursor, Dataset};
use caffe_geeps::tools::convert::{convert_imageset, convert_mnist, ImagesetOptions};
use caffe_geeps::tools::mean::compute_image_mean;

#[test]
fn convert_mnist_reads_back_as_the_idx_files() {
    let dir = common::scratch("convert-mnist");
    let prefix = common::data("t10k");
    let (images, labels) = (format!("{prefix}-images-idx3-ubyte.gz"), format!("{prefix}-labels-idx1-ubyte.gz"));
    let out = dir.join("t10k_lmdb");
    let n = convert_mnist(Path::new(&images), Path::new(&labels), &out).unwrap();
    let idx = Dataset::load(Path::new(&prefix)).unwrap();
    assert_eq!(n, idx.len());
    let db = LmdbData::open(&out).unwrap();
    assert_eq!((db.len(), db.channels, db.height, db.width), (idx.len(), 1, idx.height, idx.width));
    let t = TransformConf { scale: 0.00390625, ..TransformConf::default() };
    let picks = [0, 1, 2, n - 1];
    let per = idx.image_len();
    let (mut a, mut la) = (vec![0.0; 4 * per], vec![0.0; 4]);
    let (mut b, mut lb) = (vec![0.0; 4 * per], vec![0.0; 4]);
    db.fill(&picks, &t, true, 1, None, &mut a, &mut la).unwrap();
    idx.fill(&picks, 0.00390625, 0.0, &mut b, &mut lb);
    assert_eq!((a, la), (b, lb));

    // Two workers read disjoint halves.
    let (mut r0, mut r1) = (Cursor::new(db.len(), 0, 2).unwrap(), Cursor::new(db.len(), 1, 2).unwrap());
    let (s0, s1) = (r0.take(r0.len()), r1.take(r1.len()));
    assert_eq!(s0.len() + s1.len(), n);
    assert!(s0.iter().all(|i| !s1.contains(i)));

    // The mean of the set, then a TEST batch with it subtracted.
    let mean_file = dir.join("mean.binaryproto");
    let ((c, h, w), per_channel) = compute_image_mean(&out, &mean_file).unwrap();
    assert_eq!((c, h, w), (1, idx.height, idx.width));
    let average = idx.pixels.iter().map(|p| f64::from(*p)).sum::<f64>() / idx.pixels.len() as f64;
    assert!((f64::from(per_channel[0]) - average).abs() < 1e-3, "{per_channel:?} vs {average}");
    let (mc, mh, mw, values) = decode_mean(&std::fs::read(&mean_file).unwrap(), &mean_file).unwrap();
    let t =
        TransformConf { mean: Mean::Image { channels: mc, height: mh, width: mw, values }, ..TransformConf::default() };
    let (mut x, mut l) = (vec![0.0; n * per], vec![0.0; n]);
    db.fill(&(0..n).collect::<Vec<_>>(), &t, false, 0, None, &mut x, &mut l).unwrap();
    let centred = x.iter().map(|v| f64::from(*v)).sum::<f64>() / x.len() as f64;
    assert!(centred.abs() < 1e-3, "mean after subtracting the mean image: {centred}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn convert_imageset_resizes_greys_and_shuffles() {
    let dir = common::scratch("convert-imageset");
    let root = dir.join("images");
    std::fs::create_dir_all(root.join("sub dir")).unwrap();
    let mut list = String::new();
    for i in 0..6u8 {
        let pic = image::RgbImage::from_fn(8, 6, |x, _| image::Rgb([10 * i, 100 + x as u8, 200]));
        let name = format!("sub dir/img {i}.png");
        pic.save(root.join(&name)).unwrap();
        list.push_str(&format!("{name} {}\n", i % 3));
    }
    std::fs::write(dir.join("list.txt"), &list).unwrap();
    let colour = ImagesetOptions { resize_height: 3, resize_width: 4, ..ImagesetOptions::default() };
    assert_eq!(convert_imageset(&root, &dir.join("list.txt"), &dir.join("colour"), &colour).unwrap(), 6);
    let db = LmdbData::open(&dir.join("colour")).unwrap();
    assert_eq!((db.channels, db.height, db.width), (3, 3, 4));
    assert_eq!(db.reader.key(1), b"00000001_sub dir/img 1.png");
    let (mut x, mut l) = (vec![0.0; 2 * 36], vec![0.0; 2]);
    db.fill(&[0, 5], &TransformConf::default(), false, 0, None, &mut x, &mut l).unwrap();
    // BGR order: blue 200 first, red (10·i) last.
    assert!(x[..12].iter().all(|v| *v == 200.0));
    assert!(x[24..36].iter().all(|v| *v == 0.0) && x[36 + 24..].iter().all(|v| *v == 50.0));
    assert_eq!(l, vec![0.0, 2.0]);

    let grey = ImagesetOptions { gray: true, shuffle: true, seed: 5, ..ImagesetOptions::default() };
    convert_imageset(&root, &dir.join("list.txt"), &dir.join("grey"), &grey).unwrap();
    let g = LmdbData::open(&dir.join("grey")).unwrap();
    assert_eq!((g.channels, g.height, g.width), (1, 6, 8));
    let order: Vec<String> = (0..6).map(|i| String::from_utf8_lossy(g.reader.key(i)).into_owned()).collect();
    let files: Vec<&str> = order.iter().map(|k| &k[9..]).collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_ne!(files, sorted, "shuffled: {files:?}");

    std::fs::write(dir.join("bad.txt"), "sub dir/img 0.png 1\nmissing.png 2\n").unwrap();
    let err = convert_imageset(&root, &dir.join("bad.txt"), &dir.join("bad"), &grey).unwrap_err().to_string();
    assert!(err.contains("line 2") && err.contains("missing.png"), "{err}");
    std::fs::write(dir.join("nolabel.txt"), "a.png\n").unwrap();
    let err = convert_imageset(&root, &dir.join("nolabel.txt"), &dir.join("x"), &grey).unwrap_err().to_string();
    assert!(err.contains("line 1: expected `path label`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn labels_beyond_the_scored_classes_stop_training_with_the_record_named() {
    use caffe_geeps::cli::cluster::Cluster;
    use caffe_geeps::data::datum::{Image, Values};
    use caffe_geeps::data::lmdb::LmdbWriter;
    use caffe_geeps::proto::solver::SolverParam;

    use caffe_geeps::solvers::solve::{train, TrainOptions};

    let dir = common::scratch("lmdb-labels");
    let db = dir.join("db");
    let mut w = LmdbWriter::create(&db).unwrap();
    for i in 0..12u8 {
        // Labels 0..=11 against a net scoring 10 classes: record 10 is the first too high.
        let img = Image { channels: 1, height: 28, width: 28, values: Values::Bytes(vec![i; 784]), label: i.into() };
        w.put(format!("{i:08}").as_bytes(), &img.to_datum_bytes()).unwrap();
    }
    w.finish().unwrap();
    let net = common::small_net(4)
        .replace(&common::data("train"), &db.display().to_string())
        .replace(&common::data("t10k"), &db.display().to_string());
    let path = common::write(&dir, &net, &common::solver("net.prototxt", 5, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let opts = TrainOptions::default();
    let Err(err) = train(&solver, &opts, &Cluster::in_process(1).unwrap()) else { panic!("refused") };
    let err = err.to_string();
    assert!(err.contains("record 10 has label 10 but layer `loss` scores only 10 classes"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
