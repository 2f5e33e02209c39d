//! A log file that never grows past `max_bytes`: when the next line would, `FILE` becomes
//! `FILE.1` (and `FILE.1` `FILE.2`, up to `keep` old files, the oldest dropped), so the log
//! takes at most `max_bytes * (keep + 1)` on disk however long the monitor runs.
//!
//! The file is reached through `safe_fs`: as root its folder is walked from `/` and checked
//! (owned by root, written by no one else, or sticky such as /tmp), the log is opened relative
//! to that folder without following a symlink, and its descriptor must say a regular file of
//! root's with one link that no one else may write; rotation renames within that same folder,
//! never by path. A symlink or a hard link planted under the log's name, or a folder a user
//! controls, is refused: root never appends to a file it did not mean.

use crate::safe_fs::{self, Dir, Trust};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// 10 MiB a file.
pub const MAX_BYTES: u64 = 10 << 20;
/// Two old files besides the current one.
pub const KEEP: u32 = 2;

pub struct Rotating {
    /// The folder, opened and checked once; every later open and rename is relative to it.
    dir: Dir,
    name: OsString,
    trust: Trust,
    file: File,
    size: u64,
    max_bytes: u64,
    keep: u32,
}

impl Rotating {
    /// Opens `path` for appending (mode 0600; its missing folders made 0700), checked as
    /// `trust` says (`Trust::for_euid`).
    pub fn open(path: &Path, max_bytes: u64, keep: u32, trust: Trust) -> io::Result<Self> {
        let (dir, name) = safe_fs::place_creating(path, trust, 0o700)?;
        let file = open_append(&dir, &name, trust)?;
        let size = file.metadata()?.len();
        Ok(Rotating {
            dir,
            name,
            trust,
            file,
            size,
            max_bytes,
            keep,
        })
    }

    pub fn write_line(&mut self, line: &str) -> io::Result<()> {
        let len = line.len() as u64;
        if self.size > 0 && self.size + len > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(line.as_bytes())?;
        self.size += len;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        if self.keep == 0 {
            self.file.set_len(0)?;
            self.size = 0;
            return Ok(());
        }
        for n in (1..self.keep).rev() {
            match self.dir.rename(&self.old(n), &self.old(n + 1)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        self.dir.rename(&self.name, &self.old(1))?;
        self.file = open_append(&self.dir, &self.name, self.trust)?;
        self.size = 0;
        Ok(())
    }

    fn old(&self, n: u32) -> OsString {
        let mut name = self.name.clone();
        name.push(format!(".{n}"));
        name
    }
}

fn open_append(dir: &Dir, name: &OsStr, trust: Trust) -> io::Result<File> {
    let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT;
    safe_fs::open_checked(dir, name, flags, 0o600, trust)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller's own rule: as root (CI) the checked path is the one exercised.
    fn caller() -> Trust {
        Trust::for_euid(crate::channel::sys::euid())
    }

    #[test]
    fn the_log_rotates_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/v.log");
        let mut log = Rotating::open(&path, 100, 2, caller()).unwrap();
        for i in 0..50 {
            log.write_line(&format!("line {i:03} of the log\n"))
                .unwrap();
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let current = read(&path);
        let one = read(&dir.path().join("sub/v.log.1"));
        let two = read(&dir.path().join("sub/v.log.2"));
        assert!(!dir.path().join("sub/v.log.3").exists());
        for text in [&current, &one, &two] {
            assert!(text.len() <= 100, "{text:?}");
        }
        assert!(current.ends_with("line 049 of the log\n"), "{current:?}");
        // The newest lines in order across the files, none lost between them.
        let all = format!("{two}{one}{current}");
        let numbers: Vec<u32> = all.lines().map(|l| l[5..8].parse().unwrap()).collect();
        assert_eq!(
            numbers,
            ((50 - numbers.len() as u32)..50).collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_existing_log_is_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.log");
        std::fs::write(&path, "before\n").unwrap();
        let mut log = Rotating::open(&path, 1000, 2, caller()).unwrap();
        log.write_line("after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\nafter\n");
    }
}
