//! Where things are in a text-format file, which the parsed messages do not
//! remember: the line of every field occurrence (by its path from the top,
//! `layer#3/convolution_param#0/kernel_size#0`), the field a byte offset
//! belongs to, the extent of a field (to step past a bad one and go on
//! looking for problems), and the first unclosed `{`. It only finds
//! positions; it must never decide what a file means (prost-reflect parses
//! it against the schema).

use std::collections::HashMap;
use std::ops::Range;

use logos::Logos;

/// The tokens of the text format, enough to find field boundaries.
#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\x0C]+")]
#[logos(skip r"#[^\n]*")]
enum Tok {
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident,
    #[regex(r"[0-9.][A-Za-z0-9_.]*([eE][-+][0-9]+)?[fF]?")]
    Number,
    #[regex(r#""([^"\\\n]|\\.)*""#)]
    #[regex(r"'([^'\\\n]|\\.)*'")]
    Str,
    #[token("-")]
    #[token("+")]
    Sign,
    #[token("{")]
    #[token("<")]
    Open,
    #[token("}")]
    #[token(">")]
    Close,
    #[token("[")]
    ListOpen,
    #[token("]")]
    ListClose,
    #[token(":")]
    Colon,
    #[token(",")]
    #[token(";")]
    Sep,
}

/// The tokens of `src` with their byte ranges; anything the lexer cannot
/// read ends the list (prost-reflect reports it).
fn tokens(src: &str) -> Vec<(Tok, Range<usize>)> {
    let mut lex = Tok::lexer(src);
    let mut out = Vec::new();
    while let Some(t) = lex.next() {
        match t {
            Ok(t) => out.push((t, lex.span())),
            Err(()) => break,
        }
    }
    out
}

/// Line (from 1) of a byte offset.
pub fn line_of(src: &str, offset: usize) -> usize {
    1 + src.as_bytes()[..offset.min(src.len())].iter().filter(|&&b| b == b'\n').count()
}

/// The index after the value that starts at token `i` (a scalar, a signed
/// scalar, adjacent strings, a `{}`/`<>` message or a `[]` list).
fn skip_value(toks: &[(Tok, Range<usize>)], mut i: usize) -> usize {
    match toks.get(i).map(|t| t.0) {
        Some(Tok::Open | Tok::ListOpen) => {
            let mut depth = 0usize;
            while let Some((t, _)) = toks.get(i) {
                i += 1;
                match t {
                    Tok::Open | Tok::ListOpen => depth += 1,
                    Tok::Close | Tok::ListClose => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            i
        }
        Some(Tok::Sign) => (i + 2).min(toks.len()),
        Some(Tok::Str) => {
            while matches!(toks.get(i), Some((Tok::Str, _))) {
                i += 1;
            }
            i
        }
        Some(_) => i + 1,
        None => i,
    }
}

/// Whether token `i` is a field name: an identifier followed by `:` or a message.
fn is_field_name(toks: &[(Tok, Range<usize>)], i: usize) -> bool {
    toks[i].0 == Tok::Ident && matches!(toks.get(i + 1), Some((Tok::Colon | Tok::Open, _)))
}

/// The byte range of the field whose name starts at `offset`, through its
/// value and a trailing `,`/`;`; `None` when no field name starts there.
pub fn field_extent(src: &str, offset: usize) -> Option<Range<usize>> {
    let toks = tokens(src);
    let i = toks.iter().position(|(_, r)| r.start == offset)?;
    if toks[i].0 != Tok::Ident {
        return None;
    }
    let mut j = i + 1;
    if matches!(toks.get(j), Some((Tok::Colon, _))) {
        j += 1;
    }
    j = skip_value(&toks, j);
    if matches!(toks.get(j), Some((Tok::Sep, _))) {
        j += 1;
    }
    let end = toks.get(j - 1).map_or(src.len(), |t| t.1.end);
    Some(offset..end)
}

/// The field whose value holds byte `offset`: its name and where the name starts.
pub fn field_at(src: &str, offset: usize) -> Option<(String, usize)> {
    let toks = tokens(src);
    let mut found = None;
    for i in 0..toks.len() {
        if toks[i].1.start > offset {
            break;
        }
        if is_field_name(&toks, i) {
            let mut j = i + 1;
            if toks[j].0 == Tok::Colon {
                j += 1;
            }
            let end = toks.get(skip_value(&toks, j).saturating_sub(1)).map_or(src.len(), |t| t.1.end);
            if offset < end.max(toks[i].1.end + 1) {
                found = Some((src[toks[i].1.clone()].to_string(), toks[i].1.start));
            }
        }
    }
    found
}

/// The line of the innermost `{` or `<` left open at the end of `src`.
pub fn unclosed(src: &str) -> Option<usize> {
    let mut open = Vec::new();
    for (t, r) in tokens(src) {
        match t {
            Tok::Open => open.push(r.start),
            Tok::Close => {
                open.pop();
            }
            _ => {}
        }
    }
    open.last().map(|&o| line_of(src, o))
}

/// The line of every field occurrence of a file, by path.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    lines: HashMap<String, usize>,
}

impl Locations {
    /// Indexes a file that parsed.
    pub fn index(src: &str) -> Locations {
        let toks = tokens(src);
        let mut lines = HashMap::new();
        // Per open message: its path and how often each field was seen in it.
        let mut stack: Vec<(String, HashMap<String, usize>)> = vec![(String::new(), HashMap::new())];
        let mut i = 0;
        while i < toks.len() {
            let (t, r) = &toks[i];
            match t {
                Tok::Ident if is_field_name(&toks, i) => {
                    let name = &src[r.clone()];
                    let (prefix, counts) = stack.last_mut().expect("the top level stays");
                    let mut record = |counts: &mut HashMap<String, usize>, offset: usize| {
                        let n = counts.entry(name.to_string()).or_insert(0);
                        let key = format!("{prefix}/{name}#{n}");
                        *n += 1;
                        lines.insert(key.clone(), line_of(src, offset));
                        key
                    };
                    let mut j = i + 1;
                    if toks[j].0 == Tok::Colon {
                        j += 1;
                    }
                    match toks.get(j).map(|t| t.0) {
                        Some(Tok::Open) => {
                            let key = record(counts, r.start);
                            stack.push((key, HashMap::new()));
                            i = j + 1;
                        }
                        Some(Tok::ListOpen) => {
                            // Each element is one occurrence, at its own line.
                            j += 1;
                            while let Some((t, er)) = toks.get(j) {
                                match t {
                                    Tok::ListClose => break,
                                    Tok::Sep => j += 1,
                                    _ => {
                                        record(counts, er.start);
                                        j = skip_value(&toks, j);
                                    }
                                }
                            }
                            i = j + 1;
                        }
                        _ => {
                            record(counts, r.start);
                            i = skip_value(&toks, j);
                        }
                    }
                }
                Tok::Close => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    i += 1;
                }
                _ => i += 1,
            }
        }
        Locations { lines }
    }

    /// The top-level message of the file.
    pub fn root(&self) -> Loc<'_> {
        Loc { locs: self, key: String::new(), line: 1 }
    }
}

/// A message or field of a file, to ask for lines within it. A field that
/// is not written (a default) answers its parent's line.
#[derive(Debug, Clone)]
pub struct Loc<'a> {
    locs: &'a Locations,
    key: String,
    line: usize,
}

impl<'a> Loc<'a> {
    /// Occurrence `index` of field `name` inside this message.
    pub fn nth(&self, name: &str, index: usize) -> Loc<'a> {
        let key = format!("{}/{name}#{index}", self.key);
        let line = self.locs.lines.get(&key).copied().unwrap_or(self.line);
        Loc { locs: self.locs, key, line }
    }

    /// The first occurrence of field `name` inside this message.
    pub fn at(&self, name: &str) -> Loc<'a> {
        self.nth(name, 0)
    }

    /// The line of this field (or of the nearest written parent).
    pub fn line(&self) -> usize {
        self.line
    }

    /// The line of field `name` inside this message.
    pub fn of(&self, name: &str) -> usize {
        self.at(name).line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "# net\nname: \"Le\" 'Net'\nlayer {\n  type: \"Data\" # trailing\n  dims: [1, 2,\n 3]\n}\n\
                       layer < p { k: -1.5e-3 } >; y: -inf\nlayer {\n  name: \"b\"\n}\n";

    #[test]
    fn lines_by_path() {
        let l = Locations::index(SRC);
        let r = l.root();
        assert_eq!(r.of("name"), 2);
        assert_eq!(r.at("layer").of("type"), 4);
        assert_eq!(r.at("layer").nth("dims", 2).line(), 6);
        assert_eq!(r.nth("layer", 1).at("p").of("k"), 8);
        assert_eq!(r.of("y"), 8);
        assert_eq!(r.nth("layer", 2).of("name"), 10);
        // Not written: the parent's line.
        assert_eq!(r.nth("layer", 2).of("top"), 9);
        assert_eq!(r.nth("layer", 7).line(), 1);
    }

    #[test]
    fn extents_fields_and_unclosed() {
        let at = SRC.find("layer <").unwrap();
        let ext = field_extent(SRC, at).unwrap();
        assert!(SRC[ext].ends_with("} >;"));
        let k = SRC.find("1.5e").unwrap();
        assert_eq!(field_at(SRC, k).map(|f| f.0).as_deref(), Some("k"));
        assert_eq!(unclosed("a: 1\nlayer {\n b {\n }\n"), Some(2));
        assert_eq!(unclosed(SRC), None);
    }
}
