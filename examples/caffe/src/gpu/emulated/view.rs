//! What a native kernel sees of its launch: the geometry, the scalar
//! arguments by index, and the memory behind each pointer argument as
//! bounds-checked element loads and stores. An element outside the
//! allocation the argument points into (or any element of an argument that
//! points into none) is CUDA_ERROR_ILLEGAL_ADDRESS naming the kernel, the
//! argument and the element, as the interpreter faults. Must never touch
//! memory outside what the emulator resolved, nor hold a Rust reference into
//! it (two arguments may point into the same allocation, so every access
//! goes through raw pointers, one element at a time).

use std::marker::PhantomData;

use super::abi::{NativeArg, NativeLaunch};

/// A native kernel's failure: the driver's code and what to print.
pub type Fault = (u32, String);

/// `CUDA_ERROR_ILLEGAL_ADDRESS`.
pub const CUDA_ERROR_ILLEGAL_ADDRESS: u32 = 700;

/// A launch as the emulator hands it to a callback.
pub struct Launch<'a> {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    name: &'a str,
    args: &'a [NativeArg],
}

impl<'a> Launch<'a> {
    /// # Safety
    /// `raw` is a launch the emulator passed to a callback, during that call.
    pub unsafe fn from_raw(raw: &'a NativeLaunch) -> Launch<'a> {
        let name = std::str::from_utf8(std::slice::from_raw_parts(raw.name, raw.name_len)).unwrap_or("");
        let args = if raw.arg_count == 0 { &[][..] } else { std::slice::from_raw_parts(raw.args, raw.arg_count) };
        let [g0, g1, g2] = raw.grid;
        let [b0, b1, b2] = raw.block;
        Launch { grid: (g0, g1, g2), block: (b0, b1, b2), name, args }
    }

    pub fn name(&self) -> &str {
        self.name
    }

    /// Argument `i`'s bytes (none past the last).
    fn arg(&self, i: usize) -> &[u8] {
        match self.args.get(i) {
            // SAFETY: the emulator's argument bytes, alive during the callback.
            Some(a) if !a.bytes.is_null() => unsafe { std::slice::from_raw_parts(a.bytes, a.size) },
            _ => &[],
        }
    }
}

/// The scalar arguments of a launch.
pub struct Args<'a>(pub &'a Launch<'a>);

impl Args<'_> {
    fn word(&self, i: usize) -> [u8; 4] {
        self.0.arg(i).get(..4).and_then(|b| b.try_into().ok()).unwrap_or([0; 4])
    }
    pub fn u32(&self, i: usize) -> u32 {
        u32::from_ne_bytes(self.word(i))
    }
    pub fn i32(&self, i: usize) -> i32 {
        i32::from_ne_bytes(self.word(i))
    }
    pub fn f32(&self, i: usize) -> f32 {
        f32::from_ne_bytes(self.word(i))
    }
    pub fn u64(&self, i: usize) -> u64 {
        u64::from_ne_bytes(self.0.arg(i).get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]))
    }
}

/// One pointer argument's reach: from where it points to its allocation's end.
#[derive(Clone, Copy)]
struct Reach {
    start: *mut u8,
    bytes: usize,
}

/// The memory of a launch's pointer arguments, while their allocations are locked.
pub struct Memory<'g> {
    name: String,
    values: Vec<u64>,
    reach: Vec<Option<Reach>>,
    _locked: PhantomData<&'g mut ()>,
}

impl<'g> Memory<'g> {
    /// The views of `launch`'s pointer arguments into the memory the emulator resolved.
    pub fn new(launch: &'g Launch<'g>) -> Memory<'g> {
        let reach = launch
            .args
            .iter()
            .map(|a| (!a.host.is_null()).then_some(Reach { start: a.host, bytes: a.reach }))
            .collect();
        let values = (0..launch.args.len()).map(|i| Args(launch).u64(i)).collect();
        Memory { name: launch.name().to_string(), values, reach, _locked: PhantomData }
    }

    #[cold]
    fn fault(&self, param: usize, index: u64, what: &str) -> Fault {
        let value = self.values[param];
        let why = match self.reach[param] {
            None => format!("argument {param} ({value:#x}) is not in any live allocation"),
            Some(_) => {
                format!("{what} element {index} of argument {param} ({value:#x}) lies past its allocation's end")
            }
        };
        (CUDA_ERROR_ILLEGAL_ADDRESS, format!("kernel `{}`: {why}", self.name))
    }

    #[inline(always)]
    fn at<const N: usize>(&self, param: usize, index: u64, what: &str) -> Result<*mut u8, Fault> {
        if let Some(r) = self.reach[param] {
            if let Some(byte) = index.checked_mul(N as u64) {
                if byte.saturating_add(N as u64) <= r.bytes as u64 {
                    // SAFETY: the N bytes lie within the locked allocation.
                    return Ok(unsafe { r.start.add(byte as usize) });
                }
            }
        }
        Err(self.fault(param, index, what))
    }

    #[inline(always)]
    fn load<const N: usize>(&self, param: usize, index: u64) -> Result<[u8; N], Fault> {
        let p = self.at::<N>(param, index, "read of")?;
        // SAFETY: in bounds (above); unaligned reads are allowed.
        Ok(unsafe { (p as *const [u8; N]).read_unaligned() })
    }

    #[inline(always)]
    fn store<const N: usize>(&mut self, param: usize, index: u64, bytes: [u8; N]) -> Result<(), Fault> {
        let p = self.at::<N>(param, index, "write of")?;
        // SAFETY: in bounds (above); no reference into the allocation is alive.
        unsafe { (p as *mut [u8; N]).write_unaligned(bytes) };
        Ok(())
    }

    #[inline(always)]
    pub fn f32(&self, param: usize, index: u64) -> Result<f32, Fault> {
        Ok(f32::from_ne_bytes(self.load::<4>(param, index)?))
    }
    #[inline(always)]
    pub fn u32(&self, param: usize, index: u64) -> Result<u32, Fault> {
        Ok(u32::from_ne_bytes(self.load::<4>(param, index)?))
    }
    #[inline(always)]
    pub fn u8(&self, param: usize, index: u64) -> Result<u8, Fault> {
        Ok(self.load::<1>(param, index)?[0])
    }
    #[inline(always)]
    pub fn set_f32(&mut self, param: usize, index: u64, v: f32) -> Result<(), Fault> {
        self.store::<4>(param, index, v.to_ne_bytes())
    }
}

/// Whether every argument pointing into an allocation, but `bytes` (a byte
/// array's), is 4-byte aligned (a misaligned float access is the
/// interpreter's to report).
pub fn aligned(launch: &Launch, bytes: Option<usize>) -> bool {
    launch.args.iter().enumerate().all(|(i, a)| a.pointer == 0 || a.offset % 4 == 0 || Some(i) == bytes)
}

/// Runs `body(i)` for every `i` in `0..n` of a `FOR_EACH` grid-stride loop
/// (`i` from the thread's global index, by `blockDim.x * gridDim.x`), in
/// ascending order. Only for launches where `covers` holds.
pub fn for_each(n: u32, mut body: impl FnMut(u64) -> Result<(), Fault>) -> Result<(), Fault> {
    (0..n as u64).try_for_each(&mut body)
}

/// Whether a 1-D launch's grid-stride loop over `n` visits each index once
/// with no 32-bit wrap-around: then it is `0..n` in any order.
pub fn covers(launch: &Launch, n: u32) -> bool {
    let threads = launch.grid.0 as u64 * launch.block.0 as u64;
    threads < (1 << 32) && n as u64 + threads <= (1 << 32)
}

/// Whether the launch is a 1-D grid of 1-D blocks (the caffe kernels use
/// only `.x`; extra threads in y or z would repeat in-place updates).
pub fn flat(launch: &Launch) -> bool {
    launch.grid.1 == 1 && launch.grid.2 == 1 && launch.block.1 == 1 && launch.block.2 == 1
}
