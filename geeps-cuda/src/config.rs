//! How a [`CudaDevice`](crate::CudaDevice) is opened: which GPU, and how much
//! of its memory geeps may take. Pure data and arithmetic; must never touch
//! the driver.

/// Headroom left by default: the larger of this and [`DEFAULT_RESERVE_FRACTION`].
pub const DEFAULT_RESERVE_BYTES: usize = 256 << 20;
/// Share of the GPU's total memory left by default (1/20 = 5%).
pub const DEFAULT_RESERVE_FRACTION: usize = 20;

/// Options of a CUDA device: [`CudaConfig::ordinal`] and the setters (fields
/// may be added in a minor release).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CudaConfig {
    /// The GPU, as a CUDA ordinal (after `CUDA_VISIBLE_DEVICES` remapping).
    pub ordinal: usize,
    /// An upper bound on the bytes geeps allocates on the GPU. `None`: as much
    /// as the free memory allows. `Config::device_memory` bounds it as well.
    pub budget: Option<usize>,
    /// Bytes of the GPU's free memory left to the application (its own
    /// kernels' workspaces, cuDNN, cuBLAS) and the driver. `None`: the larger
    /// of 256 MiB and 5% of the GPU's total memory.
    pub reserve: Option<usize>,
}

impl CudaConfig {
    /// The defaults on GPU `ordinal`.
    pub fn ordinal(ordinal: usize) -> Self {
        CudaConfig { ordinal, ..CudaConfig::default() }
    }

    /// Sets [`CudaConfig::budget`].
    pub fn with_budget(mut self, bytes: usize) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Sets [`CudaConfig::reserve`].
    pub fn with_reserve(mut self, bytes: usize) -> Self {
        self.reserve = Some(bytes);
        self
    }

    /// The headroom for a GPU with `total` bytes of memory.
    pub fn reserve_for(&self, total: usize) -> usize {
        self.reserve.unwrap_or_else(|| DEFAULT_RESERVE_BYTES.max(total / DEFAULT_RESERVE_FRACTION))
    }

    /// The device's capacity: the free memory when the device is opened, less
    /// the reserve, and no more than the budget.
    pub fn capacity(&self, free: usize, total: usize) -> usize {
        let available = free.saturating_sub(self.reserve_for(total));
        self.budget.map_or(available, |b| b.min(available))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: usize = 1 << 30;

    #[test]
    fn capacity_is_free_memory_less_the_reserve_within_the_budget() {
        let c = CudaConfig::default();
        // 80 GiB GPU: reserve 4 GiB (5%).
        assert_eq!(c.capacity(70 * GIB, 80 * GIB), 66 * GIB);
        // 4 GiB GPU: reserve 256 MiB (5% would be less).
        assert_eq!(c.capacity(3 * GIB, 4 * GIB), 3 * GIB - (256 << 20));
        let c = CudaConfig::ordinal(1).with_budget(10 * GIB);
        assert_eq!(c.capacity(70 * GIB, 80 * GIB), 10 * GIB);
        assert_eq!(c.capacity(8 * GIB, 80 * GIB), 4 * GIB);
        let c = CudaConfig::default().with_reserve(0);
        assert_eq!(c.capacity(70 * GIB, 80 * GIB), 70 * GIB);
        // Less free than the reserve: nothing, never an underflow.
        assert_eq!(CudaConfig::default().capacity(GIB, 80 * GIB), 0);
    }
}
