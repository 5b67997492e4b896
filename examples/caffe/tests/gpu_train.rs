//! caffe-geeps training with its layers on the GPU: LeNet for 200
//! iterations on CUDA device 0 tracks the same run on the CPU (losses
//! within `LOSS_TOLERANCE`, the GPU's sums running in other orders); several
//! GPUs start one worker process each; and what happens without a driver or
//! without geeps-launch. The GPU runs need a CUDA device — the emulated
//! driver here (`scripts/with-cuda-emu`) — and are skipped without one
//! unless GEEPS_REQUIRE_CUDA=1.

mod common;

use std::process::Command;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::{DeviceChoice, PsOptions};
use caffe_geeps::solvers::solve::train;
use common::quiet;

/// |GPU loss − CPU loss| at every iteration, relative to the CPU loss.
const LOSS_TOLERANCE: f32 = 0.02;

#[test]
fn lenet_on_the_gpu_tracks_the_cpu_for_200_iterations() {
    if geeps_testkit::Backend::cuda_for("lenet_on_the_gpu_tracks_the_cpu_for_200_iterations").is_none() {
        return;
    }
    let dir = common::scratch("gpu-lenet");
    let path = common::write(&dir, &common::lenet(64), &common::solver("net.prototxt", 200, 10, 200, ""));
    let solver = SolverParam::load(&path).unwrap();
    let cpu = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    let gpu_opts = PsOptions { device: DeviceChoice::Cuda(vec![0]), ..PsOptions::default() };
    let gpu = train(&solver, &quiet(gpu_opts), &Cluster::in_process(1).unwrap()).unwrap();
    assert_eq!(gpu.losses.len(), 200);
    let mut worst = 0.0f32;
    for (i, (g, c)) in gpu.losses.iter().zip(&cpu.losses).enumerate() {
        assert!((g - c).abs() <= LOSS_TOLERANCE * c.abs().max(0.1), "iteration {i}: GPU loss {g}, CPU loss {c}");
        worst = worst.max((g - c).abs() / c.abs().max(0.1));
    }
    eprintln!("LeNet, 200 iterations: GPU losses within {worst:.2e} (relative) of the CPU's");
    let (first, last) = (gpu.losses[0], gpu.losses[190..].iter().sum::<f32>() / 10.0);
    assert!(last < first * 0.5, "the GPU run learns: loss {first} → {last}");
    let accuracy =
        |r: &caffe_geeps::solvers::solve::TrainReport| r.test.iter().find(|(n, _)| n == "accuracy").unwrap().1;
    assert!((accuracy(&gpu) - accuracy(&cpu)).abs() < 0.02, "test accuracy {} vs {}", accuracy(&gpu), accuracy(&cpu));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn several_gpus_start_one_worker_process_each() {
    if geeps_testkit::Backend::cuda_gpus_for("several_gpus_start_one_worker_process_each", 2).is_none() {
        return;
    }
    let dir = common::scratch("gpu-processes");
    let path = common::write(&dir, &common::lenet(16), &common::solver("net.prototxt", 4, 2, 4, ""));
    let out = Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
        .args(["train", "--no-progress", "--gpu", "0,1", "--solver"])
        .arg(&path)
        .env("GEEPS_CUDA_EMU_DEVICES", "2")
        .env("RAYON_NUM_THREADS", "1")
        .current_dir(&dir)
        .output()
        .expect("run caffe-geeps");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "caffe-geeps --gpu 0,1 failed:\n{stdout}\n{stderr}");
    // geeps-launch prefixes each rank's lines with its rank: two processes.
    assert!(stdout.contains("[1] rank 1 done"), "{stdout}");
    assert!(stdout.contains("[0] Optimization done: 4 iterations on 2 worker(s)"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn several_gpus_without_geeps_launch_is_a_clear_error() {
    let dir = common::scratch("gpu-no-launcher");
    let path = common::write(&dir, &common::lenet(16), &common::solver("net.prototxt", 1, 1, 1, ""));
    // A copy alone in a folder, with nothing on PATH: no geeps-launch anywhere.
    let lone = dir.join("caffe-geeps");
    std::fs::copy(env!("CARGO_BIN_EXE_caffe-geeps"), &lone).unwrap();
    let out = Command::new(&lone)
        .args(["train", "--no-progress", "--gpu", "0,1,2", "--solver"])
        .arg(&path)
        .env("PATH", "")
        .current_dir(&dir)
        .output()
        .expect("run caffe-geeps");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("geeps-launch") && stderr.contains("--workers 3"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A net whose activations exceed the GPU budget trains with its layers on
/// the GPU: geeps swaps what does not fit through host memory, and the run
/// computes the same bits as one with room to spare.
#[test]
fn activations_beyond_the_gpu_budget_train_the_same() {
    if geeps_testkit::Backend::cuda_for("activations_beyond_the_gpu_budget_train_the_same").is_none() {
        return;
    }
    let dir = common::scratch("gpu-budget");
    let path = common::write(&dir, &common::lenet(64), &common::solver("net.prototxt", 6, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let on_gpu = |budget_mb: usize| PsOptions {
        device: DeviceChoice::Cuda(vec![0]),
        device_memory: budget_mb << 20,
        ..PsOptions::default()
    };
    // The blobs, gradients and masks of a batch of 64 take about 10 MiB (conv1's top alone 2.8 MiB);
    // one layer's buffers at a time need about 5 MiB.
    let tight = train(&solver, &quiet(on_gpu(7)), &Cluster::in_process(1).unwrap()).unwrap();
    let roomy = train(&solver, &quiet(on_gpu(256)), &Cluster::in_process(1).unwrap()).unwrap();
    assert!(tight.stats[0].bytes_host_to_device > 0, "a 7 MiB budget swaps rows: {}", tight.stats[0]);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&tight.losses), bits(&roomy.losses), "GPU layers with a 7 MiB and a 256 MiB budget");
    for (l, (a, b)) in tight.final_params.iter().zip(&roomy.final_params).enumerate() {
        assert_eq!(bits(a), bits(b), "parameters of layer {l}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The net of every layer type trains with its layers on the GPU as with
/// them on the CPU (rows on the GPU both times), with SGD stepping on the GPU
/// and with Adam stepping on the host: the same losses and parameters to
/// rounding.
#[test]
fn every_layer_type_trains_on_the_gpu_as_on_the_cpu() {
    if geeps_testkit::Backend::cuda_for("every_layer_type_trains_on_the_gpu_as_on_the_cpu").is_none() {
        return;
    }
    let dir = common::scratch("gpu-every-type");
    for extra in ["", "type: \"Adam\"\nmomentum2: 0.999\ndelta: 1e-8\n"] {
        let solver = common::solver("net.prototxt", 6, 2, 0, extra).replace("base_lr: 0.05", "base_lr: 0.01");
        let path = common::write(&dir, &common::every_type_net(), &solver);
        let solver = SolverParam::load(&path).unwrap();
        let run = |layers_on_cpu| {
            let ps = PsOptions { device: DeviceChoice::Cuda(vec![0]), layers_on_cpu, ..PsOptions::default() };
            train(&solver, &quiet(ps), &Cluster::in_process(1).unwrap()).unwrap()
        };
        let (cpu, gpu) = (run(true), run(false));
        for (i, (g, c)) in gpu.losses.iter().zip(&cpu.losses).enumerate() {
            assert!((g - c).abs() <= 1e-3 * c.abs().max(1.0), "{extra:?} iteration {i}: GPU loss {g}, CPU loss {c}");
        }
        for (l, (g, c)) in gpu.final_params.iter().zip(&cpu.final_params).enumerate() {
            for (k, (a, b)) in g.iter().zip(c).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-3 * b.abs().max(1.0),
                    "{extra:?} layer {l} parameter {k}: GPU {a}, CPU {b}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
