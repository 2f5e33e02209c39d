//! How a command that prints ends when standard output fails. Every command that writes to
//! standard output (`--once`, `--json`, `--csv`, `--loop`, `report`, `inspect`, `export`,
//! `clean`) ends the same way: a closed pipe (`| head`) is a quiet exit with status 0, since
//! the reader took what it wanted; any other failure (a full disk, `/dev/full`, an I/O error)
//! is one line on standard error and status 1, never a panic and never a silent 0.

use std::io::{self, Write};
use std::process::ExitCode;

/// Status after a write to standard output failed with `error`; says why unless the pipe
/// was closed.
pub fn failed(error: &io::Error) -> ExitCode {
    if error.kind() == io::ErrorKind::BrokenPipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("vramscope: cannot write to standard output: {error}");
    ExitCode::from(1)
}

/// Writes `text` to standard output and flushes it; `Err` holds the status to exit with.
pub fn print(text: &str) -> Result<(), ExitCode> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| failed(&e))
}
