//! The trainer's exactly reproducible kernels (the `.cu` files beside its
//! layers, solvers and data code) in native Rust, for the emulated driver's
//! `GEEPS_CUDA_EMU_KERNELS=native`: recognised by name and parameter sizes
//! (the emulator checks those against the PTX), on a 1-D grid of 1-D blocks, with 4-byte aligned
//! pointers and arguments for which the native loop is the CUDA loop (no
//! 32-bit wrap of the grid stride, no int overflow, shared arrays in
//! bounds). Anything else (other kernels, other shapes, the kernels using
//! expf/logf/powf/tanhf/sqrt approximations or fused multiply-adds) goes to
//! the interpreter. Must never claim a launch whose bits it cannot match.

use super::view::{aligned, covers, flat, Args, Fault, Launch, Memory};
use super::{conv, elementwise, pool, reduce, solver, transform};

/// The `Kernel` enum and `ALL`, its every variant, from one list.
macro_rules! kernels {
    ($($k:ident),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Kernel {
            $($k),*
        }

        pub(crate) const ALL: &[Kernel] = &[$(Kernel::$k),*];
    };
}

kernels!(
    Im2col,
    Col2im,
    SwapOuter,
    MaxPoolForward,
    AvgPoolForward,
    MaxPoolBackward,
    AvgPoolBackward,
    AddBias,
    BiasGradient,
    ReluForward,
    ReluBackward,
    SigmoidBackward,
    TanhBackward,
    DropoutForward,
    DropoutBackward,
    SgdStep,
    CountNonfinite,
    TransformBytes,
    TransformFloats,
    CopyRows,
    AddScaled,
    EltwiseScaleCopy,
    EltwiseMultiply,
    EltwiseMaxForward,
    EltwiseMaxBackward,
    ScaleForward,
    ScaleBackward,
    PreluForward,
    PreluBackward,
    PreluSum,
);

use Kernel::*;

/// The kernel's name and parameter sizes (8: a pointer or 64-bit integer, 4: int, unsigned or float).
pub(crate) fn signature(k: Kernel) -> (&'static str, &'static [usize]) {
    // Two pointers with a 32-bit stride after each, the image count, the geometry.
    const CONV: [usize; 18] = [8, 4, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4];
    const POOL3: [usize; 14] = [8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4];
    const POOL2: [usize; 13] = [8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4];
    const TRANSFORM: [usize; 12] = [8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4];
    match k {
        Im2col => ("im2col", &CONV),
        Col2im => ("col2im", &CONV),
        SwapOuter => ("swap_outer", &[8, 8, 4, 4, 4]),
        MaxPoolForward => ("max_pool_forward", &POOL3),
        AvgPoolForward => ("avg_pool_forward", &POOL2),
        MaxPoolBackward => ("max_pool_backward", &POOL3),
        AvgPoolBackward => ("avg_pool_backward", &POOL2),
        AddBias => ("add_bias", &[8, 8, 4, 4, 4]),
        BiasGradient => ("bias_gradient", &[8, 8, 4, 4, 4]),
        ReluForward => ("relu_forward", &[8, 4, 4]),
        ReluBackward => ("relu_backward", &[8, 8, 4, 4]),
        SigmoidBackward => ("sigmoid_backward", &[8, 8, 4]),
        TanhBackward => ("tanh_backward", &[8, 8, 4]),
        DropoutForward => ("dropout_forward", &[8, 8, 4, 4, 4, 8]),
        DropoutBackward => ("dropout_backward", &[8, 8, 4]),
        SgdStep => ("sgd_step", &[8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4]),
        CountNonfinite => ("count_nonfinite", &[8, 4, 8]),
        TransformBytes => ("transform_bytes", &TRANSFORM),
        TransformFloats => ("transform_floats", &TRANSFORM),
        CopyRows => ("copy_rows", &[8, 4, 8, 4, 4, 4]),
        AddScaled => ("add_scaled", &[8, 8, 4, 4]),
        EltwiseScaleCopy => ("eltwise_scale_copy", &[8, 8, 4, 4]),
        EltwiseMultiply => ("eltwise_multiply", &[8, 8, 4]),
        EltwiseMaxForward => ("eltwise_max_forward", &[8, 8, 8, 4, 4]),
        EltwiseMaxBackward => ("eltwise_max_backward", &[8, 8, 8, 4, 4]),
        ScaleForward => ("scale_forward", &[8, 8, 8, 4, 4, 4, 4]),
        ScaleBackward => ("scale_backward", &[8, 8, 8, 8, 4, 4, 4, 4]),
        PreluForward => ("prelu_forward", &[8, 8, 8, 4, 4, 4, 4]),
        PreluBackward => ("prelu_backward", &[8, 8, 8, 8, 4, 4, 4, 4]),
        PreluSum => ("prelu_sum", &[8, 4, 8]),
    }
}

/// The kernel called `name`, if it is one of these.
pub(crate) fn named(name: &str) -> Option<Kernel> {
    ALL.iter().copied().find(|&k| signature(k).0 == name)
}

/// The kernel `launch` runs, if it is one and the native version gives its bits for these arguments.
pub(crate) fn detect(launch: &Launch) -> Option<Kernel> {
    let k = named(launch.name())?;
    if !flat(launch) || !aligned(launch, (k == TransformBytes).then_some(0)) {
        return None;
    }
    let a = Args(launch);
    let grid_stride = |n: u32| covers(launch, n);
    let threads = launch.block.0;
    let fits = match k {
        Im2col | Col2im => {
            let (g, count) = (conv::Geometry::read(&a, 5), a.u32(4));
            g.sane() && (if k == Im2col { g.columns(count) } else { g.pixels(count) }).is_some_and(grid_stride)
        }
        MaxPoolForward | MaxPoolBackward | AvgPoolForward | AvgPoolBackward => {
            let g = pool::Geometry::read(&a, if matches!(k, MaxPoolForward | MaxPoolBackward) { 3 } else { 2 });
            g.sane() && grid_stride(if matches!(k, MaxPoolForward | AvgPoolForward) { g.outputs() } else { g.inputs() })
        }
        AddBias => grid_stride(a.u32(2).wrapping_mul(a.u32(3)).wrapping_mul(a.u32(4))),
        BiasGradient => threads <= 256 && reduce::strided(a.u32(2).wrapping_mul(a.u32(4)), threads),
        CountNonfinite => threads <= 256 && grid_stride(a.u32(1)),
        ReluForward => grid_stride(a.u32(1)),
        ReluBackward | SigmoidBackward | TanhBackward | DropoutForward | DropoutBackward | AddScaled
        | EltwiseScaleCopy | EltwiseMultiply => grid_stride(a.u32(2)),
        EltwiseMaxForward | EltwiseMaxBackward | SgdStep => grid_stride(a.u32(3)),
        TransformBytes | TransformFloats => transform::outputs(&a).is_some_and(grid_stride),
        CopyRows => grid_stride(a.u32(4).wrapping_mul(a.u32(5))),
        SwapOuter => grid_stride(a.u32(2).wrapping_mul(a.u32(3)).wrapping_mul(a.u32(4))),
        ScaleForward => grid_stride(a.u32(3).wrapping_mul(a.u32(4)).wrapping_mul(a.u32(5))),
        PreluForward => {
            let n = a.u32(3);
            grid_stride(n) && (n == 0 || a.u32(6) != 0 || (a.u32(4) > 0 && a.u32(5) > 0))
        }
        // Blocks past the last parameter (channel) would race with others on `d`.
        ScaleBackward => {
            threads <= 256 && launch.grid.0 <= a.u32(5) && reduce::strided(a.u32(4).wrapping_mul(a.u32(6)), threads)
        }
        PreluBackward => {
            threads <= 256 && launch.grid.0 <= a.u32(5) && reduce::strided(a.u32(4).wrapping_mul(a.u32(6)), threads)
        }
        PreluSum => threads <= 256 && reduce::strided(a.u32(1), threads),
    };
    fits.then_some(k)
}

/// Runs `k` as the CUDA kernel would, on `m` (the launch's locked memory).
pub(crate) fn run(k: Kernel, launch: &Launch, m: &mut Memory) -> Result<(), Fault> {
    let a = &Args(launch);
    let (blocks, threads) = (launch.grid.0, launch.block.0);
    match k {
        Im2col => conv::im2col(a, m),
        Col2im => conv::col2im(a, m),
        SwapOuter => conv::swap_outer(a, m),
        MaxPoolForward => pool::max_forward(a, m),
        AvgPoolForward => pool::avg_forward(a, m),
        MaxPoolBackward => pool::max_backward(a, m),
        AvgPoolBackward => pool::avg_backward(a, m),
        AddBias => elementwise::add_bias(a, m),
        BiasGradient => reduce::bias_gradient(a, m, blocks, threads),
        ReluForward => elementwise::relu_forward(a, m),
        ReluBackward => elementwise::relu_backward(a, m),
        SigmoidBackward => elementwise::sigmoid_backward(a, m),
        TanhBackward => elementwise::tanh_backward(a, m),
        DropoutForward => elementwise::dropout_forward(a, m),
        DropoutBackward => elementwise::dropout_backward(a, m),
        SgdStep => solver::sgd_step(a, m),
        CountNonfinite => reduce::count_nonfinite(a, m, blocks, threads),
        TransformBytes => transform::transform(a, m, true),
        TransformFloats => transform::transform(a, m, false),
        CopyRows => elementwise::copy_rows(a, m),
        AddScaled => elementwise::add_scaled(a, m),
        EltwiseScaleCopy => elementwise::scale_copy(a, m),
        EltwiseMultiply => elementwise::multiply(a, m),
        EltwiseMaxForward => elementwise::max_forward(a, m),
        EltwiseMaxBackward => elementwise::max_backward(a, m),
        ScaleForward => elementwise::scale_forward(a, m),
        ScaleBackward => reduce::scale_backward(a, m, blocks, threads),
        PreluForward => elementwise::prelu_forward(a, m),
        PreluBackward => reduce::prelu_backward(a, m, blocks, threads),
        PreluSum => reduce::prelu_sum(a, m, blocks, threads),
    }
}
