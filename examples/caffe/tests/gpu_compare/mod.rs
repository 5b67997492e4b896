//! The GPU-against-CPU comparison the GPU layer suites share: a layer's
//! forward tops and backward state, bottom and parameter gradients on CUDA
//! device 0 (the emulated driver here) against its CPU code, within
//! `TOLERANCE` relative to each value's magnitude or bit for bit. The GPU's
//! tops and gradients start as NaN, so a value a kernel leaves unwritten
//! fails. It owns the comparison only; it must never name a layer.
#![allow(dead_code)] // each suite uses its part

use caffe_geeps::gpu::{DevSlice, Gpu};
use caffe_geeps::layers::{self, count, Backward, Forward, GpuBackward, GpuForward, Layer, Shape};
use caffe_geeps::proto::net::LayerKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// |gpu − cpu| ≤ TOLERANCE · (1 + |cpu|).
pub const TOLERANCE: f32 = 1e-4;

pub fn gpu(test: &str) -> Option<Gpu> {
    geeps_testkit::Backend::cuda_for(test)?;
    Some(Gpu::open(0).expect("a CUDA device answered the probe, so the layer compute opens"))
}

pub fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0..1.0f32)).collect()
}

/// How closely the GPU must reproduce the CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Match {
    /// Within [`TOLERANCE`].
    Close,
    /// Bit for bit.
    Bits,
}

pub fn close(what: &str, gpu: &[f32], cpu: &[f32], m: Match) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths");
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        match m {
            Match::Close => assert!((g - c).abs() <= TOLERANCE * (1.0 + c.abs()), "{what}[{i}]: GPU {g}, CPU {c}"),
            Match::Bits => assert_eq!(g.to_bits(), c.to_bits(), "{what}[{i}]: GPU {g}, CPU {c} (bit for bit)"),
        }
    }
}

/// The inputs of one comparison.
pub struct Case {
    pub layer: Box<dyn Layer>,
    pub bottoms: Vec<Vec<f32>>,
    /// Bottoms that get no gradient (labels).
    pub no_gradient: Vec<usize>,
    /// Tops whose gradient is absent (a branch outside every loss).
    pub no_top_gradient: Vec<usize>,
    /// The parameters, where random ones make no sense (running statistics).
    pub params: Option<Vec<f32>>,
    pub train: bool,
}

/// CPU results: tops, aux, bottom gradients, parameter gradient.
pub type Results = (Vec<Vec<f32>>, Vec<f32>, Vec<Vec<f32>>, Vec<f32>);

pub fn on_cpu(c: &Case, params: &[f32], dy: &[Vec<f32>]) -> Results {
    let l = c.layer.as_ref();
    let mut tops: Vec<Vec<f32>> = l.top_shapes().iter().map(|s| vec![0.0; count(s)]).collect();
    let mut aux = vec![0.0; l.aux_len()];
    let b: Vec<&[f32]> = if l.elementwise() {
        tops[0].copy_from_slice(&c.bottoms[0]);
        Vec::new()
    } else {
        c.bottoms.iter().map(|v| v.as_slice()).collect()
    };
    {
        let mut t: Vec<&mut [f32]> = tops.iter_mut().map(|v| v.as_mut_slice()).collect();
        l.forward(Forward { params, bottoms: &b, tops: &mut t, aux: &mut aux, train: c.train, seed: 5 });
    }
    let mut dx: Vec<Vec<f32>> = c.bottoms.iter().map(|v| vec![0.0; v.len()]).collect();
    let mut grad = vec![0.0; params.len()];
    if l.has_backward() {
        if l.elementwise() {
            dx[0].copy_from_slice(&dy[0]);
        }
        let all: Vec<&[f32]> = c.bottoms.iter().map(|v| v.as_slice()).collect();
        let top_data: Vec<&[f32]> = tops.iter().map(|v| v.as_slice()).collect();
        let top_diffs: Vec<&[f32]> = if l.elementwise() || l.is_loss() {
            Vec::new()
        } else {
            dy.iter()
                .enumerate()
                .map(|(k, v)| if c.no_top_gradient.contains(&k) { &[] } else { v.as_slice() })
                .collect()
        };
        let mut d: Vec<&mut [f32]> = dx.iter_mut().map(|v| v.as_mut_slice()).collect();
        for &k in &c.no_gradient {
            d[k] = &mut [];
        }
        l.backward(Backward {
            params,
            bottoms: &all,
            tops: &top_data,
            top_diffs: &top_diffs,
            bottom_diffs: &mut d,
            param_grad: &mut grad,
            aux: &aux,
            loss_weight: 1.0,
        });
    }
    (tops, aux, dx, grad)
}

/// A device array of `n` NaNs: whatever a kernel leaves of it shows.
pub fn unwritten(gpu: &Gpu, n: usize) -> caffe_geeps::gpu::DeviceVec<'_> {
    gpu.alloc_from(&vec![f32::NAN; n]).unwrap()
}

pub fn on_gpu(gpu: &Gpu, c: &Case, params: &[f32], dy: &[Vec<f32>]) -> Results {
    let l = c.layer.as_ref();
    let p = gpu.alloc_from(params).unwrap();
    let bottoms: Vec<_> = c.bottoms.iter().map(|v| gpu.alloc_from(v).unwrap()).collect();
    let tops: Vec<_> = l.top_shapes().iter().map(|s| unwritten(gpu, count(s))).collect();
    let aux = gpu.alloc(l.aux_len()).unwrap();
    if l.elementwise() {
        gpu.upload(&c.bottoms[0], tops[0].slice()).unwrap();
    }
    let b: Vec<DevSlice> = if l.elementwise() { Vec::new() } else { bottoms.iter().map(|v| v.slice()).collect() };
    let t: Vec<DevSlice> = tops.iter().map(|v| v.slice()).collect();
    let f = GpuForward { params: p.slice(), bottoms: &b, tops: &t, aux: aux.slice(), train: c.train, seed: 5 };
    l.forward_gpu(gpu, &f).unwrap();
    let dys: Vec<_> = dy.iter().map(|v| gpu.alloc_from(v).unwrap()).collect();
    // Values a backward must write start unwritten; the others stay zero, as on the CPU.
    let written = |k: usize| l.has_backward() && !c.no_gradient.contains(&k);
    let dx: Vec<_> = c
        .bottoms
        .iter()
        .enumerate()
        .map(|(k, v)| if written(k) { unwritten(gpu, v.len()) } else { gpu.alloc(v.len()).unwrap() })
        .collect();
    let grad = if l.has_backward() { unwritten(gpu, params.len()) } else { gpu.alloc(params.len()).unwrap() };
    if l.has_backward() {
        if l.elementwise() {
            gpu.upload(&dy[0], dx[0].slice()).unwrap();
        }
        let all: Vec<DevSlice> = bottoms.iter().map(|v| v.slice()).collect();
        let top_diffs: Vec<DevSlice> = if l.elementwise() || l.is_loss() {
            Vec::new()
        } else {
            dys.iter()
                .enumerate()
                .map(|(k, v)| if c.no_top_gradient.contains(&k) { DevSlice::EMPTY } else { v.slice() })
                .collect()
        };
        let d: Vec<DevSlice> = dx
            .iter()
            .enumerate()
            .map(|(k, v)| if c.no_gradient.contains(&k) { DevSlice::EMPTY } else { v.slice() })
            .collect();
        let back = GpuBackward {
            params: p.slice(),
            bottoms: &all,
            tops: &t,
            top_diffs: &top_diffs,
            bottom_diffs: &d,
            param_grad: grad.slice(),
            aux: aux.slice(),
            loss_weight: 1.0,
        };
        l.backward_gpu(gpu, &back).unwrap();
    }
    gpu.sync().unwrap();
    (
        tops.iter().map(|v| v.to_vec().unwrap()).collect(),
        aux.to_vec().unwrap(),
        dx.iter().map(|v| v.to_vec().unwrap()).collect(),
        grad.to_vec().unwrap(),
    )
}

/// Runs `c` on both and compares everything within [`TOLERANCE`].
pub fn compare(gpu: &Gpu, what: &str, c: Case) {
    compare_as(gpu, what, c, Match::Close)
}

/// Runs `c` on both and compares everything bit for bit.
pub fn exact(gpu: &Gpu, what: &str, c: Case) {
    compare_as(gpu, what, c, Match::Bits)
}

pub fn compare_as(gpu: &Gpu, what: &str, c: Case, m: Match) {
    let mut rng = StdRng::seed_from_u64(11);
    let l = c.layer.as_ref();
    assert!(l.on_gpu(), "{what}: {} has no GPU code", l.type_name());
    let n_params: usize = l.param_blobs().iter().map(|p| count(&p.shape)).sum();
    let params = c.params.clone().unwrap_or_else(|| random(&mut rng, n_params));
    assert_eq!(params.len(), n_params, "{what}: parameter count");
    let dy: Vec<Vec<f32>> = l.top_shapes().iter().map(|s| random(&mut rng, count(s))).collect();
    let cpu = on_cpu(&c, &params, &dy);
    let got = on_gpu(gpu, &c, &params, &dy);
    for (k, (g, h)) in got.0.iter().zip(&cpu.0).enumerate() {
        close(&format!("{what}: top {k}"), g, h, m);
    }
    close(&format!("{what}: backward state"), &got.1, &cpu.1, m);
    for (k, (g, h)) in got.2.iter().zip(&cpu.2).enumerate() {
        close(&format!("{what}: bottom gradient {k}"), g, h, m);
    }
    close(&format!("{what}: parameter gradient"), &got.3, &cpu.3, m);
}

pub fn build(kind: LayerKind, shapes: &[Shape], train: bool, rng: &mut StdRng) -> Case {
    let layer = layers::build(&kind, shapes, train).unwrap();
    let bottoms = shapes.iter().map(|s| random(rng, count(s))).collect();
    Case { layer, bottoms, no_gradient: Vec::new(), no_top_gradient: Vec::new(), params: None, train }
}

/// A classifier's scores and labels.
pub fn with_labels(kind: LayerKind, num: usize, classes: usize, rng: &mut StdRng) -> Case {
    let mut c = build(kind, &[vec![num, classes], vec![num]], true, rng);
    c.bottoms[1] = (0..num).map(|_| rng.gen_range(0..classes) as f32).collect();
    c.no_gradient = vec![1];
    c
}
