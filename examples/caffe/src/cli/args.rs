//! What a Caffe user types, made into what `caffe-geeps`'s parser reads:
//! gflags' single-dash long flags and underscores (`-solver x`,
//! `-max_iter=5`, `--sigint_effect stop`) become `--solver x`,
//! `--max-iter=5`, `--sigint-effect stop`; and the values of `-gpu` and of
//! `-sigint_effect` / `-sighup_effect` are parsed here with errors saying
//! what to write. It owns argv normalisation and these value parsers; it
//! must never decide what a command does, and never turn a value (a
//! negative number, a lone `-`, anything after `--`) into a flag.

use crate::proto::net::Phase;
use std::ffi::OsString;

use geeps::CudaDevice;

use crate::error::{Error, Result};
use crate::ps::DeviceChoice;
use crate::solvers::solve::SignalEffect;

/// Rewrites `args` (program name first) so that gflags-style flags read as
/// clap long flags: `-name`, `-name=value`, `--name_with_underscores` all
/// become `--name-with-underscores[=value]`. One-letter flags (`-h`),
/// negative numbers (`-1`, `-0.5`), `-` and every argument after `--` are
/// left as they are; only the flag name is rewritten, never a value.
pub fn normalise<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut out = Vec::new();
    let mut verbatim = false;
    for (i, arg) in args.into_iter().map(Into::into).enumerate() {
        if i == 0 || verbatim {
            out.push(arg);
            continue;
        }
        if arg == "--" {
            verbatim = true;
            out.push(arg);
            continue;
        }
        out.push(arg.to_str().and_then(long_flag).map(OsString::from).unwrap_or(arg));
    }
    out
}

/// `--name[=value]` for a gflags-style flag, `None` for anything else.
fn long_flag(arg: &str) -> Option<String> {
    let (dashes, rest) = match arg.strip_prefix("--") {
        Some(rest) => (2, rest),
        None => (1, arg.strip_prefix('-')?),
    };
    let (name, value) = match rest.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (rest, None),
    };
    let word = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    // A single dash and one letter stays a short flag (`-h`).
    if !word || (dashes == 1 && name.len() == 1) {
        return None;
    }
    let name = name.replace('_', "-");
    Some(match value {
        Some(v) => format!("--{name}={v}"),
        None => format!("--{name}"),
    })
}

/// The value of `-gpu`: Caffe's `all` or a list of ordinals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuArg {
    /// Every GPU visible to this process.
    All,
    /// These ordinals, in order.
    List(Vec<usize>),
}

impl GpuArg {
    /// Parses `all`, `0` or `0,1` (clap's value parser for `--gpu`).
    pub fn parse(text: &str) -> std::result::Result<GpuArg, String> {
        if text.trim() == "all" {
            return Ok(GpuArg::All);
        }
        match DeviceChoice::parse_gpus(text) {
            Ok(DeviceChoice::Cuda(ordinals)) => Ok(GpuArg::List(ordinals)),
            _ => Err("give GPU ordinals separated by commas (e.g. 0 or 0,1) or `all`".to_string()),
        }
    }

    /// The ordinals asked for; `all` counts the visible GPUs with the CUDA
    /// driver, and fails naming what is missing when it cannot.
    pub fn ordinals(&self) -> Result<Vec<usize>> {
        match self {
            GpuArg::List(ordinals) => Ok(ordinals.clone()),
            GpuArg::All => {
                let probe =
                    CudaDevice::probe(0).map_err(|e| Error::config(format!("-gpu all: cannot count the GPUs: {e}")))?;
                Ok((0..probe.devices).collect())
            }
        }
    }
}

impl std::fmt::Display for GpuArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuArg::All => f.write_str("all"),
            GpuArg::List(ordinals) => {
                let list: Vec<String> = ordinals.iter().map(usize::to_string).collect();
                f.write_str(&list.join(","))
            }
        }
    }
}

/// Parses Caffe's `-phase` values, in any case.
pub fn parse_phase(text: &str) -> std::result::Result<Phase, String> {
    match text.to_ascii_uppercase().as_str() {
        "TRAIN" => Ok(Phase::Train),
        "TEST" => Ok(Phase::Test),
        _ => Err("write TRAIN or TEST".to_string()),
    }
}

/// Parses Caffe's `-sigint_effect` / `-sighup_effect` values (clap's value
/// parser for both).
pub fn parse_signal_effect(text: &str) -> std::result::Result<SignalEffect, String> {
    match text {
        "stop" => Ok(SignalEffect::Stop),
        "snapshot" => Ok(SignalEffect::Snapshot),
        "none" => Ok(SignalEffect::None),
        _ => Err("write one of stop, snapshot, none".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        let mut all = vec!["caffe-geeps"];
        all.extend_from_slice(args);
        normalise(all).into_iter().skip(1).map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn gflags_forms_become_long_kebab_flags() {
        assert_eq!(
            norm(&["train", "-solver", "s.prototxt", "-gpu", "0,1", "-max_iter", "5"]),
            ["train", "--solver", "s.prototxt", "--gpu", "0,1", "--max-iter", "5"]
        );
        assert_eq!(norm(&["--max_iter=5", "-sigint_effect=stop"]), ["--max-iter=5", "--sigint-effect=stop"]);
        assert_eq!(norm(&["--max-iter", "5", "--no-progress"]), ["--max-iter", "5", "--no-progress"]);
    }

    #[test]
    fn values_are_never_rewritten() {
        // Underscores in a value, negative numbers, a lone dash, one-letter flags.
        assert_eq!(norm(&["-weights=my_net.caffemodel"]), ["--weights=my_net.caffemodel"]);
        assert_eq!(norm(&["-slack", "-1", "-x", "-0.5", "-", "-h"]), ["--slack", "-1", "-x", "-0.5", "-", "-h"]);
        assert_eq!(norm(&["-1e-3", "-.5"]), ["-1e-3", "-.5"]);
        assert_eq!(norm(&["my_file", "snapshot_prefix"]), ["my_file", "snapshot_prefix"]);
        assert_eq!(norm(&["--", "-solver", "-max_iter"]), ["--", "-solver", "-max_iter"]);
    }

    #[test]
    fn gpu_values_parse_and_bad_ones_say_what_to_write() {
        assert_eq!(GpuArg::parse("all").unwrap(), GpuArg::All);
        assert_eq!(GpuArg::parse("0,1").unwrap(), GpuArg::List(vec![0, 1]));
        assert_eq!(GpuArg::List(vec![0, 2]).to_string(), "0,2");
        assert_eq!(GpuArg::List(vec![3]).ordinals().unwrap(), [3]);
        for bad in ["x", "", "0,,1", "-1", "All"] {
            let e = GpuArg::parse(bad).unwrap_err();
            assert!(e.contains("0,1") && e.contains("all"), "{bad}: {e}");
        }
    }

    #[test]
    fn signal_effects_parse_caffes_words_only() {
        assert_eq!(parse_phase("test").unwrap(), Phase::Test);
        assert_eq!(parse_phase("TRAIN").unwrap(), Phase::Train);
        assert!(parse_phase("deploy").unwrap_err().contains("TRAIN or TEST"));
        assert_eq!(parse_signal_effect("stop").unwrap(), SignalEffect::Stop);
        assert_eq!(parse_signal_effect("snapshot").unwrap(), SignalEffect::Snapshot);
        assert_eq!(parse_signal_effect("none").unwrap(), SignalEffect::None);
        assert!(parse_signal_effect("maybe").unwrap_err().contains("stop, snapshot, none"));
        assert!(parse_signal_effect("STOP").is_err());
    }
}
