//! The manifest of a checkpoint: which clock, which world, which tables,
//! and a length and CRC-32 per file, as a small line-based text file
//! (`MANIFEST`) that a person can read. It owns writing and parsing that
//! text and checking files against it; it must never decide where
//! checkpoints live (`layout.rs`) or read rows from an instance.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, Result};

/// The first line of every manifest; the number is the format's version.
const HEADER: &str = "geeps checkpoint 1";

/// One file of a checkpoint, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    /// The file's name inside the checkpoint folder.
    pub(crate) file: String,
    pub(crate) bytes: u64,
    pub(crate) crc32: u32,
}

/// A parameter table in a checkpoint: all its rows, dense, in row order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableEntry {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) rows: u32,
    /// The clocks every worker had ended on the table.
    pub(crate) clock: u64,
    pub(crate) data: FileEntry,
}

/// What a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// The instance clock the checkpoint was taken at (every table's lowest).
    pub(crate) clock: u64,
    /// Workers of the cluster that wrote it.
    pub(crate) workers: usize,
    pub(crate) row_width: usize,
    pub(crate) tables: Vec<TableEntry>,
    /// Each worker's own state (`rank-R.state`), in rank order.
    pub(crate) rank_states: Vec<FileEntry>,
}

impl Manifest {
    pub(crate) fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{HEADER}");
        let _ = writeln!(s, "clock {}", self.clock);
        let _ = writeln!(s, "workers {}", self.workers);
        let _ = writeln!(s, "row_width {}", self.row_width);
        for t in &self.tables {
            // The name goes last: it may hold spaces.
            let _ = writeln!(
                s,
                "table {} rows={} clock={} {} name={}",
                t.id,
                t.rows,
                t.clock,
                file_fields(&t.data),
                t.name
            );
        }
        for (rank, f) in self.rank_states.iter().enumerate() {
            let _ = writeln!(s, "rank {rank} {}", file_fields(f));
        }
        s
    }

    /// Parses a manifest; `origin` names it in errors.
    pub(crate) fn parse(text: &str, origin: &Path) -> Result<Manifest> {
        let bad = |line: usize, what: String| Error::Checkpoint {
            path: origin.display().to_string(),
            reason: format!("line {line}: {what}"),
        };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        match lines.next() {
            Some((_, HEADER)) => {}
            Some((n, other)) => return Err(bad(n, format!("`{other}` is not a geeps checkpoint manifest ({HEADER})"))),
            None => return Err(bad(1, "the manifest is empty".into())),
        }
        let (mut clock, mut workers, mut row_width) = (None, None, None);
        let (mut tables, mut rank_states) = (Vec::new(), Vec::new());
        for (n, line) in lines {
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            let number =
                |v: &str| v.trim().parse::<u64>().map_err(|_| bad(n, format!("`{word}` needs a number, got `{v}`")));
            match word {
                "clock" => clock = Some(number(rest)?),
                "workers" => workers = Some(number(rest)? as usize),
                "row_width" => row_width = Some(number(rest)? as usize),
                "table" => {
                    let (fields, name) =
                        rest.split_once(" name=").ok_or_else(|| bad(n, "a table line ends with `name=`".into()))?;
                    let mut parts = fields.split(' ');
                    let id = number(parts.next().unwrap_or(""))? as u32;
                    let fields = Fields::parse(parts, n, &bad)?;
                    tables.push(TableEntry {
                        id,
                        name: name.to_string(),
                        rows: fields.number("rows")? as u32,
                        clock: fields.number("clock")?,
                        data: fields.file()?,
                    });
                }
                "rank" => {
                    let mut parts = rest.split(' ');
                    let rank = number(parts.next().unwrap_or(""))? as usize;
                    if rank != rank_states.len() {
                        return Err(bad(
                            n,
                            format!("rank {rank} listed where rank {} was expected", rank_states.len()),
                        ));
                    }
                    rank_states.push(Fields::parse(parts, n, &bad)?.file()?);
                }
                "" => {}
                other => return Err(bad(n, format!("unknown entry `{other}`"))),
            }
        }
        let missing = |what: &str| bad(0, format!("no `{what}` line"));
        Ok(Manifest {
            clock: clock.ok_or_else(|| missing("clock"))?,
            workers: workers.ok_or_else(|| missing("workers"))?,
            row_width: row_width.ok_or_else(|| missing("row_width"))?,
            tables,
            rank_states,
        })
    }
}

fn file_fields(f: &FileEntry) -> String {
    format!("file={} bytes={} crc32={:08x}", f.file, f.bytes, f.crc32)
}

/// `key=value` fields of one manifest line.
struct Fields<'a, F: Fn(usize, String) -> Error> {
    pairs: Vec<(&'a str, &'a str)>,
    line: usize,
    bad: &'a F,
}

impl<'a, F: Fn(usize, String) -> Error> Fields<'a, F> {
    fn parse(parts: impl Iterator<Item = &'a str>, line: usize, bad: &'a F) -> Result<Self> {
        let mut pairs = Vec::new();
        for p in parts.filter(|p| !p.is_empty()) {
            let kv = p.split_once('=').ok_or_else(|| bad(line, format!("`{p}` is not key=value")))?;
            pairs.push(kv);
        }
        Ok(Fields { pairs, line, bad })
    }

    fn get(&self, key: &str) -> Result<&'a str> {
        self.pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .ok_or_else(|| (self.bad)(self.line, format!("no `{key}=`")))
    }

    fn number(&self, key: &str) -> Result<u64> {
        let v = self.get(key)?;
        v.parse().map_err(|_| (self.bad)(self.line, format!("`{key}={v}` is not a number")))
    }

    fn file(&self) -> Result<FileEntry> {
        let file = self.get("file")?;
        if file.is_empty() || file.contains('/') || file.contains('\\') || file.starts_with('.') {
            return Err((self.bad)(
                self.line,
                format!("file name `{file}` must be a plain name inside the checkpoint"),
            ));
        }
        let crc = self.get("crc32")?;
        Ok(FileEntry {
            file: file.to_string(),
            bytes: self.number("bytes")?,
            crc32: u32::from_str_radix(crc, 16)
                .map_err(|_| (self.bad)(self.line, format!("`crc32={crc}` is not 8 hex digits")))?,
        })
    }
}

/// Checks a file's length and CRC-32 against its entry.
pub(crate) fn verify(folder: &Path, entry: &FileEntry) -> Result<Vec<u8>> {
    let path = folder.join(&entry.file);
    let bytes = std::fs::read(&path)
        .map_err(|e| Error::Checkpoint { path: path.display().to_string(), reason: format!("cannot read it: {e}") })?;
    if bytes.len() as u64 != entry.bytes {
        return Err(Error::Checkpoint {
            path: path.display().to_string(),
            reason: format!("{} bytes where the manifest says {} (a torn or altered file)", bytes.len(), entry.bytes),
        });
    }
    let crc = crc32fast::hash(&bytes);
    if crc != entry.crc32 {
        return Err(Error::Checkpoint {
            path: path.display().to_string(),
            reason: format!("CRC-32 {crc:08x} where the manifest says {:08x} (a corrupted file)", entry.crc32),
        });
    }
    Ok(bytes)
}

/// The manifest entry of bytes about to be written as `file`.
pub(crate) fn entry_of(file: &str, bytes: &[u8]) -> FileEntry {
    FileEntry { file: file.to_string(), bytes: bytes.len() as u64, crc32: crc32fast::hash(bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            clock: 42,
            workers: 3,
            row_width: 4,
            tables: vec![TableEntry {
                id: 1,
                name: "conv 1 weights".into(),
                rows: 7,
                clock: 42,
                data: entry_of("table-1.f32", b"abcd"),
            }],
            rank_states: vec![entry_of("rank-0.state", b""), entry_of("rank-1.state", b"xy")],
        }
    }

    #[test]
    fn text_round_trips() {
        let m = sample();
        assert_eq!(Manifest::parse(&m.to_text(), Path::new("M")).unwrap(), m);
    }

    #[test]
    fn bad_manifests_name_the_line() {
        let text = sample().to_text().replace("rows=7", "rows=seven");
        let e = Manifest::parse(&text, Path::new("M")).unwrap_err().to_string();
        assert!(e.contains("line 5") && e.contains("rows=seven"), "{e}");
        let e = Manifest::parse("hello\n", Path::new("M")).unwrap_err().to_string();
        assert!(e.contains("not a geeps checkpoint manifest"), "{e}");
        let text = sample().to_text().replace("file=table-1.f32", "file=../x");
        assert!(Manifest::parse(&text, Path::new("M")).unwrap_err().to_string().contains("plain name"));
        let text = sample().to_text().replace("clock 42\n", "");
        assert!(Manifest::parse(&text, Path::new("M")).unwrap_err().to_string().contains("no `clock` line"));
    }
}
