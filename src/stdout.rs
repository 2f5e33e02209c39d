//! How a command that prints ends when standard output fails. Every command that writes to
//! standard output (`--once`, `--json`, `--csv`, `--loop`, `report`, `inspect`, `export`,
//! `clean`) ends the same way: a closed pipe (`| head`) is a quiet exit with status 0, since
//! the reader took what it wanted; any other failure (a full disk, `/dev/full`, an I/O error,
//! no standard output at all: `>&-`) is one line on standard error and status 1, never a
//! panic and never a silent 0.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether descriptor 1 was closed when the program started (see [`note_if_closed`]).
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Notes whether descriptor 1 is closed (`>&-`). Called by the binary before `main`, from
/// its `.init_array`: Rust's runtime then opens `/dev/null` on a closed 0, 1 or 2, after
/// which every write to the absent standard output would succeed and the command would end
/// with status 0 having printed nothing. Once noted, every write to standard output fails
/// with "it is closed".
pub fn note_if_closed() {
    // SAFETY: F_GETFD on a descriptor number only reads its flags.
    let rc = unsafe { libc::fcntl(1, libc::F_GETFD) };
    if rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::EBADF) {
        CLOSED.store(true, Ordering::Relaxed);
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "it is closed")
}

/// Status after a write to standard output failed with `error`; says why unless the pipe
/// was closed.
pub fn failed(error: &io::Error) -> ExitCode {
    if error.kind() == io::ErrorKind::BrokenPipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("vramscope: cannot write to standard output: {error}");
    ExitCode::from(1)
}

/// Standard output, locked, for a command that writes to it in pieces: every write fails
/// when there is no standard output ([`guard`]).
pub fn lock() -> Out {
    Out(io::stdout().lock())
}

/// See [`lock`].
pub struct Out(io::StdoutLock<'static>);

impl Out {
    pub fn is_terminal(&self) -> bool {
        self.0.is_terminal()
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if CLOSED.load(Ordering::Relaxed) {
            return Err(closed());
        }
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        if CLOSED.load(Ordering::Relaxed) {
            return Err(closed());
        }
        self.0.flush()
    }
}

/// Writes `text` to standard output and flushes it; `Err` holds the status to exit with.
pub fn print(text: &str) -> Result<(), ExitCode> {
    let mut out = lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| failed(&e))
}
