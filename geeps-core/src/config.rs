//! Instance configuration and its validation. Every field has a production
//! default; `validate` names the field and the reason when a value is unusable.

use std::time::Duration;

use crate::error::{Error, Result};

/// Default row width, in `f32` values (the paper's setting).
pub const DEFAULT_ROW_WIDTH: usize = 128;

/// Default deadline of a blocking wait: long enough for a slow first
/// iteration (a JIT-compiling GPU, a cold page cache, a rank starting late).
pub const DEFAULT_WAIT_DEADLINE: Duration = Duration::from_secs(120);

/// Configuration of one geeps instance (one worker).
///
/// Start from [`Config::default`] and change what differs; the fields can be
/// read and assigned, and new ones may come in a minor release:
///
/// ```
/// use std::time::Duration;
/// use geeps_core::Config;
///
/// let config = Config::default()
///     .with_device_memory(256 << 20)
///     .with_wait_deadline(Duration::from_secs(300));
/// assert_eq!(config.row_width, 128);
/// config.validate()?;
/// # Ok::<(), geeps_core::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
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
            wait_deadline: DEFAULT_WAIT_DEADLINE,
        }
    }
}

impl Config {
    /// Sets [`Config::row_width`].
    pub fn with_row_width(mut self, floats: usize) -> Self {
        self.row_width = floats;
        self
    }

    /// Sets [`Config::device_memory`].
    pub fn with_device_memory(mut self, bytes: usize) -> Self {
        self.device_memory = bytes;
        self
    }

    /// Sets [`Config::read_my_writes`].
    pub fn with_read_my_writes(mut self, on: bool) -> Self {
        self.read_my_writes = on;
        self
    }

    /// Sets [`Config::slow_wait_log`].
    pub fn with_slow_wait_log(mut self, after: Duration) -> Self {
        self.slow_wait_log = after;
        self
    }

    /// Sets [`Config::wait_deadline`].
    pub fn with_wait_deadline(mut self, deadline: Duration) -> Self {
        self.wait_deadline = deadline;
        self
    }

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
            (Config::default().with_row_width(0), "row_width"),
            (Config::default().with_device_memory(0), "device_memory"),
            (Config::default().with_wait_deadline(Duration::ZERO), "wait_deadline"),
            (Config::default().with_slow_wait_log(Duration::ZERO), "slow_wait_log"),
        ];
        for (config, field) in bad {
            match config.validate() {
                Err(Error::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("expected InvalidConfig for {field}, got {other:?}"),
            }
        }
    }
}
