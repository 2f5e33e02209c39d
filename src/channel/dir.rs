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

/// The folder `path` names: the folders above it walked from `/` and checked on their
/// descriptors (`safe_fs::walk`: root's, or the one user's, writable by no one else unless
/// sticky, for root; anything for a user), the folder itself opened without following a
/// symlink. Its own owner and mode are the caller's to judge.
fn open_dir_unfollowed(path: &Path, euid: u32) -> Result<crate::safe_fs::Dir, String> {
    use crate::safe_fs::{Trust, walk_parent};
    let shown = || path.display().to_string();
    let (parent, name) =
        walk_parent(path, Trust::for_euid(euid)).map_err(|e| format!("{}: {e}", shown()))?;
    parent.sub(&name).map_err(|e| {
        let link = parent
            .stat_at(&name)
            .is_ok_and(|st| st.kind == crate::safe_fs::Kind::Symlink);
        if link {
            format!("{} is a symlink", shown())
        } else {
            format!("{}: {e}", shown())
        }
    })
}

/// Opens a channel directory the way a reader must, root above all: its folders walked from
/// `/` and checked on their descriptors (`safe_fs::walk`: root's, or the one user's, writable
/// by no one else unless sticky), the directory itself opened without following a symlink
/// and checked by `fstat` (a directory, its owner's unless we are root, not writable by group
/// or others). Every read, request and removal in it is then relative to what was checked:
/// a user who swaps the directory's path for a symlink meanwhile changes nothing.
pub fn open_channel_dir(path: &Path, euid: u32) -> Result<crate::safe_fs::Dir, String> {
    use crate::safe_fs::Kind;
    let shown = || path.display().to_string();
    let dir = open_dir_unfollowed(path, euid)?;
    let st = dir.stat().map_err(|e| format!("{}: {e}", shown()))?;
    let why = if st.kind != Kind::Dir {
        Some("is not a directory".to_string())
    } else if st.uid != euid && euid != 0 {
        Some(format!("is owned by uid {}, not {euid}", st.uid))
    } else if st.mode & 0o022 != 0 {
        Some(format!(
            "has mode {:04o}, allowing group/other access",
            st.mode
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(format!("{} {why}", shown())),
        None => Ok(dir),
    }
}

/// Why a channel file (or a snapshot beside it) was not opened: one line, and whether the
/// name was simply not there (a writer's old snapshot it already removed, a channel gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotOpened {
    pub missing: bool,
    pub why: String,
}

impl From<String> for NotOpened {
    fn from(why: String) -> Self {
        NotOpened {
            missing: false,
            why,
        }
    }
}

/// Opens the channel file at `path` (read-only, or read-write for a snapshot request) inside
/// its directory opened by [`open_channel_dir`]: the name is looked at (`fstatat`, not
/// following) and refused unless it is a regular file before it is opened (opening a FIFO or
/// a device can block or act), opened `O_NOFOLLOW | O_NONBLOCK`, and what was opened must be
/// what was looked at. The caller checks the file's owner and mode on the descriptor.
pub fn open_channel_file(path: &Path, euid: u32, write: bool) -> Result<std::fs::File, NotOpened> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err("not a file in a directory".to_string().into());
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = open_dir_unfollowed(parent, euid)?;
    open_channel_file_in(&dir, name, write)
}

/// The file `name` in `dir` (a directory opened and checked once), as [`open_channel_file`]
/// opens it: looked at without following, refused unless a regular file, opened
/// `O_NOFOLLOW | O_NONBLOCK`, and what was opened must be what was looked at.
pub fn open_channel_file_in(
    dir: &crate::safe_fs::Dir,
    name: &std::ffi::OsStr,
    write: bool,
) -> Result<std::fs::File, NotOpened> {
    use crate::safe_fs::Kind;
    use std::os::unix::fs::MetadataExt;
    let before = dir.stat_at(name).map_err(|e| NotOpened {
        missing: e.kind() == io::ErrorKind::NotFound,
        why: format!("cannot stat: {e}"),
    })?;
    if before.kind != Kind::File {
        return Err(format!("not a regular file: {}", before.kind.words()).into());
    }
    let access = if write { libc::O_RDWR } else { libc::O_RDONLY };
    let file = dir
        .open_file(name, access | libc::O_NONBLOCK | libc::O_NOCTTY, 0)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("symlink") {
                "not a regular file: a symlink".to_string()
            } else {
                format!("cannot open: {e}")
            }
        })?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if (meta.dev(), meta.ino()) != (before.dev, before.ino) {
        return Err("replaced while being opened".to_string().into());
    }
    Ok(file)
}
