//! The `caffe-geeps` binary as a Caffe user types it: `train -solver S
//! -max_iter N` (saying it computes on the CPU), `test`/`time`, the
//! data tools under Caffe's names and argument order, `device_query`, and
//! clap's errors naming a bad flag.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn caffe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GEEPS_RANK")
        .output()
        .expect("run caffe-geeps")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Succeeds or panics with what the command printed; returns (stdout, stderr).
fn ok(args: &[&str]) -> (String, String) {
    let out = caffe(args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{args:?} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// Fails with clap's usage error code; returns stderr.
fn usage_error(args: &[&str]) -> String {
    let out = caffe(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stdout));
    text(&out.stderr)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn caffe_style_train_then_test_and_time() {
    let dir = common::scratch("cli-train");
    let extra = format!("snapshot_prefix: \"{}\"", s(&dir.join("small")));
    let solver = common::write(&dir, &common::small_net(8), &common::solver("net.prototxt", 500, 0, 0, &extra));
    let (net, solver) = (s(&dir.join("net.prototxt")), s(&solver));

    let (stdout, _) = ok(&[
        "train",
        "-solver",
        &solver,
        "-max_iter",
        "3",
        "-workers=1",
        "-no_progress",
        "-sigint_effect",
        "none",
        "-sighup_effect=stop",
    ]);
    assert!(stdout.contains("Optimization done: 3 iterations on 1 worker(s)"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("Using CPU, ") && l.ends_with(" threads")), "{stdout}");
    let weights = dir.join("small_iter_3.caffemodel");
    assert!(weights.exists(), "the run snapshots at its end: {stdout}");

    let (stdout, _) = ok(&["test", "--model", &net, "--weights", &s(&weights), "--iterations", "2"]);
    assert!(stdout.contains("Running for 2 iterations."), "{stdout}");
    assert!(stdout.contains("Batch 1, accuracy = "), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("loss = ") && l.ends_with(" loss)")), "{stdout}");
    assert!(stdout.contains("Test net output #0: accuracy"), "{stdout}");

    let (stdout, stderr) = ok(&["time", "-model", &net, "-iterations=1"]);
    assert!(stdout.contains("Average Forward-Backward: "), "{stdout}");
    // A log read through a pipe carries no colour codes.
    assert!(!stderr.contains('\x1b'), "ANSI escapes in a piped log: {stderr:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_run_over_earlier_snapshots_refuses_unless_told_to_resume_or_overwrite() {
    let dir = common::scratch("cli-rerun");
    let extra = format!("snapshot: 2\nsnapshot_prefix: \"{}\"", s(&dir.join("small")));
    let solver = common::write(&dir, &common::small_net(8), &common::solver("net.prototxt", 4, 0, 0, &extra));
    let solver = s(&solver);
    let train = |more: &[&str]| {
        let mut args = vec!["train", "-solver", &solver, "-workers=1", "-no_progress"];
        args.extend_from_slice(more);
        caffe(&args)
    };
    assert!(train(&[]).status.success());
    // The same command again would start over the snapshot at iteration 2
    // (the last iteration's weights are a .caffemodel only).
    let again = train(&[]);
    let err = text(&again.stderr);
    assert!(!again.status.success(), "a rerun started over earlier snapshots: {}", text(&again.stdout));
    assert!(
        err.contains("already holds 1 snapshot(s) of an earlier run") && err.contains("small_iter_2.geeps"),
        "{err}"
    );
    assert!(err.contains("-resume") && err.contains("-overwrite"), "{err}");
    // -resume goes on from the newest, saying whose it is.
    let resumed = train(&["-resume", "-max_iter", "6"]);
    let out = text(&resumed.stdout) + &text(&resumed.stderr);
    assert!(resumed.status.success(), "{out}");
    assert!(out.contains("at iteration 2 (a snapshot of run ") && out.contains(", not this one)"), "{out}");
    // -overwrite removes them and starts from 0.
    let fresh = train(&["-overwrite"]);
    let out = text(&fresh.stdout) + &text(&fresh.stderr);
    assert!(fresh.status.success() && !out.contains("Resuming"), "{out}");
    assert!(out.contains("removed 2 earlier snapshot(s)"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mnist_converts_and_averages_under_caffes_names() {
    let dir = common::scratch("cli-mnist");
    let p = common::data("t10k");
    let (images, labels) = (format!("{p}-images-idx3-ubyte.gz"), format!("{p}-labels-idx1-ubyte.gz"));
    let db = dir.join("t10k_lmdb");
    let (stdout, _) = ok(&["convert_mnist_data", &images, &labels, &s(&db), "--backend=lmdb"]);
    let records = caffe_geeps::data::lmdb::LmdbReader::open(&db).unwrap().len();
    assert!(records > 0);
    assert_eq!(stdout.trim(), format!("Wrote {records} record(s) to {}", s(&db)));

    let mean = dir.join("mean.binaryproto");
    let (stdout, _) = ok(&["compute_image_mean", &s(&db), &s(&mean)]);
    assert!(stdout.contains(&format!("mean of {records} record(s)")), "{stdout}");
    assert!(stdout.contains("shape 1x28x28"), "{stdout}");
    assert!(std::fs::metadata(&mean).unwrap().len() > 28 * 28 * 4, "the mean holds 784 floats");

    let err = usage_error(&["convert-mnist", &images, &labels, &s(&dir.join("x")), "--backend", "leveldb"]);
    assert!(err.contains("--backend") && err.contains("leveldb"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn imageset_flags_come_before_caffes_positional_arguments() {
    let dir = common::scratch("cli-imageset");
    for (name, shade) in [("a.png", 10u8), ("b.png", 200)] {
        image::RgbImage::from_pixel(6, 5, image::Rgb([shade, shade, shade])).save(dir.join(name)).unwrap();
    }
    std::fs::write(dir.join("list.txt"), "a.png 0\nb.png 1\n").unwrap();
    let db = dir.join("set_lmdb");
    let (stdout, _) = ok(&[
        "convert_imageset",
        "--resize_height=4",
        "--resize_width=4",
        "--shuffle",
        "--gray",
        &s(&dir),
        &s(&dir.join("list.txt")),
        &s(&db),
    ]);
    assert_eq!(stdout.trim(), format!("Wrote 2 record(s) to {}", s(&db)));
    let (stdout, _) = ok(&["compute-image-mean", &s(&db), &s(&dir.join("mean.binaryproto"))]);
    assert!(stdout.contains("shape 1x4x4"), "resized and grey: {stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn device_query_describes_the_gpu_or_says_what_is_missing() {
    for spelling in [["device_query", "-gpu", "0"], ["device-query", "--gpu", "0"]] {
        let out = caffe(&spelling);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        if out.status.success() {
            for field in ["Name:", "Compute capability:", "Total global memory:", "Driver CUDA version:"] {
                assert!(stdout.contains(field), "{field}: {stdout}");
            }
        } else {
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "one error: {stderr}");
            assert!(stderr.contains("device_query -gpu 0") && stderr.contains("driver"), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
    let out = caffe(&["train", "-solver", "absent.prototxt", "-gpu", "all"]);
    if caffe(&["device_query", "-gpu", "0"]).status.success() {
        assert!(!text(&out.stderr).contains("-gpu all"), "{}", text(&out.stderr));
    } else {
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("-gpu all: cannot count the GPUs") && stderr.contains("driver"), "{stderr}");
    }
}

#[test]
fn bad_flags_are_usage_errors_naming_the_flag() {
    let err = usage_error(&["train", "-solver", "s.prototxt", "-gpu", "x"]);
    assert!(err.contains("'x'") && err.contains("--gpu") && err.contains("0,1"), "{err}");
    let err = usage_error(&["train", "-solver", "s.prototxt", "-sigint_effect", "maybe"]);
    assert!(err.contains("--sigint-effect") && err.contains("stop, snapshot, none"), "{err}");
    let err = usage_error(&["train", "-solver", "s.prototxt", "-foo"]);
    assert!(err.contains("--foo"), "{err}");
    let err = usage_error(&["device_query"]);
    assert!(err.contains("--gpu"), "{err}");
    let err = usage_error(&["test", "-model", "m", "-weights", "w", "-iterations", "-3"]);
    assert!(err.contains("-3") && !err.contains("--3"), "a negative value stays a value: {err}");
}

/// Caffe's `-level` and `-stage` select layers by their include rules in
/// `time`, `test` and `train`; `time -phase TEST` is refused with the reason.
#[test]
fn level_and_stage_flags_select_layers() {
    let dir = common::scratch("cli-stage");
    let staged = common::small_net(8).replace(
        "layer { name: \"loss\"",
        "layer { name: \"extra\" type: \"ReLU\" bottom: \"ip2\" top: \"extra\" include { stage: \"wide\" min_level: 1 } }\nlayer { name: \"loss\"",
    );
    let extra = format!("snapshot_prefix: \"{}\"", s(&dir.join("staged")));
    let solver = common::write(&dir, &staged, &common::solver("net.prototxt", 2, 0, 0, &extra));
    let net = s(&dir.join("net.prototxt"));
    let (plain, _) = ok(&["time", "-model", &net, "-iterations", "1"]);
    assert!(!plain.contains("extra"), "{plain}");
    let (lower, _) = ok(&["time", "-model", &net, "-iterations", "1", "-stage", "wide"]);
    assert!(!lower.contains("extra"), "level 0 is below min_level 1: {lower}");
    let (staged_out, _) = ok(&["time", "-model", &net, "-iterations", "1", "-stage", "wide,x", "-level", "1"]);
    assert!(staged_out.contains("extra"), "{staged_out}");
    ok(&["train", "-solver", &s(&solver), "-workers", "1", "-no_progress", "-stage=wide", "-level=1"]);
    let out = caffe(&["time", "-model", &net, "-phase", "TEST"]);
    assert!(!out.status.success() && text(&out.stderr).contains("-phase TEST"), "{}", text(&out.stderr));
    assert!(usage_error(&["time", "-model", &net, "-phase", "deploy"]).contains("TRAIN or TEST"));
    let _ = std::fs::remove_dir_all(&dir);
}
