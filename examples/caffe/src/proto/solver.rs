//! Caffe's `SolverParameter` (the `*_solver.prototxt` file) read into the
//! settings this trainer runs: the solver type and its settings, the
//! learning-rate policy, regularization, clipping, iter_size, the schedule of
//! display, test and snapshot. It owns checking those fields
//! (every problem of the file, each at its line) with Caffe's defaults; it
//! must never compute a rate or run anything (`solver.rs` does).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::proto::caffe::{self, solver_parameter};
use crate::proto::locate::Loc;
use crate::proto::net::Phase;
use crate::proto::net_state::NetState;
use crate::proto::problems::Problems;
use crate::proto::text;

/// The learning-rate policy with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum LrPolicy {
    Fixed,
    /// base_lr × gamma ^ floor(iter / stepsize)
    Step {
        gamma: f32,
        stepsize: u64,
    },
    /// base_lr × (1 + gamma × iter) ^ (−power)
    Inv {
        gamma: f32,
        power: f32,
    },
    /// base_lr × gamma ^ (number of stepvalues ≤ iter)
    MultiStep {
        gamma: f32,
        stepvalues: Vec<u64>,
    },
    /// base_lr × gamma ^ iter
    Exp {
        gamma: f32,
    },
    /// base_lr × (1 − iter / max_iter) ^ power
    Poly {
        power: f32,
    },
    /// base_lr / (1 + exp(−gamma × (iter − stepsize)))
    Sigmoid {
        gamma: f32,
        stepsize: u64,
    },
}

/// Caffe's solver types (`type: "Adam"` or the old `solver_type: ADAM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SolverType {
    Sgd,
    Nesterov,
    AdaGrad,
    RmsProp,
    AdaDelta,
    Adam,
}

impl SolverType {
    /// Every type with its `type` string and its `solver_type` enum value.
    const ALL: [(SolverType, &'static str, solver_parameter::SolverType); 6] = [
        (SolverType::Sgd, "SGD", solver_parameter::SolverType::Sgd),
        (SolverType::Nesterov, "Nesterov", solver_parameter::SolverType::Nesterov),
        (SolverType::AdaGrad, "AdaGrad", solver_parameter::SolverType::Adagrad),
        (SolverType::RmsProp, "RMSProp", solver_parameter::SolverType::Rmsprop),
        (SolverType::AdaDelta, "AdaDelta", solver_parameter::SolverType::Adadelta),
        (SolverType::Adam, "Adam", solver_parameter::SolverType::Adam),
    ];

    /// Caffe's name of the type (its `type` string).
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|t| t.0 == self).map_or("SGD", |t| t.1)
    }
}

/// `regularization_type`: what weight decay adds to the gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regularization {
    /// decay × w
    L2,
    /// decay × sign(w)
    L1,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SolverParam {
    /// The net file, resolved (see `resolve`).
    pub net: PathBuf,
    pub solver_type: SolverType,
    pub base_lr: f32,
    /// SGD's and Nesterov's momentum, AdaDelta's decay, Adam's beta1.
    pub momentum: f32,
    /// Adam's beta2.
    pub momentum2: f32,
    /// The epsilon of AdaGrad, RMSProp, AdaDelta and Adam.
    pub delta: f32,
    /// RMSProp's decay of the mean squared gradient.
    pub rms_decay: f32,
    pub weight_decay: f32,
    pub regularization: Regularization,
    /// Scale the gradients down to this L2 norm when it is larger.
    pub clip_gradients: Option<f32>,
    /// Mini-batches whose gradients are summed (and averaged) per update.
    pub iter_size: u64,
    pub lr_policy: LrPolicy,
    pub max_iter: u64,
    /// Log every this many iterations (0: never).
    pub display: u64,
    /// Iterations over which the displayed loss is averaged.
    pub average_loss: u64,
    /// The test nets, each tested every `test_interval` (none: no test).
    pub test_nets: Vec<TestNet>,
    /// Test every this many iterations (0: only at the end).
    pub test_interval: u64,
    /// Test once before training starts.
    pub test_initialization: bool,
    /// Log each test's total loss (Caffe's `Test loss:` line): the test
    /// outputs' means times their loss weights, summed.
    pub test_compute_loss: bool,
    /// Write weights every this many iterations (0: only at the end).
    pub snapshot: u64,
    pub snapshot_prefix: String,
    /// `snapshot_format: HDF5`: weights and solver state as `.caffemodel.h5`
    /// and `.solverstate.h5` (Caffe's HDF5 layout) instead of binary protos.
    pub snapshot_hdf5: bool,
    pub snapshot_after_train: bool,
    pub random_seed: Option<u64>,
    /// `solver_mode: GPU`: the GPU (`device_id`, default 0) to keep rows on.
    pub gpu: Option<usize>,
    /// The level and stages the TRAIN net is built for (`train_state`).
    pub train_state: NetState,
    pub file: PathBuf,
}

/// One test net: its file, the batches of each test, and the state (level,
/// stages) it is built for.
#[derive(Debug, Clone, PartialEq)]
pub struct TestNet {
    pub net: PathBuf,
    pub iter: u64,
    pub state: NetState,
    /// The solver file's line of this net's `test_iter` (0: none).
    pub iter_line: usize,
}

/// Resolves `name` as Caffe does (against the current directory), falling
/// back to the directory of the file that names it, so shipped files work
/// from anywhere.
pub fn resolve(name: &str, base_dir: &Path) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() || p.exists() {
        return p.to_path_buf();
    }
    let beside = base_dir.join(p);
    if beside.exists() {
        beside
    } else {
        p.to_path_buf()
    }
}

impl SolverParam {
    pub fn load(path: &Path) -> Result<SolverParam> {
        let src =
            std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read the solver: {e}")))?;
        Self::parse(&src, path)
    }

    pub fn parse(src: &str, path: &Path) -> Result<SolverParam> {
        let (s, locs) = text::parse::<caffe::SolverParameter>(src, path, "SolverParameter")?;
        let loc = locs.root();
        let at = |name: &str| loc.of(name);
        let mut p = Problems::new(path);
        let unsupported = |p: &mut Problems, field: &str, why: &str| {
            p.push(at(field), format!("field `{field}` is not supported by caffe-geeps{why}; remove it"))
        };
        for (field, set) in [
            ("net_param", s.net_param.is_some()),
            ("train_net_param", s.train_net_param.is_some()),
            ("test_net_param", !s.test_net_param.is_empty()),
            ("snapshot_diff", s.snapshot_diff()),
            ("weights", !s.weights.is_empty()),
        ] {
            if set {
                unsupported(&mut p, field, "");
            }
        }
        // GPU: the workers keep their rows on GPU `device_id` (the layers
        // still compute on the CPU). Without `solver_mode`, the CPU.
        let gpu_mode = s.solver_mode.is_some() && s.solver_mode() == solver_parameter::SolverMode::Gpu;
        if s.device_id() < 0 {
            p.push(at("device_id"), format!("device_id {}: a GPU ordinal is 0 or more", s.device_id()));
        }
        let gpu = gpu_mode.then(|| s.device_id().max(0) as usize);
        let solver_type = solver_type(&s, &loc, &mut p);
        let regularization = match s.regularization_type() {
            "L2" => Regularization::L2,
            "L1" => Regularization::L1,
            other => {
                p.push(at("regularization_type"), format!("regularization_type `{other}`: use \"L1\" or \"L2\""));
                Regularization::L2
            }
        };
        let iter_size = s.iter_size();
        if iter_size < 1 {
            p.push(at("iter_size"), format!("iter_size {iter_size} must be >= 1"));
        }
        let clip = s.clip_gradients();
        // Negative (Caffe's default) means no clipping.
        let clip_gradients = if clip.is_nan() || clip == 0.0 {
            p.push(
                at("clip_gradients"),
                format!("clip_gradients {clip}: give the largest L2 norm (> 0), or a negative value for no clipping"),
            );
            None
        } else {
            (clip > 0.0).then_some(clip)
        };
        check_type_settings(&s, solver_type, &loc, &mut p);

        let net_name = match (&s.net, &s.train_net) {
            (Some(_), Some(_)) => {
                p.push(at("train_net"), "give `net` (TRAIN and TEST in one file) or `train_net`, not both");
                s.net.clone()
            }
            (Some(n), None) | (None, Some(n)) => Some(n.clone()),
            (None, None) => {
                p.push(1, "the solver has no `net: \"...prototxt\"` (or `train_net`)");
                None
            }
        };
        let base_lr = s.base_lr.unwrap_or(0.0);
        if s.base_lr.is_none() {
            p.push(1, "the solver has no `base_lr`");
        } else if !(base_lr.is_finite() && base_lr > 0.0) {
            p.push(at("base_lr"), format!("base_lr {base_lr} must be a positive number"));
        }
        let momentum = s.momentum();
        if !(0.0..1.0).contains(&momentum) {
            p.push(at("momentum"), format!("momentum {momentum} must be in [0, 1)"));
        }
        let weight_decay = s.weight_decay();
        if !(weight_decay >= 0.0 && weight_decay.is_finite()) {
            p.push(at("weight_decay"), format!("weight_decay {weight_decay} must be >= 0"));
        }
        let mut need = |v: Option<f32>, what: &str, policy: &str| {
            match v {
                None => p.push(at("lr_policy"), format!("lr_policy \"{policy}\" needs `{what}`")),
                Some(g) if what == "gamma" && !(g >= 0.0 && g.is_finite()) => {
                    p.push(at("gamma"), format!("gamma {g} must be >= 0 (lr_policy \"{policy}\")"))
                }
                Some(_) => {}
            }
            v.unwrap_or(0.0)
        };
        let lr_policy = match s.lr_policy.as_deref().unwrap_or("fixed") {
            "fixed" => Some(LrPolicy::Fixed),
            "step" => {
                let gamma = need(s.gamma, "gamma", "step");
                match s.stepsize {
                    Some(st) if st > 0 => Some(LrPolicy::Step { gamma, stepsize: st as u64 }),
                    _ => {
                        p.push(at("lr_policy"), "lr_policy \"step\" needs `stepsize` >= 1");
                        None
                    }
                }
            }
            "exp" => Some(LrPolicy::Exp { gamma: need(s.gamma, "gamma", "exp") }),
            "poly" => Some(LrPolicy::Poly { power: need(s.power, "power", "poly") }),
            "sigmoid" => {
                let gamma = need(s.gamma, "gamma", "sigmoid");
                match s.stepsize {
                    Some(st) if st > 0 => Some(LrPolicy::Sigmoid { gamma, stepsize: st as u64 }),
                    _ => {
                        p.push(at("lr_policy"), "lr_policy \"sigmoid\" needs `stepsize` >= 1");
                        None
                    }
                }
            }
            "inv" => Some(LrPolicy::Inv { gamma: need(s.gamma, "gamma", "inv"), power: need(s.power, "power", "inv") }),
            "multistep" => {
                let gamma = need(s.gamma, "gamma", "multistep");
                if s.stepvalue.windows(2).any(|w| w[0] >= w[1]) || s.stepvalue.iter().any(|v| *v < 0) {
                    p.push(at("stepvalue"), "stepvalue entries must be >= 0 and increase");
                }
                let stepvalues = s.stepvalue.iter().map(|&v| v.max(0) as u64).collect();
                Some(LrPolicy::MultiStep { gamma, stepvalues })
            }
            other => {
                p.push(
                    at("lr_policy"),
                    format!(
                        "lr_policy \"{other}\" is not supported; use fixed, step, exp, inv, multistep, poly or sigmoid"
                    ),
                );
                None
            }
        };
        let max_iter = s.max_iter.unwrap_or(0);
        if max_iter <= 0 {
            let why =
                if matches!(lr_policy, Some(LrPolicy::Poly { .. })) { " (lr_policy \"poly\" uses it)" } else { "" };
            p.push(at("max_iter"), format!("the solver needs `max_iter` >= 1{why}"));
        }
        let count = |p: &mut Problems, field: &str, v: i32| {
            if v < 0 {
                p.push(at(field), format!("{field} {v} must be >= 0"));
            }
            v.max(0) as u64
        };
        let display = count(&mut p, "display", s.display());
        let average_loss = count(&mut p, "average_loss", s.average_loss()).max(1);
        let state_of = |st: Option<&caffe::NetState>, phase: Phase| NetState {
            phase,
            level: st.map_or(0, |s| s.level()),
            stages: st.map(|s| s.stage.clone()).unwrap_or_default(),
        };
        let train_state = state_of(s.train_state.as_ref(), Phase::Train);
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        // Caffe's test nets: the `test_net` files, then as many instances of
        // `net` as `test_iter`s remain; one `test_iter` each, and one
        // `test_state` each when any is given.
        let files: Vec<PathBuf> = s.test_net.iter().map(|n| resolve(n, &base_dir)).collect();
        let generic = if s.net.is_some() { s.test_iter.len().saturating_sub(files.len()) } else { 0 };
        let instances = files.len() + generic;
        if s.test_iter.len() != instances {
            let line = if s.test_iter.is_empty() {
                at("test_net")
            } else {
                loc.nth("test_iter", s.test_iter.len() - 1).line()
            };
            p.push(
                line,
                format!(
                    "{} test_iter for {} test net(s): give one `test_iter` per `test_net` (with `net`, each further one tests another instance of it)",
                    s.test_iter.len(),
                    files.len()
                ),
            );
        }
        if !s.test_state.is_empty() && s.test_state.len() != instances {
            p.push(
                loc.nth("test_state", 0).line(),
                format!(
                    "{} test_state for {instances} test net(s): give none, or one per test net",
                    s.test_state.len()
                ),
            );
        }
        let test_nets: Vec<TestNet> = (0..instances.min(s.test_iter.len()))
            .map(|i| TestNet {
                net: files.get(i).cloned().unwrap_or_else(|| resolve(s.net.as_deref().unwrap_or_default(), &base_dir)),
                iter: s.test_iter[i].max(0) as u64,
                state: state_of(s.test_state.get(i), Phase::Test),
                iter_line: loc.nth("test_iter", i).line(),
            })
            .collect();
        for (i, &t) in s.test_iter.iter().enumerate() {
            if t < 0 {
                p.push(loc.nth("test_iter", i).line(), format!("test_iter {t} must be >= 0"));
            }
        }
        let test_iter = test_nets.first().map_or(0, |t| t.iter);
        let test_interval = count(&mut p, "test_interval", s.test_interval());
        if s.test_interval.is_some_and(|t| t > 0) && s.test_iter.is_empty() {
            p.push(
                at("test_interval"),
                "test_interval is set but test_iter is not: give `test_iter` (the test batches of each test), as Caffe requires",
            );
        }
        let warn = |field: &str, what: &str| tracing::warn!("{}:{}: {what}", path.display(), at(field));
        if s.test_interval == Some(0) && test_iter > 0 {
            warn(
                "test_interval",
                "test_interval 0: Caffe never tests during training; caffe-geeps tests once, at the end",
            );
        }
        let snapshot_hdf5 =
            s.snapshot_format.is_some() && s.snapshot_format() == solver_parameter::SnapshotFormat::Hdf5;
        if s.debug_info() {
            warn("debug_info", "debug_info: caffe-geeps prints no per-blob debug information; ignored");
        }
        let snapshot = count(&mut p, "snapshot", s.snapshot());
        p.finish()?;

        let random_seed = u64::try_from(s.random_seed()).ok();
        Ok(SolverParam {
            net: resolve(&net_name.expect("checked above"), &base_dir),
            solver_type,
            base_lr,
            momentum,
            momentum2: s.momentum2(),
            delta: s.delta(),
            rms_decay: s.rms_decay(),
            weight_decay,
            regularization,
            clip_gradients,
            iter_size: iter_size.max(1) as u64,
            lr_policy: lr_policy.expect("checked above"),
            max_iter: max_iter as u64,
            display,
            average_loss,
            test_nets,
            test_interval,
            test_initialization: s.test_initialization(),
            test_compute_loss: s.test_compute_loss(),
            snapshot,
            snapshot_prefix: s
                .snapshot_prefix
                .clone()
                .unwrap_or_else(|| path.file_stem().map_or("caffe-geeps".into(), |s| s.to_string_lossy().into_owned())),
            snapshot_hdf5,
            snapshot_after_train: s.snapshot_after_train(),
            random_seed,
            gpu,
            train_state,
            file: path.to_path_buf(),
        })
    }
}

/// The solver type from `type` or the old `solver_type` enum; both given
/// must agree.
fn solver_type(s: &caffe::SolverParameter, loc: &Loc<'_>, p: &mut Problems) -> SolverType {
    let by_enum = s.solver_type.map(|_| s.solver_type());
    let from_enum = by_enum.and_then(|e| SolverType::ALL.iter().find(|t| t.2 == e).map(|t| t.0));
    let Some(name) = s.r#type.as_deref() else { return from_enum.unwrap_or(SolverType::Sgd) };
    let Some(&(from_type, _, _)) = SolverType::ALL.iter().find(|t| t.1 == name) else {
        let names: Vec<&str> = SolverType::ALL.iter().map(|t| t.1).collect();
        p.push(loc.of("type"), format!("solver type `{name}` is not supported; use one of {}", names.join(", ")));
        return SolverType::Sgd;
    };
    if let (Some(e), Some(t)) = (by_enum, from_enum) {
        if t != from_type {
            p.push(
                loc.of("solver_type"),
                format!(
                    "solver_type {} contradicts `type: \"{name}\"` (line {}); give only `type`",
                    e.as_str_name(),
                    loc.of("type")
                ),
            );
        }
    }
    from_type
}

/// The settings of the solver type: in range, and none that the type
/// would ignore.
fn check_type_settings(s: &caffe::SolverParameter, ty: SolverType, loc: &Loc<'_>, p: &mut Problems) {
    let name = ty.name();
    let momentum = s.momentum();
    if matches!(ty, SolverType::AdaGrad | SolverType::RmsProp) && momentum != 0.0 {
        p.push(loc.of("momentum"), format!("momentum cannot be used with {name} (Caffe refuses it too); remove it"));
    }
    let unit = |p: &mut Problems, field: &str, v: f32| {
        if !(0.0..1.0).contains(&v) {
            p.push(loc.of(field), format!("{field} {v} must be in [0, 1)"));
        }
    };
    let adaptive = !matches!(ty, SolverType::Sgd | SolverType::Nesterov);
    for (field, given, applies, what) in [
        ("delta", s.delta.is_some(), adaptive, "the epsilon of AdaGrad, RMSProp, AdaDelta and Adam"),
        ("momentum2", s.momentum2.is_some(), ty == SolverType::Adam, "Adam's beta2"),
        ("rms_decay", s.rms_decay.is_some(), ty == SolverType::RmsProp, "RMSProp's decay"),
    ] {
        if given && !applies {
            p.push(loc.of(field), format!("field `{field}` ({what}) has no effect with solver type {name}; remove it"));
        }
    }
    if !(s.delta() > 0.0 && s.delta().is_finite()) {
        p.push(loc.of("delta"), format!("delta {} must be > 0 (it keeps the denominators off zero)", s.delta()));
    }
    unit(p, "momentum2", s.momentum2());
    unit(p, "rms_decay", s.rms_decay());
}
