//! Kernels the PTX interpreter cannot run, or that fault, fail the way a
//! driver fails them and never crash the process: an unknown instruction
//! refuses the launch (CUDA_ERROR_INVALID_PTX) with a message naming it and
//! its line, leaving the context usable; a store outside every allocation
//! is CUDA_ERROR_ILLEGAL_ADDRESS and a misaligned load
//! CUDA_ERROR_MISALIGNED_ADDRESS, sticky as on a GPU, with the kernel, line
//! and address on stderr; so is a store inside an allocation but past the
//! extent the launch declared for its argument (guard mode). Each case runs
//! in a child process.

mod common;

use common::*;
use geeps_cuda_emu as emu;
use geeps_cuda_emu::result::*;

const PTX: &str = ".version 8.0
.target sm_70
.address_size 64
.visible .entry fine(.param .u64 p)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    st.global.u32 [%rd1], 42;
    ret;
}
.visible .entry strange(.param .u64 p)
{
    .reg .b32 %r<4>;
    mov.u32 %r1, 1;
    frobnicate.b32 %r2, %r1;
    ret;
}
.visible .entry quiet_nan(.param .u64 p)
{
    .reg .f32 %f<4>;
    max.NaN.f32 %f1, %f2, %f3;
    ret;
}
.visible .entry past_the_end(.param .u64 p, .param .u32 n)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], 7;
    ret;
}
.visible .entry crooked(.param .u64 p)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.global.u32 %r1, [%rd1+2];
    ret;
}
";

fn stderr_of(test: &str) -> String {
    let out = run_child(test, &[]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "child {test} failed ({}):\n{text}", out.status);
    text
}

#[test]
fn an_unknown_instruction_is_a_launch_error_and_the_context_goes_on() {
    let name = "an_unknown_instruction_is_a_launch_error_and_the_context_goes_on";
    if !is_child(name) {
        let text = stderr_of(name);
        assert!(text.contains("frobnicate") && text.contains("PTX line 15"), "message: {text}");
        assert!(text.contains(".NaN is not supported"), "message: {text}");
        return;
    }
    open();
    let m = load_ptx(PTX);
    let p = upload_u32(&[0]);
    code(launch(function(m, "strange"), (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p)]), CUDA_ERROR_INVALID_PTX);
    // A modifier that changes the result is refused, not ignored.
    code(launch(function(m, "quiet_nan"), (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p)]), CUDA_ERROR_INVALID_PTX);
    ok(launch(function(m, "fine"), (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p)]));
    assert_eq!(read_u32(p, 1), [42]);
}

#[test]
fn a_store_past_the_end_is_an_illegal_address() {
    let name = "a_store_past_the_end_is_an_illegal_address";
    if !is_child(name) {
        let text = stderr_of(name);
        assert!(
            text.contains("past_the_end") && text.contains("PTX line 32") && text.contains("0x"),
            "message: {text}"
        );
        return;
    }
    open();
    let m = load_ptx(PTX);
    let p = upload_u32(&[1, 2, 3]);
    code(
        launch(function(m, "past_the_end"), (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p), Arg::U32(3)]),
        CUDA_ERROR_ILLEGAL_ADDRESS,
    );
    // Sticky, as on a GPU; the emulator keeps answering.
    code(emu::cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    let (mut free, mut total) = (0usize, 0usize);
    unsafe { ok(emu::cuMemGetInfo_v2(&mut free, &mut total)) };
    assert!(free <= total);
}

#[test]
fn a_misaligned_load_is_a_misaligned_address() {
    let name = "a_misaligned_load_is_a_misaligned_address";
    if !is_child(name) {
        let text = stderr_of(name);
        assert!(text.contains("crooked") && text.contains("misaligned"), "message: {text}");
        return;
    }
    open();
    let m = load_ptx(PTX);
    let p = upload_u32(&[1, 2, 3]);
    code(launch(function(m, "crooked"), (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p)]), CUDA_ERROR_MISALIGNED_ADDRESS);
}

#[test]
fn a_store_past_a_declared_extent_inside_an_allocation_is_an_illegal_address() {
    let name = "a_store_past_a_declared_extent_inside_an_allocation_is_an_illegal_address";
    if !is_child(name) {
        let text = stderr_of(name);
        assert!(
            text.contains("past_the_end") && text.contains("stray access") && text.contains("declared"),
            "message: {text}"
        );
        // Without the guard the same store lands in the allocation's spare bytes.
        let out = run_child(name, &[("GEEPS_CUDA_EMU_GUARD", "0")]);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success() && text.contains("unguarded store succeeded"), "guard off:\n{text}");
        return;
    }
    open();
    let m = load_ptx(PTX);
    // Six words, of which the launch says its argument covers the first three.
    let p = upload_u32(&[1, 2, 3, 4, 5, 6]);
    let f = function(m, "past_the_end");
    // A declaration serves only the next launch of its thread: this one stays in bounds.
    declare_extents(&[(p, 12)]);
    ok(launch(f, (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p), Arg::U32(2)]));
    // An undeclared launch is held to the allocation only.
    ok(launch(f, (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p), Arg::U32(4)]));
    assert_eq!(read_u32(p, 6), [1, 2, 7, 4, 7, 6]);
    declare_extents(&[(p, 12)]);
    let got = launch(f, (1, 1, 1), (1, 1, 1), 0, &[Arg::U64(p), Arg::U32(3)]);
    assert_ne!(got, CUDA_SUCCESS, "unguarded store succeeded");
    code(got, CUDA_ERROR_ILLEGAL_ADDRESS);
}

fn declare_extents(ranges: &[(u64, u64)]) {
    let words: Vec<u64> = ranges.iter().flat_map(|&(a, b)| [a, b]).collect();
    ok(unsafe { emu::geeps_cuda_emu_declare_extents(words.as_ptr(), ranges.len()) });
}
