//! Why a snapshot could not be read or asked about: one clear line, never a panic.

use std::fmt;

/// A snapshot that cannot be read, or a question it cannot answer. `Display` is one line,
/// with foreign text already cleaned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SitesError {
    kind: ErrorKind,
    line: String,
}

/// What went wrong, for callers that act on it (the CLI's exit status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file could not be opened or read.
    Io,
    /// The file is not a memory snapshot (not a pickle, truncated, the wrong shape).
    NotASnapshot,
    /// The pickle asks to run code or to build objects a snapshot never holds.
    Refused,
    /// A limit was passed (size, values, deadline).
    Limit,
    /// The snapshot is readable but cannot answer the question (no OOM in it, no such
    /// device).
    NotInSnapshot,
}

impl SitesError {
    pub(crate) fn new(kind: ErrorKind, line: impl Into<String>) -> Self {
        let mut line = line.into();
        crate::text::clean_in_place(&mut line);
        SitesError { kind, line }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The same error, its line led by the file it is about: with two files, a reader must
    /// not have to guess which one has no OOM or is not a snapshot.
    pub fn in_file(self, file: &std::path::Path) -> Self {
        let name = crate::text::clean(&file.display().to_string()).into_owned();
        if self.line.contains(&name) {
            return self;
        }
        SitesError {
            kind: self.kind,
            line: format!("{name}: {}", self.line),
        }
    }
}

impl fmt::Display for SitesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for SitesError {}
