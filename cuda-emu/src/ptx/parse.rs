//! A PTX module's structure: its `.entry` kernels (name, parameters with
//! their offsets in the parameter buffer, body statements) and its
//! module-level `.shared`/`.global`/`.const` variables. Device functions
//! (`.func`) are skipped: a `call` to one fails at decode. Must never
//! interpret an instruction; bodies are kept as text with their lines.

use super::error::Error;
use super::source::{pieces, Piece};

/// One state space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    Local,
    Param,
    Const,
    /// Generic addressing (no state space given).
    Generic,
}

/// A variable declared with `.shared`, `.local`, `.global` or `.const`.
#[derive(Debug, Clone)]
pub struct Var {
    pub name: String,
    pub space: Space,
    pub size: usize,
    pub align: usize,
    /// `.extern .shared x[]`: the launch's dynamic shared memory.
    pub dynamic: bool,
    /// The initializer's bytes (`= {1, 2}`), zeros when none.
    pub init: Vec<u8>,
}

/// One kernel parameter and its place in the parameter buffer.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub offset: usize,
    pub size: usize,
}

/// One piece of a kernel body.
#[derive(Debug, Clone)]
pub enum Item {
    /// A directive (`.reg`, `.shared`, ...) or an instruction.
    Stmt(String),
    Label(String),
    Open,
    Close,
}

#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    pub param_bytes: usize,
    pub body: Vec<(Item, u32)>,
}

#[derive(Debug, Clone, Default)]
pub struct ModuleText {
    pub kernels: Vec<Kernel>,
    pub vars: Vec<Var>,
}

/// The structure of `ptx`.
pub fn module(ptx: &str) -> Result<ModuleText, Error> {
    let ps = pieces(ptx);
    let mut m = ModuleText::default();
    let mut i = 0;
    while i < ps.len() {
        let (piece, line) = (&ps[i], ps[i].1);
        i += 1;
        match &piece.0 {
            Piece::Stmt(s) => {
                let words: Vec<&str> = s.split_whitespace().collect();
                let is_entry = words.contains(&".entry");
                let is_func = words.contains(&".func");
                if is_entry || is_func {
                    // The body (or none: a `.func` prototype ends with `;`).
                    let has_body = matches!(ps.get(i), Some((Piece::Open, _)));
                    let mut body = Vec::new();
                    if has_body {
                        let mut depth = 0;
                        loop {
                            let Some((p, l)) = ps.get(i) else {
                                return Err(Error::at(line, "the body of this function never ends (unbalanced `{`)"));
                            };
                            i += 1;
                            match p {
                                Piece::Open => depth += 1,
                                Piece::Close => depth -= 1,
                                _ => {}
                            }
                            if depth == 0 {
                                break;
                            }
                            if !(depth == 1 && matches!(p, Piece::Open)) {
                                body.push((to_item(p), *l));
                            }
                        }
                    }
                    if is_entry {
                        m.kernels.push(kernel_header(s, line, body)?);
                    }
                } else if let Some(v) = variable(s, line)? {
                    m.vars.push(v);
                }
            }
            Piece::Label(l) => return Err(Error::at(line, format!("label `{l}` outside any function"))),
            Piece::Open | Piece::Close => return Err(Error::at(line, "a `{` or `}` outside any function")),
        }
    }
    Ok(m)
}

fn to_item(p: &Piece) -> Item {
    match p {
        Piece::Stmt(s) => Item::Stmt(s.clone()),
        Piece::Label(l) => Item::Label(l.clone()),
        Piece::Open => Item::Open,
        Piece::Close => Item::Close,
    }
}

fn kernel_header(s: &str, line: u32, body: Vec<(Item, u32)>) -> Result<Kernel, Error> {
    let open = s.find('(');
    let head = &s[..open.unwrap_or(s.len())];
    let name = head.split_whitespace().last().unwrap_or("").to_string();
    let mut params = Vec::new();
    let mut offset = 0usize;
    if let Some(open) = open {
        let close = s.rfind(')').ok_or_else(|| Error::at(line, "unterminated parameter list"))?;
        for p in s[open + 1..close].split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (pname, size, align) = decl(p, line)?;
            offset = offset.div_ceil(align) * align;
            params.push(Param { name: pname, offset, size });
            offset += size;
        }
    }
    Ok(Kernel { name, params, param_bytes: offset, body })
}

/// Bytes of one element of PTX type `ty` (without the dot).
pub fn type_bytes(ty: &str) -> Option<usize> {
    Some(match ty {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        _ => return None,
    })
}

/// `.param .align 8 .b8 name[24]`, `.shared .align 4 .b8 x[1024]`, `.global .f32 y = 1.0`:
/// name, bytes and alignment.
fn decl(text: &str, line: u32) -> Result<(String, usize, usize), Error> {
    let text = text.split('=').next().unwrap_or("");
    let (mut ty, mut align, mut name) = (None, None, None);
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            ".align" => align = words.next().and_then(|n| n.parse::<usize>().ok()),
            w if w.starts_with('.') => {
                if let Some(b) = type_bytes(&w[1..]) {
                    ty = Some(b);
                }
            }
            w => name = Some(w.to_string()),
        }
    }
    let elem = ty.ok_or_else(|| Error::at(line, format!("no type in `{text}`")))?;
    let name = name.ok_or_else(|| Error::at(line, format!("no name in `{text}`")))?;
    let (base, count) = match name.split_once('[') {
        Some((b, n)) => {
            let n = n.trim_end_matches(']').trim();
            let count = if n.is_empty() {
                0
            } else {
                n.parse::<usize>().map_err(|_| Error::at(line, format!("bad array size in `{name}`")))?
            };
            (b.to_string(), count)
        }
        None => (name.clone(), 1),
    };
    Ok((base, elem * count, align.unwrap_or(elem).max(1)))
}

/// A `.shared`/`.local`/`.global`/`.const` variable declaration, if `s` is one.
pub fn variable(s: &str, line: u32) -> Result<Option<Var>, Error> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let space = if words.contains(&".shared") {
        Space::Shared
    } else if words.contains(&".local") {
        Space::Local
    } else if words.contains(&".global") {
        Space::Global
    } else if words.contains(&".const") {
        Space::Const
    } else {
        return Ok(None);
    };
    let (name, size, align) = decl(s, line)?;
    let dynamic = words.contains(&".extern");
    let mut init = vec![0u8; size];
    if let Some((lhs, rhs)) = s.split_once('=') {
        let elem = lhs.split_whitespace().rev().find_map(|w| w.strip_prefix('.').and_then(type_bytes)).unwrap_or(1);
        let float = lhs.contains(".f32") || lhs.contains(".f64");
        let values = rhs.trim().trim_start_matches('{').trim_end_matches('}');
        for (k, v) in values.split(',').map(str::trim).filter(|v| !v.is_empty()).enumerate() {
            let bits = super::operand::literal(v, float && elem == 4, float && elem == 8)
                .ok_or_else(|| Error::at(line, format!("bad initializer value `{v}`")))?;
            let at = k * elem;
            if at + elem > init.len() {
                return Err(Error::at(line, "more initializer values than the variable holds"));
            }
            init[at..at + elem].copy_from_slice(&bits.to_le_bytes()[..elem]);
        }
    }
    Ok(Some(Var { name, space, size, align, dynamic, init }))
}
