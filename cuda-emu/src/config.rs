//! The emulator's settings, read once from the environment on first use:
//! capacity, device count and identity, stream delays and their seed, the
//! kernel engine and logging. Must never change after it is read (a running
//! emulator with shifting settings would be untestable).

use std::sync::OnceLock;

/// How `cuLaunchKernel` executes kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelMode {
    /// The PTX in the emulator's own interpreter (`crate::ptx`, the default).
    Interpret,
    /// geeps' row kernels and the registered exactly reproducible kernels in
    /// native Rust (`crate::native_kernels`); any other kernel in the interpreter.
    Native,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes of device memory per device (`GEEPS_CUDA_EMU_MEMORY`, default 2 GiB).
    pub memory: usize,
    /// Visible devices (`GEEPS_CUDA_EMU_DEVICES`, default 1).
    pub devices: i32,
    /// Seed of the per-operation delays (`GEEPS_CUDA_EMU_SEED`).
    pub seed: u64,
    /// Largest delay before each stream operation, µs (`GEEPS_CUDA_EMU_DELAY_US`, default 50; 0 disables).
    pub delay_us: u64,
    /// `GEEPS_CUDA_EMU_KERNELS`: `interpret` (default) or `native`.
    pub kernels: KernelMode,
    /// `GEEPS_CUDA_EMU_LOG=1`: every refused call is named on stderr.
    pub log: bool,
    /// `GEEPS_CUDA_EMU_COMPUTE_CAPABILITY`, default 8.0.
    pub compute_capability: (i32, i32),
    /// `GEEPS_CUDA_EMU_DRIVER_VERSION`, default 12040 (CUDA 12.4).
    pub driver_version: i32,
    /// `GEEPS_CUDA_EMU_RACECHECK`, default on (`0` turns it off): the race
    /// and free checks of `racecheck`.
    pub racecheck: bool,
    /// `GEEPS_CUDA_EMU_LAZY=1`: a stream runs an operation only once something
    /// waits for it (a synchronise, an event, another stream, a query).
    pub lazy: bool,
    /// `GEEPS_CUDA_EMU_GUARD`, default on (`0` turns it off): launches hold
    /// pointer arguments to the extents their caller declared (`extents`).
    pub guard: bool,
}

pub const DEFAULT_MEMORY: usize = 2 << 30;
pub const DEFAULT_DELAY_US: u64 = 50;
pub const DEFAULT_SEED: u64 = 0x6765_6570_7365_6d75;

/// The settings, read from the environment the first time.
pub fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config::from_lookup(|k| std::env::var(k).ok()))
}

impl Config {
    /// The settings from `lookup` (an environment); bad values are reported
    /// on stderr and replaced by the default.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Config {
        let get = |key: &str, parse: &dyn Fn(&str) -> Option<u64>, default: u64| -> u64 {
            match lookup(key) {
                None => default,
                Some(v) if v.trim().is_empty() => default,
                Some(v) => parse(v.trim()).unwrap_or_else(|| {
                    eprintln!("geeps-cuda-emu: ignoring {key}={v:?} (not understood); using {default}");
                    default
                }),
            }
        };
        let int = |s: &str| s.parse::<u64>().ok();
        let seed = |s: &str| match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        };
        let kernels = match lookup("GEEPS_CUDA_EMU_KERNELS").as_deref().map(str::trim) {
            None | Some("") | Some("interpret") | Some("ptx") => KernelMode::Interpret,
            Some("native") => KernelMode::Native,
            Some(other) => {
                eprintln!("geeps-cuda-emu: ignoring GEEPS_CUDA_EMU_KERNELS={other:?} (interpret or native)");
                KernelMode::Interpret
            }
        };
        let compute_capability = match lookup("GEEPS_CUDA_EMU_COMPUTE_CAPABILITY") {
            None => (8, 0),
            Some(v) => parse_capability(v.trim()).unwrap_or_else(|| {
                eprintln!("geeps-cuda-emu: ignoring GEEPS_CUDA_EMU_COMPUTE_CAPABILITY={v:?} (e.g. 8.0)");
                (8, 0)
            }),
        };
        Config {
            memory: get("GEEPS_CUDA_EMU_MEMORY", &parse_bytes, DEFAULT_MEMORY as u64) as usize,
            devices: get("GEEPS_CUDA_EMU_DEVICES", &int, 1).min(64) as i32,
            seed: get("GEEPS_CUDA_EMU_SEED", &seed, DEFAULT_SEED),
            delay_us: get("GEEPS_CUDA_EMU_DELAY_US", &int, DEFAULT_DELAY_US),
            kernels,
            log: matches!(lookup("GEEPS_CUDA_EMU_LOG").as_deref().map(str::trim), Some("1" | "true" | "yes")),
            compute_capability,
            driver_version: get("GEEPS_CUDA_EMU_DRIVER_VERSION", &int, 12040).min(i32::MAX as u64) as i32,
            racecheck: !matches!(
                lookup("GEEPS_CUDA_EMU_RACECHECK").as_deref().map(str::trim),
                Some("0" | "false" | "no" | "off")
            ),
            lazy: matches!(lookup("GEEPS_CUDA_EMU_LAZY").as_deref().map(str::trim), Some("1" | "true" | "yes" | "on")),
            guard: !matches!(
                lookup("GEEPS_CUDA_EMU_GUARD").as_deref().map(str::trim),
                Some("0" | "false" | "no" | "off")
            ),
        }
    }
}

/// `1073741824`, `512M`, `2G`, `1.5GiB`, `64k`: bytes, with binary suffixes.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(1u64 << shift);
    }
    let value = number.parse::<f64>().ok()? * (1u64 << shift) as f64;
    (value.is_finite() && value >= 0.0 && value < u64::MAX as f64).then_some(value as u64)
}

fn parse_capability(s: &str) -> Option<(i32, i32)> {
    let (major, minor) = s.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_accept_suffixes() {
        assert_eq!(parse_bytes("1024"), Some(1024));
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("2gib"), Some(2 << 30));
        assert_eq!(parse_bytes("1.5G"), Some(3 << 29));
        assert_eq!(parse_bytes("64k"), Some(64 << 10));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("12X"), None);
    }

    #[test]
    fn bad_values_fall_back_to_defaults() {
        let c = Config::from_lookup(|k| match k {
            "GEEPS_CUDA_EMU_MEMORY" => Some("nonsense".into()),
            "GEEPS_CUDA_EMU_KERNELS" => Some("native".into()),
            "GEEPS_CUDA_EMU_SEED" => Some("0x10".into()),
            "GEEPS_CUDA_EMU_COMPUTE_CAPABILITY" => Some("7.5".into()),
            _ => None,
        });
        assert_eq!(c.memory, DEFAULT_MEMORY);
        assert_eq!(c.kernels, KernelMode::Native);
        assert_eq!(c.seed, 16);
        assert_eq!(c.compute_capability, (7, 5));
        assert_eq!(c.delay_us, DEFAULT_DELAY_US);
        assert!(c.racecheck && !c.lazy && c.guard, "the race detector and guards on, laziness off, by default");
        let off = Config::from_lookup(|k| match k {
            "GEEPS_CUDA_EMU_RACECHECK" => Some("0".into()),
            "GEEPS_CUDA_EMU_LAZY" => Some("1".into()),
            "GEEPS_CUDA_EMU_GUARD" => Some("off".into()),
            _ => None,
        });
        assert!(!off.racecheck && off.lazy && !off.guard);
    }
}
