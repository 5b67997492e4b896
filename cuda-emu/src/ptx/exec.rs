//! Runs decoded kernels: blocks one after another, each block's threads
//! SIMT-style. Threads at the same instruction run it together (one
//! dispatch, a loop over their lanes); the lowest waiting instruction goes
//! first, so diverged threads reconverge; threads at `bar.sync` wait until
//! every live thread of the block is at one; `ret`/`exit` ends a thread.
//! A fault stops the kernel with the instruction's line; must never let a
//! thread run past the end of the code or touch memory unchecked.

use std::collections::BTreeMap;

use super::float::{ftz32, sat32, sat64};
use super::inst::{Code, Combine, Fill, Inst, Kind, Post, Shuffle, Vote, SCRATCH};
use super::int;
use super::memory::{Fault, Memory};

/// A launch's geometry.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    /// Bytes of dynamic shared memory.
    pub dynamic_shared: usize,
}

/// A kernel fault: the instruction's line and what went wrong.
pub struct Stop {
    pub line: u32,
    pub fault: Fault,
}

/// Runs `code` over the whole grid; thread-instructions executed on success.
pub fn run(code: &Code, geo: Geometry, mem: &mut Memory) -> Result<u64, Stop> {
    let (bx, by, bz) = (geo.block.0 as usize, geo.block.1 as usize, geo.block.2 as usize);
    let n = bx * by * bz;
    let mut regs = vec![0u64; code.regs as usize * n];
    for &(r, fill) in &code.fills {
        let row = &mut regs[r as usize * n..(r as usize + 1) * n];
        for (l, v) in row.iter_mut().enumerate() {
            let tid = [l % bx, (l / bx) % by, l / (bx * by)];
            let ntid = [bx, by, bz];
            let nctaid = [geo.grid.0 as usize, geo.grid.1 as usize, geo.grid.2 as usize];
            *v = match fill {
                Fill::Const(c) => c,
                Fill::Tid(d) => tid[d] as u64,
                Fill::Ntid(d) => ntid[d] as u64,
                Fill::Nctaid(d) => nctaid[d] as u64,
                Fill::LaneId => (l % 32) as u64,
                Fill::WarpId => (l / 32) as u64,
                Fill::Ctaid(_) => 0,
            };
        }
    }
    mem.local_bytes = code.local_bytes;
    let shared_len = code.shared_bytes + geo.dynamic_shared;
    let mut e = Exec { code, n, regs, count: 0, act: Vec::with_capacity(n), scratch: Vec::new() };
    for z in 0..geo.grid.2 {
        for y in 0..geo.grid.1 {
            for x in 0..geo.grid.0 {
                for &(r, fill) in &code.fills {
                    if let Fill::Ctaid(d) = fill {
                        let v = [x, y, z][d] as u64;
                        e.regs[r as usize * n..(r as usize + 1) * n].fill(v);
                    }
                }
                mem.shared.clear();
                mem.shared.resize(shared_len, 0);
                for (at, init) in &code.shared_init {
                    mem.shared[*at..*at + init.len()].copy_from_slice(init);
                }
                mem.local.clear();
                mem.local.resize(code.local_bytes * n, 0);
                e.block(mem)?;
            }
        }
    }
    Ok(e.count)
}

/// `from` joined into `into`, both sorted by thread: lanes stay in order
/// so each instruction walks its register rows forward (cache-friendly).
fn join(into: &mut Vec<u32>, mut from: Vec<u32>) {
    match (into.last(), from.first()) {
        (None, _) => *into = from,
        (_, None) => {}
        (Some(&a), Some(&b)) if a < b => into.append(&mut from),
        _ if from.last() < into.first() => {
            from.append(into);
            *into = from;
        }
        _ => {
            let mut out = Vec::with_capacity(into.len() + from.len());
            let (mut i, mut j) = (0, 0);
            while i < into.len() && j < from.len() {
                if into[i] < from[j] {
                    out.push(into[i]);
                    i += 1;
                } else {
                    out.push(from[j]);
                    j += 1;
                }
            }
            out.extend_from_slice(&into[i..]);
            out.extend_from_slice(&from[j..]);
            *into = out;
        }
    }
}

struct Exec<'c> {
    code: &'c Code,
    n: usize,
    regs: Vec<u64>,
    count: u64,
    act: Vec<u32>,
    /// `shfl` results, before they are written.
    scratch: Vec<(u64, u64)>,
}

impl Exec<'_> {
    fn pred(&self, p: u32, neg: bool, l: u32) -> bool {
        (self.regs[p as usize * self.n + l as usize] & 1 != 0) != neg
    }

    fn block(&mut self, mem: &mut Memory) -> Result<(), Stop> {
        let mut waiting: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        waiting.insert(0, (0..self.n as u32).collect());
        let mut barrier: Vec<(u32, u32)> = Vec::new();
        loop {
            let (mut pc, mut lanes) = match waiting.pop_first() {
                Some(g) => g,
                None if !barrier.is_empty() => {
                    barrier.sort_unstable();
                    for (pc, l) in barrier.drain(..) {
                        waiting.entry(pc).or_default().push(l);
                    }
                    continue;
                }
                None => return Ok(()),
            };
            loop {
                if let Some(e) = waiting.first_entry() {
                    if *e.key() == pc {
                        join(&mut lanes, e.remove());
                    }
                }
                let code = self.code;
                let Some(inst) = code.insts.get(pc as usize) else { break };
                let all = match inst.guard {
                    None => true,
                    Some((p, neg)) => {
                        let mut act = std::mem::take(&mut self.act);
                        act.clear();
                        act.extend(lanes.iter().copied().filter(|&l| self.pred(p, neg, l)));
                        self.act = act;
                        self.act.len() == lanes.len()
                    }
                };
                match &inst.kind {
                    Kind::Bra { target } => {
                        if all {
                            pc = *target;
                        } else if self.act.is_empty() {
                            pc += 1;
                        } else {
                            let (p, neg) = inst.guard.unwrap_or((SCRATCH, false));
                            let (taken, rest): (Vec<u32>, Vec<u32>) =
                                lanes.iter().partition(|&&l| self.pred(p, neg, l));
                            join(waiting.entry(*target).or_default(), taken);
                            lanes = rest;
                            pc += 1;
                        }
                        self.count += lanes.len() as u64;
                        if waiting.first_key_value().is_some_and(|(&k, _)| k < pc) {
                            join(waiting.entry(pc).or_default(), std::mem::take(&mut lanes));
                            break;
                        }
                    }
                    Kind::Bar | Kind::Exit => {
                        let is_bar = matches!(inst.kind, Kind::Bar);
                        let (p, neg) = inst.guard.unwrap_or((SCRATCH, false));
                        let (stop, go): (Vec<u32>, Vec<u32>) =
                            lanes.iter().partition(|&&l| inst.guard.is_none() || self.pred(p, neg, l));
                        if is_bar {
                            barrier.extend(stop.iter().map(|&l| (pc + 1, l)));
                        }
                        lanes = go;
                        pc += 1;
                        if lanes.is_empty() {
                            break;
                        }
                    }
                    _ => {
                        let act = std::mem::take(&mut self.act);
                        let which = if inst.guard.is_none() { &lanes } else { &act };
                        let r = self.step(inst, which, mem);
                        self.count += which.len() as u64;
                        self.act = act;
                        r.map_err(|fault| Stop { line: inst.line, fault })?;
                        pc += 1;
                    }
                }
            }
        }
    }

    fn addr(&self, base: Option<u32>, offset: u64, l: usize) -> u64 {
        match base {
            Some(b) => self.regs[b as usize * self.n + l].wrapping_add(offset),
            None => offset,
        }
    }

    fn step(&mut self, inst: &Inst, lanes: &[u32], mem: &mut Memory) -> Result<(), Fault> {
        let n = self.n;
        let regs = &mut self.regs;
        match &inst.kind {
            &Kind::Alu { f, d, a, b, c, ftz_in, post } => {
                let (d, a, b, c) = (d as usize * n, a as usize * n, b as usize * n, c as usize * n);
                if !ftz_in && post == Post::None {
                    for &l in lanes {
                        let l = l as usize;
                        regs[d + l] = f(regs[a + l], regs[b + l], regs[c + l]);
                    }
                } else {
                    for &l in lanes {
                        let l = l as usize;
                        let (x, y, z) = (regs[a + l], regs[b + l], regs[c + l]);
                        let v = if ftz_in { f(ftz32(x), ftz32(y), ftz32(z)) } else { f(x, y, z) };
                        regs[d + l] = match post {
                            Post::None => v,
                            Post::Sat32 => sat32(v),
                            Post::Sat64 => sat64(v),
                            Post::Ftz32 => ftz32(v),
                            Post::SatFtz32 => sat32(ftz32(v)),
                            Post::Mask => 0u64.wrapping_sub(v & 1) & 0xFFFF_FFFF,
                            Post::One32 => {
                                if v & 1 != 0 {
                                    1f32.to_bits() as u64
                                } else {
                                    0
                                }
                            }
                        };
                    }
                }
            }
            &Kind::Bfi { d, a, b, c, e, bits } => {
                for &l in lanes {
                    let l = l as usize;
                    let at = |r: u32| r as usize * n + l;
                    regs[at(d)] = int::bfi(regs[at(a)], regs[at(b)], regs[at(c)], regs[at(e)], bits);
                }
            }
            &Kind::Setp { f, d, q, a, b, combine, c, c_neg, ftz_in } => {
                for &l in lanes {
                    let l = l as usize;
                    let (x, y) = (regs[a as usize * n + l], regs[b as usize * n + l]);
                    let v = if ftz_in { f(ftz32(x), ftz32(y), 0) } else { f(x, y, 0) };
                    let other = (regs[c as usize * n + l] & 1) ^ c_neg as u64;
                    let join = |v: u64| match combine {
                        Combine::None => v,
                        Combine::And => v & other,
                        Combine::Or => v | other,
                        Combine::Xor => v ^ other,
                    };
                    regs[d as usize * n + l] = join(v);
                    if q != SCRATCH {
                        regs[q as usize * n + l] = join(v ^ 1);
                    }
                }
            }
            Kind::Ld { space, bytes, signed, d, base, offset } => {
                let bytes = *bytes as usize;
                let align = bytes * d.len();
                for &l in lanes {
                    let l = l as usize;
                    let at = self.addr(*base, *offset, l);
                    for (k, &r) in d.iter().enumerate() {
                        // A vector is aligned to its whole size: checked at its first element.
                        let a = if k == 0 { align } else { bytes };
                        let v = mem.load(*space, at.wrapping_add((k * bytes) as u64), bytes, a, l)?;
                        let v = match (*signed, bytes) {
                            (true, 1) => v as u8 as i8 as i64 as u64,
                            (true, 2) => v as u16 as i16 as i64 as u64,
                            (true, 4) => v as u32 as i32 as i64 as u64,
                            _ => v,
                        };
                        self.regs[r as usize * n + l] = v;
                    }
                }
            }
            Kind::St { space, bytes, s, base, offset } => {
                let bytes = *bytes as usize;
                let align = bytes * s.len();
                for &l in lanes {
                    let l = l as usize;
                    let at = self.addr(*base, *offset, l);
                    for (k, &r) in s.iter().enumerate() {
                        let v = self.regs[r as usize * n + l];
                        let a = if k == 0 { align } else { bytes };
                        mem.store(*space, at.wrapping_add((k * bytes) as u64), bytes, a, l, v)?;
                    }
                }
            }
            &Kind::Atom { space, bytes, f, d, base, offset, b, c } => {
                let bytes = bytes as usize;
                for &l in lanes {
                    let l = l as usize;
                    let at = self.addr(base, offset, l);
                    let old = mem.load(space, at, bytes, bytes, l)?;
                    let new = f(old, self.regs[b as usize * n + l], self.regs[c as usize * n + l]);
                    mem.store(space, at, bytes, bytes, l, new)?;
                    self.regs[d as usize * n + l] = old;
                }
            }
            Kind::Pack { d, parts, bits } => {
                let mask = if *bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
                for &l in lanes {
                    let l = l as usize;
                    let v = parts
                        .iter()
                        .enumerate()
                        .fold(0u64, |v, (i, &p)| v | (regs[p as usize * n + l] & mask) << (i as u32 * bits));
                    regs[*d as usize * n + l] = v;
                }
            }
            Kind::Unpack { s, parts, bits } => {
                let mask = if *bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
                for &l in lanes {
                    let l = l as usize;
                    let v = regs[*s as usize * n + l];
                    for (i, &p) in parts.iter().enumerate() {
                        regs[p as usize * n + l] = (v >> (i as u32 * bits)) & mask;
                    }
                }
            }
            &Kind::Shfl { mode, d, p, a, b, c } => {
                // Every lane reads before any writes (`d` may be `a`).
                let mut out = std::mem::take(&mut self.scratch);
                out.clear();
                for &l in lanes {
                    let l = l as usize;
                    let lane = (l % 32) as i32;
                    let (bv, cv) = (regs[b as usize * n + l] as i32 & 0x1f, regs[c as usize * n + l] as i32);
                    let seg = (cv >> 8) & 0x1f;
                    let max_lane = (lane & seg) | (cv & 0x1f & !seg);
                    let min_lane = lane & seg;
                    let (j, ok) = match mode {
                        Shuffle::Up => (lane - bv, lane - bv >= max_lane),
                        Shuffle::Down => (lane + bv, lane + bv <= max_lane),
                        Shuffle::Bfly => (lane ^ bv, (lane ^ bv) <= max_lane),
                        Shuffle::Idx => (min_lane | (bv & !seg), (min_lane | (bv & !seg)) <= max_lane),
                    };
                    let src = l - lane as usize + if ok { j as usize } else { lane as usize };
                    // A source past the block's last thread reads the lane's own value.
                    let src = if src < n { src } else { l };
                    out.push((regs[a as usize * n + src], ok as u64));
                }
                for (&l, &(v, ok)) in lanes.iter().zip(&out) {
                    regs[d as usize * n + l as usize] = v;
                    if p != SCRATCH {
                        regs[p as usize * n + l as usize] = ok;
                    }
                }
                self.scratch = out;
            }
            &Kind::Vote { mode, d, a, negate } => {
                // Per warp: the lanes executing this and those whose predicate holds.
                let warps = n.div_ceil(32);
                let (mut here, mut set) = (vec![0u32; warps], vec![0u32; warps]);
                for &l in lanes {
                    let l = l as usize;
                    here[l / 32] |= 1 << (l % 32);
                    let v = mode == Vote::Active || ((regs[a as usize * n + l] & 1 != 0) != negate);
                    if v {
                        set[l / 32] |= 1 << (l % 32);
                    }
                }
                for &l in lanes {
                    let w = l as usize / 32;
                    regs[d as usize * n + l as usize] = match mode {
                        Vote::All => (set[w] == here[w]) as u64,
                        Vote::Any => (set[w] != 0) as u64,
                        Vote::Uni => (set[w] == here[w] || set[w] == 0) as u64,
                        Vote::Ballot | Vote::Active => set[w] as u64,
                    };
                }
            }
            Kind::Nop => {}
            Kind::Bra { .. } | Kind::Bar | Kind::Exit => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::join;

    #[test]
    fn joined_lanes_stay_sorted() {
        for (a, b) in
            [(vec![], vec![1, 2]), (vec![1, 2], vec![3]), (vec![5, 6], vec![1, 2]), (vec![1, 4, 9], vec![2, 3, 10])]
        {
            let mut into = a.clone();
            join(&mut into, b.clone());
            let mut want = [a, b].concat();
            want.sort_unstable();
            assert_eq!(into, want);
        }
    }
}
