//! PTX text to statements: comments removed, the text split at `;`, `{`,
//! `}` and labels, each statement keeping the line it starts on (for error
//! messages). Knows nothing of what a statement means; must never drop
//! text silently (everything is a statement, a brace or a label).

/// One piece of a PTX module's text.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// A directive or instruction, without its `;`.
    Stmt(String),
    /// `name:`
    Label(String),
    Open,
    Close,
}

/// The pieces of `ptx`, each with its 1-based line.
pub fn pieces(ptx: &str) -> Vec<(Piece, u32)> {
    let text = strip_comments(ptx);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cur_line = 0u32;
    let mut line = 1u32;
    let mut depth_paren = 0i32;
    let mut inner = 0i32;
    let flush = |cur: &mut String, cur_line: u32, out: &mut Vec<(Piece, u32)>| {
        let s = cur.trim();
        if !s.is_empty() {
            out.push((Piece::Stmt(s.to_string()), cur_line));
        }
        cur.clear();
    };
    for c in text.chars() {
        match c {
            '\n' => {
                line += 1;
                // Module header directives end at the line's end, without a `;`.
                let t = cur.trim_start();
                if [".version", ".target", ".address_size"].iter().any(|d| t.starts_with(d)) {
                    flush(&mut cur, cur_line, &mut out);
                } else {
                    cur.push(' ');
                }
            }
            '(' => {
                depth_paren += 1;
                cur.push(c);
            }
            ')' => {
                depth_paren -= 1;
                cur.push(c);
            }
            ';' => flush(&mut cur, cur_line, &mut out),
            // Braces inside an operand list (`{%r1, %r2}`) or an initializer belong to the statement.
            '{' if depth_paren > 0 || joins_brace(&cur) => {
                inner += 1;
                cur.push(c);
            }
            '}' if inner > 0 => {
                inner -= 1;
                cur.push(c);
            }
            '{' => {
                flush(&mut cur, cur_line, &mut out);
                out.push((Piece::Open, line));
            }
            '}' => {
                flush(&mut cur, cur_line, &mut out);
                out.push((Piece::Close, line));
            }
            ':' if is_label(&cur) => {
                out.push((Piece::Label(cur.trim().to_string()), cur_line));
                cur.clear();
            }
            c => {
                if cur.trim().is_empty() && !c.is_whitespace() {
                    cur_line = line;
                }
                cur.push(c);
            }
        }
    }
    flush(&mut cur, cur_line, &mut out);
    out
}

/// Whether a `{` after `cur` is part of the statement (a vector operand
/// or an initializer) rather than the start of a body or scope.
fn joins_brace(cur: &str) -> bool {
    let t = cur.trim();
    !t.is_empty() && (!t.starts_with('.') || t.contains('='))
}

fn is_label(cur: &str) -> bool {
    let s = cur.trim();
    !s.is_empty() && !s.starts_with('.') && s.chars().all(|c| c.is_ascii_alphanumeric() || "_$".contains(c))
}

/// `//` and `/* */` comments replaced by spaces, newlines kept.
fn strip_comments(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut rest = ptx;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").map_or(after.len(), |i| i + 2);
            out.extend(after[..end].chars().filter(|&c| c == '\n'));
            out.push(' ');
            rest = &after[end..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_labels_and_braces_keep_their_lines() {
        let p = pieces(".version 8.0\n// c\n.entry k(\n.param .u64 a\n)\n{\n$L1:\n@%p1 bra $L1; /* x\n */ mov.b64 %rd1, {%r1, %r2};\n}\n");
        assert_eq!(p[0], (Piece::Stmt(".version 8.0".into()), 1));
        assert_eq!(p[1], (Piece::Stmt(".entry k( .param .u64 a )".into()), 3));
        assert_eq!(p[2], (Piece::Open, 6));
        assert_eq!(p[3], (Piece::Label("$L1".into()), 7));
        assert_eq!(p[4], (Piece::Stmt("@%p1 bra $L1".into()), 8));
        assert_eq!(p[5], (Piece::Stmt("mov.b64 %rd1, {%r1, %r2}".into()), 9));
        assert_eq!(p[6], (Piece::Close, 10));
    }
}
