//! The device memory budget each worker gives geeps. On the host device
//! without `--device-memory-mb` it is fitted to the net: room for every
//! table twice over (so geeps can pin them all and double-buffer its
//! accesses), capped by the memory the system has available; host memory
//! is taken as rows are used, so a roomy budget costs nothing unused. A
//! budget the user gave (or a GPU's) is checked against each layer's own
//! accesses first, and a layer that cannot fit is named with the flag to
//! raise. It owns those sizes; it must never allocate or call geeps.

use crate::error::{Error, Result};
use crate::net::params::ParamLayout;
use crate::net::Net;
use crate::ps::layout::rows_for;
use crate::ps::{DeviceChoice, PsOptions};

const MIB: usize = 1 << 20;

/// Headroom over the tables for geeps' own buffers (control rows, landing).
const HEADROOM: usize = 64 * MIB;

/// The bytes `floats` take in rows of `width`.
fn row_bytes(floats: usize, width: usize) -> usize {
    rows_for(floats, width) as usize * width * 4
}

/// Every table of one worker: parameters, their histories, blobs, gradients
/// and layer state, as `ps::layout` declares them.
pub fn tables_bytes(net: &Net, params: &ParamLayout, history_copies: usize, width: usize) -> usize {
    let p: usize =
        params.layers.iter().map(|lp| row_bytes(lp.len, width) + row_bytes(history_copies * lp.len, width)).sum();
    let blobs: usize = net.blobs.iter().map(|b| row_bytes(b.count(), width) * if b.needs_diff { 2 } else { 1 }).sum();
    let aux: usize = net.layers.iter().filter(|l| l.aux_len > 0).map(|l| row_bytes(l.aux_len, width)).sum();
    p + blobs + aux
}

/// The bytes layer `li` touches at once: its forward's or its backward's
/// accesses (parameters read and updated, history, blobs, gradients, state),
/// the larger of the two.
pub fn layer_bytes(net: &Net, li: usize, history_copies: usize, width: usize) -> usize {
    let l = &net.layers[li];
    let blobs = |list: &[usize]| -> usize { list.iter().map(|&b| row_bytes(net.blobs[b].count(), width)).sum() };
    let params = if l.param_len > 0 { row_bytes(l.param_len, width) } else { 0 };
    let aux = if l.aux_len > 0 { row_bytes(l.aux_len, width) } else { 0 };
    let forward = params + aux + blobs(&l.fwd_in) + blobs(&l.fwd_inout) + blobs(&l.fwd_out);
    let backward = if l.backward {
        params * 2
            + history_copies * params
            + aux
            + blobs(&l.bwd_data_in)
            + blobs(&l.bwd_diff_in)
            + blobs(&l.bwd_diff_inout)
            + blobs(&l.bwd_diff_out)
    } else {
        0
    };
    forward.max(backward)
}

/// Memory the system can give without swapping (`MemAvailable`), if known.
fn available() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

fn mib(bytes: usize) -> usize {
    bytes.div_ceil(MIB)
}

/// The budget of one worker of `net` under `opts`.
pub fn for_worker(net: &Net, params: &ParamLayout, opts: &PsOptions, history_copies: usize) -> Result<usize> {
    let width = opts.row_width;
    if opts.budget_from_net && opts.device == DeviceChoice::Host {
        let tables = tables_bytes(net, params, history_copies, width);
        let want = tables.saturating_mul(2).saturating_add(HEADROOM);
        return match available() {
            Some(avail) if tables > avail => Err(Error::config(format!(
                "net `{}` needs {} MiB of memory per worker for its parameters, blobs and gradients, and this \
                 machine has {} MiB available; lower batch_size, or run fewer workers per machine",
                net.name,
                mib(tables),
                avail / MIB
            ))),
            Some(avail) => Ok(want.min(avail)),
            None => Ok(want),
        };
    }
    let budget = opts.device_memory;
    let biggest =
        (0..net.layers.len()).map(|li| (li, layer_bytes(net, li, history_copies, width))).max_by_key(|&(_, b)| b);
    if let Some((li, need)) = biggest.filter(|&(_, need)| need > budget) {
        let l = &net.layers[li];
        return Err(Error::config(format!(
            "layer `{}` ({}, line {}) touches {} MiB at once (its parameters, blobs and gradients), more than the \
             device memory budget of {} MiB per worker: raise --device-memory-mb to at least {}{}",
            l.name,
            l.type_name,
            l.line,
            mib(need),
            budget / MIB,
            mib(need),
            if opts.device == DeviceChoice::Host {
                " (or leave it out: on the CPU the budget then fits the net)"
            } else {
                ""
            }
        )));
    }
    Ok(budget)
}
