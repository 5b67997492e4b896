//! Helpers of the emulator's tests: opening the primary context through the
//! exported functions, checking result codes by name, and running a test's
//! body in a child process (the emulator reads its settings once per
//! process, and some checks must crash or poison a context).

#![allow(dead_code)]

use std::ffi::c_void;
use std::process::{Command, Output};

use geeps_cuda_emu as emu;
use geeps_cuda_emu::result::{label, CUresult, CUDA_SUCCESS};

const CHILD: &str = "GEEPS_CUDA_EMU_TEST_CHILD";

/// Whether this process is the child running `test`.
pub fn is_child(test: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|v| v == test)
}

/// Runs `test` alone in a child of this test binary with `envs` set.
pub fn run_child(test: &str, envs: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, test);
    // Hermetic: the child sees the emulator settings the test gives, not the caller's.
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GEEPS_CUDA_EMU")) {
        cmd.env_remove(k);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("the test binary runs")
}

/// Runs `test` in a child and requires it to pass.
pub fn child_passes(test: &str, envs: &[(&str, &str)]) {
    let out = run_child(test, envs);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child {test} failed ({}):\n{text}", out.status);
    assert!(text.contains("1 passed"), "child {test} did not run its body:\n{text}");
}

/// Asserts `got` is `want`, naming both.
#[track_caller]
pub fn code(got: CUresult, want: CUresult) {
    assert_eq!(got, want, "got {}, want {}", label(got), label(want));
}

#[track_caller]
pub fn ok(got: CUresult) {
    code(got, CUDA_SUCCESS)
}

/// `cuInit`, the primary context of device 0, made current on this thread.
pub fn open() -> *mut c_void {
    ok(emu::cuInit(0));
    let mut ctx = std::ptr::null_mut();
    unsafe {
        ok(emu::cuDevicePrimaryCtxRetain(&mut ctx, 0));
        ok(emu::cuCtxSetCurrent(ctx));
    }
    ctx
}

pub fn alloc(bytes: usize) -> u64 {
    let mut p = 0u64;
    unsafe { ok(emu::cuMemAlloc_v2(&mut p, bytes)) };
    p
}

/// Page-locked host memory for `n` u32.
pub fn pinned_u32(n: usize) -> &'static mut [u32] {
    let mut p = std::ptr::null_mut();
    unsafe {
        ok(emu::cuMemAllocHost_v2(&mut p, n * 4));
        std::slice::from_raw_parts_mut(p as *mut u32, n)
    }
}

pub fn stream(flags: u32) -> *mut c_void {
    let mut s = std::ptr::null_mut();
    unsafe { ok(emu::cuStreamCreate(&mut s, flags)) };
    s
}

pub fn event() -> *mut c_void {
    let mut e = std::ptr::null_mut();
    unsafe { ok(emu::cuEventCreate(&mut e, 2)) };
    e
}

/// `n` u32 read from the device, synchronously.
pub fn read_u32(ptr: u64, n: usize) -> Vec<u32> {
    let mut out = vec![0u32; n];
    unsafe { ok(emu::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), ptr, n * 4)) };
    out
}

pub fn write_u32(ptr: u64, data: &[u32]) {
    unsafe { ok(emu::cuMemcpyHtoD_v2(ptr, data.as_ptr().cast(), data.len() * 4)) };
}

/// The cdylib cargo built next to this test binary.
pub fn cdylib() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the deps folder");
    [deps.join("libgeeps_cuda_emu.so"), deps.parent().expect("the profile folder").join("libgeeps_cuda_emu.so")]
        .into_iter()
        .find(|p| p.exists())
        .expect("cargo builds the cdylib with the tests")
}

/// Runs `test` in a child whose library path holds `names` (e.g.
/// `libcuda.so.1`) as links to this crate's cdylib, as a program loading
/// the real libraries would find them, and requires it to pass.
pub fn child_passes_with_libraries(test: &str, names: &[&str]) {
    let dir = std::env::temp_dir().join(format!("geeps-cuda-emu-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    for name in names {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(cdylib(), &link).expect("a link to the cdylib");
    }
    let path = dir.to_string_lossy().into_owned();
    let out = run_child(test, &[("LD_LIBRARY_PATH", path.as_str())]);
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "child {test} failed ({}):\n{text}", out.status);
}

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    U32(u32),
    U64(u64),
    F32(f32),
}

/// Loads `ptx` as a module in the current context.
pub fn load_ptx(ptx: &str) -> *mut c_void {
    let image = std::ffi::CString::new(ptx).expect("PTX without NUL bytes");
    let mut m = std::ptr::null_mut();
    unsafe { ok(emu::cuModuleLoadData(&mut m, image.as_ptr().cast())) };
    m
}

/// Kernel `name` of module `m`.
pub fn function(m: *mut c_void, name: &str) -> *mut c_void {
    let name = std::ffi::CString::new(name).expect("a name");
    let mut f = std::ptr::null_mut();
    unsafe { ok(emu::cuModuleGetFunction(&mut f, m, name.as_ptr())) };
    f
}

/// Launches `f` on the null stream and synchronises: the launch's code,
/// else the synchronisation's.
pub fn launch(f: *mut c_void, grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32, args: &[Arg]) -> CUresult {
    let mut values: Vec<[u8; 8]> = args
        .iter()
        .map(|a| match *a {
            Arg::U32(v) => (v as u64).to_ne_bytes(),
            Arg::U64(v) => v.to_ne_bytes(),
            Arg::F32(v) => (v.to_bits() as u64).to_ne_bytes(),
        })
        .collect();
    let mut ptrs: Vec<*mut c_void> = values.iter_mut().map(|v| v.as_mut_ptr() as *mut c_void).collect();
    let (g, b) = (grid, block);
    let r = unsafe {
        emu::cuLaunchKernel(
            f,
            g.0,
            g.1,
            g.2,
            b.0,
            b.1,
            b.2,
            shared,
            std::ptr::null_mut(),
            ptrs.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if r != CUDA_SUCCESS {
        return r;
    }
    emu::cuCtxSynchronize()
}

pub fn upload_f32(data: &[f32]) -> u64 {
    let p = alloc(data.len().max(1) * 4);
    unsafe { ok(emu::cuMemcpyHtoD_v2(p, data.as_ptr().cast(), data.len() * 4)) };
    p
}

pub fn read_f32(ptr: u64, n: usize) -> Vec<f32> {
    read_u32(ptr, n).into_iter().map(f32::from_bits).collect()
}

pub fn upload_u32(data: &[u32]) -> u64 {
    let p = alloc(data.len().max(1) * 4);
    write_u32(p, data);
    p
}
