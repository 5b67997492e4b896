//! Refusing a net that cannot fit in memory before anything is allocated:
//! the bytes each layer needs (its parameters in their copies, its top
//! blobs with their gradients, per local worker) against what the machine
//! has available. It owns that estimate; it must never allocate a blob.

use crate::error::{Error, Result};
use crate::net::Net;

/// Copies of each parameter a worker process holds: the initial values,
/// geeps' parameter cache, the keeper's partition, the momentum history and
/// the update buffers in flight.
const PARAM_COPIES: u64 = 5;

/// Bytes a layer needs per worker: (parameters, blobs).
fn layer_bytes(net: &Net, layer: usize) -> (u64, u64) {
    let l = &net.layers[layer];
    let params = l.param_len as u64 * 4 * PARAM_COPIES;
    let blobs: u64 = l.tops.iter().map(|&b| net.blobs[b].count() as u64 * 4 * 2).sum();
    (params, blobs)
}

/// Memory the system can give without swapping (`MemAvailable`), if known.
fn available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Checks that `workers` local workers of `net` fit in `limit` bytes (the
/// available memory when `None`); the error lists the biggest layers.
pub fn check_fits(net: &Net, workers: usize, limit: Option<u64>) -> Result<()> {
    let Some(limit) = limit.or_else(available) else { return Ok(()) };
    let per_layer: Vec<(usize, u64, u64)> = (0..net.layers.len())
        .map(|i| {
            let (p, b) = layer_bytes(net, i);
            (i, p, b)
        })
        .collect();
    let total: u64 =
        per_layer.iter().map(|(_, p, b)| (p + b).saturating_mul(workers as u64)).fold(0, u64::saturating_add);
    if total <= limit {
        return Ok(());
    }
    let mut biggest = per_layer.clone();
    biggest.sort_by_key(|(_, p, b)| std::cmp::Reverse(p + b));
    let lines: Vec<String> = biggest
        .iter()
        .take(5)
        .map(|&(i, p, b)| {
            let l = &net.layers[i];
            format!(
                "layer `{}` ({}, line {}): {} ({} parameters, {} of blobs)",
                l.name,
                l.type_name,
                l.line,
                gib((p + b) * workers as u64),
                net.layers[i].param_len,
                gib(b * workers as u64)
            )
        })
        .collect();
    Err(Error::config(format!(
        "net `{}` needs about {} for {workers} worker(s) and this machine has {} available; \
         the biggest layers: {}. Lower num_output or batch_size, or run fewer workers per machine",
        net.name,
        gib(total),
        gib(limit),
        lines.join("; ")
    )))
}
