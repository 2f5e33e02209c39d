//! Channel directories: where a writer puts its file and the ownership rules both sides apply.
//! A directory is only trusted if it is a real directory (never a symlink) owned by the right
//! user and not writable by anyone else, or another user could plant or swap files in it.

use std::env;
use std::ffi::CString;
use std::fs::Metadata;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::layout::DIR_MODE;
use super::sys::check;

/// `$VRAMSCOPE_DIR` when set and not empty.
pub fn env_dir() -> Option<PathBuf> {
    env::var_os("VRAMSCOPE_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// How every user's directory in `/dev/shm` begins (root reads them all).
pub const SHM_DIR_PREFIX: &str = "vramscope-";

/// `/dev/shm/vramscope-<uid>`, where writers put their files.
pub fn shm_dir(uid: u32) -> PathBuf {
    user_shm_dir(Path::new("/dev/shm"), uid)
}

/// `<shm>/vramscope-<uid>`.
pub fn user_shm_dir(shm: &Path, uid: u32) -> PathBuf {
    shm.join(format!("{SHM_DIR_PREFIX}{uid}"))
}

/// Where a reader looks for users' `vramscope-<uid>` directories: `$VRAMSCOPE_SHM` when set
/// and not empty, else `/dev/shm`. The tests point it at a folder of their own, so that
/// other users' channels on the machine (which root reads) are not part of what they see.
pub fn shm_root() -> PathBuf {
    env::var_os("VRAMSCOPE_SHM")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// `$XDG_RUNTIME_DIR/vramscope` when the variable is set.
pub fn runtime_dir() -> Option<PathBuf> {
    env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(|d| PathBuf::from(d).join("vramscope"))
}

/// The directory a writer uses (§1): `$VRAMSCOPE_DIR`, else `/dev/shm/vramscope-<uid>` when
/// `/dev/shm` is a directory, else `$XDG_RUNTIME_DIR/vramscope`.
pub fn writer_dir(uid: u32) -> io::Result<PathBuf> {
    if let Some(d) = env_dir() {
        return Ok(d);
    }
    if Path::new("/dev/shm").is_dir() {
        return Ok(shm_dir(uid));
    }
    runtime_dir().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no channel directory: /dev/shm is missing and XDG_RUNTIME_DIR is unset",
        )
    })
}

/// Why `meta` (from lstat or fstat of a directory) may not be trusted, if it may not.
/// `forbidden` are the mode bits that must be clear. Owner checks are skipped for root
/// readers (`uid` 0 with `any_owner_for_root`), who watch every user's directory.
pub fn untrusted_dir(
    meta: &Metadata,
    uid: u32,
    forbidden: u32,
    any_owner_for_root: bool,
) -> Option<String> {
    if meta.file_type().is_symlink() {
        return Some("is a symlink".into());
    }
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    if meta.uid() != uid && !(any_owner_for_root && uid == 0) {
        return Some(format!("is owned by uid {}, not {uid}", meta.uid()));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & forbidden != 0 {
        return Some(format!("has mode {mode:04o}, allowing group/other access"));
    }
    None
}

/// A channel directory opened by descriptor, so checks and later file operations all refer to
/// the same directory even if its path is swapped meanwhile.
pub struct DirHandle {
    pub fd: OwnedFd,
    pub path: PathBuf,
}

pub(crate) fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

/// Opens (creating the last component, mode 0700, if missing) the writer's directory and
/// checks it: not a symlink, ours, no group/other permission bits at all.
pub fn open_writer_dir(path: &Path, uid: u32) -> io::Result<DirHandle> {
    let c = c_path(path)?;
    // SAFETY: `c` is a valid NUL-terminated path.
    let made = unsafe { libc::mkdir(c.as_ptr(), DIR_MODE) } == 0;
    if !made {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EEXIST) {
            return Err(err);
        }
    }
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is a valid path; O_NOFOLLOW refuses a symlink as the last component.
    let fd = check(unsafe { libc::open(c.as_ptr(), flags) }).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: is a symlink or not a directory", path.display()),
            )
        } else {
            e
        }
    })?;
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if made {
        // The umask may have removed owner bits we need; never add any for others.
        // SAFETY: fchmod on the descriptor we own.
        unsafe { libc::fchmod(fd.as_raw_fd(), DIR_MODE) };
    }
    let file = std::fs::File::from(fd);
    let meta = file.metadata()?;
    if let Some(why) = untrusted_dir(&meta, uid, 0o077, false) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("channel directory {} {why}", path.display()),
        ));
    }
    Ok(DirHandle {
        fd: OwnedFd::from(file),
        path: path.to_path_buf(),
    })
}
