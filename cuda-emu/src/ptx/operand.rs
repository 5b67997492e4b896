//! One instruction's text split into its guard, opcode with modifiers and
//! operands (registers, immediates, addresses, vectors, symbols), and PTX
//! literals read into bits. Knows no instruction's meaning; must never
//! guess an operand it cannot read (that is an error naming the text).

/// A literal as written; its bits depend on the type it is used as.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Imm {
    Int(i128),
    /// `0fXXXXXXXX`
    F32(u32),
    /// `0dXXXXXXXXXXXXXXXX`
    F64(u64),
    /// `1.5`, `1e-3`
    Dec(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Opnd {
    /// `%r1`, `%tid.x`, or a name declared with `.reg`.
    Reg(String),
    /// `!%p1`
    NotReg(String),
    Imm(Imm),
    /// `[base+offset]`; `base` a register or a variable/parameter name.
    Addr {
        base: Option<String>,
        offset: i64,
    },
    /// `{%f1, %f2}`
    Vector(Vec<Opnd>),
    /// A label, variable or parameter name.
    Sym(String),
    /// `_`
    Sink,
}

#[derive(Debug, Clone)]
pub struct Syntax {
    /// `@%p1` (false) or `@!%p1` (true).
    pub guard: Option<(String, bool)>,
    pub op: String,
    /// The dot-separated modifiers after the opcode, without dots.
    pub mods: Vec<String>,
    pub operands: Vec<Opnd>,
}

/// `@!%p1 ld.global.v2.f32 {%f1, %f2}, [%rd1+8]`
pub fn syntax(text: &str) -> Result<Syntax, String> {
    let mut rest = text.trim();
    let mut guard = None;
    if let Some(g) = rest.strip_prefix('@') {
        let end = g.find(char::is_whitespace).ok_or("a guard without an instruction")?;
        let p = &g[..end];
        guard = Some(match p.strip_prefix('!') {
            Some(p) => (p.to_string(), true),
            None => (p.to_string(), false),
        });
        rest = g[end..].trim();
    }
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let mut parts = rest[..end].split('.');
    let op = parts.next().unwrap_or("").to_string();
    let mods = parts.map(str::to_string).collect();
    let operands = split_top(&rest[end..]).iter().map(|o| operand(o)).collect::<Result<Vec<_>, _>>()?;
    Ok(Syntax { guard, op, mods, operands })
}

/// Splits at commas outside `{}`, `[]` and `()`.
fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for c in s.chars() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

fn operand(s: &str) -> Result<Opnd, String> {
    let s = s.trim();
    if s == "_" {
        return Ok(Opnd::Sink);
    }
    if let Some(inner) = s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        return Ok(Opnd::Vector(split_top(inner).iter().map(|o| operand(o)).collect::<Result<_, _>>()?));
    }
    if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        return address(inner.trim());
    }
    if let Some(r) = s.strip_prefix('!') {
        return Ok(Opnd::NotReg(r.trim().to_string()));
    }
    if s.starts_with('%') {
        return Ok(Opnd::Reg(s.to_string()));
    }
    if let Some(i) = imm(s) {
        return Ok(Opnd::Imm(i));
    }
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c)) {
        return Ok(Opnd::Sym(s.to_string()));
    }
    Err(format!("cannot read the operand `{s}`"))
}

fn address(inner: &str) -> Result<Opnd, String> {
    let (base, offset) = match inner.find(['+', '-']).filter(|&i| i > 0) {
        Some(i) => {
            let off = inner[i + 1..].trim();
            let v = match imm(off) {
                Some(Imm::Int(v)) => v as i64,
                _ => return Err(format!("cannot read the address offset in `[{inner}]`")),
            };
            (inner[..i].trim(), if &inner[i..i + 1] == "-" { -v } else { v })
        }
        None => (inner, 0),
    };
    if let Some(Imm::Int(v)) = imm(base) {
        return Ok(Opnd::Addr { base: None, offset: v as i64 + offset });
    }
    Ok(Opnd::Addr { base: Some(base.to_string()), offset })
}

/// A literal, if `s` is one.
pub fn imm(s: &str) -> Option<Imm> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    if let Some(h) = lower.strip_prefix("0f").filter(|h| h.len() == 8) {
        let b = u32::from_str_radix(h, 16).ok()?;
        return Some(Imm::F32(if neg { b ^ 0x8000_0000 } else { b }));
    }
    if let Some(h) = lower.strip_prefix("0d").filter(|h| h.len() == 16) {
        let b = u64::from_str_radix(h, 16).ok()?;
        return Some(Imm::F64(if neg { b ^ (1 << 63) } else { b }));
    }
    let digits = lower.trim_end_matches('u');
    let v = if let Some(h) = digits.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()? as i128
    } else if let Some(b) = digits.strip_prefix("0b") {
        u64::from_str_radix(b, 2).ok()? as i128
    } else if digits.chars().all(|c| c.is_ascii_digit()) && !digits.is_empty() {
        digits.parse::<u64>().ok()? as i128
    } else if body.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        let f = body.parse::<f64>().ok()?;
        return Some(Imm::Dec(if neg { -f } else { f }));
    } else {
        return None;
    };
    Some(Imm::Int(if neg { -v } else { v }))
}

/// The bits of literal `s` stored as an integer, an f32 or an f64.
pub fn literal(s: &str, f32: bool, f64: bool) -> Option<u64> {
    Some(imm_bits(imm(s)?, f32, f64))
}

/// The bits of `i` used as an integer, an f32 or an f64.
pub fn imm_bits(i: Imm, f32: bool, f64: bool) -> u64 {
    match (i, f32, f64) {
        (Imm::F32(b), _, true) => (f32::from_bits(b) as f64).to_bits(),
        (Imm::F32(b), _, _) => b as u64,
        (Imm::F64(b), true, _) => (f64::from_bits(b) as f32).to_bits() as u64,
        (Imm::F64(b), _, _) => b,
        (Imm::Dec(v), true, _) => (v as f32).to_bits() as u64,
        (Imm::Dec(v), _, true) => v.to_bits(),
        (Imm::Dec(v), _, _) => v as i64 as u64,
        (Imm::Int(v), true, _) => (v as f32).to_bits() as u64,
        (Imm::Int(v), _, true) => (v as f64).to_bits(),
        (Imm::Int(v), _, _) => v as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_of_every_form_are_read() {
        let s = syntax("@!%p2 ld.global.v2.f32 {%f1, _}, [%rd1+-8]").unwrap();
        assert_eq!(s.guard, Some(("%p2".into(), true)));
        assert_eq!((s.op.as_str(), s.mods.clone()), ("ld", vec!["global".into(), "v2".into(), "f32".into()]));
        assert_eq!(s.operands[0], Opnd::Vector(vec![Opnd::Reg("%f1".into()), Opnd::Sink]));
        assert_eq!(s.operands[1], Opnd::Addr { base: Some("%rd1".into()), offset: -8 });
        let s = syntax("mov.f32 %f1, 0fBF800000").unwrap();
        assert_eq!(s.operands[1], Opnd::Imm(Imm::F32(0xBF80_0000)));
        assert_eq!(imm("-0x10"), Some(Imm::Int(-16)));
        assert_eq!(imm("0d3FF0000000000000"), Some(Imm::F64(0x3FF0_0000_0000_0000)));
        assert_eq!(literal("1.5", true, false), Some(1.5f32.to_bits() as u64));
        let s = syntax("ld.param.u32 %r1, [k_param_1]").unwrap();
        assert_eq!(s.operands[1], Opnd::Addr { base: Some("k_param_1".into()), offset: 0 });
    }
}
