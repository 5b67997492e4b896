//! Instance configuration and its validation. Every field has a production
//! default; `validate` names the field and the reason when a value is unusable.

use std::time::Duration;

use crate::error::{Error, Result};

/// Default row width, in `f32` values (the paper's setting).
pub const DEFAULT_ROW_WIDTH: usize = 128;

/// Configuration of one geeps instance (one worker).
#[derive(Debug, Clone)]
pub struct Config {
    /// Floats per row; the same on every worker of a cluster.
    pub row_width: usize,
    /// Device memory budget in bytes: parameter cache and local data pinned on
    /// the device plus the access buffer pool.
    pub device_memory: usize,
    /// Whether a worker sees its own updates as soon as `update` returns.
    pub read_my_writes: bool,
    /// A blocking wait longer than this logs what it waits for and who is behind.
    pub slow_wait_log: Duration,
    /// A blocking wait longer than this fails with [`Error::Timeout`].
    pub wait_deadline: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            row_width: DEFAULT_ROW_WIDTH,
            device_memory: 1 << 30,
            read_my_writes: true,
            slow_wait_log: Duration::from_secs(5),
            wait_deadline: Duration::from_secs(30),
        }
    }
}

impl Config {
    /// Checks every field; the error names the first unusable one.
    pub fn validate(&self) -> Result<()> {
        if self.row_width == 0 || self.row_width > 1 << 20 {
            return Err(Error::InvalidConfig {
                field: "row_width",
                reason: format!("{} floats; use 1 to 1048576 (default 128)", self.row_width),
            });
        }
        if self.device_memory == 0 {
            return Err(Error::InvalidConfig {
                field: "device_memory",
                reason: "0 bytes; give the device memory budget in bytes".into(),
            });
        }
        if self.wait_deadline.is_zero() {
            return Err(Error::InvalidConfig {
                field: "wait_deadline",
                reason: "zero; a blocking call needs time to wait".into(),
            });
        }
        if self.slow_wait_log.is_zero() {
            return Err(Error::InvalidConfig {
                field: "slow_wait_log",
                reason: "zero; use a positive interval".into(),
            });
        }
        Ok(())
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.row_width * std::mem::size_of::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
        assert_eq!(Config::default().row_bytes(), 512);
    }

    #[test]
    fn each_bad_field_is_named() {
        let bad = [
            (Config { row_width: 0, ..Config::default() }, "row_width"),
            (Config { device_memory: 0, ..Config::default() }, "device_memory"),
            (Config { wait_deadline: Duration::ZERO, ..Config::default() }, "wait_deadline"),
            (Config { slow_wait_log: Duration::ZERO, ..Config::default() }, "slow_wait_log"),
        ];
        for (config, field) in bad {
            match config.validate() {
                Err(Error::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("expected InvalidConfig for {field}, got {other:?}"),
            }
        }
    }
}
