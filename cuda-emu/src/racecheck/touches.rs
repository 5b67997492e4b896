//! Which bytes a stream operation reads and writes, as the race detector
//! sees them: copies and memsets their exact ranges (a page-locked host
//! range too), cuBLAS its operands' spans, geeps' row kernels the index
//! and the rows it names (read from the index when the kernel runs), any
//! other kernel what each pointer argument reaches, read and written: the
//! extent its caller declared (guard mode, which the kernel is held to),
//! else from the pointer to the allocation's end (coarse but sound for
//! kernels that index forward from their arguments). Must never write
//! device memory, nor hold an allocation's lock after returning.

use crate::launch::Launch;
use crate::memory::Span;
use crate::native_kernels::rows::{self, RowOp};
use crate::ops::{HostSource, Op};

/// A resource the detector tracks: a device allocation or a page-locked block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub base: u64,
    pub size: u64,
    pub pinned: bool,
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.pinned { "page-locked host block" } else { "device allocation" };
        write!(f, "{kind} {:#x} ({} bytes)", self.base, self.size)
    }
}

/// One access: bytes `start..end` (offsets into `resource`), read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touch {
    pub resource: Resource,
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

fn device(span: &Span, write: bool) -> Touch {
    let resource = Resource { base: span.alloc.base, size: span.alloc.size as u64, pinned: false };
    Touch { resource, start: span.offset as u64, end: (span.offset + span.len) as u64, write }
}

fn pinned(block: &crate::pinned::PinnedBlock, addr: usize, len: usize, write: bool) -> Touch {
    let resource = Resource { base: block.base() as u64, size: block.len() as u64, pinned: true };
    let start = (addr - block.base()) as u64;
    Touch { resource, start, end: start + len as u64, write }
}

/// The bytes `op` touches, index-named rows read now from the index.
pub fn touches(op: &Op) -> Vec<Touch> {
    match op {
        Op::HostToDevice { dst, src } => {
            let mut t = vec![device(dst, true)];
            if let HostSource::Pinned { block, addr } = src {
                t.push(pinned(block, *addr, dst.len, false));
            }
            t
        }
        Op::DeviceToHost { src, dst } => {
            let mut t = vec![device(src, false)];
            if let Some(block) = &dst.block {
                t.push(pinned(block, dst.addr, src.len, true));
            }
            t
        }
        Op::DeviceToDevice { src, dst } => vec![device(src, false), device(dst, true)],
        Op::Memset { dst, .. } => vec![device(dst, true)],
        Op::Gemm(g) => {
            let mut t: Vec<Touch> =
                [&g.a, &g.b].iter().filter_map(|o| o.span.as_ref()).map(|s| device(s, false)).collect();
            t.extend(g.c.span.as_ref().map(|s| device(s, true)));
            t
        }
        Op::Launch(l) => match rows::detect(l) {
            Some(op) => row_touches(op, l).unwrap_or_else(|| coarse(l)),
            None => coarse(l),
        },
        Op::Wait { .. } => Vec::new(),
    }
}

/// What each pointer argument reaches (its declared extent in guard mode,
/// else to the allocation's end), read and written; overlaps merged.
fn coarse(l: &Launch) -> Vec<Touch> {
    let mut t: Vec<Touch> = l
        .pointers
        .iter()
        .map(|p| Touch {
            resource: Resource { base: p.alloc.base, size: p.alloc.size as u64, pinned: false },
            start: p.offset as u64,
            end: (p.offset + p.bytes()) as u64,
            write: true,
        })
        .collect();
    t.sort_by_key(|x| (x.resource.base, x.start));
    t.dedup_by(|later, earlier| {
        let overlaps = later.resource == earlier.resource && later.start <= earlier.end;
        if overlaps {
            earlier.end = earlier.end.max(later.end);
        }
        overlaps
    });
    t
}

fn u32_arg(l: &Launch, i: usize) -> u32 {
    u32::from_ne_bytes(l.args[i][..4].try_into().unwrap_or([0; 4]))
}

/// A row kernel `(src, index, pairs, dst, width)`: its index, the source rows
/// it reads and the destination rows it writes (read-modify-write for the
/// add, which a write covers). None when an argument is not a live pointer
/// (the kernel faults on its own).
fn row_touches(op: RowOp, l: &Launch) -> Option<Vec<Touch>> {
    let arg = |param: usize| l.pointers.iter().find(|p| p.param == param);
    let (src, index, dst) = (arg(0)?, arg(1)?, arg(3)?);
    let (pairs, width) = (u32_arg(l, 2) as u64, u32_arg(l, 4) as u64);
    let row_bytes = width * 4;
    let resource =
        |p: &crate::launch::Pointer| Resource { base: p.alloc.base, size: p.alloc.size as u64, pinned: false };
    let index_end = (index.offset as u64 + 8 * pairs).min(index.alloc.size as u64);
    let mut t = vec![Touch { resource: resource(index), start: index.offset as u64, end: index_end, write: false }];
    if row_bytes == 0 || pairs == 0 {
        return Some(t);
    }
    let (mut from_rows, mut to_rows) = (Vec::new(), Vec::new());
    {
        let data = index.alloc.lock();
        let words = data.get(index.offset..index_end as usize)?;
        for pair in words.chunks_exact(8) {
            let b = u32::from_ne_bytes(pair[..4].try_into().ok()?) as u64;
            let s = u32::from_ne_bytes(pair[4..].try_into().ok()?) as u64;
            let (from, to) = if op == RowOp::Gather { (s, b) } else { (b, s) };
            from_rows.push(from);
            to_rows.push(to);
        }
    }
    t.extend(rows_as_ranges(from_rows, src, row_bytes).into_iter().map(|(start, end)| Touch {
        resource: resource(src),
        start,
        end,
        write: false,
    }));
    t.extend(rows_as_ranges(to_rows, dst, row_bytes).into_iter().map(|(start, end)| Touch {
        resource: resource(dst),
        start,
        end,
        write: true,
    }));
    Some(t)
}

/// Row numbers as merged byte ranges of the allocation `base` points into,
/// clipped to it (a row past its end faults in the kernel itself).
fn rows_as_ranges(mut rows: Vec<u64>, base: &crate::launch::Pointer, row_bytes: u64) -> Vec<(u64, u64)> {
    rows.sort_unstable();
    rows.dedup();
    let size = base.alloc.size as u64;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for r in rows {
        let start = (base.offset as u64).saturating_add(r.saturating_mul(row_bytes)).min(size);
        let end = start.saturating_add(row_bytes).min(size);
        match ranges.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ if start < end => ranges.push((start, end)),
            _ => {}
        }
    }
    ranges
}

/// The resources `op` holds, known when it is enqueued (for the free check).
pub fn held(op: &Op) -> Vec<Resource> {
    let dev = |s: &Span| Resource { base: s.alloc.base, size: s.alloc.size as u64, pinned: false };
    let pin = |b: &crate::pinned::PinnedBlock| Resource { base: b.base() as u64, size: b.len() as u64, pinned: true };
    let mut r = match op {
        Op::HostToDevice { dst, src } => {
            let mut r = vec![dev(dst)];
            if let HostSource::Pinned { block, .. } = src {
                r.push(pin(block));
            }
            r
        }
        Op::DeviceToHost { src, dst } => {
            let mut r = vec![dev(src)];
            r.extend(dst.block.as_deref().map(pin));
            r
        }
        Op::DeviceToDevice { src, dst } => vec![dev(src), dev(dst)],
        Op::Memset { dst, .. } => vec![dev(dst)],
        Op::Gemm(g) => [&g.a, &g.b, &g.c].iter().filter_map(|o| o.span.as_ref()).map(dev).collect(),
        Op::Launch(l) => l
            .pointers
            .iter()
            .map(|p| Resource { base: p.alloc.base, size: p.alloc.size as u64, pinned: false })
            .collect(),
        Op::Wait { .. } => Vec::new(),
    };
    r.sort_by_key(|x| x.base);
    r.dedup();
    r
}
