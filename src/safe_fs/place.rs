//! A file a command names by path (a configuration file, a log, a recording), reached the
//! way the caller's privilege needs: for a caller whose files are checked (root) its folder
//! is walked from `/` and checked ([`walk_parent`]), the file itself is opened relative to
//! that folder without following it, and what was opened is checked on its descriptor
//! ([`open_checked`]). For any other caller the kernel resolves the folder, since it checks
//! every step as that caller's own and the caller reaches only what its user may.
//!
//! A symlink as the last component is never opened ([`Dir`] follows none); for a file only
//! read, [`place_following`] follows one when [`Trust`] allows it (its owner is trusted and
//! its folder was checked, so nobody else could have put it there), by walking its target
//! again from `/`: root's own `~/.config/vramscope/config.toml -> /etc/...` works, a user's
//! link in `/tmp` is refused.

use super::dir::Dir;
use super::stat::{Kind, Stat};
use super::trust::Trust;
use super::walk::{walk, walk_parent};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Linux's own limit on symlinks in one lookup.
const MAX_LINKS: usize = 40;

/// Whether `e` is a check's refusal (a folder or file the caller may not rely on, a symlink
/// not followed) rather than a failure the system reported.
pub fn is_refusal(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

fn refusal(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

/// The folder holding the file `path` names, and the file's name in it (to open with
/// [`open_checked`] or [`Dir::open_file`], which do not follow it).
pub fn place(path: &Path, trust: Trust) -> io::Result<(Dir, OsString)> {
    if !trust.checks() {
        return by_kernel(path, None);
    }
    walk_parent(path, trust)
}

/// [`place`], making the missing folders on the way with `mode` (each made relative to the
/// checked folder above it, and checked once made: one a user made first is refused).
pub fn place_creating(path: &Path, trust: Trust, mode: u32) -> io::Result<(Dir, OsString)> {
    if !trust.checks() {
        return by_kernel(path, Some(mode));
    }
    walk_parent_creating(path, trust, mode)
}

/// [`place`] for a file to read, where a symlink as the last component that `trust` allows
/// is followed (its target walked again from `/`); one it does not allow is refused. For
/// an unprivileged caller the name is left to the open, as for [`place`].
pub fn place_following(path: &Path, trust: Trust) -> io::Result<(Dir, OsString)> {
    if !trust.checks() {
        return by_kernel(path, None);
    }
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let (dir, name) = walk_parent(&path, trust)?;
        let st = match dir.stat_at(&name) {
            Ok(st) => st,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((dir, name)),
            Err(e) => return Err(e),
        };
        if st.kind != Kind::Symlink {
            return Ok((dir, name));
        }
        if let Some(why) = trust.link(&st) {
            return Err(refusal(format!(
                "{} {why}",
                dir.shown().join(&name).display()
            )));
        }
        // The folder's real path (the walk's), so a relative target is walked from it.
        path = dir.shown().join(dir.read_link(&name)?);
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// The name of the file `path` names, or why it names none.
fn file_name(path: &Path) -> io::Result<OsString> {
    path.file_name()
        .filter(|_| !path.as_os_str().as_bytes().ends_with(b"/"))
        .map(OsStr::to_os_string)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} does not name a file", path.display()),
            )
        })
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An unprivileged caller's folder, resolved by the kernel as that caller: `O_PATH`, so a
/// folder the user may pass through but not list (mode 0711) is fine, as it is to `open`.
fn by_kernel(path: &Path, create: Option<u32>) -> io::Result<(Dir, OsString)> {
    let name = file_name(path)?;
    let folder = parent(path);
    if let Some(mode) = create {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(folder)?;
    }
    let c = CString::new(folder.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: `c` is NUL-terminated; open returns a new descriptor or -1.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok((Dir::from_fd(fd, folder.to_path_buf()), name))
}

/// [`walk_parent`], making the folders that are missing: the deepest folder that exists is
/// walked and checked, and each missing one below it is made and opened relative to the one
/// above, never followed, and checked.
fn walk_parent_creating(path: &Path, trust: Trust, mode: u32) -> io::Result<(Dir, OsString)> {
    let name = file_name(path)?;
    let mut missing: Vec<OsString> = Vec::new();
    let mut at: PathBuf = parent(path).to_path_buf();
    let mut dir = loop {
        match walk(&at, trust) {
            Ok(dir) => break dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(file_name(&at).map_err(|_| e)?);
                at = parent(&at).to_path_buf();
            }
            Err(e) => return Err(e),
        }
    };
    for folder in missing.iter().rev() {
        match dir.create_dir(folder, mode) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let sub = dir.sub(folder)?;
        if let Some(why) = trust.folder(&sub.stat()?) {
            return Err(refusal(format!(
                "the folder {} {why}",
                sub.shown().display()
            )));
        }
        dir = sub;
    }
    Ok((dir, name))
}

/// Opens `name` in `dir` with `flags` (and `mode` when it creates it); `O_NOFOLLOW`,
/// `O_NONBLOCK` (a FIFO planted under the name does not hang the open) and `O_CLOEXEC` are
/// always added. When `trust` checks, what was opened must be a file it may rely on
/// ([`Trust::file`]: regular, owned by root or its user, one link, written by no one else),
/// said by `fstat` on the descriptor; `O_TRUNC` is applied only after that check, so a file
/// refused is never emptied.
pub fn open_checked(
    dir: &Dir,
    name: &OsStr,
    flags: libc::c_int,
    mode: u32,
    trust: Trust,
) -> io::Result<File> {
    let truncate = flags & libc::O_TRUNC != 0;
    let file = dir
        .open_file(name, (flags & !libc::O_TRUNC) | libc::O_NONBLOCK, mode)
        .map_err(|e| {
            // With O_CREAT in a sticky folder the kernel may say EACCES (protected_regular)
            // where a symlink is the reason: said as such.
            match dir.stat_at(name) {
                Ok(st) if st.kind == Kind::Symlink => refusal(format!(
                    "{} is a symlink, not followed",
                    dir.shown().join(name).display()
                )),
                _ => e,
            }
        })?;
    let st = Stat::of(file.as_fd())?;
    if let Some(why) = trust.file(&st) {
        return Err(refusal(format!(
            "{} {why}",
            dir.shown().join(name).display()
        )));
    }
    if truncate && st.kind == Kind::File {
        file.set_len(0)?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const APPEND: libc::c_int = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT;

    #[test]
    fn a_user_reaches_the_folder_the_kernel_resolves_and_missing_ones_are_made() {
        let top = tempfile::tempdir().unwrap();
        let path = top.path().join("a/b/v.log");
        assert_eq!(
            place(&path, Trust::Anyone).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let (dir, name) = place_creating(&path, Trust::Anyone, 0o700).unwrap();
        assert_eq!(name, "v.log");
        open_checked(&dir, &name, APPEND, 0o600, Trust::Anyone)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
        // The kernel's folder (O_PATH) still names, renames and removes relative to itself.
        dir.rename(&name, OsStr::new("w.log")).unwrap();
        assert_eq!(dir.stat_at(OsStr::new("w.log")).unwrap().kind, Kind::File);
        dir.remove_file(OsStr::new("w.log")).unwrap();
        assert!(!path.exists() && !path.with_file_name("w.log").exists());
        assert!(place(Path::new("/tmp/"), Trust::Anyone).is_err());
    }

    #[test]
    fn a_symlink_as_the_file_is_never_opened_and_a_truncation_waits_for_the_check() {
        let top = tempfile::tempdir().unwrap();
        let target = top.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        std::os::unix::fs::symlink(&target, top.path().join("link")).unwrap();
        let (dir, name) = place(&top.path().join("link"), Trust::Anyone).unwrap();
        let err =
            open_checked(&dir, &name, APPEND | libc::O_TRUNC, 0o600, Trust::Anyone).unwrap_err();
        assert!(is_refusal(&err), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    }

    /// Needs root to give files away; CI runs as root.
    #[test]
    fn root_follows_only_its_own_links_and_refuses_what_another_user_could_change() {
        if crate::channel::sys::euid() != 0 {
            eprintln!("skipped: not root");
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        let top = tempfile::tempdir().unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = Trust::OwnedBy(0);
        let real = top.path().join("real.toml");
        std::fs::write(&real, "mine").unwrap();
        std::os::unix::fs::symlink(&real, top.path().join("ours")).unwrap();
        let (dir, name) = place_following(&top.path().join("ours"), root).unwrap();
        assert_eq!(name, "real.toml");
        let (_, own_name) = place(&top.path().join("ours"), root).unwrap();
        assert_eq!(own_name, "ours", "a writer's name is never followed");
        assert!(open_checked(&dir, &name, libc::O_RDONLY, 0, root).is_ok());

        std::os::unix::fs::symlink(&real, top.path().join("theirs")).unwrap();
        std::os::unix::fs::lchown(top.path().join("theirs"), Some(65534), None).unwrap();
        let err = place_following(&top.path().join("theirs"), root).unwrap_err();
        assert!(is_refusal(&err));
        assert!(
            err.to_string()
                .ends_with("theirs is a symlink that belongs to uid 65534"),
            "{err}"
        );

        std::os::unix::fs::chown(&real, Some(65534), None).unwrap();
        let err = open_checked(&dir, &name, libc::O_RDONLY, 0, root).unwrap_err();
        assert!(err.to_string().ends_with("belongs to uid 65534"), "{err}");
        std::os::unix::fs::chown(&real, Some(0), None).unwrap();
        std::fs::hard_link(&real, top.path().join("second")).unwrap();
        let err = open_checked(&dir, &name, libc::O_WRONLY | libc::O_TRUNC, 0, root).unwrap_err();
        assert!(err.to_string().ends_with("has 2 hard links"), "{err}");
        assert_eq!(std::fs::read(&real).unwrap(), b"mine", "not emptied");

        // A folder another user made where root would make one is refused, not used.
        let theirs = top.path().join("made");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        let err = place_creating(&theirs.join("sub/v.log"), root, 0o700).unwrap_err();
        assert!(err.to_string().ends_with("belongs to uid 65534"), "{err}");
        assert!(!theirs.join("sub").exists());
        let (dir, _) = place_creating(&top.path().join("new/sub/v.log"), root, 0o700).unwrap();
        assert_eq!(dir.stat().unwrap().mode, 0o700);
    }
}
