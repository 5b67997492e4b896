//! Caffe's `SolverParameter` (the `*_solver.prototxt` file) read into the
//! settings this trainer runs: SGD settings, the learning-rate policy, the
//! schedule of display, test and snapshot. It owns checking those fields
//! (every problem of the file, each at its line) with Caffe's defaults; it
//! must never compute a rate or run anything (`solver.rs` does).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::proto::caffe::{self, solver_parameter};
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
}

#[derive(Debug, Clone, PartialEq)]
pub struct SolverParam {
    /// The net file, resolved (see `resolve`).
    pub net: PathBuf,
    pub base_lr: f32,
    pub momentum: f32,
    pub weight_decay: f32,
    pub lr_policy: LrPolicy,
    pub max_iter: u64,
    /// Log every this many iterations (0: never).
    pub display: u64,
    /// Iterations over which the displayed loss is averaged.
    pub average_loss: u64,
    /// Test batches per test (0 when the solver runs no test).
    pub test_iter: u64,
    /// Test every this many iterations (0: only at the end).
    pub test_interval: u64,
    /// Test once before training starts.
    pub test_initialization: bool,
    /// Write weights every this many iterations (0: only at the end).
    pub snapshot: u64,
    pub snapshot_prefix: String,
    pub snapshot_after_train: bool,
    pub random_seed: Option<u64>,
    /// `solver_mode: GPU`: the GPU (`device_id`, default 0) to keep rows on.
    pub gpu: Option<usize>,
    pub file: PathBuf,
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
            ("train_net", s.train_net.is_some()),
            ("test_net", !s.test_net.is_empty()),
            ("net_param", s.net_param.is_some()),
            ("train_net_param", s.train_net_param.is_some()),
            ("test_net_param", !s.test_net_param.is_empty()),
            ("train_state", s.train_state.is_some()),
            ("test_state", !s.test_state.is_empty()),
            ("test_compute_loss", s.test_compute_loss()),
            ("clip_gradients", s.clip_gradients() >= 0.0),
            ("snapshot_diff", s.snapshot_diff()),
            ("delta", s.delta.is_some()),
            ("momentum2", s.momentum2.is_some()),
            ("rms_decay", s.rms_decay.is_some()),
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
        if s.r#type() != "SGD" {
            p.push(at("type"), format!("solver type `{}`: only SGD is supported", s.r#type()));
        }
        if s.solver_type() != solver_parameter::SolverType::Sgd {
            p.push(at("solver_type"), format!("solver_type {}: only SGD is supported", s.solver_type().as_str_name()));
        }
        if s.regularization_type() != "L2" {
            p.push(
                at("regularization_type"),
                format!("regularization_type `{}`: only L2 is supported", s.regularization_type()),
            );
        }
        if s.iter_size() != 1 {
            p.push(at("iter_size"), "iter_size other than 1 is not supported; raise batch_size instead");
        }

        let net_name = s.net.clone();
        if net_name.is_none() {
            p.push(1, "the solver has no `net: \"...prototxt\"`");
        }
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
            if v.is_none() {
                p.push(at("lr_policy"), format!("lr_policy \"{policy}\" needs `{what}`"));
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
                    format!("lr_policy \"{other}\" is not supported; use fixed, step, inv or multistep"),
                );
                None
            }
        };
        let max_iter = s.max_iter.unwrap_or(0);
        if max_iter <= 0 {
            p.push(at("max_iter"), "the solver needs `max_iter` >= 1");
        }
        if s.test_iter.len() > 1 {
            p.push(loc.nth("test_iter", 1).line(), "one test net only: give `test_iter` once");
        }
        let count = |p: &mut Problems, field: &str, v: i32| {
            if v < 0 {
                p.push(at(field), format!("{field} {v} must be >= 0"));
            }
            v.max(0) as u64
        };
        let display = count(&mut p, "display", s.display());
        let average_loss = count(&mut p, "average_loss", s.average_loss()).max(1);
        let test_iter = count(&mut p, "test_iter", s.test_iter.first().copied().unwrap_or(0));
        let test_interval = count(&mut p, "test_interval", s.test_interval());
        let snapshot = count(&mut p, "snapshot", s.snapshot());
        p.finish()?;

        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let random_seed = u64::try_from(s.random_seed()).ok();
        Ok(SolverParam {
            net: resolve(&net_name.expect("checked above"), &base_dir),
            base_lr,
            momentum,
            weight_decay,
            lr_policy: lr_policy.expect("checked above"),
            max_iter: max_iter as u64,
            display,
            average_loss,
            test_iter,
            test_interval,
            test_initialization: s.test_initialization(),
            snapshot,
            snapshot_prefix: s
                .snapshot_prefix
                .clone()
                .unwrap_or_else(|| path.file_stem().map_or("caffe-geeps".into(), |s| s.to_string_lossy().into_owned())),
            snapshot_after_train: s.snapshot_after_train(),
            random_seed,
            gpu,
            file: path.to_path_buf(),
        })
    }
}
