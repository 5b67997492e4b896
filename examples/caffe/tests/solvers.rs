//! The solver types, iter_size and gradient clipping end to end: one worker
//! through geeps trains as the plain-memory reference does (Caffe's Step);
//! iter_size 2 of half batches equals one full batch; LeNet on the bundled
//! data brings its loss down with Adam and with Nesterov on two workers,
//! every training call on geeps's fast path.

mod common;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::proto::solver::{SolverParam, SolverType};
use caffe_geeps::ps::PsOptions;
use caffe_geeps::solvers::solve::train;
use common::{assert_close, quiet, reference};

/// A solver for `net.prototxt` with `settings` (type and its fields; a
/// fixed rate of 0.01 unless they give `base_lr` or `lr_policy`).
fn solver(max_iter: u64, settings: &str) -> String {
    let mut s = format!(
        "net: \"net.prototxt\"\nweight_decay: 0.0005\nmax_iter: {max_iter}\ndisplay: 0\nrandom_seed: 7\n\
         snapshot_after_train: false\n{settings}\n"
    );
    for (field, default) in [("base_lr", "0.01"), ("lr_policy", "\"fixed\"")] {
        if !settings.contains(field) {
            s.push_str(&format!("{field}: {default}\n"));
        }
    }
    s
}

fn load(dir: &std::path::Path, net: &str, solver: &str) -> SolverParam {
    SolverParam::load(&common::write(dir, net, solver)).unwrap()
}

#[test]
fn every_solver_type_through_geeps_trains_as_caffe_does() {
    let dir = common::scratch("solver-types");
    for (settings, ty) in [
        ("type: \"Nesterov\"\nmomentum: 0.9", SolverType::Nesterov),
        ("type: \"AdaGrad\"\ndelta: 1e-6", SolverType::AdaGrad),
        ("solver_type: RMSPROP\nrms_decay: 0.95\nbase_lr: 0.001", SolverType::RmsProp),
        ("type: \"AdaDelta\"\nmomentum: 0.95\ndelta: 1e-6\nregularization_type: \"L1\"", SolverType::AdaDelta),
        ("type: \"Adam\"\nmomentum: 0.9\nmomentum2: 0.999\nlr_policy: \"poly\"\npower: 1", SolverType::Adam),
    ] {
        let s = load(&dir, &common::small_net(16), &solver(6, settings));
        assert_eq!(s.solver_type, ty);
        let (want, want_losses) = reference(&s);
        assert!(want_losses.iter().all(|l| l.is_finite()), "{ty:?}: {want_losses:?}");
        let report = train(&s, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
        assert_close(&report.final_params, &want, &format!("{ty:?}"));
        for (i, (a, b)) in report.losses.iter().zip(&want_losses).enumerate() {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{ty:?} loss at iteration {i}: {a} vs {b}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn iter_size_and_clipping_update_once_per_iteration() {
    let dir = common::scratch("iter-size");
    // LeNet has no dropout: two half batches see the images of one full
    // batch, and SoftmaxWithLoss averages, so iter_size 2 equals batch 2x.
    let sgd = "momentum: 0.9";
    let full = load(&dir, &common::lenet(16), &solver(4, sgd));
    let report = train(&full, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    let halves = load(&dir, &common::lenet(8), &solver(4, &format!("{sgd}\niter_size: 2")));
    assert_eq!(halves.iter_size, 2);
    let (want, want_losses) = reference(&halves);
    let accumulated = train(&halves, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    assert_close(&accumulated.final_params, &want, "iter_size 2 through geeps vs the reference");
    assert_close(&accumulated.final_params, &report.final_params, "iter_size 2 x batch 8 vs batch 16");
    for (a, b) in accumulated.losses.iter().zip(&want_losses).chain(accumulated.losses.iter().zip(&report.losses)) {
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "losses {:?} vs {:?}", accumulated.losses, want_losses);
    }

    // A norm far above every gradient's leaves training as it was; a small
    // one clips (the steps differ) exactly as the reference clips.
    let loose = load(&dir, &common::small_net(16), &solver(5, &format!("{sgd}\nclip_gradients: 1e6")));
    let plain_sgd = load(&dir, &common::small_net(16), &solver(5, sgd));
    let a = train(&loose, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    let b = train(&plain_sgd, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    assert_close(&a.final_params, &b.final_params, "clip_gradients above the norm");
    let clip = |c: &str| load(&dir, &common::small_net(16), &solver(5, &format!("{sgd}\niter_size: 2{c}")));
    let tight = clip("\nclip_gradients: 0.05");
    let (want, _) = reference(&tight);
    let ps = PsOptions { layers_per_table: 2, batches_per_clock: 5, ..PsOptions::default() };
    let clipped = train(&tight, &quiet(ps), &Cluster::in_process(1).unwrap()).unwrap();
    assert_close(&clipped.final_params, &want, "clipped, 2 layers per table, 5 iterations per clock");
    let unclipped = train(&clip(""), &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    let mut pairs = clipped.final_params.iter().flatten().zip(unclipped.final_params.iter().flatten());
    assert!(pairs.any(|(x, y)| (x - y).abs() > 1e-3), "clip_gradients 0.05 changed nothing");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lenet_with_adam_and_with_nesterov_brings_the_loss_down() {
    let dir = common::scratch("lenet-solvers");
    for settings in [
        "type: \"Adam\"\nmomentum: 0.9\nmomentum2: 0.999\nbase_lr: 0.001",
        // Two workers each clip and accumulate their own gradient.
        "type: \"Nesterov\"\nmomentum: 0.9\niter_size: 2\nclip_gradients: 10",
    ] {
        let s = load(&dir, &common::lenet(16), &solver(40, settings));
        let report = train(&s, &quiet(PsOptions::default()), &Cluster::in_process(2).unwrap()).unwrap();
        let mean = |s: &[f32]| s.iter().sum::<f32>() / s.len() as f32;
        let (first, last) = (mean(&report.losses[..5]), mean(&report.losses[30..]));
        assert!(last < 0.75 * first, "{settings}: loss {first} -> {last}");
        for st in &report.stats {
            assert!(st.prefetch_hits > 10 * st.slow_path_calls, "{settings}: {st}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
