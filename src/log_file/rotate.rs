//! A log file that never grows past `max_bytes`: when the next line would, `FILE` becomes
//! `FILE.1` (and `FILE.1` `FILE.2`, up to `keep` old files, the oldest dropped), so the log
//! takes at most `max_bytes * (keep + 1)` on disk however long the monitor runs.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// 10 MiB a file.
pub const MAX_BYTES: u64 = 10 << 20;
/// Two old files besides the current one.
pub const KEEP: u32 = 2;

pub struct Rotating {
    path: PathBuf,
    file: File,
    size: u64,
    max_bytes: u64,
    keep: u32,
}

impl Rotating {
    /// Opens `path` for appending (mode 0600; its directory made 0700 when missing).
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(Rotating {
            path: path.to_path_buf(),
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
            let from = self.old(n);
            if from.exists() {
                std::fs::rename(&from, self.old(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.old(1))?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        Ok(())
    }

    fn old(&self, n: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/v.log");
        let mut log = Rotating::open(&path, 100, 2).unwrap();
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
        let mut log = Rotating::open(&path, 1000, 2).unwrap();
        log.write_line("after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\nafter\n");
    }
}
