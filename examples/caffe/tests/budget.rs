//! The device memory budget as a user meets it through `train`: on the CPU
//! without `--device-memory-mb` the budget fits the net, so a layer bigger
//! than the old 512 MiB default trains; a budget given too small for one
//! layer is refused before training, naming the layer and the flag to
//! raise; and geeps' own budget error names that flag too.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn train(solver: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
        .args(["train", "-workers", "1", "-no_progress", "-solver"])
        .arg(solver)
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove("GEEPS_RANK")
        .output()
        .expect("run caffe-geeps")
}

/// A net on the bundled data whose one InnerProduct (784 x `outputs`)
/// dominates memory.
fn wide_net(outputs: usize, batch: usize) -> String {
    format!(
        r#"name: "wide"
layer {{ name: "d" type: "Data" top: "data" top: "label" transform_param {{ scale: 0.00390625 }}
  data_param {{ source: "{train}" batch_size: {batch} }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param {{ num_output: {outputs} weight_filler {{ type: "constant" value: 0.0001 }} }} }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "constant" value: 0.0001 }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
"#,
        train = common::data("train"),
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_cpu_budget_fits_a_layer_bigger_than_512_mib() {
    let dir = common::scratch("budget-wide");
    // ip1 holds 784 x 65536 floats (196 MiB): its backward touches the
    // weights, their update and their momentum, about 600 MiB at once.
    let solver = common::write(&dir, &wide_net(65536, 2), &common::solver("net.prototxt", 1, 0, 0, ""));
    let out = train(&solver, &["-device_memory_mb", "512"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("caffe-geeps: layer `ip1` (InnerProduct, line 4)"), "said once, before any worker: {err}");
    assert!(err.contains("raise --device-memory-mb to at least 5") && err.contains("leave it out"), "{err}");
    assert!(!err.contains("device_memory`"), "{err}");

    let out = train(&solver, &[]);
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("Optimization done: 1 iterations"), "{}", text(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_budget_too_small_for_one_layer_names_it_and_the_flag() {
    let dir = common::scratch("budget-small");
    let solver = common::write(&dir, &common::small_net(256), &common::solver("net.prototxt", 1, 0, 0, ""));
    let out = train(&solver, &["--device-memory-mb", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("layer `") && err.contains("more than the device memory budget of 1 MiB"), "{err}");
    assert!(err.contains("raise --device-memory-mb to at least"), "{err}");
    // A budget that holds every layer but not the whole net trains, swapping.
    let out = train(&solver, &["--device-memory-mb", "16"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
