//! Kernel bodies to `Code`: registers declared with `.reg` (in nested
//! scopes too) numbered into the register file, immediates and special
//! registers turned into pre-filled registers, `.shared`/`.local`
//! variables laid out, every instruction checked and resolved to the
//! function computing it, labels to instruction indexes. Anything it does
//! not know is an error naming the instruction and its line; must never
//! accept an instruction it cannot execute.

use std::collections::HashMap;

use super::compare;
use super::convert;
use super::error::Error;
use super::float;
use super::inst::{Code, Combine, Fill, Fn3, Inst, Kind, Post, Shuffle, Vote, SCRATCH};
use super::int;
use super::memory::{DATA_WINDOW, LOCAL_WINDOW, SHARED_WINDOW};
use super::operand::{imm_bits, syntax, Opnd, Syntax};
use super::parse::{type_bytes, variable, Item, Kernel, Space, Var};

struct Decoder {
    scopes: Vec<HashMap<String, u32>>,
    regs: u32,
    fills: Vec<(u32, Fill)>,
    consts: HashMap<u64, u32>,
    specials: HashMap<String, u32>,
    vars: HashMap<String, (Space, u64)>,
    shared_bytes: usize,
    shared_init: Vec<(usize, Vec<u8>)>,
    local_bytes: usize,
    labels: HashMap<String, u32>,
    /// (instruction, label) of each branch, resolved at the end.
    branches: Vec<(usize, String, u32)>,
}

fn identity(a: u64, _: u64, _: u64) -> u64 {
    a
}
fn to_shared(a: u64, _: u64, _: u64) -> u64 {
    a.wrapping_sub(SHARED_WINDOW)
}
fn from_shared(a: u64, _: u64, _: u64) -> u64 {
    a.wrapping_add(SHARED_WINDOW)
}
fn to_local(a: u64, _: u64, _: u64) -> u64 {
    a.wrapping_sub(LOCAL_WINDOW)
}
fn from_local(a: u64, _: u64, _: u64) -> u64 {
    a.wrapping_add(LOCAL_WINDOW)
}

const TYPES: [&str; 17] = [
    "pred", "b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "f16", "f32", "f64",
    "bf16",
];

fn is_type(m: &str) -> bool {
    TYPES.contains(&m)
}

/// The module's `.global`/`.const` variables laid out in one buffer: each
/// one's name, space and offset, and the buffer's initial bytes.
pub fn module_data(vars: &[Var]) -> (Vec<(String, Space, usize)>, Vec<u8>) {
    let mut data = Vec::new();
    let mut placed = Vec::new();
    for v in vars.iter().filter(|v| v.space == Space::Global || v.space == Space::Const) {
        let at = data.len().div_ceil(v.align) * v.align;
        data.resize(at, 0);
        data.extend_from_slice(&v.init);
        placed.push((v.name.clone(), v.space, at));
    }
    (placed, data)
}

/// Decodes kernel `k` of a module whose module-level variables are `vars`.
pub fn kernel(k: &Kernel, vars: &[Var]) -> Result<Code, Error> {
    let mut d = Decoder {
        scopes: vec![HashMap::new()],
        regs: 1,
        fills: Vec::new(),
        consts: HashMap::new(),
        specials: HashMap::new(),
        vars: HashMap::new(),
        shared_bytes: 0,
        shared_init: Vec::new(),
        local_bytes: 0,
        labels: HashMap::new(),
        branches: Vec::new(),
    };
    for p in &k.params {
        d.vars.insert(p.name.clone(), (Space::Param, p.offset as u64));
    }
    for (name, space, at) in module_data(vars).0 {
        d.vars.insert(name, (space, DATA_WINDOW + at as u64));
    }
    let mut dynamic = Vec::new();
    for v in vars {
        if v.dynamic {
            dynamic.push(v.name.clone());
        } else {
            d.place(v);
        }
    }
    // Variables first, wherever declared: an instruction may name one declared after it.
    for (item, line) in &k.body {
        if let Item::Stmt(s) = item {
            if s.starts_with('.') && !s.starts_with(".reg") {
                d.variable(s, *line, &mut dynamic)?;
            }
        }
    }
    // Dynamic shared memory starts after the static variables.
    let dyn_at = d.shared_bytes.div_ceil(16) * 16;
    d.shared_bytes = dyn_at;
    for name in dynamic {
        d.vars.insert(name, (Space::Shared, dyn_at as u64));
    }
    let mut insts: Vec<Inst> = Vec::new();
    for (item, line) in &k.body {
        match item {
            Item::Open => d.scopes.push(HashMap::new()),
            Item::Close => {
                d.scopes.pop();
            }
            Item::Label(l) => {
                d.labels.insert(l.clone(), insts.len() as u32);
            }
            Item::Stmt(s) if s.starts_with(".reg") => d.registers(s, *line)?,
            // Variables are placed above; performance hints (.maxntid, .pragma, .loc, ...) change nothing here.
            Item::Stmt(s) if s.starts_with('.') => {}
            Item::Stmt(s) => {
                let syn = syntax(s).map_err(|e| Error::at(*line, format!("`{s}`: {e}")))?;
                let guard = match &syn.guard {
                    Some((p, neg)) => Some((d.reg(p).map_err(|e| Error::at(*line, format!("`{s}`: {e}")))?, *neg)),
                    None => None,
                };
                let at = insts.len();
                let kind = d.inst(&syn, at, *line).map_err(|e| Error::at(*line, format!("`{s}`: {e}")))?;
                insts.push(Inst { kind, guard, line: *line });
            }
        }
    }
    for (at, label, line) in std::mem::take(&mut d.branches) {
        let target =
            *d.labels.get(&label).ok_or_else(|| Error::at(line, format!("branch to unknown label `{label}`")))?;
        insts[at].kind = Kind::Bra { target };
    }
    insts.push(Inst { kind: Kind::Exit, guard: None, line: 0 });
    Ok(Code {
        insts,
        regs: d.regs,
        fills: d.fills,
        shared_bytes: d.shared_bytes,
        local_bytes: d.local_bytes,
        shared_init: d.shared_init,
        param_bytes: k.param_bytes,
        params: k.params.iter().map(|p| (p.offset, p.size)).collect(),
    })
}

impl Decoder {
    fn new_reg(&mut self) -> u32 {
        self.regs += 1;
        self.regs - 1
    }

    fn place(&mut self, v: &Var) {
        match v.space {
            Space::Shared => {
                let at = self.shared_bytes.div_ceil(v.align) * v.align;
                self.shared_bytes = at + v.size;
                if v.init.iter().any(|&b| b != 0) {
                    self.shared_init.push((at, v.init.clone()));
                }
                self.vars.insert(v.name.clone(), (Space::Shared, at as u64));
            }
            Space::Local => {
                let at = self.local_bytes.div_ceil(v.align) * v.align;
                self.local_bytes = at + v.size;
                self.vars.insert(v.name.clone(), (Space::Local, at as u64));
            }
            // Module globals and constants live in the module's data (see `module_data`).
            _ => {}
        }
    }

    /// `.reg .b32 %r<48>;` or `.reg .f32 %f1, %f2;`
    fn registers(&mut self, s: &str, line: u32) -> Result<(), Error> {
        let rest = s.split_once(char::is_whitespace).map_or("", |x| x.1).trim();
        let names = rest.split_once(char::is_whitespace).map_or("", |x| x.1);
        for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let list: Vec<String> = match n.split_once('<') {
                Some((base, count)) => {
                    let count: u32 = count
                        .trim_end_matches('>')
                        .trim()
                        .parse()
                        .map_err(|_| Error::at(line, format!("bad register count in `{n}`")))?;
                    (0..count).map(|i| format!("{base}{i}")).collect()
                }
                None => vec![n.to_string()],
            };
            for name in list {
                let r = self.new_reg();
                if let Some(scope) = self.scopes.last_mut() {
                    scope.insert(name, r);
                }
            }
        }
        Ok(())
    }

    /// A `.shared`/`.local` declaration in a kernel body, placed.
    fn variable(&mut self, s: &str, line: u32, dynamic: &mut Vec<String>) -> Result<(), Error> {
        if let Some(v) = variable(s, line)? {
            if v.space == Space::Global || v.space == Space::Const {
                return Err(Error::at(line, "function-level .global/.const variables are not supported"));
            }
            if v.dynamic {
                dynamic.push(v.name.clone());
            } else {
                self.place(&v);
            }
        }
        Ok(())
    }

    fn reg(&mut self, name: &str) -> Result<u32, String> {
        for s in self.scopes.iter().rev() {
            if let Some(&r) = s.get(name) {
                return Ok(r);
            }
        }
        if let Some(&r) = self.specials.get(name) {
            return Ok(r);
        }
        let dim = |s: &str| match s {
            "x" => Some(0),
            "y" => Some(1),
            "z" => Some(2),
            _ => None,
        };
        let fill = match name.split_once('.') {
            Some(("%tid", c)) => dim(c).map(Fill::Tid),
            Some(("%ntid", c)) => dim(c).map(Fill::Ntid),
            Some(("%ctaid", c)) => dim(c).map(Fill::Ctaid),
            Some(("%nctaid", c)) => dim(c).map(Fill::Nctaid),
            None if name == "%laneid" => Some(Fill::LaneId),
            None if name == "%warpid" => Some(Fill::WarpId),
            None if name == "%nwarpid" => Some(Fill::Const(32)),
            None if name == "%warpsize" || name == "WARP_SZ" => Some(Fill::Const(32)),
            _ => None,
        }
        .ok_or_else(|| format!("unknown register `{name}`"))?;
        let r = self.new_reg();
        self.fills.push((r, fill));
        self.specials.insert(name.to_string(), r);
        Ok(r)
    }

    fn constant(&mut self, bits: u64) -> u32 {
        if let Some(&r) = self.consts.get(&bits) {
            return r;
        }
        let r = self.new_reg();
        self.fills.push((r, Fill::Const(bits)));
        self.consts.insert(bits, r);
        r
    }

    fn symbol(&self, name: &str) -> Result<(Space, u64), String> {
        self.vars.get(name).copied().ok_or_else(|| {
            format!("unknown symbol `{name}` (device functions and function-level .global variables are not supported)")
        })
    }

    /// A source operand read as type `ty`.
    fn src(&mut self, o: &Opnd, ty: &str) -> Result<u32, String> {
        match o {
            Opnd::Reg(r) => self.reg(r),
            Opnd::Imm(i) => Ok(self.constant(imm_bits(*i, ty == "f32", ty == "f64"))),
            Opnd::Sym(s) => {
                // A variable's name as a value is its address in its state space.
                let (_, at) = self.symbol(s)?;
                Ok(self.constant(at))
            }
            other => Err(format!("operand {other:?} cannot be a source here")),
        }
    }

    fn dst(&mut self, o: &Opnd) -> Result<u32, String> {
        match o {
            Opnd::Reg(r) => self.reg(r),
            Opnd::Sink => Ok(SCRATCH),
            other => Err(format!("operand {other:?} cannot be a destination")),
        }
    }

    fn operand<'a>(&self, s: &'a Syntax, i: usize) -> Result<&'a Opnd, String> {
        s.operands.get(i).ok_or_else(|| format!("operand {} is missing", i + 1))
    }

    /// Base register and offset of an address operand, and the space a symbol implies.
    fn address(&mut self, o: &Opnd) -> Result<(Option<u32>, u64, Option<Space>), String> {
        match o {
            Opnd::Addr { base: None, offset } => Ok((None, *offset as u64, None)),
            Opnd::Addr { base: Some(b), offset } if b.starts_with('%') => {
                Ok((Some(self.reg(b)?), *offset as u64, None))
            }
            Opnd::Addr { base: Some(b), offset } => {
                let (space, at) = self.symbol(b)?;
                Ok((None, at.wrapping_add(*offset as u64), Some(space)))
            }
            other => Err(format!("operand {other:?} is not an address")),
        }
    }

    fn regs_of(&mut self, o: &Opnd, ty: &str, dst: bool) -> Result<Vec<u32>, String> {
        match o {
            Opnd::Vector(v) => {
                v.iter().map(|x| if dst { self.dst(x) } else { self.src(x, ty) }).collect::<Result<Vec<_>, _>>()
            }
            x if dst => Ok(vec![self.dst(x)?]),
            x => Ok(vec![self.src(x, ty)?]),
        }
    }

    fn inst(&mut self, s: &Syntax, at: usize, line: u32) -> Result<Kind, String> {
        let mods: Vec<&str> = s.mods.iter().map(String::as_str).collect();
        let has = |m: &str| mods.contains(&m);
        let types: Vec<&str> = mods.iter().copied().filter(|m| is_type(m)).collect();
        let ty = types.last().copied().unwrap_or("");
        let space = if has("param") {
            Space::Param
        } else if has("global") {
            Space::Global
        } else if has("shared") {
            Space::Shared
        } else if has("local") {
            Space::Local
        } else if has("const") {
            Space::Const
        } else {
            Space::Generic
        };
        let op = s.op.as_str();
        let unsupported = || format!("the instruction `{op}` with modifiers {mods:?} is not supported");
        // Modifiers that change results in ways not implemented: refused rather than ignored.
        if let Some(m) = mods.iter().find(|m| ["NaN", "xorsign", "abs", "relu", "cc", "oob", "satfinite"].contains(m)) {
            return Err(format!("the modifier .{m} is not supported"));
        }
        Ok(match op {
            "mov" => {
                let (d, a) = (self.operand(s, 0)?, self.operand(s, 1)?);
                let bits = type_bytes(ty).unwrap_or(8) as u32 * 8;
                match (d, a) {
                    (Opnd::Vector(parts), _) => {
                        let parts = parts.iter().map(|p| self.dst(p)).collect::<Result<Vec<_>, _>>()?;
                        let s = self.src(a, ty)?;
                        Kind::Unpack { s, bits: bits / parts.len().max(1) as u32, parts }
                    }
                    (_, Opnd::Vector(parts)) => {
                        let parts = parts.iter().map(|p| self.src(p, "")).collect::<Result<Vec<_>, _>>()?;
                        Kind::Pack { d: self.dst(d)?, bits: bits / parts.len().max(1) as u32, parts }
                    }
                    _ => self.alu(identity, d, &[a], ty, Post::None, false)?,
                }
            }
            "add" | "sub" | "mul" | "mad" | "fma" | "div" | "rem" | "abs" | "neg" | "min" | "max" | "and" | "or"
            | "xor" | "not" | "cnot" | "shl" | "shr" | "popc" | "clz" | "brev" | "bfe" | "sad" | "sqrt" | "rsqrt"
            | "rcp" | "ex2" | "lg2" | "sin" | "cos" | "tanh" | "copysign" => {
                let float = ty == "f32" || ty == "f64";
                let f = if float { float::pick(op, ty, &mods) } else { int::pick(op, ty, &mods) };
                let f = f.ok_or_else(unsupported)?;
                let ftz = ty == "f32" && has("ftz");
                let post = match (ty, has("sat"), ftz) {
                    ("f32", true, true) => Post::SatFtz32,
                    ("f32", true, false) => Post::Sat32,
                    ("f32", false, true) => Post::Ftz32,
                    ("f64", true, _) => Post::Sat64,
                    _ => Post::None,
                };
                let srcs: Vec<&Opnd> = s.operands.iter().skip(1).collect();
                self.alu(f, self.operand(s, 0)?, &srcs, ty, post, ftz)?
            }
            "bfi" => {
                let bits = type_bytes(ty).ok_or_else(unsupported)? as u32 * 8;
                let d = self.dst(self.operand(s, 0)?)?;
                let mut r = [0u32; 4];
                for (i, x) in r.iter_mut().enumerate() {
                    *x = self.src(self.operand(s, i + 1)?, ty)?;
                }
                Kind::Bfi { d, a: r[0], b: r[1], c: r[2], e: r[3], bits }
            }
            "prmt" if mods == ["b32"] => {
                let srcs: Vec<&Opnd> = s.operands.iter().skip(1).collect();
                self.alu(int::prmt, self.operand(s, 0)?, &srcs, ty, Post::None, false)?
            }
            "setp" => {
                let cmp = mods.first().copied().unwrap_or("");
                let f = compare::pick(cmp, ty).ok_or_else(unsupported)?;
                let combine = if has("and") {
                    Combine::And
                } else if has("or") {
                    Combine::Or
                } else if has("xor") {
                    Combine::Xor
                } else {
                    Combine::None
                };
                let (d, q) = match self.operand(s, 0)? {
                    Opnd::Reg(r) if r.contains('|') => {
                        let (p, q) = r.split_once('|').unwrap_or((r, r));
                        (self.reg(p.trim())?, self.reg(q.trim())?)
                    }
                    o => (self.dst(o)?, SCRATCH),
                };
                let (a, b) = (self.src(self.operand(s, 1)?, ty)?, self.src(self.operand(s, 2)?, ty)?);
                let (c, c_neg) = match (combine, s.operands.get(3)) {
                    (Combine::None, _) => (SCRATCH, false),
                    (_, Some(Opnd::NotReg(p))) => (self.reg(p)?, true),
                    (_, Some(o)) => (self.src(o, "pred")?, false),
                    (_, None) => return Err("setp with .and/.or/.xor needs a fourth operand".into()),
                };
                Kind::Setp { f, d, q, a, b, combine, c, c_neg, ftz_in: ty == "f32" && has("ftz") }
            }
            "set" if types.len() == 2 && !has("and") && !has("or") && !has("xor") => {
                let cmp = mods.first().copied().unwrap_or("");
                let f = compare::pick(cmp, types[1]).ok_or_else(unsupported)?;
                let post = if types[0] == "f32" { Post::One32 } else { Post::Mask };
                let srcs: Vec<&Opnd> = s.operands.iter().skip(1).take(2).collect();
                self.alu(f, self.operand(s, 0)?, &srcs, types[1], post, false)?
            }
            "selp" => {
                let d = self.operand(s, 0)?;
                let (a, b) = (self.src(self.operand(s, 1)?, ty)?, self.src(self.operand(s, 2)?, ty)?);
                let c = self.src(self.operand(s, 3)?, "pred")?;
                Kind::Alu { f: compare::selp, d: self.dst(d)?, a, b, c, ftz_in: false, post: Post::None }
            }
            "slct" if types.len() == 2 => {
                let f: Fn3 = if types[1] == "f32" { compare::slct_f32 } else { compare::slct_s32 };
                let d = self.operand(s, 0)?;
                let (a, b) = (self.src(self.operand(s, 1)?, types[0])?, self.src(self.operand(s, 2)?, types[0])?);
                let c = self.src(self.operand(s, 3)?, types[1])?;
                Kind::Alu { f, d: self.dst(d)?, a, b, c, ftz_in: false, post: Post::None }
            }
            "cvt" if types.len() == 2 => {
                let (dt, st) = (convert::code(types[0]), convert::code(types[1]));
                let (Some(dt), Some(st)) = (dt, st) else { return Err(unsupported()) };
                let integral = mods.iter().any(|m| ["rni", "rzi", "rmi", "rpi"].contains(m));
                let spec = convert::spec(dt, st, float::mode(&mods), has("sat"), has("ftz"), integral);
                let d = self.dst(self.operand(s, 0)?)?;
                let a = self.src(self.operand(s, 1)?, types[1])?;
                // The common conversions get their own function; the rest decode `spec` per value.
                let f = convert::fast(spec).unwrap_or(convert::cvt);
                Kind::Alu { f, d, a, b: self.constant(spec), c: SCRATCH, ftz_in: false, post: Post::None }
            }
            "testp" if ty == "f32" || ty == "f64" => {
                let class = mods.first().copied().unwrap_or("");
                let f = compare::testp(class, ty).ok_or_else(unsupported)?;
                self.alu(f, self.operand(s, 0)?, &[self.operand(s, 1)?], ty, Post::None, false)?
            }
            "cvta" => {
                let f: Fn3 = match (has("to"), space) {
                    (_, Space::Global) => identity,
                    (true, Space::Shared) => to_shared,
                    (false, Space::Shared) => from_shared,
                    (true, Space::Local) => to_local,
                    (false, Space::Local) => from_local,
                    _ => return Err(unsupported()),
                };
                self.alu(f, self.operand(s, 0)?, &[self.operand(s, 1)?], ty, Post::None, false)?
            }
            "ld" | "ldu" => {
                let bytes = type_bytes(ty).ok_or_else(unsupported)? as u32;
                let d = self.regs_of(self.operand(s, 0)?, ty, true)?;
                let (base, offset, implied) = self.address(self.operand(s, 1)?)?;
                let space = if space == Space::Generic { implied.unwrap_or(space) } else { space };
                let signed = ty.starts_with('s');
                Kind::Ld { space, bytes, signed, d, base, offset }
            }
            "st" => {
                let bytes = type_bytes(ty).ok_or_else(unsupported)? as u32;
                let (base, offset, implied) = self.address(self.operand(s, 0)?)?;
                let space = if space == Space::Generic { implied.unwrap_or(space) } else { space };
                let v = self.regs_of(self.operand(s, 1)?, ty, false)?;
                Kind::St { space, bytes, s: v, base, offset }
            }
            "atom" | "red" => {
                let ops = ["add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec"];
                let aop = mods.iter().copied().find(|m| ops.contains(m)).ok_or_else(unsupported)?;
                let f = if ty.starts_with('f') { float::atom(aop, ty) } else { int::atom(aop, ty) };
                let f = f.ok_or_else(unsupported)?;
                let bytes = type_bytes(ty).ok_or_else(unsupported)? as u32;
                let first = if op == "atom" { 1 } else { 0 };
                let d = if op == "atom" { self.dst(self.operand(s, 0)?)? } else { SCRATCH };
                let (base, offset, implied) = self.address(self.operand(s, first)?)?;
                let space = if space == Space::Generic { implied.unwrap_or(space) } else { space };
                let b = self.src(self.operand(s, first + 1)?, ty)?;
                let c = match s.operands.get(first + 2) {
                    Some(o) => self.src(o, ty)?,
                    None => SCRATCH,
                };
                Kind::Atom { space, bytes, f, d, base, offset, b, c }
            }
            "bra" => {
                let Opnd::Sym(label) = self.operand(s, 0)? else { return Err("bra needs a label".into()) };
                self.branches.push((at, label.clone(), line));
                Kind::Bra { target: 0 }
            }
            "ret" | "exit" => Kind::Exit,
            "shfl" if has("sync") && ty == "b32" => {
                let mode = if has("up") {
                    Shuffle::Up
                } else if has("down") {
                    Shuffle::Down
                } else if has("bfly") {
                    Shuffle::Bfly
                } else if has("idx") {
                    Shuffle::Idx
                } else {
                    return Err(unsupported());
                };
                let (d, p) = match self.operand(s, 0)? {
                    Opnd::Reg(r) if r.contains('|') => {
                        let (d, p) = r.split_once('|').unwrap_or((r, r));
                        (self.reg(d.trim())?, self.reg(p.trim())?)
                    }
                    o => (self.dst(o)?, SCRATCH),
                };
                let a = self.src(self.operand(s, 1)?, ty)?;
                let b = self.src(self.operand(s, 2)?, ty)?;
                let c = self.src(self.operand(s, 3)?, ty)?;
                Kind::Shfl { mode, d, p, a, b, c }
            }
            "vote" => {
                let mode = if has("all") {
                    Vote::All
                } else if has("any") {
                    Vote::Any
                } else if has("uni") {
                    Vote::Uni
                } else if has("ballot") {
                    Vote::Ballot
                } else {
                    return Err(unsupported());
                };
                let d = self.dst(self.operand(s, 0)?)?;
                let (a, negate) = match self.operand(s, 1)? {
                    Opnd::NotReg(p) => (self.reg(p)?, true),
                    o => (self.src(o, "pred")?, false),
                };
                Kind::Vote { mode, d, a, negate }
            }
            "activemask" => {
                Kind::Vote { mode: Vote::Active, d: self.dst(self.operand(s, 0)?)?, a: SCRATCH, negate: false }
            }
            "bar" | "barrier" if has("warp") => Kind::Nop,
            "bar" | "barrier" if mods.is_empty() || has("sync") || (op == "barrier" && has("aligned")) => Kind::Bar,
            "membar" | "fence" => Kind::Nop,
            _ => return Err(unsupported()),
        })
    }

    fn alu(&mut self, f: Fn3, d: &Opnd, srcs: &[&Opnd], ty: &str, post: Post, ftz_in: bool) -> Result<Kind, String> {
        let d = self.dst(d)?;
        let mut r = [SCRATCH; 3];
        if srcs.len() > 3 {
            return Err("too many operands".into());
        }
        for (i, o) in srcs.iter().enumerate() {
            r[i] = self.src(o, ty)?;
        }
        Ok(Kind::Alu { f, d, a: r[0], b: r[1], c: r[2], ftz_in, post })
    }
}
