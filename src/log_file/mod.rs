//! The monitor's own log (`--monitor-log FILE`, or `auto` for the XDG state directory), for a
//! monitor left running for days: with a UTC timestamp, every reason for an `n/a` or a refused
//! channel as it appears, changes or clears, and every restart of a stuck driver call. Off
//! unless asked for; never on stdout (the terminal is the screen). The file is rotated and
//! bounded (`rotate.rs`). A log that cannot be opened at start is an error the caller reports
//! (exit 2: the user asked for it), and so is one where its first line cannot be written
//! (a full disk, `/dev/full`); a write that fails later is dropped, since the screen is
//! the terminal and the monitor must go on.

mod path;
mod reasons;
mod rotate;

pub use path::resolve;
pub use reasons::ReasonLog;
pub use rotate::{KEEP, MAX_BYTES, Rotating};

use crate::safe_fs::Trust;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

struct Log {
    file: Rotating,
    reasons: ReasonLog,
}

static LOG: OnceLock<Mutex<Log>> = OnceLock::new();

/// Opens the log for the rest of the process and writes its first line; an error names the
/// file and the reason (a folder or file root may not rely on, a full disk, `/dev/full`).
pub fn open(path: &Path) -> Result<(), String> {
    let file = start(path, Trust::for_euid(crate::channel::sys::euid()))?;
    let log = Log {
        file,
        reasons: ReasonLog::default(),
    };
    if LOG.set(Mutex::new(log)).is_err() {
        return Err("the log is already open".to_string());
    }
    Ok(())
}

/// The log at `path` with its first line written.
fn start(path: &Path, trust: Trust) -> Result<Rotating, String> {
    let cannot = |e: std::io::Error| format!("cannot write the log {}: {e}", path.display());
    let mut file = Rotating::open(path, MAX_BYTES, KEEP, trust).map_err(cannot)?;
    let started = format!("vramscope {} started", env!("CARGO_PKG_VERSION"));
    file.write_line(&line(now_ms(), &started)).map_err(cannot)?;
    Ok(file)
}

/// Whether a log is open (callers skip work that only feeds it).
pub fn active() -> bool {
    LOG.get().is_some()
}

/// Writes `text` (made safe: no control characters) with the time, when a log is open.
pub fn note(text: &str) {
    if let Some(log) = LOG.get() {
        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
        let _ = log.file.write_line(&line(now_ms(), text));
    }
}

/// The reasons shown now (each `n/a`'s and each refused channel's); what changed since the
/// last call is written.
pub fn reasons(current: impl FnOnce() -> Vec<String>) {
    let Some(log) = LOG.get() else { return };
    let changes = {
        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
        log.reasons.update(current())
    };
    for change in changes {
        note(&change);
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One line of the log: `2026-11-25 17:10:00.123 UTC text`.
pub fn line(ms: u64, text: &str) -> String {
    format!(
        "{} {}\n",
        crate::model::time::utc_label(ms),
        crate::text::clean_bytes(text.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_the_utc_time_and_no_control_characters() {
        assert_eq!(
            line(1_764_090_600_123, "channel x refused: \x1b[31mred\u{202e}"),
            format!(
                "2025-11-25 17:10:00.123 UTC channel x refused: {}\n",
                crate::text::clean_bytes("\x1b[31mred\u{202e}".as_bytes())
            )
        );
        assert!(!line(0, "a\x1bb\nc").contains('\x1b'));
        assert_eq!(line(0, "a\nb").matches('\n').count(), 1);
    }

    #[test]
    fn a_first_line_that_cannot_be_written_is_an_error_naming_the_log() {
        let err = start(Path::new("/dev/full"), Trust::Anyone).err().unwrap();
        assert!(
            err.starts_with("cannot write the log /dev/full: No space left on device"),
            "{err}"
        );
        let err = start(Path::new("/dev/full"), Trust::OwnedBy(0))
            .err()
            .unwrap();
        assert_eq!(
            err,
            "cannot write the log /dev/full: /dev/full is not a regular file"
        );
    }
}
