//! The protobuf text format (what Caffe's `.prototxt` files are written in),
//! parsed into a schema-free tree of fields that remember their line. It owns
//! the syntax only: comments, strings and their escapes, numbers, enum
//! identifiers, nested messages in `{}` or `<>`, and `[a, b]` lists. It must
//! never decide what a field means; `fields.rs` and the message modules do.

use std::fmt;

/// A message: its fields in file order (repeated fields appear repeatedly).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    pub fields: Vec<Field>,
    /// Line of the opening brace (1 for the top level).
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub line: usize,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar(Scalar),
    Message(Message),
}

/// A scalar as written; its type is decided by the schema that reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// An identifier: an enum value, `true`/`false`, `inf`, `nan`.
    Ident(String),
    /// A number as written, sign included.
    Number(String),
    /// A string, escapes resolved, adjacent literals joined.
    Str(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Ident(s) | Scalar::Number(s) => f.write_str(s),
            Scalar::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A syntax error at a line and column.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Number(String),
    Str(String),
    Punct(char),
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Number(s) => write!(f, "number {s}"),
            Tok::Str(s) => write!(f, "string {s:?}"),
            Tok::Punct(c) => write!(f, "`{c}`"),
            Tok::End => f.write_str("end of file"),
        }
    }
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
    col: usize,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str) -> Self {
        Lexer { chars: src.chars().peekable(), line: 1, col: 1 }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn err(&self, line: usize, col: usize, msg: impl Into<String>) -> SyntaxError {
        SyntaxError { line, col, msg: msg.into() }
    }

    /// Skips blanks and `#` comments.
    fn skip(&mut self) {
        while let Some(&c) = self.chars.peek() {
            if c == '#' {
                while let Some(c) = self.bump() {
                    if c == '\n' {
                        break;
                    }
                }
            } else if c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// The next token and where it starts.
    fn next(&mut self) -> Result<(Tok, usize, usize), SyntaxError> {
        self.skip();
        let (line, col) = (self.line, self.col);
        let Some(&c) = self.chars.peek() else { return Ok((Tok::End, line, col)) };
        let tok = if c.is_ascii_alphabetic() || c == '_' {
            let mut s = String::new();
            while let Some(&c) = self.chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    s.push(c);
                    self.bump();
                } else {
                    break;
                }
            }
            Tok::Ident(s)
        } else if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' {
            let mut s = String::new();
            s.push(c);
            self.bump();
            if c == '-' || c == '+' {
                self.skip();
                if let Some(&d) = self.chars.peek() {
                    if d.is_ascii_alphabetic() {
                        // `-inf`: the identifier follows; keep the sign with it.
                        let (t, l, c) = self.next()?;
                        return match t {
                            Tok::Ident(id) => Ok((Tok::Number(format!("{s}{id}")), l, c)),
                            other => Err(self.err(line, col, format!("expected a number after `{s}`, found {other}"))),
                        };
                    }
                }
            }
            while let Some(&c) = self.chars.peek() {
                let exp_sign = (c == '-' || c == '+') && matches!(s.chars().last(), Some('e' | 'E'));
                if c.is_ascii_alphanumeric() || c == '.' || exp_sign {
                    s.push(c);
                    self.bump();
                } else {
                    break;
                }
            }
            Tok::Number(s)
        } else if c == '"' || c == '\'' {
            Tok::Str(self.string(c, line, col)?)
        } else if "{}<>[]:,;".contains(c) {
            self.bump();
            Tok::Punct(c)
        } else {
            return Err(self.err(line, col, format!("unexpected character `{c}`")));
        };
        Ok((tok, line, col))
    }

    fn string(&mut self, quote: char, line: usize, col: usize) -> Result<String, SyntaxError> {
        self.bump();
        let mut s = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return Err(self.err(line, col, "string is not closed on its line")),
                Some(c) if c == quote => return Ok(s),
                Some('\\') => {
                    let c = self.bump().ok_or_else(|| self.err(line, col, "string is not closed"))?;
                    s.push(match c {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '\\' | '\'' | '"' => c,
                        other => {
                            return Err(self.err(self.line, self.col, format!("unsupported escape `\\{other}`")));
                        }
                    });
                }
                Some(c) => s.push(c),
            }
        }
    }
}

struct Parser<'a> {
    lex: Lexer<'a>,
    peeked: Option<(Tok, usize, usize)>,
}

impl Parser<'_> {
    fn peek(&mut self) -> Result<&(Tok, usize, usize), SyntaxError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lex.next()?);
        }
        Ok(self.peeked.as_ref().expect("just filled"))
    }

    fn take(&mut self) -> Result<(Tok, usize, usize), SyntaxError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lex.next(),
        }
    }

    fn message(&mut self, line: usize, close: Option<char>) -> Result<Message, SyntaxError> {
        let mut fields = Vec::new();
        loop {
            let (tok, l, c) = self.take()?;
            match tok {
                Tok::Punct(p) if Some(p) == close => return Ok(Message { fields, line }),
                Tok::End if close.is_none() => return Ok(Message { fields, line }),
                Tok::End => {
                    return Err(SyntaxError {
                        line,
                        col: 1,
                        msg: format!("the message opened on line {line} is not closed"),
                    })
                }
                Tok::Ident(name) => {
                    let value = self.field_value(&name, l)?;
                    for v in value {
                        fields.push(Field { name: name.clone(), line: l, value: v });
                    }
                    if matches!(self.peek()?.0, Tok::Punct(',' | ';')) {
                        self.take()?;
                    }
                }
                Tok::Punct('[') => {
                    return Err(SyntaxError {
                        line: l,
                        col: c,
                        msg: "extension fields `[...]` are not supported".into(),
                    })
                }
                other => {
                    return Err(SyntaxError { line: l, col: c, msg: format!("expected a field name, found {other}") })
                }
            }
        }
    }

    /// The value(s) after a field name: a list gives several.
    fn field_value(&mut self, name: &str, line: usize) -> Result<Vec<Value>, SyntaxError> {
        let colon = matches!(self.peek()?.0, Tok::Punct(':'));
        if colon {
            self.take()?;
        }
        let (tok, l, c) = self.take()?;
        match tok {
            Tok::Punct('{') => Ok(vec![Value::Message(self.message(l, Some('}'))?)]),
            Tok::Punct('<') => Ok(vec![Value::Message(self.message(l, Some('>'))?)]),
            Tok::Punct('[') if colon => {
                let mut out = Vec::new();
                if matches!(self.peek()?.0, Tok::Punct(']')) {
                    self.take()?;
                    return Ok(out);
                }
                loop {
                    let (tok, l, c) = self.take()?;
                    out.push(match tok {
                        Tok::Punct('{') => Value::Message(self.message(l, Some('}'))?),
                        t => Value::Scalar(self.scalar(t, l, c, name)?),
                    });
                    match self.take()? {
                        (Tok::Punct(','), ..) => continue,
                        (Tok::Punct(']'), ..) => return Ok(out),
                        (t, l, c) => {
                            return Err(SyntaxError { line: l, col: c, msg: format!("expected `,` or `]`, found {t}") })
                        }
                    }
                }
            }
            t if colon => Ok(vec![Value::Scalar(self.scalar(t, l, c, name)?)]),
            t => Err(SyntaxError {
                line: l,
                col: c,
                msg: format!("expected `:` or `{{` after field `{name}` (line {line}), found {t}"),
            }),
        }
    }

    fn scalar(&mut self, tok: Tok, line: usize, col: usize, name: &str) -> Result<Scalar, SyntaxError> {
        match tok {
            Tok::Ident(s) => Ok(Scalar::Ident(s)),
            Tok::Number(s) => Ok(Scalar::Number(s)),
            Tok::Str(mut s) => {
                // Adjacent literals are one string, as in C.
                while let Tok::Str(_) = self.peek()?.0 {
                    if let (Tok::Str(more), ..) = self.take()? {
                        s.push_str(&more);
                    }
                }
                Ok(Scalar::Str(s))
            }
            other => Err(SyntaxError { line, col, msg: format!("expected a value for field `{name}`, found {other}") }),
        }
    }
}

/// Parses a whole text-format file into its top-level message.
pub fn parse(src: &str) -> Result<Message, SyntaxError> {
    let mut p = Parser { lex: Lexer::new(src), peeked: None };
    p.message(1, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(m: &Message, i: usize) -> &Scalar {
        match &m.fields[i].value {
            Value::Scalar(s) => s,
            Value::Message(_) => panic!("field {i} is a message"),
        }
    }

    #[test]
    fn fields_messages_lists_and_lines() {
        let m = parse(
            "# comment\nname: \"Le\" 'Net'\nlayer {\n  type: \"Data\" # trailing\n  dims: [1, 2,3]\n}\nx < a: -1.5e-3 >; y: -inf\n",
        )
        .unwrap();
        assert_eq!(m.fields.len(), 4);
        assert_eq!(scalar(&m, 0), &Scalar::Str("LeNet".into()));
        assert_eq!(m.fields[1].line, 3);
        let Value::Message(layer) = &m.fields[1].value else { panic!() };
        assert_eq!(layer.fields.len(), 4);
        assert_eq!(layer.fields[0].line, 4);
        assert_eq!(scalar(layer, 3), &Scalar::Number("3".into()));
        let Value::Message(x) = &m.fields[2].value else { panic!() };
        assert_eq!(scalar(x, 0), &Scalar::Number("-1.5e-3".into()));
        assert_eq!(scalar(&m, 3), &Scalar::Number("-inf".into()));
    }

    #[test]
    fn syntax_errors_say_where() {
        let e = parse("layer {\n  name: \"a\"\n").unwrap_err();
        assert!(e.msg.contains("not closed"), "{e:?}");
        let e = parse("a: 1\nb 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("a: \"open\n").unwrap_err();
        assert!(e.msg.contains("not closed"));
        let e = parse("a: 1 }").unwrap_err();
        assert!(e.msg.contains("expected a field name"));
        let e = parse("a: @").unwrap_err();
        assert!(e.msg.contains('@'));
    }
}
