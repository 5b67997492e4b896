//! Input on the GPU: its forward writes zeros into every top, as on the CPU
//! (nothing in the net feeds it).

use super::Input;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::layers::layer::{count, GpuForward};

impl Input {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        for (t, s) in f.tops.iter().zip(&self.shapes) {
            gpu.zero(t.prefix(count(s))?)?;
        }
        Ok(())
    }
}
