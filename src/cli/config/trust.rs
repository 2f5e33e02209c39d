//! Reading the configuration file, and root's monitor taking no settings from a file another
//! user could have written: a setting picks the NVML library it loads (`nvml-lib`), and the
//! screen root acts on (signals) must not be steered by someone else.
//!
//! As root, the check and the read are one open: every folder from `/` is opened and checked
//! on its descriptor (owned by root, written by no one else, or shared with the sticky bit
//! such as /tmp: `safe_fs::Trust`), the file is opened relative to the last of them without
//! following it, and its own descriptor is checked before a byte is read. A user who swaps a
//! symlink or renames a folder on the way changes nothing that was read; checking a path and
//! then reading it again let such a user's file through. Any other user reads any file it can
//! (the kernel checks it as theirs). Either way the read is bounded
//! (`safe_fs::bounds::CONFIG`) and a FIFO or device is never read.

use crate::safe_fs::{self, Dir, Kind, ReadError, Stat, Trust, bounds};
use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;

/// Why no bytes came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No file by that name (or a folder on the way is missing): for the usual location,
    /// no file at all. The line says so for a file that was named.
    Missing(String),
    /// Anything else: the line to say.
    Problem(String),
}

impl Failure {
    /// The line to say.
    pub fn line(&self) -> &str {
        match self {
            Failure::Missing(line) | Failure::Problem(line) => line,
        }
    }
}

/// The bytes of the file at `path`, read as `euid` may. With `missing_ok` (the usual
/// location, read only when there), a root refusal on the way to a file that is not there is
/// no file rather than an error: `sudo` with the user's HOME must not stop every run.
pub fn read(path: &Path, euid: u32, missing_ok: bool) -> Result<Vec<u8>, Failure> {
    let shown = super::file::shown(path);
    if euid != 0 {
        // The usual location behind a folder this user may not search (HOME=/root kept by
        // `setpriv` or `su`) is no file, as a name nobody can look up is.
        return safe_fs::read_file(path, bounds::CONFIG).map_err(|e| match failure(&shown, e) {
            Failure::Problem(line) if missing_ok && !exists(path) => Failure::Missing(line),
            other => other,
        });
    }
    let trust = Trust::OwnedBy(0);
    let refused = |why: &str| {
        Failure::Problem(format!(
            "{shown}: refused: running as root, and {why}; root's monitor takes no settings \
             another user could write (--config none reads no file)"
        ))
    };
    let (dir, name) = match safe_fs::place_following(path, trust) {
        Ok(found) => found,
        Err(e) if safe_fs::is_refusal(&e) => {
            if missing_ok && !exists(path) {
                return Err(Failure::Missing(format!("{shown}: cannot read: {e}")));
            }
            return Err(refused(&e.to_string()));
        }
        Err(e) => return Err(failure(&shown, ReadError::Io(e))),
    };
    let file = match dir.open_read(&name) {
        Ok(file) => file,
        Err(e) if safe_fs::is_refusal(&e) => return Err(refused(&e.to_string())),
        Err(e) => return Err(failure(&shown, ReadError::Io(e))),
    };
    let st = Stat::of(file.as_fd()).map_err(|e| failure(&shown, ReadError::Io(e)))?;
    if st.kind != Kind::File {
        return Err(failure(&shown, ReadError::NotRegular(st.kind)));
    }
    if let Some(why) = trust.file(&st) {
        return Err(refused(&format!("it {why}")));
    }
    safe_fs::read_bounded(&file, bounds::CONFIG).map_err(|e| failure(&shown, e))
}

/// Whether anything has the name `path` gives, looked up by the kernel. Only for the usual
/// location after a refusal: it reads nothing and decides only between no file and a refusal
/// (neither takes a setting from the file).
fn exists(path: &Path) -> bool {
    let Ok((dir, name)) = safe_fs::place(path, Trust::Anyone) else {
        return false;
    };
    present(&dir, &name)
}

fn present(dir: &Dir, name: &OsStr) -> bool {
    !matches!(dir.stat_at(name), Err(e) if e.kind() == io::ErrorKind::NotFound)
}

fn failure(shown: &str, e: ReadError) -> Failure {
    match e {
        ReadError::Io(e) if e.kind() == io::ErrorKind::NotFound => {
            Failure::Missing(format!("{shown}: cannot read: {e}"))
        }
        ReadError::Io(e) => Failure::Problem(format!("{shown}: cannot read: {e}")),
        other => Failure::Problem(format!("{shown}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn what_is_not_a_small_regular_file_is_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let euid = crate::channel::sys::euid();
        let missing = read(&dir.path().join("none.toml"), euid, false).unwrap_err();
        assert!(matches!(missing, Failure::Missing(_)), "{missing:?}");
        assert!(
            missing.line().contains("none.toml: cannot read: "),
            "{missing:?}"
        );
        let folder = read(dir.path(), euid, false).unwrap_err();
        assert!(
            folder.line().ends_with(": is a folder, not a file"),
            "{folder:?}"
        );
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; (bounds::CONFIG.max_bytes + 1) as usize]).unwrap();
        assert!(read(&big, euid, false).unwrap_err().line().ends_with(
            "big.toml: is 1048577 bytes, more than the 1048576 bytes a configuration file may have"
        ));
        let fifo = dir.path().join("fifo.toml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        assert!(
            read(&fifo, euid, false).unwrap_err().line().ends_with(
                "fifo.toml: is not a regular file (a FIFO, device or socket is not read)"
            )
        );
        let ok = dir.path().join("ok.toml");
        std::fs::write(&ok, "ascii = true\n").unwrap();
        assert_eq!(read(&ok, euid, false).unwrap(), b"ascii = true\n");
    }

    /// Needs root to give a file away; CI runs as root.
    #[test]
    fn root_refuses_a_file_another_user_owns_or_may_write() {
        if crate::channel::sys::euid() != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read(&file, 0, false), Ok(Vec::new()), "root's own file");

        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        let owned = read(&file, 0, false).unwrap_err();
        assert!(
            owned
                .line()
                .contains("refused: running as root, and it belongs to uid 65534"),
            "{owned:?}"
        );
        assert!(!owned.line().contains('\n'));

        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let written = read(&file, 0, false).unwrap_err();
        assert!(
            written
                .line()
                .contains("it may be written by others (mode 666)"),
            "{written:?}"
        );

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let folder = read(&file, 0, false).unwrap_err();
        let expected = format!(
            "refused: running as root, and the folder {} may be written by others (mode 777)",
            dir.path().display()
        );
        assert!(folder.line().contains(&expected), "{folder:?}");
        // In the usual location, a folder root may not rely on is no file when none is there.
        assert!(matches!(
            read(&dir.path().join("absent.toml"), 0, true),
            Err(Failure::Missing(_))
        ));
        assert!(matches!(read(&file, 0, true), Err(Failure::Problem(_))));

        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(
            read(&file, 0, false),
            Ok(Vec::new()),
            "a sticky shared folder"
        );
    }
}
