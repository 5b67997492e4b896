//! Loaded modules and their functions: the PTX text is kept, its `.entry`
//! kernels and their parameter lists (sizes and alignments) are parsed at
//! load, as the JIT would reject a malformed module then. Functions are
//! handles onto one entry of a live module. Must never execute anything:
//! running kernels is `launch`'s job.

use std::sync::{Arc, Mutex};

use crate::handles::{Kind, Registry};
use crate::interpret::Interpreter;

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The PTX type, e.g. `u64`, `f32`, `b8`.
    pub ty: String,
    pub size: usize,
    pub align: usize,
}

/// One `.entry` of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub params: Vec<Param>,
}

pub struct Module {
    pub context: u64,
    pub entries: Vec<Entry>,
    pub interpreter: Interpreter,
    /// The function handle of each entry, once looked up.
    pub functions: Mutex<Vec<Option<u64>>>,
}

pub struct Function {
    pub module: Arc<Module>,
    pub module_handle: u64,
    pub entry: usize,
}

impl Function {
    pub fn entry(&self) -> &Entry {
        &self.module.entries[self.entry]
    }
}

pub static MODULES: Registry<Arc<Module>> = Registry::new(Kind::Module);
pub static FUNCTIONS: Registry<Arc<Function>> = Registry::new(Kind::Function);

/// Unregisters every module (and function) of the context `handle`.
pub fn destroy_context_modules(handle: u64) {
    FUNCTIONS.remove_where(|f| f.module.context == handle);
    MODULES.remove_where(|m| m.context == handle);
}

/// Removes `//` and `/* */` comments.
fn strip_comments(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut rest = ptx;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The entries of a PTX module, or what is wrong with it (the JIT log).
pub fn parse(ptx: &str) -> Result<Vec<Entry>, String> {
    let text = strip_comments(ptx);
    let mut tokens = text.split_whitespace();
    if tokens.next() != Some(".version") {
        return Err("ptxas fatal: PTX must begin with a .version directive".into());
    }
    if !text.contains(".target") {
        return Err("ptxas fatal: no .target directive".into());
    }
    let mut depth = 0i64;
    for c in text.chars() {
        depth += match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        };
        if depth < 0 {
            return Err("ptxas fatal: unbalanced '}'".into());
        }
    }
    if depth != 0 {
        return Err("ptxas fatal: unexpected end of file (unbalanced '{')".into());
    }
    let mut entries = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = find_token(rest, ".entry") {
        let after = &rest[at + ".entry".len()..];
        let open = after.find('(').ok_or("ptxas fatal: .entry without a parameter list")?;
        let name = after[..open].trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c)) {
            return Err(format!("ptxas fatal: bad kernel name {name:?}"));
        }
        let close = after[open..].find(')').ok_or("ptxas fatal: unterminated parameter list")? + open;
        let params = after[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| parse_param(p).map_err(|e| format!("ptxas fatal: kernel {name}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        if entries.iter().any(|e: &Entry| e.name == name) {
            return Err(format!("ptxas fatal: duplicate definition of {name}"));
        }
        entries.push(Entry { name: name.to_string(), params });
        rest = &after[close..];
    }
    Ok(entries)
}

/// `.entry` as a whole token (not `.entry_x`).
fn find_token(text: &str, token: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(token) {
        let at = from + i;
        let end = at + token.len();
        let next = text[end..].chars().next();
        if next.is_none_or(|c| c.is_whitespace()) {
            return Some(at);
        }
        from = end;
    }
    None
}

/// `.param .u64 name`, `.param .align 8 .b8 name[16]`, `.param .u64 .ptr .global .align 4 name`.
fn parse_param(text: &str) -> Result<Param, String> {
    let mut words = text.split_whitespace().peekable();
    if words.next() != Some(".param") {
        return Err(format!("parameter {text:?} is not a .param"));
    }
    let (mut ty, mut align, mut name) = (None, None, None);
    while let Some(w) = words.next() {
        match w {
            ".align" => {
                let n = words.next().and_then(|n| n.parse::<usize>().ok()).ok_or("bad .align")?;
                align = Some(n);
            }
            ".ptr" | ".global" | ".const" | ".local" | ".shared" => {}
            w if w.starts_with('.') => ty = Some(w[1..].to_string()),
            w => name = Some(w.to_string()),
        }
    }
    let ty = ty.ok_or_else(|| format!("parameter {text:?} has no type"))?;
    let name = name.ok_or_else(|| format!("parameter {text:?} has no name"))?;
    let elem = type_size(&ty).ok_or_else(|| format!("unknown parameter type .{ty}"))?;
    let count = match name.split_once('[') {
        Some((_, n)) => n.trim_end_matches(']').parse::<usize>().map_err(|_| format!("bad array size in {name}"))?,
        None => 1,
    };
    Ok(Param { ty, size: elem * count, align: align.unwrap_or(elem) })
}

fn type_size(ty: &str) -> Option<usize> {
    Some(match ty {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_parameters_are_parsed() {
        let ptx = ".version 8.0\n.target sm_70\n.address_size 64\n// .entry fake(\n\
            .visible .entry k1(\n\t.param .u64 k1_param_0,\n\t.param .u32 k1_param_1\n)\n{\n ret;\n}\n\
            .entry k2(.param .align 8 .b8 k2_param_0[24], .param .f32 k2_param_1)\n.maxntid 256\n{ ret; }\n";
        let e = parse(ptx).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "k1");
        assert_eq!(e[0].params.iter().map(|p| p.size).collect::<Vec<_>>(), vec![8, 4]);
        assert_eq!(e[1].params[0], Param { ty: "b8".into(), size: 24, align: 8 });
        assert_eq!(e[1].params[1].size, 4);
    }

    #[test]
    fn malformed_modules_are_refused() {
        assert!(parse("garbage").is_err());
        assert!(parse(".version 8.0\n.target sm_70\n.entry k(\n{").is_err());
        assert!(parse(".version 8.0\n.target sm_70\n.entry k(.param .q99 x)\n{}").is_err());
        assert!(parse(".version 8.0\n.entry k()\n{}").is_err());
    }
}
