//! What `fstat` and `fstatat(AT_SYMLINK_NOFOLLOW)` say about one descriptor or one name.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The kind of file, as its mode says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    // The rest are never read as a file: opening or reading one could block, act or never end.
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
}

impl Kind {
    /// What it is, in words: `a FIFO`, `a character device`...
    pub fn words(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symlink",
            Kind::Fifo => "a FIFO",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Socket => "a socket",
        }
    }
}

/// The facts a check needs, read from a descriptor (never from a path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    pub uid: u32,
    pub gid: u32,
    /// The permission bits with setuid, setgid and sticky (`& 0o7777`).
    pub mode: u32,
    pub nlink: u64,
    pub size: u64,
    /// Last modification, seconds since the epoch.
    pub mtime: i64,
    pub dev: u64,
    pub ino: u64,
}

impl Stat {
    fn from_raw(st: &libc::stat) -> Stat {
        let kind = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFCHR => Kind::CharDevice,
            libc::S_IFBLK => Kind::BlockDevice,
            _ => Kind::Socket,
        };
        Stat {
            kind,
            uid: st.st_uid,
            gid: st.st_gid,
            mode: st.st_mode & 0o7777,
            // u32 on some targets (aarch64), u64 on x86_64.
            #[allow(clippy::useless_conversion, reason = "st_nlink is u32 on aarch64")]
            nlink: u64::from(st.st_nlink),
            size: st.st_size.max(0) as u64,
            mtime: st.st_mtime,
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }

    /// `fstat` of an open descriptor.
    pub fn of(fd: BorrowedFd<'_>) -> io::Result<Stat> {
        // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open for the borrow; `st` is writable.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Stat::from_raw(&st))
    }

    /// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: a symlink is described, not followed.
    pub fn at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Stat> {
        // SAFETY: as in `of`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `dir` is open, `name` is NUL-terminated, `st` is writable.
        let rc = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Stat::from_raw(&st))
    }

    /// The same file as `other` (device and inode).
    pub fn same_file(&self, other: &Stat) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}
