//! The one calling convention both executors use (geeps buffers in
//! `ps::worker`, plain memory in `plain`): a layer's forward and backward
//! over the slices of its blobs, taken by blob index, so both run exactly
//! the same math. It owns that hand-over; it must never own blob memory.

use crate::layers::{Backward, Forward};
use crate::net::wiring::Net;

/// The slices of one layer call, by blob: taken out as the layer needs them.
#[derive(Default)]
pub struct Io<'b> {
    pub data_in: Vec<(usize, &'b [f32])>,
    pub data_out: Vec<(usize, &'b mut [f32])>,
    pub diff_in: Vec<(usize, &'b [f32])>,
    pub diff_out: Vec<(usize, &'b mut [f32])>,
}

fn get<'b>(list: &[(usize, &'b [f32])], b: usize) -> &'b [f32] {
    list.iter().find(|(i, _)| *i == b).map(|(_, s)| *s).unwrap_or(&[])
}

fn take<'b>(list: &mut Vec<(usize, &'b mut [f32])>, b: usize) -> &'b mut [f32] {
    match list.iter().position(|(i, _)| *i == b) {
        Some(p) => list.swap_remove(p).1,
        None => &mut [],
    }
}

/// Runs `layer`'s forward on `io`: `data_in` holds `fwd_in`, `data_out`
/// holds `fwd_out` and `fwd_inout` (an in-place blob already holds the input).
pub fn forward_layer(net: &Net, li: usize, params: &[f32], mut io: Io<'_>, aux: &mut [f32], train: bool, seed: u64) {
    let l = &net.layers[li];
    let Some(c) = &l.compute else { return };
    let mut tops: Vec<&mut [f32]> = l.tops.iter().map(|&t| take(&mut io.data_out, t)).collect();
    let bottoms: Vec<&[f32]> = if c.elementwise() {
        if !l.in_place {
            let n = net.blobs[l.tops[0]].count();
            tops[0][..n].copy_from_slice(&get(&io.data_in, l.bottoms[0])[..n]);
        }
        Vec::new()
    } else {
        l.bottoms.iter().map(|&b| get(&io.data_in, b)).collect()
    };
    c.forward(Forward { params, bottoms: &bottoms, tops: &mut tops, aux, train, seed });
}

/// Runs `layer`'s backward on `io`: `data_in` holds `bwd_data_in`,
/// `diff_in` holds `bwd_diff_in`, `diff_out` holds `bwd_diff_out` and
/// `bwd_diff_inout`; the parameter gradient is written to `grad`.
pub fn backward_layer(net: &Net, li: usize, params: &[f32], mut io: Io<'_>, aux: &[f32], grad: &mut [f32]) {
    let l = &net.layers[li];
    let Some(c) = &l.compute else { return };
    let reads = c.backward_reads();
    let bottoms: Vec<&[f32]> = l
        .bottoms
        .iter()
        .enumerate()
        .map(|(k, &b)| if reads.bottoms.get(k).copied().unwrap_or(false) { get(&io.data_in, b) } else { &[] })
        .collect();
    let tops: Vec<&[f32]> = if reads.tops { l.tops.iter().map(|&t| get(&io.data_in, t)).collect() } else { Vec::new() };
    // An elementwise layer finds its top gradient where it writes the
    // bottom's; when the bottom wants none, it gets a scratch copy (it may
    // still need the gradient for its parameters).
    let mut scratch = Vec::new();
    let mut bottom_diffs: Vec<&mut [f32]> = l
        .bottoms
        .iter()
        .enumerate()
        .map(|(k, &b)| if l.propagate[k] { take(&mut io.diff_out, b) } else { &mut [] })
        .collect();
    let top_diffs: Vec<&[f32]> = if c.elementwise() {
        if !l.in_place {
            let n = net.blobs[l.tops[0]].count();
            let dy = &get(&io.diff_in, l.tops[0])[..n];
            if bottom_diffs[0].is_empty() {
                scratch.extend_from_slice(dy);
                bottom_diffs[0] = &mut scratch;
            } else {
                bottom_diffs[0][..n].copy_from_slice(dy);
            }
        }
        Vec::new()
    } else if reads.top_diffs {
        l.tops.iter().map(|&t| get(&io.diff_in, t)).collect()
    } else {
        Vec::new()
    };
    c.backward(Backward {
        params,
        bottoms: &bottoms,
        tops: &tops,
        top_diffs: &top_diffs,
        bottom_diffs: &mut bottom_diffs,
        param_grad: grad,
        aux,
        loss_weight: l.loss_weight,
    });
}
