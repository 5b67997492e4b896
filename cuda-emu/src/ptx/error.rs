//! What is wrong with PTX text, at which line: the error the parser and
//! the decoder return. Must never carry anything but the line and the words.

/// Something wrong with PTX text, at a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub line: u32,
    pub message: String,
}

impl Error {
    pub fn at(line: u32, message: impl Into<String>) -> Error {
        Error { line, message: message.into() }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PTX line {}: {}", self.line, self.message)
    }
}
