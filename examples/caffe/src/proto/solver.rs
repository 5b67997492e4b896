//! Caffe's `SolverParameter` (the `*_solver.prototxt` file): SGD settings,
//! the learning-rate policy, the schedule of display, test and snapshot. It
//! owns reading and checking those fields with Caffe's defaults; it must
//! never compute a rate or run anything (`solver.rs` does).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::proto::fields::Fields;
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
        let msg = text::parse(src).map_err(|e| Error::Prototxt {
            file: path.to_path_buf(),
            line: e.line,
            msg: e.msg.clone(),
        })?;
        let mut f = Fields::new(path, "SolverParameter", &msg);
        let line = |f: &mut Fields<'_>, name: &str| f.all(name).first().map_or(1, |x| x.line);
        let at = |name: &str| msg.fields.iter().find(|x| x.name == name).map_or(1, |x| x.line);
        let net_name = f.string("net")?;
        let base_lr = f.f32("base_lr")?;
        let momentum = f.f32("momentum")?.unwrap_or(0.0);
        let weight_decay = f.f32("weight_decay")?.unwrap_or(0.0);
        let policy = f.string("lr_policy")?;
        let gamma = f.f32("gamma")?;
        let power = f.f32("power")?;
        let stepsize = f.u32("stepsize")?;
        let stepvalues: Vec<u64> = f.u32s("stepvalue")?.into_iter().map(u64::from).collect();
        let max_iter = f.u32("max_iter")?;
        let display = f.u32("display")?.unwrap_or(0);
        let average_loss = f.u32("average_loss")?.unwrap_or(1).max(1);
        let test_iters = f.u32s("test_iter")?;
        let test_interval = f.u32("test_interval")?.unwrap_or(0);
        let test_initialization = f.bool("test_initialization")?.unwrap_or(true);
        let snapshot = f.u32("snapshot")?.unwrap_or(0);
        let snapshot_prefix = f.string("snapshot_prefix")?;
        let snapshot_after_train = f.bool("snapshot_after_train")?.unwrap_or(true);
        let random_seed = f.i64("random_seed")?;
        // GPU: the workers keep their rows on GPU `device_id` (the layers
        // still compute on the CPU).
        let gpu_mode = f.enumeration("solver_mode", &["CPU", "GPU"])?.is_some_and(|(m, _)| m == "GPU");
        let device_id = f.i64("device_id")?;
        if let Some(id) = device_id.filter(|id| *id < 0) {
            let l = line(&mut f, "device_id");
            return Err(f.err(l, format!("device_id {id}: a GPU ordinal is 0 or more")));
        }
        let gpu = gpu_mode.then(|| device_id.unwrap_or(0) as usize);
        f.bool("debug_info")?;
        f.enumeration("snapshot_format", &["BINARYPROTO", "HDF5"])?;
        if let Some(t) = f.string("type")? {
            if t != "SGD" {
                let l = line(&mut f, "type");
                return Err(f.err(l, format!("solver type `{t}`: only SGD is supported")));
            }
        }
        if let Some((t, l)) =
            f.enumeration("solver_type", &["SGD", "NESTEROV", "ADAGRAD", "RMSPROP", "ADADELTA", "ADAM"])?
        {
            if t != "SGD" {
                return Err(f.err(l, format!("solver_type {t}: only SGD is supported")));
            }
        }
        if let Some(r) = f.string("regularization_type")? {
            if r != "L2" {
                let l = line(&mut f, "regularization_type");
                return Err(f.err(l, format!("regularization_type `{r}`: only L2 is supported")));
            }
        }
        if let Some(n) = f.u32("iter_size")? {
            if n != 1 {
                let l = line(&mut f, "iter_size");
                return Err(f.err(l, "iter_size other than 1 is not supported; raise batch_size instead"));
            }
        }
        f.finish(&[
            "train_net",
            "test_net",
            "net_param",
            "train_net_param",
            "test_net_param",
            "train_state",
            "test_state",
            "test_compute_loss",
            "clip_gradients",
            "snapshot_diff",
            "delta",
            "momentum2",
            "rms_decay",
            "layer_wise_reduce",
            "weights",
            "snapshot_prefix_",
        ])?;

        let Some(net_name) = net_name else {
            return Err(f_err(path, 1, "the solver has no `net: \"...prototxt\"`"));
        };
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let Some(base_lr) = base_lr else { return Err(f_err(path, 1, "the solver has no `base_lr`")) };
        if !(base_lr.is_finite() && base_lr > 0.0) {
            return Err(f_err(path, at("base_lr"), format!("base_lr {base_lr} must be a positive number")));
        }
        if !(0.0..1.0).contains(&momentum) {
            return Err(f_err(path, at("momentum"), format!("momentum {momentum} must be in [0, 1)")));
        }
        if !(weight_decay >= 0.0 && weight_decay.is_finite()) {
            return Err(f_err(path, at("weight_decay"), format!("weight_decay {weight_decay} must be >= 0")));
        }
        let need = |v: Option<f32>, what: &str, policy: &str| {
            v.ok_or_else(|| f_err(path, at("lr_policy"), format!("lr_policy \"{policy}\" needs `{what}`")))
        };
        let lr_policy = match policy.as_deref().unwrap_or("fixed") {
            "fixed" => LrPolicy::Fixed,
            "step" => LrPolicy::Step {
                gamma: need(gamma, "gamma", "step")?,
                stepsize: match stepsize {
                    Some(s) if s > 0 => u64::from(s),
                    _ => return Err(f_err(path, at("lr_policy"), "lr_policy \"step\" needs `stepsize` >= 1")),
                },
            },
            "inv" => LrPolicy::Inv { gamma: need(gamma, "gamma", "inv")?, power: need(power, "power", "inv")? },
            "multistep" => {
                if stepvalues.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(f_err(path, at("stepvalue"), "stepvalue entries must increase"));
                }
                LrPolicy::MultiStep { gamma: need(gamma, "gamma", "multistep")?, stepvalues }
            }
            other => {
                return Err(f_err(
                    path,
                    at("lr_policy"),
                    format!("lr_policy \"{other}\" is not supported; use fixed, step, inv or multistep"),
                ))
            }
        };
        let max_iter = match max_iter {
            Some(m) if m > 0 => u64::from(m),
            _ => return Err(f_err(path, at("max_iter"), "the solver needs `max_iter` >= 1")),
        };
        if test_iters.len() > 1 {
            return Err(f_err(path, at("test_iter"), "one test net only: give `test_iter` once"));
        }
        let random_seed = match random_seed {
            Some(s) if s >= 0 => Some(s as u64),
            _ => None,
        };
        Ok(SolverParam {
            net: resolve(&net_name, &base_dir),
            base_lr,
            momentum,
            weight_decay,
            lr_policy,
            max_iter,
            display: u64::from(display),
            average_loss: u64::from(average_loss),
            test_iter: test_iters.first().copied().map_or(0, u64::from),
            test_interval: u64::from(test_interval),
            test_initialization,
            snapshot: u64::from(snapshot),
            snapshot_prefix: snapshot_prefix
                .unwrap_or_else(|| path.file_stem().map_or("caffe-geeps".into(), |s| s.to_string_lossy().into_owned())),
            snapshot_after_train,
            random_seed,
            gpu,
            file: path.to_path_buf(),
        })
    }
}

fn f_err(path: &Path, line: usize, msg: impl Into<String>) -> Error {
    Error::Prototxt { file: path.to_path_buf(), line, msg: msg.into() }
}
