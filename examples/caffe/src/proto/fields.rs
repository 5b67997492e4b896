//! Reading typed fields out of a parsed text-format message, the way a
//! generated protobuf class would, but strictly: every field must be taken by
//! the schema code, and `finish` turns anything left over into an error that
//! names the field and its line. It owns type conversion and those errors; it
//! must never know what any particular field means.

use std::path::Path;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::proto::text::{Field, Message, Scalar, Value};

/// The fields of one message being read by its schema.
pub struct Fields<'a> {
    file: &'a Path,
    /// The protobuf message type, for errors (`LayerParameter`).
    what: &'a str,
    msg: &'a Message,
    used: Vec<bool>,
}

impl<'a> Fields<'a> {
    pub fn new(file: &'a Path, what: &'a str, msg: &'a Message) -> Self {
        Fields { file, what, msg, used: vec![false; msg.fields.len()] }
    }

    pub fn file(&self) -> &'a Path {
        self.file
    }

    /// Line of the message itself (its opening brace).
    pub fn line(&self) -> usize {
        self.msg.line
    }

    pub fn err(&self, line: usize, msg: impl Into<String>) -> Error {
        Error::Prototxt { file: self.file.to_path_buf(), line, msg: msg.into() }
    }

    /// Every occurrence of `name`, marked as read.
    pub fn all(&mut self, name: &str) -> Vec<&'a Field> {
        let mut out = Vec::new();
        for (i, f) in self.msg.fields.iter().enumerate() {
            if f.name == name {
                self.used[i] = true;
                out.push(f);
            }
        }
        out
    }

    /// The single occurrence of `name`, if any.
    pub fn one(&mut self, name: &str) -> Result<Option<&'a Field>> {
        let all = self.all(name);
        match all.as_slice() {
            [] => Ok(None),
            [f] => Ok(Some(f)),
            [a, b, ..] => Err(self.err(
                b.line,
                format!("field `{name}` of {} is given twice (lines {} and {})", self.what, a.line, b.line),
            )),
        }
    }

    fn scalar(&self, f: &'a Field) -> Result<&'a Scalar> {
        match &f.value {
            Value::Scalar(s) => Ok(s),
            Value::Message(_) => Err(self.err(f.line, format!("field `{}` takes a value, not a {{ }} block", f.name))),
        }
    }

    fn number<T: FromStr>(&self, f: &'a Field, kind: &str) -> Result<T> {
        let s = self.scalar(f)?;
        let text = match s {
            Scalar::Number(t) | Scalar::Ident(t) => t.as_str(),
            Scalar::Str(_) => "",
        };
        // Protobuf allows a trailing `f` on floats (`0.5f`).
        let text = if kind == "a number" { text.trim_end_matches(['f', 'F']) } else { text };
        let text = match text {
            "inf" | "+inf" | "infinity" => "inf",
            "-inf" | "-infinity" => "-inf",
            t => t,
        };
        text.parse::<T>().map_err(|_| self.err(f.line, format!("field `{}` needs {kind}, got {s}", f.name)))
    }

    pub fn f32(&mut self, name: &str) -> Result<Option<f32>> {
        match self.one(name)? {
            None => Ok(None),
            Some(f) => {
                let v: f32 = self.number(f, "a number")?;
                Ok(Some(v))
            }
        }
    }

    pub fn u32(&mut self, name: &str) -> Result<Option<u32>> {
        match self.one(name)? {
            None => Ok(None),
            Some(f) => Ok(Some(self.number(f, "a whole number >= 0")?)),
        }
    }

    pub fn i64(&mut self, name: &str) -> Result<Option<i64>> {
        match self.one(name)? {
            None => Ok(None),
            Some(f) => Ok(Some(self.number(f, "a whole number")?)),
        }
    }

    pub fn bool(&mut self, name: &str) -> Result<Option<bool>> {
        match self.one(name)? {
            None => Ok(None),
            Some(f) => match self.scalar(f)? {
                Scalar::Ident(s) | Scalar::Number(s) if s == "true" || s == "1" => Ok(Some(true)),
                Scalar::Ident(s) | Scalar::Number(s) if s == "false" || s == "0" => Ok(Some(false)),
                s => Err(self.err(f.line, format!("field `{name}` needs true or false, got {s}"))),
            },
        }
    }

    pub fn string(&mut self, name: &str) -> Result<Option<String>> {
        match self.one(name)? {
            None => Ok(None),
            Some(f) => match self.scalar(f)? {
                Scalar::Str(s) => Ok(Some(s.clone())),
                s => Err(self.err(f.line, format!("field `{name}` needs a quoted string, got {s}"))),
            },
        }
    }

    /// An enum value, one of `allowed` (written bare, or quoted).
    pub fn enumeration(&mut self, name: &str, allowed: &[&str]) -> Result<Option<(String, usize)>> {
        match self.one(name)? {
            None => Ok(None),
            Some(f) => {
                let v = match self.scalar(f)? {
                    Scalar::Ident(s) | Scalar::Str(s) => s.clone(),
                    Scalar::Number(s) => s.clone(),
                };
                if allowed.contains(&v.as_str()) {
                    Ok(Some((v, f.line)))
                } else {
                    Err(self.err(f.line, format!("field `{name}` is {v}; use one of {}", allowed.join(", "))))
                }
            }
        }
    }

    /// Every value of a repeated whole-number field.
    pub fn u32s(&mut self, name: &str) -> Result<Vec<u32>> {
        let all = self.all(name);
        all.into_iter().map(|f| self.number(f, "a whole number >= 0")).collect()
    }

    /// Every value of a repeated string field.
    pub fn strings(&mut self, name: &str) -> Result<Vec<String>> {
        let all = self.all(name);
        all.into_iter()
            .map(|f| match self.scalar(f)? {
                Scalar::Str(s) => Ok(s.clone()),
                s => Err(self.err(f.line, format!("field `{name}` needs a quoted string, got {s}"))),
            })
            .collect()
    }

    /// Every occurrence of a repeated message field.
    pub fn messages(&mut self, name: &str) -> Result<Vec<&'a Message>> {
        let all = self.all(name);
        all.into_iter()
            .map(|f| match &f.value {
                Value::Message(m) => Ok(m),
                Value::Scalar(_) => Err(self.err(f.line, format!("field `{name}` is a {{ }} block, not a value"))),
            })
            .collect()
    }

    /// The single occurrence of a message field.
    pub fn message(&mut self, name: &str) -> Result<Option<&'a Message>> {
        match self.one(name)? {
            None => Ok(None),
            Some(f) => match &f.value {
                Value::Message(m) => Ok(Some(m)),
                Value::Scalar(_) => Err(self.err(f.line, format!("field `{name}` is a {{ }} block, not a value"))),
            },
        }
    }

    /// Fails on the first field nobody read. `caffe_only` lists fields that
    /// Caffe knows but this trainer does not implement, for a clearer message.
    pub fn finish(&self, caffe_only: &[&str]) -> Result<()> {
        for (f, used) in self.msg.fields.iter().zip(&self.used) {
            if !used {
                let msg = if caffe_only.contains(&f.name.as_str()) {
                    format!("field `{}` of {} is not supported by caffe-geeps; remove it", f.name, self.what)
                } else {
                    format!("unknown field `{}` in {}", f.name, self.what)
                };
                return Err(self.err(f.line, msg));
            }
        }
        Ok(())
    }
}
