//! Tells whether anything was added to or removed from a set of directories since the last
//! look, so that the channel sampler lists its directories only when something changed.
//!
//! Why: listing the channel directories (a `stat` of each candidate, then `open`,
//! `getdents` and `close` of each one found) every two seconds cost about 100 µs of CPU a
//! time on an idle machine, a tenth of a 1 s refresh's budget, to find nothing new nearly
//! always. With inotify the kernel keeps the answer, and asking is one `read`.
//!
//! Each directory's parent is watched too, for its creation or removal. Only changes of
//! entries are asked for, not writes to files, and in a parent only entries that could be a
//! channel directory count: `/dev/shm` is busy on a training machine (PyTorch's shared
//! tensors come and go there all the time) and must not set off a listing each time.

use crate::channel::dir::{SHM_DIR_PREFIX, c_path};
use crate::channel::sys::check;
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
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
    /// Watch descriptors of the directories themselves: every event there counts.
    dirs: HashSet<libc::c_int>,
    /// Per watch descriptor of a parent: the names in it that are watched directories.
    parents: HashMap<libc::c_int, HashSet<OsString>>,
    /// A watch could not be placed (limit reached, say): nothing can be trusted to be
    /// unchanged, so every look says "changed".
    blind: bool,
}

impl DirWatch {
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointers; the returned descriptor is checked and then owned.
        let fd = check(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })?;
        Ok(Self {
            // SAFETY: a fresh descriptor nothing else owns.
            inotify: unsafe { OwnedFd::from_raw_fd(fd) },
            dirs: HashSet::new(),
            parents: HashMap::new(),
            blind: false,
        })
    }

    /// Watches each directory and its parent. Watching what is already watched costs one
    /// syscall and changes nothing, so this is simply called before every full listing.
    pub fn watch<'a>(&mut self, dirs: impl IntoIterator<Item = &'a Path>) {
        for dir in dirs {
            self.place(dir, None);
            if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
                self.place(parent, Some(name));
            }
        }
    }

    /// One watch; `child` names the entry of interest when `path` is a parent.
    fn place(&mut self, path: &Path, child: Option<&OsStr>) {
        match self.add(path) {
            Ok(wd) => match child {
                Some(child) => {
                    self.parents.entry(wd).or_default().insert(child.to_owned());
                }
                None => {
                    self.dirs.insert(wd);
                }
            },
            // A directory that does not exist (yet) has nothing to watch; its parent sees
            // it come.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {}
            Err(_) => self.blind = true,
        }
    }

    fn add(&self, path: &Path) -> io::Result<libc::c_int> {
        let path = c_path(path)?;
        // SAFETY: a NUL-terminated path that outlives the call.
        check(unsafe {
            libc::inotify_add_watch(self.inotify.as_raw_fd(), path.as_ptr(), ENTRY_CHANGES)
        })
    }

    /// Whether any watched directory gained, lost or renamed an entry since the last call
    /// (or the kernel dropped events, or a watch is missing). Drains what is pending.
    pub fn changed(&mut self) -> bool {
        let mut changed = std::mem::take(&mut self.blind);
        // Room for several events with names of NAME_MAX bytes.
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reads at most `buf.len()` bytes into a buffer we own.
            let n =
                unsafe { libc::read(self.inotify.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else {
                // EAGAIN: nothing pending. Any other error: assume the worst.
                let again = io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
                return changed || !again;
            };
            changed |= self.take_events(&buf[..n.min(buf.len())]);
        }
    }

    /// Whether one of the events in `bytes` (whole `inotify_event`s, as `read` gives them)
    /// is a change that matters; forgets watches the kernel dropped.
    fn take_events(&mut self, mut bytes: &[u8]) -> bool {
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        let mut counts = false;
        while bytes.len() >= HEADER {
            let field = |at: usize| {
                let mut word = [0u8; 4];
                word.copy_from_slice(&bytes[at..at + 4]);
                word
            };
            let wd = libc::c_int::from_ne_bytes(field(0));
            let mask = u32::from_ne_bytes(field(4));
            let len = u32::from_ne_bytes(field(12)) as usize;
            let name_bytes = bytes.get(HEADER..HEADER + len).unwrap_or_default();
            // The name is NUL-padded.
            let name = name_bytes.split(|&b| b == 0).next().unwrap_or_default();
            counts |= mask & libc::IN_Q_OVERFLOW != 0
                || self.dirs.contains(&wd)
                || self.parents.get(&wd).is_some_and(|children| {
                    // Any user's `/dev/shm` directory: root lists them all.
                    name.starts_with(SHM_DIR_PREFIX.as_bytes())
                        || children.contains(OsStr::from_bytes(name))
                });
            if mask & libc::IN_IGNORED != 0 {
                // Its directory is gone; the number may come back for another one.
                self.dirs.remove(&wd);
                self.parents.remove(&wd);
            }
            bytes = bytes.get(HEADER + len..).unwrap_or_default();
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch on `<tempdir>/channels`, made first where `create`.
    fn watching_channels(create: bool) -> (tempfile::TempDir, std::path::PathBuf, DirWatch) {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("channels");
        if create {
            std::fs::create_dir(&dir).unwrap();
        }
        let mut watch = DirWatch::new().unwrap();
        watch.watch([dir.as_path()]);
        (parent, dir, watch)
    }

    #[test]
    fn quiet_until_an_entry_comes_or_goes() {
        let (_parent, dir, mut watch) = watching_channels(true);
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
    fn other_entries_of_a_parent_do_not_count() {
        let (parent, dir, mut watch) = watching_channels(true);
        // What PyTorch does in /dev/shm all day.
        std::fs::write(parent.path().join("torch_1234_0"), b"x").unwrap();
        std::fs::remove_file(parent.path().join("torch_1234_0")).unwrap();
        assert!(!watch.changed(), "a stranger in the parent");
        std::fs::create_dir(parent.path().join("vramscope-1000")).unwrap();
        assert!(watch.changed(), "another user's channel directory");
        std::fs::remove_dir(&dir).unwrap();
        assert!(watch.changed(), "the watched directory itself went");
    }

    #[test]
    fn a_directory_that_does_not_exist_yet_is_seen_coming() {
        let (_parent, dir, mut watch) = watching_channels(false);
        assert!(!watch.changed());
        std::fs::create_dir(&dir).unwrap();
        assert!(watch.changed(), "the parent saw it created");
        // After the next listing the directory itself is watched.
        watch.watch([dir.as_path()]);
        std::fs::write(dir.join("3-4.vsc"), b"x").unwrap();
        assert!(watch.changed());
    }
}
