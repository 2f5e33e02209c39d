//! Tells whether anything was added to or removed from a set of directories since the last
//! look, so that the channel sampler lists its directories only when something changed.
//!
//! Why: listing the channel directories (a `stat` of each candidate, then `open`,
//! `getdents` and `close` of each one found) every two seconds cost about 100 µs of CPU a
//! time on an idle machine, a tenth of a 1 s refresh's budget, to find nothing new nearly
//! always. With inotify the kernel keeps the answer, and asking is one `read`.
//!
//! Each directory's parent is watched too, for its creation or removal. Only changes of
//! entries are asked for, not writes to files: a busy `/dev/shm` must not wake us.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const ENTRY_CHANGES: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

pub struct DirWatch {
    inotify: OwnedFd,
    /// A watch could not be placed (limit reached, say): nothing can be trusted to be
    /// unchanged, so every look says "changed".
    blind: bool,
}

impl DirWatch {
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointers; the returned descriptor is checked and then owned.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: a fresh descriptor nothing else owns.
            inotify: unsafe { OwnedFd::from_raw_fd(fd) },
            blind: false,
        })
    }

    /// Watches each directory and its parent. Watching what is already watched costs one
    /// syscall and changes nothing, so this is simply called after every full listing.
    pub fn watch<'a>(&mut self, dirs: impl IntoIterator<Item = &'a Path>) {
        for dir in dirs {
            for path in [Some(dir), dir.parent()].into_iter().flatten() {
                // A directory that does not exist (yet) has nothing to watch; its parent
                // sees it come.
                if let Err(e) = self.add(path)
                    && e.raw_os_error() != Some(libc::ENOENT)
                    && e.raw_os_error() != Some(libc::ENOTDIR)
                {
                    self.blind = true;
                }
            }
        }
    }

    fn add(&self, path: &Path) -> io::Result<()> {
        let mut bytes = path.as_os_str().as_bytes().to_vec();
        bytes.push(0);
        // SAFETY: `bytes` is a NUL-terminated path that outlives the call.
        let wd = unsafe {
            libc::inotify_add_watch(
                self.inotify.as_raw_fd(),
                bytes.as_ptr().cast(),
                ENTRY_CHANGES,
            )
        };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether any watched directory gained, lost or renamed an entry since the last call
    /// (or the kernel dropped events, or a watch is missing). Drains what is pending.
    pub fn changed(&mut self) -> bool {
        let mut changed = std::mem::take(&mut self.blind);
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reads at most `buf.len()` bytes into a buffer we own.
            let n =
                unsafe { libc::read(self.inotify.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            match n {
                n if n > 0 => changed = true,
                // EAGAIN: nothing pending. Any other error: assume the worst.
                _ => {
                    let again = io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
                    return changed || n == 0 || !again;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_until_an_entry_comes_or_goes() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("channels");
        std::fs::create_dir(&dir).unwrap();
        let mut watch = DirWatch::new().unwrap();
        watch.watch([dir.as_path()]);
        assert!(!watch.changed(), "nothing happened yet");

        std::fs::write(dir.join("1-2.vsc"), b"x").unwrap();
        assert!(watch.changed(), "a new file");
        assert!(!watch.changed(), "events are drained");

        // Writes to a file already there are not entry changes.
        std::fs::write(dir.join("1-2.vsc"), b"more").unwrap();
        assert!(!watch.changed(), "a rewrite of an existing file");

        std::fs::remove_file(dir.join("1-2.vsc")).unwrap();
        assert!(watch.changed(), "a removal");
    }

    #[test]
    fn a_directory_that_does_not_exist_yet_is_seen_coming() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("vramscope-0");
        let mut watch = DirWatch::new().unwrap();
        watch.watch([dir.as_path()]);
        assert!(!watch.changed());
        std::fs::create_dir(&dir).unwrap();
        assert!(watch.changed(), "the parent saw it created");
        // After the next listing the directory itself is watched.
        watch.watch([dir.as_path()]);
        std::fs::write(dir.join("3-4.vsc"), b"x").unwrap();
        assert!(watch.changed());
    }
}
