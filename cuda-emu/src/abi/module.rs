//! Modules and launches: `cuModuleLoadData(Ex)` (PTX text only; the JIT
//! error log option is filled on failure), `cuModuleGetFunction`,
//! `cuModuleUnload`, `cuLaunchKernel`. Must never accept a binary image it
//! cannot run, nor keep a pointer into the caller's image.

use std::ffi::{c_char, c_uint, c_void, CStr};
use std::sync::Arc;

use super::guard::{guard, handle, key, put, refuse};
use crate::config::{config, KernelMode};
use crate::interpret::Interpreter;
use crate::launch::Launch;
use crate::module::{self, Function, Module, FUNCTIONS, MODULES};
use crate::ops::Op;
use crate::result::{
    CUresult, Res, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_PTX,
    CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_OUT_OF_MEMORY,
};
use crate::stream_table::{self, submit};
use crate::{context, engine};

const CU_JIT_INFO_LOG_BUFFER: u32 = 3;
const CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: u32 = 4;
const CU_JIT_ERROR_LOG_BUFFER: u32 = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: u32 = 6;

/// The JIT options' log buffers: (buffer, its size, index of the size option).
struct Logs {
    error: (*mut u8, usize, Option<usize>),
    info: (*mut u8, usize, Option<usize>),
}

impl Logs {
    unsafe fn read(n: c_uint, options: *mut u32, values: *mut *mut c_void) -> Res<Logs> {
        let mut logs = Logs { error: (std::ptr::null_mut(), 0, None), info: (std::ptr::null_mut(), 0, None) };
        if n == 0 {
            return Ok(logs);
        }
        if options.is_null() || values.is_null() {
            return refuse(CUDA_ERROR_INVALID_VALUE, || "cuModuleLoadDataEx: options without values".into());
        }
        for i in 0..n as usize {
            let value = *values.add(i);
            match *options.add(i) {
                CU_JIT_ERROR_LOG_BUFFER => logs.error.0 = value as *mut u8,
                CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES => logs.error = (logs.error.0, value as usize, Some(i)),
                CU_JIT_INFO_LOG_BUFFER => logs.info.0 = value as *mut u8,
                CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES => logs.info = (logs.info.0, value as usize, Some(i)),
                _ => {}
            }
        }
        Ok(logs)
    }

    /// Writes `text` (NUL-terminated, truncated) into a log buffer and
    /// stores the bytes written in its size option, as the driver does.
    unsafe fn write(buffer: (*mut u8, usize, Option<usize>), values: *mut *mut c_void, text: &str) {
        let (ptr, size, at) = buffer;
        if ptr.is_null() || size == 0 {
            return;
        }
        let n = text.len().min(size - 1);
        std::ptr::copy_nonoverlapping(text.as_ptr(), ptr, n);
        *ptr.add(n) = 0;
        if let Some(i) = at {
            *values.add(i) = (n + 1) as *mut c_void;
        }
    }
}

unsafe fn load(
    call: &'static str,
    out: *mut *mut c_void,
    image: *const c_void,
    logs: Logs,
    values: *mut *mut c_void,
) -> CUresult {
    guard(call, || {
        let ctx = context::current()?;
        if out.is_null() || image.is_null() {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("{call}: NULL module or image"));
        }
        let bytes = CStr::from_ptr(image as *const c_char).to_bytes();
        if bytes.starts_with(b"\x7fELF") || bytes.starts_with(&[0x50, 0xed, 0x55, 0xba]) {
            return refuse(CUDA_ERROR_NOT_SUPPORTED, || {
                format!("{call}: cubin and fatbin images cannot run in the emulator; pass PTX")
            });
        }
        let ptx = String::from_utf8_lossy(bytes);
        let fail = |log: String| {
            Logs::write(logs.error, values, &log);
            refuse(CUDA_ERROR_INVALID_PTX, || format!("{call}: {log}"))
        };
        let entries = match module::parse(&ptx) {
            Ok(e) => e,
            Err(log) => return fail(log),
        };
        let interpreter = Interpreter::new(&ptx);
        if let (Some(e), KernelMode::Interpret) = (interpreter.compile_error(), config().kernels) {
            return fail(e.to_string());
        }
        Logs::write(logs.error, values, "");
        Logs::write(logs.info, values, &format!("geeps-cuda-emu: loaded {} kernels", entries.len()));
        let functions = std::sync::Mutex::new(vec![None; entries.len()]);
        let module = Arc::new(Module { context: ctx.handle, entries, interpreter, functions });
        let h = MODULES.insert(module).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
        put(out, handle(h))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadData(out: *mut *mut c_void, image: *const c_void) -> CUresult {
    let logs = Logs { error: (std::ptr::null_mut(), 0, None), info: (std::ptr::null_mut(), 0, None) };
    load("cuModuleLoadData", out, image, logs, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    out: *mut *mut c_void,
    image: *const c_void,
    num_options: c_uint,
    options: *mut u32,
    values: *mut *mut c_void,
) -> CUresult {
    match Logs::read(num_options, options, values) {
        Ok(logs) => load("cuModuleLoadDataEx", out, image, logs, values),
        Err(code) => code,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(out: *mut *mut c_void, m: *mut c_void, name: *const c_char) -> CUresult {
    guard("cuModuleGetFunction", || {
        context::require_init()?;
        let Some(module) = MODULES.get(key(m)) else {
            return refuse(CUDA_ERROR_INVALID_HANDLE, || format!("cuModuleGetFunction: module {m:?} is not loaded"));
        };
        if name.is_null() {
            return refuse(CUDA_ERROR_INVALID_VALUE, || "cuModuleGetFunction: NULL name".into());
        }
        let name = CStr::from_ptr(name).to_string_lossy();
        let Some(entry) = module.entries.iter().position(|e| e.name == name) else {
            return refuse(CUDA_ERROR_NOT_FOUND, || format!("cuModuleGetFunction: no kernel `{name}` in the module"));
        };
        // The same handle for the same kernel, as the driver returns.
        let mh = key(m);
        let known = module.functions.lock().unwrap_or_else(|p| p.into_inner()).get(entry).copied().flatten();
        let h = match known {
            Some(h) => h,
            None => {
                let h = FUNCTIONS
                    .insert(Arc::new(Function { module: module.clone(), module_handle: mh, entry }))
                    .ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
                module.functions.lock().unwrap_or_else(|p| p.into_inner())[entry] = Some(h);
                h
            }
        };
        put(out, handle(h))
    })
}

/// Functions of the module become stale at once; launches already queued still run.
#[no_mangle]
pub unsafe extern "C" fn cuModuleUnload(m: *mut c_void) -> CUresult {
    guard("cuModuleUnload", || {
        context::require_init()?;
        if MODULES.remove(key(m)).is_none() {
            return refuse(CUDA_ERROR_INVALID_HANDLE, || format!("cuModuleUnload: module {m:?} is not loaded"));
        }
        let mh = key(m);
        FUNCTIONS.remove_where(|f| f.module_handle == mh);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuLaunchKernel(
    f: *mut c_void,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared: c_uint,
    s: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    // This launch's declaration is used or dropped here, never left for the next.
    let declared = crate::extents::take();
    guard("cuLaunchKernel", || {
        context::require_init()?;
        let Some(function) = FUNCTIONS.get(key(f)) else {
            return refuse(CUDA_ERROR_INVALID_HANDLE, || format!("cuLaunchKernel: function {f:?} is not live"));
        };
        let stream = stream_table::resolve(key(s))?;
        if stream.context().handle != function.module.context {
            return refuse(CUDA_ERROR_INVALID_CONTEXT, || {
                "cuLaunchKernel: the stream and the function belong to different contexts".into()
            });
        }
        let launch = Launch::capture(
            function,
            (grid_x, grid_y, grid_z),
            (block_x, block_y, block_z),
            shared,
            params,
            extra,
            &declared,
        )?;
        // A kernel the interpreter cannot decode fails here, as a JIT failure, without poisoning the context.
        if let Err(why) = engine::runnable(&launch) {
            crate::log::fault(&format!("cuLaunchKernel: {why}"));
            return Err(CUDA_ERROR_INVALID_PTX);
        }
        submit(&stream, Op::Launch(Box::new(launch))).map(|_| ())
    })
}
