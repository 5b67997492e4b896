//! The prototxt readers on the shipped files, on Caffe's own LeNet, and on
//! broken files: every error names what is wrong and its line.

mod common;

use common::net_err;

use std::path::Path;

use caffe_geeps::proto::net::{Filler, LayerKind, NetParam, Normalization, Phase, PoolMethod, VarianceNorm};
use caffe_geeps::proto::solver::{LrPolicy, Regularization, SolverParam, SolverType};
use caffe_geeps::Error;

fn solver_err(src: &str) -> (usize, String) {
    match SolverParam::parse(src, Path::new("broken_solver.prototxt")) {
        Err(Error::Prototxt { line, msg, .. }) => (line, msg),
        Err(Error::Problems { mut problems, .. }) => problems.remove(0),
        Err(other) => panic!("expected a prototxt error, got {other}"),
        Ok(_) => panic!("expected an error for:\n{src}"),
    }
}

#[test]
fn the_shipped_lenet_reads_as_caffe_means_it() {
    let net = NetParam::load(&common::models().join("lenet_train_test.prototxt")).unwrap();
    assert_eq!(net.name, "LeNet");
    let types: Vec<_> = net.layers.iter().map(|l| l.kind.type_name()).collect();
    assert_eq!(
        types,
        [
            "Data",
            "Data",
            "Convolution",
            "Pooling",
            "Convolution",
            "Pooling",
            "InnerProduct",
            "ReLU",
            "InnerProduct",
            "Accuracy",
            "SoftmaxWithLoss"
        ]
    );
    assert!(net.layers[0].phases.admits(Phase::Train) && !net.layers[0].phases.admits(Phase::Test));
    let LayerKind::Data(d) = &net.layers[1].kind else { panic!() };
    assert_eq!((d.batch_size, d.scale), (100, 0.00390625));
    let LayerKind::Convolution(c) = &net.layers[4].kind else { panic!() };
    assert_eq!((c.num_output, c.kernel, c.stride, c.pad), (50, (5, 5), (1, 1), (0, 0)));
    assert_eq!(c.weight_filler, Filler::Xavier(VarianceNorm::FanIn));
    assert_eq!(c.bias_filler, Filler::Constant(0.0));
    assert_eq!(net.layers[4].params[1].lr_mult, 2.0);
    let LayerKind::Pooling(p) = &net.layers[3].kind else { panic!() };
    assert_eq!((p.method, p.kernel, p.stride), (PoolMethod::Max, (2, 2), (2, 2)));
    assert_eq!(net.layers[7].bottoms, net.layers[7].tops);

    let s = SolverParam::load(&common::models().join("lenet_solver.prototxt")).unwrap();
    assert!(s.net.ends_with("lenet_train_test.prototxt") && s.net.exists());
    assert_eq!(s.lr_policy, LrPolicy::Inv { gamma: 0.0001, power: 0.75 });
    assert_eq!((s.base_lr, s.momentum, s.weight_decay), (0.01, 0.9, 0.0005));
    assert_eq!((s.test_nets[0].iter, s.test_interval), (20, 100));
}

#[test]
fn the_full_dataset_files_differ_only_in_the_data_sources() {
    let strip = |mut n: NetParam| {
        for l in &mut n.layers {
            if let LayerKind::Data(d) = &mut l.kind {
                d.source.clear();
            }
            l.line = 0;
        }
        n.file.clear();
        n.layers
    };
    let subset = NetParam::load(&common::models().join("lenet_train_test.prototxt")).unwrap();
    let full = NetParam::load(&common::models().join("lenet_full_train_test.prototxt")).unwrap();
    let LayerKind::Data(d) = &full.layers[0].kind else { panic!() };
    assert_eq!(d.source, "/usr/share/datasets/fashion-mnist/train");
    assert_eq!(strip(subset), strip(full));
    let s = SolverParam::load(&common::models().join("lenet_full_solver.prototxt")).unwrap();
    assert!(s.net.ends_with("lenet_full_train_test.prototxt"));
    assert_eq!(s.test_nets[0].iter, 100);
}

#[test]
fn caffes_own_solver_file_reads_unchanged() {
    // Caffe's examples/mnist/lenet_solver.prototxt, comments included.
    let src = r#"# The train/test net protocol buffer definition
net: "examples/mnist/lenet_train_test.prototxt"
# test_iter specifies how many forward passes the test should carry out.
test_iter: 100
# Carry out testing every 500 training iterations.
test_interval: 500
# The base learning rate, momentum and the weight decay of the network.
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
# The learning rate policy
lr_policy: "inv"
gamma: 0.0001
power: 0.75
# Display every 100 iterations
display: 100
# The maximum number of iterations
max_iter: 10000
# snapshot intermediate results
snapshot: 5000
snapshot_prefix: "examples/mnist/lenet"
# solver mode: CPU or GPU
solver_mode: GPU
"#;
    let s = SolverParam::parse(src, Path::new("lenet_solver.prototxt")).unwrap();
    assert_eq!((s.max_iter, s.display, s.snapshot, s.test_nets[0].iter), (10000, 100, 5000, 100));
    assert_eq!(s.snapshot_prefix, "examples/mnist/lenet");
    assert_eq!(s.gpu, Some(0), "solver_mode: GPU selects GPU 0 (device_id absent)");
    let cpu = SolverParam::parse("net: \"n\" base_lr: 0.1 max_iter: 1 solver_mode: CPU device_id: 3", Path::new("s"));
    assert_eq!(cpu.unwrap().gpu, None);
    let gpu3 = SolverParam::parse("net: \"n\" base_lr: 0.1 max_iter: 1 solver_mode: GPU device_id: 3", Path::new("s"));
    assert_eq!(gpu3.unwrap().gpu, Some(3));
    let bad = SolverParam::parse("net: \"n\" base_lr: 0.1 max_iter: 1 solver_mode: GPU device_id: -1", Path::new("s"));
    assert!(bad.unwrap_err().to_string().contains("device_id -1"));
    let steps = "net: \"n\" base_lr: 0.1 max_iter: 9 lr_policy: \"multistep\" gamma: 0.1 stepvalue: 3 stepvalue: 6";
    let s = SolverParam::parse(steps, Path::new("s.prototxt")).unwrap();
    assert_eq!(s.lr_policy, LrPolicy::MultiStep { gamma: 0.1, stepvalues: vec![3, 6] });
}

#[test]
fn unknown_layer_types_and_fields_are_named_with_their_line() {
    let (line, msg) = net_err("name: \"x\"\nlayer {\n  name: \"n\"\n  type: \"WindowData\"\n}\n");
    assert_eq!(line, 4);
    assert!(msg.contains("unknown layer type `WindowData`") && msg.contains("LRN, BatchNorm"), "{msg}");

    let (line, msg) = net_err("layer {\n  name: \"r\"\n  type: \"ReLU\"\n  bottom: \"a\"\n  colour: 3\n}\n");
    assert_eq!(line, 5);
    assert!(msg.contains("unknown field `colour`"), "{msg}");

    let src = "layer {\n name: \"c\"\n type: \"Convolution\"\n convolution_param {\n  num_output: 2\n  \
               kernel_size: 3\n  weight_filler { type: \"orthogonal\" }\n }\n}\n";
    let (line, msg) = net_err(src);
    assert_eq!(line, 7);
    assert!(msg.contains("unknown filler type `orthogonal`"), "{msg}");

    let (line, msg) =
        net_err("layer {\n name: \"p\"\n type: \"ReLU\"\n pooling_param { pool: MAX kernel_size: 2 }\n}\n");
    assert_eq!(line, 4);
    assert!(msg.contains("`pooling_param` does not apply to a ReLU layer"), "{msg}");

    let (line, msg) = net_err("layer {\n name: \"p\"\n type: \"Pooling\"\n pooling_param { pool: STOCHASTIC }\n}\n");
    assert_eq!(line, 4);
    assert!(msg.contains("STOCHASTIC") && msg.contains("MAX, AVE"), "{msg}");

    // V1 `layers` are upgraded (tests/v1_nets.rs); the V0 form inside them is refused.
    let (line, msg) = net_err("layers {\n layer {\n  name: \"old\"\n }\n}\n");
    assert_eq!(line, 2);
    assert!(msg.contains("V0") && msg.contains("upgrade_net_proto_text"), "{msg}");

    let (_, msg) = net_err("layer {\n name: \"d\"\n type: \"Data\"\n data_param { batch_size: 4 }\n}\n");
    assert!(msg.contains("no `source`"), "{msg}");
}

#[test]
fn syntax_errors_say_where() {
    let (line, msg) = net_err("name: \"x\"\nlayer {\n  name: \"a\"\n");
    assert!(msg.contains("not closed"), "{msg}");
    assert_eq!(line, 2);
    let (line, _) = net_err("name: \"x\"\nlayer {\n  name \"a\"\n}\n");
    assert_eq!(line, 3);
    let (line, msg) = net_err("layer {\n type: Convolution\n}\n");
    assert_eq!(line, 2);
    assert!(msg.contains("quoted"), "{msg}");
}

#[test]
fn broken_solvers_are_named() {
    let (line, msg) = solver_err("net: \"n\"\nbase_lr: 0.1\nmax_iter: 5\nlr_polcy: \"fixed\"\n");
    assert_eq!(line, 4);
    assert!(msg.contains("unknown field `lr_polcy`"), "{msg}");
    let (line, msg) = solver_err("net: \"n\"\nbase_lr: 0.1\nmax_iter: 5\nlr_policy: \"plateau\"\n");
    assert_eq!(line, 4);
    assert!(msg.contains("plateau") && msg.contains("poly or sigmoid"), "{msg}");
    let (line, msg) = solver_err("net: \"n\"\nbase_lr: 0.1\nmax_iter: 5\nlr_policy: \"step\"\ngamma: 0.1\n");
    assert_eq!(line, 4);
    assert!(msg.contains("stepsize"), "{msg}");
    let (line, msg) = solver_err("net: \"n\"\nbase_lr: -1\nmax_iter: 5\n");
    assert_eq!(line, 2);
    assert!(msg.contains("base_lr"), "{msg}");
    let (line, msg) = solver_err("net: \"n\"\nbase_lr: 0.1\nmax_iter: 5\nsnapshot_diff: true\n");
    assert_eq!(line, 4);
    assert!(msg.contains("not supported"), "{msg}");
    let (_, msg) = solver_err("net: \"n\"\nbase_lr: 0.1\nmax_iter: five\n");
    assert!(msg.contains("max_iter"), "{msg}");
}

#[test]
fn solver_types_policies_and_their_settings() {
    let parse = |rest: &str| {
        SolverParam::parse(&format!("net: \"n\"\nbase_lr: 0.1\nmax_iter: 100\n{rest}"), Path::new("s.prototxt"))
            .unwrap()
    };
    let s = parse("");
    assert_eq!(
        (s.solver_type, s.regularization, s.clip_gradients, s.iter_size),
        (SolverType::Sgd, Regularization::L2, None, 1)
    );
    assert_eq!((s.momentum2, s.delta, s.rms_decay), (0.999, 1e-8, 0.99), "Caffe's defaults");
    let s = parse("type: \"Adam\"\nmomentum: 0.9\nmomentum2: 0.99\ndelta: 1e-7\n");
    assert_eq!((s.solver_type, s.momentum, s.momentum2, s.delta), (SolverType::Adam, 0.9, 0.99, 1e-7));
    for (old, ty) in [
        ("SGD", SolverType::Sgd),
        ("NESTEROV", SolverType::Nesterov),
        ("ADAGRAD", SolverType::AdaGrad),
        ("RMSPROP", SolverType::RmsProp),
        ("ADADELTA", SolverType::AdaDelta),
        ("ADAM", SolverType::Adam),
    ] {
        assert_eq!(parse(&format!("solver_type: {old}")).solver_type, ty, "solver_type: {old}");
        assert_eq!(parse(&format!("type: \"{}\"", ty.name())).solver_type, ty);
        assert_eq!(parse(&format!("type: \"{}\" solver_type: {old}", ty.name())).solver_type, ty);
    }
    let s = parse("type: \"RMSProp\"\nrms_decay: 0.98\nregularization_type: \"L1\"\nclip_gradients: 35\niter_size: 4");
    assert_eq!(
        (s.rms_decay, s.regularization, s.clip_gradients, s.iter_size),
        (0.98, Regularization::L1, Some(35.0), 4)
    );
    assert_eq!(parse("clip_gradients: -1").clip_gradients, None, "negative: no clipping, as in Caffe");
    assert_eq!(parse("lr_policy: \"exp\" gamma: 0.99").lr_policy, LrPolicy::Exp { gamma: 0.99 });
    assert_eq!(parse("lr_policy: \"poly\" power: 0.5").lr_policy, LrPolicy::Poly { power: 0.5 });
    let sigmoid = parse("lr_policy: \"sigmoid\" gamma: 0.1 stepsize: 50").lr_policy;
    assert_eq!(sigmoid, LrPolicy::Sigmoid { gamma: 0.1, stepsize: 50 });
}

#[test]
fn bad_solver_settings_are_named_with_their_line() {
    let err = |rest: &str| solver_err(&format!("net: \"n\"\nbase_lr: 0.1\nmax_iter: 100\n{rest}"));
    for (rest, line, want) in [
        (
            "type: \"Adamax\"\n",
            4,
            "solver type `Adamax` is not supported; use one of SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam",
        ),
        (
            "type: \"Adam\"\nmomentum: 0.9\nsolver_type: NESTEROV\n",
            6,
            "solver_type NESTEROV contradicts `type: \"Adam\"` (line 4)",
        ),
        ("solver_type: ADAGRAD\nmomentum: 0.9\n", 5, "momentum cannot be used with AdaGrad"),
        ("type: \"RMSProp\"\n\nrms_decay: 1.5\n", 6, "rms_decay 1.5 must be in [0, 1)"),
        ("momentum2: 0.99\n", 4, "`momentum2` (Adam's beta2) has no effect with solver type SGD"),
        ("type: \"Nesterov\"\ndelta: 1e-6\n", 5, "`delta`"),
        ("type: \"Adam\"\nrms_decay: 0.9\n", 5, "`rms_decay` (RMSProp's decay) has no effect with solver type Adam"),
        ("type: \"Adam\"\ndelta: 0\n", 5, "delta 0 must be > 0"),
        ("type: \"Adam\"\nmomentum2: 1\n", 5, "momentum2 1 must be in [0, 1)"),
        ("regularization_type: \"L3\"\n", 4, "regularization_type `L3`: use \"L1\" or \"L2\""),
        ("iter_size: 0\n", 4, "iter_size 0 must be >= 1"),
        ("clip_gradients: 0\n", 4, "clip_gradients 0"),
        ("lr_policy: \"exp\"\n", 4, "lr_policy \"exp\" needs `gamma`"),
        ("lr_policy: \"exp\"\ngamma: -0.5\n", 5, "gamma -0.5 must be >= 0"),
        ("lr_policy: \"poly\"\n", 4, "lr_policy \"poly\" needs `power`"),
        ("lr_policy: \"sigmoid\"\ngamma: 0.1\n", 4, "lr_policy \"sigmoid\" needs `stepsize` >= 1"),
        ("lr_policy: \"sigmoid\"\nstepsize: 10\n", 4, "lr_policy \"sigmoid\" needs `gamma`"),
    ] {
        let (at, msg) = err(rest);
        assert!(msg.contains(want), "{rest}: {msg}");
        assert_eq!(at, line, "{rest}: {msg}");
    }
    let (line, msg) = solver_err("net: \"n\"\nbase_lr: 0.1\nlr_policy: \"poly\"\npower: 1\n");
    assert_eq!(line, 1);
    assert!(msg.contains("needs `max_iter` >= 1 (lr_policy \"poly\" uses it)"), "{msg}");
}

#[test]
fn every_problem_of_a_net_is_reported_in_one_run() {
    let src = "name: \"x\"\n\
               layer {\n  name: \"c\"\n  type: \"Convolution\"\n  convolution_param {\n    num_output: 0\n    kernel_size: 3\n    group: 0\n  }\n}\n\
               layer {\n  name: \"p\"\n  type: \"Pooling\"\n  pooling_param { pool: MAXX kernel_size: 2 }\n}\n\
               layer {\n  name: \"r\"\n  type: \"ReLU\"\n  colour: 3\n}\n";
    let e = NetParam::parse(src, Path::new("many.prototxt")).unwrap_err().to_string();
    // Schema problems first (unknown fields and enum values), each at its line.
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(lines[0].starts_with("many.prototxt:14: field `pool`: `MAXX` is not a PoolingParameter.PoolMethod"), "{e}");
    assert!(lines[0].contains("MAX, AVE, STOCHASTIC"), "{e}");
    assert!(lines[1].starts_with("many.prototxt:19: unknown field `colour` in LayerParameter"), "{e}");

    // Once the file parses, every check on its values in one run too.
    let src = src.replace("MAXX", "MAX").replace("  colour: 3\n", "");
    let e = NetParam::parse(&src, Path::new("many.prototxt")).unwrap_err().to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(lines[0].starts_with("many.prototxt:5: convolution_param needs num_output >= 1"), "{e}");
    assert!(lines[1].starts_with("many.prototxt:8: group 0: use group 1"), "{e}");
}

#[test]
fn duplicate_layer_names_follow_caffe() {
    let layer = |name: &str, phase: &str| {
        format!("layer {{\n  name: \"{name}\"\n  type: \"ReLU\"\n  bottom: \"a\"\n  top: \"a\"\n{phase}}}\n")
    };
    // Caffe lets layers share a name (its MNIST autoencoder names two losses `loss`).
    let src = format!("{}{}", layer("r", ""), layer("r", ""));
    NetParam::parse(&src, Path::new("ok.prototxt")).unwrap();
    // Weights are matched by layer name: two parameter layers may not share one.
    let dir = common::scratch("duplicate-names");
    let conv = |top: &str| {
        format!(
            "layer {{ name: \"c\" type: \"Convolution\" bottom: \"data\" top: \"{top}\" \
             convolution_param {{ num_output: 2 kernel_size: 1 }} }}\n"
        )
    };
    let net = format!(
        "layer {{ name: \"data\" type: \"Input\" top: \"data\" input_param {{ shape {{ dim: 1 dim: 1 dim: 4 dim: 4 }} }} }}\n{}{}",
        conv("x"),
        conv("y")
    );
    let path = dir.join("net.prototxt");
    std::fs::write(&path, net).unwrap();
    let param = NetParam::load(&path).unwrap();
    let e = caffe_geeps::net::Net::build(&param, caffe_geeps::proto::net::Phase::Train, &Default::default())
        .err()
        .expect("two parameter layers named `c`")
        .to_string();
    assert!(e.contains("net.prototxt:3:") && e.contains("two layers named `c` hold parameters (lines 2 and 3)"), "{e}");
}

#[test]
fn misspelt_fields_get_a_suggestion() {
    let (line, msg) =
        net_err("layer {\n name: \"c\"\n type: \"Convolution\"\n convolution_param {\n  num_ouptut: 3\n }\n}\n");
    assert_eq!(line, 5);
    assert!(msg.contains("unknown field `num_ouptut` in ConvolutionParameter; did you mean `num_output`?"), "{msg}");
}

#[test]
fn loss_normalization_as_caffe_reads_it() {
    let norm = |loss_param: &str| {
        let src = format!("layer {{ name: \"l\" type: \"SoftmaxWithLoss\" {loss_param} }}");
        match NetParam::parse(&src, Path::new("n")).unwrap().layers[0].kind {
            LayerKind::SoftmaxWithLoss { normalization } => normalization,
            ref other => panic!("{other:?}"),
        }
    };
    assert_eq!(norm(""), Normalization::Batch);
    assert_eq!(norm("loss_param { normalization: NONE }"), Normalization::None);
    // The old flag: false means BATCH_SIZE; `normalization`, when given, wins.
    assert_eq!(norm("loss_param { normalize: false }"), Normalization::Batch);
    assert_eq!(norm("loss_param { normalize: false normalization: NONE }"), Normalization::None);
}

#[test]
fn solver_fields_caffe_geeps_cannot_honour_are_refused_at_their_line() {
    let base = "net: \"n.prototxt\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 10\n";
    let (line, msg) = solver_err(&format!("{base}test_interval: 100\n"));
    assert_eq!(line, 5);
    assert!(msg.contains("test_iter is not"), "{msg}");
    // Caffe goes on with these; so does caffe-geeps (with a warning).
    for extra in ["debug_info: true\n", "test_iter: 4\ntest_interval: 0\n", "snapshot_format: BINARYPROTO\n"] {
        assert!(SolverParam::parse(&format!("{base}{extra}"), std::path::Path::new("s.prototxt")).is_ok(), "{extra}");
    }
}

#[test]
fn include_and_exclude_rules_select_layers_by_level_and_stage() {
    use caffe_geeps::proto::net::Phase;
    use caffe_geeps::proto::net_state::NetState;
    let src = r#"name: "staged"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 } } }
layer { name: "big" type: "InnerProduct" bottom: "x" top: "y" include { phase: TRAIN stage: "big" }
  inner_product_param { num_output: 2 } }
layer { name: "deep" type: "ReLU" bottom: "x" top: "z" include { min_level: 2 } }
layer { name: "quiet" type: "ReLU" bottom: "x" top: "w" exclude { not_stage: "loud" } }
"#;
    let net = NetParam::parse(src, Path::new("staged.prototxt")).unwrap();
    let kept = |state: &NetState| -> Vec<&str> {
        net.layers.iter().filter(|l| l.phases.admits_state(state)).map(|l| l.name.as_str()).collect()
    };
    let train = NetState::phase(Phase::Train);
    assert_eq!(kept(&train), ["in"]);
    let big = NetState { stages: vec!["big".into(), "loud".into()], level: 2, ..train.clone() };
    assert_eq!(kept(&big), ["in", "big", "deep", "quiet"]);
    assert_eq!(kept(&NetState { stages: vec!["big".into()], ..NetState::phase(Phase::Test) }), ["in"]);

    let (line, msg) = net_err(
        "name: \"n\"\nlayer { name: \"a\" type: \"ReLU\" bottom: \"x\" top: \"x\"\n include { min_level: 3 max_level: 1 } }\n",
    );
    assert_eq!(line, 3);
    assert!(msg.contains("max_level 1 is below min_level 3"), "{msg}");

    let s = SolverParam::parse(
        "net: \"n.prototxt\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 1\ntrain_state { level: 2 stage: \"big\" }\n",
        Path::new("s.prototxt"),
    )
    .unwrap();
    assert_eq!(
        (s.train_state.phase, s.train_state.level, s.train_state.stages.clone()),
        (Phase::Train, 2, vec!["big".to_string()])
    );
    assert!(s.test_nets.is_empty(), "no test_iter: no test net");
    let s = SolverParam::parse(
        "net: \"n.prototxt\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 1\ntest_iter: 3\ntest_iter: 5\ntest_state { stage: \"eval\" }\ntest_state { stage: \"val\" level: 1 }\n",
        Path::new("s.prototxt"),
    )
    .unwrap();
    let nets: Vec<_> =
        s.test_nets.iter().map(|t| (t.iter, t.state.stages.clone(), t.state.level, t.state.phase)).collect();
    assert_eq!(nets, [(3, vec!["eval".to_string()], 0, Phase::Test), (5, vec!["val".to_string()], 1, Phase::Test)]);
}

#[test]
fn train_net_test_net_and_several_test_nets_are_read_as_caffe_reads_them() {
    let dir = common::scratch("test-nets");
    for f in ["t.prototxt", "a.prototxt", "b.prototxt", "n.prototxt"] {
        std::fs::write(dir.join(f), "").unwrap();
    }
    let base = "base_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 1\n";
    let load = |extra: &str| SolverParam::parse(&format!("{base}{extra}"), &dir.join("s.prototxt"));
    let s = load(
        "train_net: \"t.prototxt\"\ntest_net: \"a.prototxt\"\ntest_net: \"b.prototxt\"\ntest_iter: 2\ntest_iter: 4\n",
    )
    .unwrap();
    assert!(s.net.ends_with("t.prototxt"));
    let nets: Vec<_> = s.test_nets.iter().map(|t| (t.net.file_name().unwrap().to_owned(), t.iter)).collect();
    assert_eq!(nets, [("a.prototxt".into(), 2), ("b.prototxt".into(), 4)]);
    // With `net`, test_iters beyond the test_net files test instances of it.
    let s = load("net: \"n.prototxt\"\ntest_net: \"a.prototxt\"\ntest_iter: 2\ntest_iter: 7\n").unwrap();
    let nets: Vec<_> = s.test_nets.iter().map(|t| (t.net.file_name().unwrap().to_owned(), t.iter)).collect();
    assert_eq!(nets, [("a.prototxt".into(), 2), ("n.prototxt".into(), 7)]);
    // Mistakes, at their lines.
    let err = |extra: &str| solver_err(&format!("{base}{extra}"));
    let (line, msg) = err("train_net: \"t.prototxt\"\ntest_net: \"a.prototxt\"\ntest_iter: 2\ntest_iter: 4\n");
    assert_eq!(line, 7);
    assert!(msg.contains("2 test_iter for 1 test net"), "{msg}");
    let (line, msg) = err("net: \"n.prototxt\"\ntrain_net: \"t.prototxt\"\n");
    assert_eq!(line, 5);
    assert!(msg.contains("not both"), "{msg}");
    let (_, msg) = err("net: \"n.prototxt\"\ntest_iter: 2\ntest_state { stage: \"a\" }\ntest_state { stage: \"b\" }\n");
    assert!(msg.contains("2 test_state for 1 test net"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}
