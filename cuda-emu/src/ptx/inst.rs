//! The decoded form of a kernel: instructions whose operands are indexes
//! into the per-thread register file (immediates and special registers
//! are pre-filled registers), with types resolved to the functions that
//! compute them and labels resolved to instruction indexes. Must never
//! hold PTX text except in error messages.

use super::parse::Space;

/// One operation on one thread's values: `d = f(a, b, c)`.
pub type Fn3 = fn(u64, u64, u64) -> u64;

/// Register 0: read where an operand is unused, written by `_`.
pub const SCRATCH: u32 = 0;

/// What happens to an ALU result before it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Post {
    None,
    /// `.sat` of an f32: clamped to [0, 1], NaN to 0.
    Sat32,
    Sat64,
    /// `.ftz` of an f32 result: subnormals to zero.
    Ftz32,
    SatFtz32,
    /// `set` with an integer destination: true is all ones.
    Mask,
    /// `set` with an f32 destination: true is 1.0.
    One32,
}

/// How `setp`'s second predicate combines (`.and`, `.or`, `.xor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    None,
    And,
    Or,
    Xor,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Alu {
        f: Fn3,
        d: u32,
        a: u32,
        b: u32,
        c: u32,
        ftz_in: bool,
        post: Post,
    },
    /// `bfi`: four sources.
    Bfi {
        d: u32,
        a: u32,
        b: u32,
        c: u32,
        e: u32,
        bits: u32,
    },
    Setp {
        f: Fn3,
        d: u32,
        q: u32,
        a: u32,
        b: u32,
        combine: Combine,
        c: u32,
        c_neg: bool,
        ftz_in: bool,
    },
    Ld {
        space: Space,
        bytes: u32,
        signed: bool,
        d: Vec<u32>,
        base: Option<u32>,
        offset: u64,
    },
    St {
        space: Space,
        bytes: u32,
        s: Vec<u32>,
        base: Option<u32>,
        offset: u64,
    },
    /// `atom`/`red`: `d = old; mem = f(old, b, c)`.
    Atom {
        space: Space,
        bytes: u32,
        f: Fn3,
        d: u32,
        base: Option<u32>,
        offset: u64,
        b: u32,
        c: u32,
    },
    /// `mov.b64 %rd, {%r1, %r2}`: parts from the least significant.
    Pack {
        d: u32,
        parts: Vec<u32>,
        bits: u32,
    },
    /// `mov.b64 {%r1, %r2}, %rd`
    Unpack {
        s: u32,
        parts: Vec<u32>,
        bits: u32,
    },
    Bra {
        target: u32,
    },
    /// `shfl.sync`: `d = a` of another lane of the warp, `p` whether it was in range.
    Shfl {
        mode: Shuffle,
        d: u32,
        p: u32,
        a: u32,
        b: u32,
        c: u32,
    },
    /// `vote.sync` and `activemask`: over the warp's lanes executing it.
    Vote {
        mode: Vote,
        d: u32,
        a: u32,
        negate: bool,
    },
    Bar,
    Exit,
    Nop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shuffle {
    Up,
    Down,
    Bfly,
    Idx,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    All,
    Any,
    Uni,
    Ballot,
    /// `activemask`: the ballot of a true predicate.
    Active,
}

#[derive(Debug, Clone)]
pub struct Inst {
    pub kind: Kind,
    /// The guard predicate register and whether it is negated.
    pub guard: Option<(u32, bool)>,
    /// The PTX line, for messages.
    pub line: u32,
}

/// What a register is filled with before the kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    Const(u64),
    Tid(usize),
    Ntid(usize),
    Ctaid(usize),
    Nctaid(usize),
    LaneId,
    WarpId,
}

/// A decoded kernel.
#[derive(Debug, Clone)]
pub struct Code {
    pub insts: Vec<Inst>,
    pub regs: u32,
    pub fills: Vec<(u32, Fill)>,
    /// Static shared bytes, and where dynamic shared memory starts.
    pub shared_bytes: usize,
    /// Local bytes per thread.
    pub local_bytes: usize,
    /// Each shared variable's initial bytes at its offset (zeros unless initialised).
    pub shared_init: Vec<(usize, Vec<u8>)>,
    pub param_bytes: usize,
    /// Each parameter's offset and size in the parameter buffer.
    pub params: Vec<(usize, usize)>,
}
