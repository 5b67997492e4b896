//! The lines that say where a command computes, as Caffe's log says it:
//! `Using GPUs 0` and, per GPU, its name, memory and compute capability;
//! or `Using CPU, N threads`. It owns those words; it must never open a
//! device for compute (a probe only asks the driver).

use geeps::CudaDevice;

use crate::error::{Error, Result};

/// `Using GPUs 0,1` and one `GPU n: name, memory, compute capability` line per GPU.
pub fn gpu_lines(ordinals: &[usize]) -> Result<Vec<String>> {
    let list: Vec<String> = ordinals.iter().map(usize::to_string).collect();
    let mut lines = vec![format!("Using GPUs {}", list.join(","))];
    for &ordinal in ordinals {
        let p = CudaDevice::probe(ordinal).map_err(|e| {
            Error::config(format!(
                "-gpu {ordinal}: no usable CUDA device: {e}. Run without -gpu (and with solver_mode: CPU) to \
                 compute on the CPU"
            ))
        })?;
        let (major, minor) = p.compute_capability;
        lines.push(format!(
            "GPU {ordinal}: {}, {} MiB, compute capability {major}.{minor}",
            p.name,
            p.total_memory >> 20
        ));
    }
    Ok(lines)
}

/// `Using CPU, N threads`: the threads the layers' compute spreads over.
pub fn cpu_line() -> String {
    format!("Using CPU, {} threads", rayon::current_num_threads())
}
