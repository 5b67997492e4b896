//! The memory a running kernel sees: the locked allocations its arguments
//! point into (global addresses are the emulator's device addresses), the
//! block's shared memory, each thread's local memory and the parameter
//! buffer; generic addresses of shared and local memory live in windows
//! above every user-space address. A global address in another live
//! allocation of the emulator (reached through a pointer the kernel read
//! from memory) is served by locking that allocation for the one access.
//! Every access is bounds- and alignment-checked; must never touch bytes
//! outside these buffers and live allocations, nor wait forever on a lock.

use super::parse::Space;

/// Generic address of shared offset 0 (above any host or device address).
pub const SHARED_WINDOW: u64 = 0xF000_0000_0000;
/// Generic address of local offset 0 (of the thread making the access).
pub const LOCAL_WINDOW: u64 = 0xE000_0000_0000;
/// Address of the module's `.global`/`.const` variables.
pub const DATA_WINDOW: u64 = 0xD000_0000_0000;

/// Why an access failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Illegal(String),
    Misaligned(String),
}

pub struct Memory<'a> {
    /// (device address, bytes) of each locked allocation, by address.
    globals: Vec<(u64, &'a mut [u8])>,
    last: usize,
    pub shared: Vec<u8>,
    pub local: Vec<u8>,
    pub local_bytes: usize,
    pub params: Vec<u8>,
    /// The module's `.global`/`.const` variables, at `DATA_WINDOW`.
    data: &'a mut [u8],
    /// Per global (same order): the address ranges accesses must stay in,
    /// when the launch declared them (guard mode); empty: the allocation's bounds.
    fences: Vec<Vec<(u64, u64)>>,
    fenced: bool,
}

/// `b` (1, 2, 4 or 8 bytes) as a little-endian value; fixed sizes, so no `memcpy` call.
#[inline(always)]
fn read(b: &[u8]) -> u64 {
    match b.len() {
        4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
        8 => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        2 => u16::from_le_bytes([b[0], b[1]]) as u64,
        _ => b.first().copied().unwrap_or(0) as u64,
    }
}

#[inline(always)]
fn write(b: &mut [u8], v: u64) {
    match b.len() {
        4 => b.copy_from_slice(&(v as u32).to_le_bytes()),
        8 => b.copy_from_slice(&v.to_le_bytes()),
        2 => b.copy_from_slice(&(v as u16).to_le_bytes()),
        _ => {
            if let Some(x) = b.first_mut() {
                *x = v as u8;
            }
        }
    }
}

fn space_name(s: Space) -> &'static str {
    match s {
        Space::Global => "global",
        Space::Shared => "shared",
        Space::Local => "local",
        Space::Param => "param",
        Space::Const => "const",
        Space::Generic => "generic",
    }
}

impl<'a> Memory<'a> {
    pub fn new(mut globals: Vec<(u64, &'a mut [u8])>, params: Vec<u8>, data: &'a mut [u8]) -> Memory<'a> {
        globals.sort_by_key(|g| g.0);
        let fences = vec![Vec::new(); globals.len()];
        Memory {
            globals,
            last: 0,
            shared: Vec::new(),
            local: Vec::new(),
            local_bytes: 0,
            params,
            data,
            fences,
            fenced: false,
        }
    }

    /// Holds accesses to the allocation at each base to the given address
    /// ranges (an empty list leaves that allocation held to its bounds).
    pub fn fence(&mut self, by_base: Vec<(u64, Vec<(u64, u64)>)>) {
        for (base, ranges) in by_base {
            if let Some(i) = self.globals.iter().position(|g| g.0 == base) {
                self.fenced |= !ranges.is_empty();
                self.fences[i] = ranges;
            }
        }
    }

    /// The fault for an access of `n` bytes at `addr` in global `i` outside its fences, if it is.
    #[inline]
    fn fence_fault(&self, i: usize, addr: u64, n: usize) -> Option<Fault> {
        let f = &self.fences[i];
        if f.is_empty() || f.iter().any(|&(s, e)| addr >= s && addr.saturating_add(n as u64) <= e) {
            return None;
        }
        let ranges: Vec<String> = f.iter().map(|(s, e)| format!("{s:#x}..{e:#x}")).collect();
        Some(Fault::Illegal(format!(
            "{n}-byte global access at {addr:#x} lies inside the allocation at {:#x} but outside what the \
             launch's pointer arguments were declared to cover there ({}): a stray access into a \
             neighbouring blob or row range",
            self.globals[i].0,
            ranges.join(", ")
        )))
    }

    /// The `n` bytes at `addr` of `space` as thread `lane` sees them; `align` is the access's alignment.
    #[inline]
    pub fn bytes(&mut self, space: Space, addr: u64, n: usize, align: usize, lane: usize) -> Result<&mut [u8], Fault> {
        // Alignments are powers of two: a mask, not a division, on this hot path.
        if addr & (align as u64 - 1) != 0 {
            return Err(Fault::Misaligned(format!(
                "misaligned {n}-byte {} access at {addr:#x} (needs {align}-byte alignment)",
                space_name(space)
            )));
        }
        let (space, addr) = match space {
            Space::Generic if (SHARED_WINDOW..SHARED_WINDOW + (1 << 32)).contains(&addr) => {
                (Space::Shared, addr - SHARED_WINDOW)
            }
            Space::Generic if (LOCAL_WINDOW..LOCAL_WINDOW + (1 << 32)).contains(&addr) => {
                (Space::Local, addr - LOCAL_WINDOW)
            }
            Space::Generic => (Space::Global, addr),
            s => (s, addr),
        };
        let outside = |what: &str| {
            Fault::Illegal(format!("{n}-byte {} access at {addr:#x} is outside {what}", space_name(space)))
        };
        let in_data = (DATA_WINDOW..DATA_WINDOW + self.data.len() as u64).contains(&addr);
        let (buf, at): (&mut [u8], usize) = match space {
            Space::Global | Space::Const if in_data => (&mut *self.data, (addr - DATA_WINDOW) as usize),
            Space::Global => {
                let hit =
                    |g: &(u64, &'a mut [u8])| addr >= g.0 && (addr - g.0).saturating_add(n as u64) <= g.1.len() as u64;
                if !self.globals.get(self.last).is_some_and(hit) {
                    self.last = self
                        .globals
                        .iter()
                        .position(hit)
                        .ok_or_else(|| outside("every allocation the kernel's pointer arguments point into"))?;
                }
                if self.fenced {
                    if let Some(fault) = self.fence_fault(self.last, addr, n) {
                        return Err(fault);
                    }
                }
                let g = &mut self.globals[self.last];
                let at = (addr - g.0) as usize;
                (&mut *g.1, at)
            }
            Space::Shared => (&mut self.shared, addr as usize),
            Space::Param => (&mut self.params, addr as usize),
            Space::Local => {
                if addr.saturating_add(n as u64) > self.local_bytes as u64 {
                    return Err(outside("the thread's local memory"));
                }
                let at = lane * self.local_bytes + addr as usize;
                (&mut self.local, at)
            }
            Space::Const | Space::Generic => return Err(outside("the module's variables")),
        };
        if addr > usize::MAX as u64 {
            return Err(outside("the state space"));
        }
        match buf.get_mut(at..at.saturating_add(n)) {
            Some(b) => Ok(b),
            None => Err(outside("the state space")),
        }
    }

    /// The bytes of an aligned global access inside the allocation used last
    /// (most accesses): the common case without the general resolution.
    #[inline(always)]
    fn cached_global(&mut self, space: Space, addr: u64, n: usize, align: usize) -> Option<&mut [u8]> {
        if space != Space::Global || addr & (align as u64 - 1) != 0 {
            return None;
        }
        // Outside a fence: the general path reports it.
        if self.fenced && self.fence_fault(self.last, addr, n).is_some() {
            return None;
        }
        let g = self.globals.get_mut(self.last)?;
        let at = addr.checked_sub(g.0)? as usize;
        g.1.get_mut(at..at.checked_add(n)?)
    }

    #[inline]
    pub fn load(&mut self, space: Space, addr: u64, n: usize, align: usize, lane: usize) -> Result<u64, Fault> {
        if let Some(b) = self.cached_global(space, addr, n, align) {
            return Ok(read(b));
        }
        let mut v = [0u8; 8];
        match self.bytes(space, addr, n, align, lane) {
            Ok(b) => return Ok(read(b)),
            Err(e) => self.other_allocation(space, addr, n, e, |b| v[..n].copy_from_slice(b))?,
        }
        Ok(u64::from_le_bytes(v))
    }

    #[inline]
    pub fn store(
        &mut self,
        space: Space,
        addr: u64,
        n: usize,
        align: usize,
        lane: usize,
        value: u64,
    ) -> Result<(), Fault> {
        if let Some(b) = self.cached_global(space, addr, n, align) {
            write(b, value);
            return Ok(());
        }
        match self.bytes(space, addr, n, align, lane) {
            Ok(b) => write(b, value),
            Err(e) => self.other_allocation(space, addr, n, e, |b| b.copy_from_slice(&value.to_le_bytes()[..n]))?,
        }
        Ok(())
    }

    /// `f` on the `n` bytes at global `addr` in a live allocation the launch
    /// did not lock, or `fault` (what the locked ones said) when there is none.
    #[cold]
    fn other_allocation(
        &self,
        space: Space,
        addr: u64,
        n: usize,
        fault: Fault,
        f: impl FnOnce(&mut [u8]),
    ) -> Result<(), Fault> {
        let global = space == Space::Global
            || (space == Space::Generic
                && !(SHARED_WINDOW..SHARED_WINDOW + (1 << 32)).contains(&addr)
                && !(LOCAL_WINDOW..LOCAL_WINDOW + (1 << 32)).contains(&addr));
        if !global || matches!(fault, Fault::Misaligned(_)) {
            return Err(fault);
        }
        let Some(alloc) = crate::memory::space().find(addr) else { return Err(fault) };
        // One of the launch's own allocations: the access ran past its end.
        if self.globals.iter().any(|g| g.0 == alloc.base)
            || (addr - alloc.base).saturating_add(n as u64) > alloc.size as u64
        {
            return Err(fault);
        }
        let at = (addr - alloc.base) as usize;
        // Another operation may hold it (and wait for ours): try for a while, never block.
        for _ in 0..100_000 {
            if let Some(mut bytes) = alloc.try_lock() {
                f(&mut bytes[at..at + n]);
                return Ok(());
            }
            std::thread::yield_now();
        }
        Err(Fault::Illegal(format!(
            "{n}-byte global access at {addr:#x}: its allocation stayed busy in another operation"
        )))
    }
}
