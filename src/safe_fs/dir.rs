//! One open directory and everything done relative to it. Each name is one component (no
//! `/`, not `.` or `..`), and no call follows a symlink at that name: `openat` with
//! `O_NOFOLLOW`, `fstatat`/`fchownat` with `AT_SYMLINK_NOFOLLOW`, `unlinkat`, `mkdirat`,
//! `renameat`. Renaming or swapping the directory's path afterwards changes nothing here:
//! the descriptor still names the directory that was opened and checked.

use super::stat::{Kind, Stat};
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// How deep [`Dir::remove_tree`] goes: the trees removed (the attach agent's, a channel
/// folder) are two levels deep; a deeper one is not ours.
const MAX_TREE_DEPTH: usize = 16;

/// An open directory: `O_RDONLY | O_DIRECTORY | O_CLOEXEC`.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// Where it was when opened, for messages only: never opened again.
    shown: PathBuf,
}

/// One name in a directory, as `readdir` gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
}

/// `name` as one path component, or an error saying why it is not one.
pub(super) fn component(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} is not a single file name", name),
        ));
    }
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a file name holds a NUL byte"))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// ELOOP from an `O_NOFOLLOW` open means the name is a symlink: said as such.
fn symlink_refused(e: io::Error, shown: &Path) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is a symlink, not followed", shown.display()),
        )
    } else {
        e
    }
}

impl Dir {
    /// Opens `path` itself as a directory, refusing a symlink as its last component (the
    /// folders above it are resolved by the kernel: use [`super::walk`] where they matter).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is NUL-terminated; open returns a new descriptor or -1.
        let fd = check(unsafe { libc::open(c.as_ptr(), flags) })
            .map_err(|e| symlink_refused(e, path))?;
        // SAFETY: `fd` was just returned by open and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Dir {
            fd,
            shown: path.to_path_buf(),
        })
    }

    /// Opens `path` as a directory following every symlink in it: only for a link the kernel
    /// owns and must be followed (`/proc/PID/root`, a process's root folder).
    pub fn open_following(path: &Path) -> io::Result<Dir> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: `c` is NUL-terminated; open returns a new descriptor or -1.
        let fd = check(unsafe { libc::open(c.as_ptr(), flags) })?;
        // SAFETY: `fd` was just returned by open and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Dir {
            fd,
            shown: path.to_path_buf(),
        })
    }

    /// Takes an open directory descriptor (already checked by the caller).
    pub fn from_fd(fd: OwnedFd, shown: PathBuf) -> Dir {
        Dir { fd, shown }
    }

    /// Where it was when opened (for messages).
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// `/proc/self/fd/N`: for a program that takes a path (an interpreter, `sys.remote_exec`)
    /// and must reach this very directory; the kernel resolves it to the descriptor.
    pub fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// `fstat` of the directory itself.
    pub fn stat(&self) -> io::Result<Stat> {
        Stat::of(self.fd.as_fd())
    }

    /// `fstatat` of `name`, not following a symlink.
    pub fn stat_at(&self, name: &OsStr) -> io::Result<Stat> {
        Stat::at(self.fd.as_fd(), &component(name)?)
    }

    /// Another descriptor of the same directory.
    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
            shown: self.shown.clone(),
        })
    }

    fn openat(&self, name: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: the descriptor is open, `name` is NUL-terminated; openat returns a new
        // descriptor or -1.
        let fd = check(unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                flags,
                libc::c_uint::from(mode),
            )
        })?;
        // SAFETY: just returned by openat, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn joined(&self, name: &OsStr) -> PathBuf {
        self.shown.join(name)
    }

    /// The subdirectory `name` (never through a symlink).
    pub fn sub(&self, name: &OsStr) -> io::Result<Dir> {
        let c = component(name)?;
        let fd = self
            .openat(&c, libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(|e| {
                // With O_DIRECTORY a symlink fails as "not a directory": say what it is.
                let link = e.raw_os_error() == Some(libc::ENOTDIR)
                    && Stat::at(self.fd.as_fd(), &c).is_ok_and(|st| st.kind == Kind::Symlink);
                if link {
                    symlink_refused(
                        io::Error::from_raw_os_error(libc::ELOOP),
                        &self.joined(name),
                    )
                } else {
                    e
                }
            })?;
        Ok(Dir {
            fd,
            shown: self.joined(name),
        })
    }

    /// Opens the file `name` with `flags` (`O_RDONLY`, `O_WRONLY | O_APPEND`, with `O_CREAT`
    /// and `mode` to create...); `O_NOFOLLOW | O_CLOEXEC` are always added.
    pub fn open_file(&self, name: &OsStr, flags: libc::c_int, mode: u32) -> io::Result<File> {
        let c = component(name)?;
        let fd = self
            .openat(&c, flags, mode as libc::mode_t)
            .map_err(|e| symlink_refused(e, &self.joined(name)))?;
        Ok(File::from(fd))
    }

    /// Creates the file `name` afresh (`O_CREAT | O_EXCL`: fails if anything has that name)
    /// for writing, with `mode`.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        self.open_file(name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)
    }

    /// Opens `name` for reading without blocking on a FIFO; the caller checks what it got.
    pub fn open_read(&self, name: &OsStr) -> io::Result<File> {
        self.open_file(name, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY, 0)
    }

    /// `mkdirat(name, mode)`.
    pub fn create_dir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let c = component(name)?;
        // SAFETY: the descriptor is open and `c` NUL-terminated.
        check(unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) })?;
        Ok(())
    }

    /// `unlinkat(name)`: a symlink is removed, never its target.
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        let c = component(name)?;
        // SAFETY: as in `create_dir`.
        check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) })?;
        Ok(())
    }

    /// `unlinkat(name, AT_REMOVEDIR)`: an empty directory.
    pub fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        let c = component(name)?;
        // SAFETY: as in `create_dir`.
        check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) })?;
        Ok(())
    }

    /// Removes `name` and, when it is a directory, everything in it, each level opened by
    /// descriptor from the one above: a symlink anywhere is removed, never followed.
    pub fn remove_tree(&self, name: &OsStr) -> io::Result<()> {
        self.remove_tree_at(name, 0)
    }

    fn remove_tree_at(&self, name: &OsStr, depth: usize) -> io::Result<()> {
        if self.stat_at(name)?.kind != Kind::Dir {
            return self.remove_file(name);
        }
        if depth >= MAX_TREE_DEPTH {
            return Err(io::Error::other(format!(
                "{} is more than {MAX_TREE_DEPTH} levels deep",
                self.joined(name).display()
            )));
        }
        let sub = self.sub(name)?;
        for entry in sub.entries(usize::MAX)? {
            sub.remove_tree_at(&entry.name, depth + 1)?;
        }
        self.remove_dir(name)
    }

    /// `fchownat(name, uid, gid, AT_SYMLINK_NOFOLLOW)`.
    pub fn chown_at(&self, name: &OsStr, uid: u32, gid: u32) -> io::Result<()> {
        let c = component(name)?;
        // SAFETY: as in `create_dir`.
        check(unsafe {
            libc::fchownat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                uid,
                gid,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        Ok(())
    }

    /// `renameat(from, to)` inside this directory (neither name is followed).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (a, b) = (component(from)?, component(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: the descriptor is open and both names NUL-terminated.
        check(unsafe { libc::renameat(fd, a.as_ptr(), fd, b.as_ptr()) })?;
        Ok(())
    }

    /// `readlinkat(name)`, at most `PATH_MAX` bytes.
    pub fn read_link(&self, name: &OsStr) -> io::Result<OsString> {
        let c = component(name)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: the descriptor is open, `c` NUL-terminated, `buf` writable for its length.
        let n = unsafe {
            libc::readlinkat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(OsString::from_vec(buf))
    }

    /// The names in the directory (not `.` and `..`), at most `max` of them.
    pub fn entries(&self, max: usize) -> io::Result<Vec<Entry>> {
        // A descriptor of its own: closedir closes it, and the read position is its own.
        let dup = self.openat(c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let raw = std::os::fd::IntoRawFd::into_raw_fd(dup);
        // SAFETY: `raw` is an open directory descriptor that fdopendir takes over.
        let stream = unsafe { libc::fdopendir(raw) };
        if stream.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so the descriptor is still ours to close.
            unsafe { libc::close(raw) };
            return Err(e);
        }
        let mut names = Vec::new();
        while names.len() < max {
            // SAFETY: `stream` is a valid DIR*; readdir returns an entry or null.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: d_name is a NUL-terminated array inside the entry readdir returned.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            names.push(Entry {
                name: OsString::from_vec(name.to_vec()),
            });
        }
        // SAFETY: `stream` came from fdopendir and is closed once.
        unsafe { libc::closedir(stream) };
        Ok(names)
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn work_is_relative_to_the_opened_directory_even_after_its_path_is_swapped() {
        let top = tempfile::tempdir().unwrap();
        let real = top.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let dir = Dir::open(&real).unwrap();
        // The path now names something else: a symlink to another folder.
        let elsewhere = top.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::rename(&real, top.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &real).unwrap();
        dir.create_new(OsStr::new("f"), 0o600)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        assert!(top.path().join("moved/f").exists());
        assert!(!elsewhere.join("f").exists());
        assert!(Dir::open(&real).is_err(), "a symlink is not opened");
    }

    #[test]
    fn no_name_is_followed_and_no_name_is_a_path() {
        let top = tempfile::tempdir().unwrap();
        let dir = Dir::open(top.path()).unwrap();
        let target = top.path().join("target");
        std::fs::write(&target, "secret").unwrap();
        std::os::unix::fs::symlink(&target, top.path().join("link")).unwrap();
        let err = dir.open_read(OsStr::new("link")).unwrap_err();
        assert!(
            err.to_string().contains("is a symlink, not followed"),
            "{err}"
        );
        assert!(dir.sub(OsStr::new("link")).is_err());
        for bad in ["", ".", "..", "a/b", "/etc"] {
            assert!(dir.open_read(OsStr::new(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(dir.stat_at(OsStr::new("link")).unwrap().kind, Kind::Symlink);
        let mut text = String::new();
        dir.open_read(OsStr::new("target"))
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "secret");
    }

    #[test]
    fn remove_tree_removes_a_symlink_and_never_what_it_names() {
        let top = tempfile::tempdir().unwrap();
        let keep = top.path().join("keep");
        std::fs::create_dir(&keep).unwrap();
        std::fs::write(keep.join("precious"), "x").unwrap();
        let tree = top.path().join("tree/a/b");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(&keep, tree.join("to-keep")).unwrap();
        let dir = Dir::open(top.path()).unwrap();
        dir.remove_tree(OsStr::new("tree")).unwrap();
        assert!(!top.path().join("tree").exists());
        assert!(keep.join("precious").exists());
        let names: Vec<_> = dir
            .entries(10)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec![OsString::from("keep")]);
    }
}
