//! Opening a folder by path the way a privileged caller must: from `/`, one component at a
//! time, each opened `O_DIRECTORY | O_NOFOLLOW` relative to the one above and checked on its
//! descriptor ([`Trust`]). A symlink on the way is followed only when its owner is trusted
//! and its folder was (so nobody else could have put it there or replaced it); its target is
//! walked the same way. What comes back is the descriptor of the folder that was checked:
//! renaming or swapping anything on the path afterwards changes nothing.

use super::dir::{Dir, component};
use super::stat::Kind;
use super::trust::Trust;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Linux's own limit on symlinks in one lookup.
const MAX_LINKS: usize = 40;

fn refused(shown: &Path, what: &str, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{what} {} {why}", shown.display()),
    )
}

/// The folder `path` names, walked and checked from `/` (a relative path starts at the
/// current directory's absolute path, whose folders are checked too).
pub fn walk(path: &Path, trust: Trust) -> io::Result<Dir> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let (root, rest, trust) = match process_root(&absolute, trust)? {
        Some(found) => found,
        None => {
            let root = Dir::open(Path::new("/"))?;
            if let Some(why) = trust.folder(&root.stat()?) {
                return Err(refused(Path::new("/"), "the folder", &why));
            }
            (root, absolute.clone(), trust)
        }
    };
    let mut chain = vec![root];
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, &rest);
    let mut links = 0;
    while let Some(name) = todo.pop() {
        if name == "." {
            continue;
        }
        if name == ".." {
            if chain.len() > 1 {
                chain.pop();
            }
            continue;
        }
        let Some(here) = chain.last() else {
            return Err(io::Error::other("the walk lost its place"));
        };
        let shown = here.shown().join(&name);
        let st = here.stat_at(&name)?;
        if st.kind == Kind::Symlink {
            if let Some(why) = trust.link(&st) {
                return Err(refused(&shown, "the path through", &why));
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let target = PathBuf::from(here.read_link(&name)?);
            if target.is_absolute() {
                chain.truncate(1);
            }
            push_components(&mut todo, &target);
            continue;
        }
        // Opened without following: had it become a symlink since the fstatat, this fails.
        let next = here.sub(&name)?;
        let st = next.stat()?;
        if let Some(why) = trust.folder(&st) {
            return Err(refused(&shown, "the folder", &why));
        }
        chain.push(next);
    }
    chain
        .pop()
        .ok_or_else(|| io::Error::other("the walk lost its place"))
}

/// A path under `/proc/PID/root` (a container's files, seen from the host): that root is
/// the kernel's link to the process's root folder, opened as the kernel gives it, and the
/// rest is walked inside it, an absolute symlink there meaning that root (as the container
/// sees it), never the host's. Its folders may belong to root or to the root folder's owner
/// (a rootless container's files are its user's). `None` for any other path.
fn process_root(path: &Path, trust: Trust) -> io::Result<Option<(Dir, PathBuf, Trust)>> {
    let mut parts = path.components();
    let (Some(Component::RootDir), Some(proc), Some(Component::Normal(pid)), Some(root)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    if proc != Component::Normal(OsStr::new("proc"))
        || root != Component::Normal(OsStr::new("root"))
        || pid.is_empty()
        || !pid.as_bytes().iter().all(u8::is_ascii_digit)
    {
        return Ok(None);
    }
    let shown = Path::new("/proc").join(pid).join("root");
    let dir = Dir::open_following(&shown)?;
    let trust = match trust {
        Trust::Anyone => Trust::Anyone,
        Trust::OwnedBy(_) => Trust::OwnedBy(dir.stat()?.uid),
    };
    if let Some(why) = trust.folder(&dir.stat()?) {
        return Err(refused(&shown, "the folder", &why));
    }
    Ok(Some((dir, parts.as_path().to_path_buf(), trust)))
}

/// Pushes the components of `path` so that `pop` yields them in order.
fn push_components(todo: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    todo.extend(parts.into_iter().rev());
}

/// The folder holding the file `path` names, walked as [`walk`] walks, and the file's own
/// name in it (to open with [`Dir::open_file`], which does not follow it).
pub fn walk_parent(path: &Path, trust: Trust) -> io::Result<(Dir, OsString)> {
    let name = path
        .file_name()
        .filter(|_| !path.as_os_str().as_bytes().ends_with(b"/"))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} does not name a file", path.display()),
            )
        })?;
    component(name)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((walk(parent, trust)?, OsStr::to_os_string(name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_walk_follows_symlinks_for_a_user_and_lands_on_the_folder_checked() {
        let top = tempfile::tempdir().unwrap();
        let real = top.path().join("real/inner");
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(top.path().join("real"), top.path().join("link")).unwrap();
        let dir = walk(&top.path().join("link/inner"), Trust::Anyone).unwrap();
        std::fs::write(real.join("f"), "x").unwrap();
        assert_eq!(dir.stat_at(OsStr::new("f")).unwrap().kind, Kind::File);
        let (parent, name) = walk_parent(&top.path().join("link/inner/f"), Trust::Anyone).unwrap();
        assert_eq!(name, "f");
        assert!(parent.open_read(&name).is_ok());
        assert!(walk_parent(Path::new("/"), Trust::Anyone).is_err());
    }

    #[test]
    fn a_process_root_is_entered_as_the_kernel_gives_it() {
        // Our own root is the host's: /proc/self/root/tmp is /tmp, by inode.
        let pid = std::process::id();
        let dir = walk(
            Path::new(&format!("/proc/{pid}/root/tmp")),
            Trust::for_euid(0),
        )
        .unwrap();
        let tmp = Dir::open(Path::new("/tmp")).unwrap().stat().unwrap();
        assert!(dir.stat().unwrap().same_file(&tmp));
        // An absolute symlink inside it means that root: `/proc/PID/root/<link to /tmp>`.
        let top = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/tmp", top.path().join("abs")).unwrap();
        let inside = format!("/proc/{pid}/root{}/abs", top.path().display());
        let via = walk(Path::new(&inside), Trust::Anyone).unwrap();
        assert!(via.stat().unwrap().same_file(&tmp));
    }

    /// Needs root to give a folder away; CI runs as root.
    #[test]
    fn root_refuses_a_folder_or_symlink_another_user_owns_on_the_way() {
        if crate::channel::sys::euid() != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let top = tempfile::tempdir().unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let theirs = top.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let err = walk(&theirs, Trust::OwnedBy(0)).unwrap_err();
        assert!(err.to_string().ends_with("belongs to uid 65534"), "{err}");
        assert!(walk(&theirs, Trust::OwnedBy(65534)).is_ok());

        let ours = top.path().join("ours");
        std::fs::create_dir(&ours).unwrap();
        std::os::unix::fs::symlink(&ours, top.path().join("rootlink")).unwrap();
        assert!(walk(&top.path().join("rootlink"), Trust::OwnedBy(0)).is_ok());
        std::os::unix::fs::symlink(&ours, top.path().join("userlink")).unwrap();
        std::os::unix::fs::lchown(top.path().join("userlink"), Some(65534), None).unwrap();
        let err = walk(&top.path().join("userlink"), Trust::OwnedBy(0)).unwrap_err();
        assert!(
            err.to_string()
                .contains("is a symlink that belongs to uid 65534"),
            "{err}"
        );
        std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = walk(&ours, Trust::OwnedBy(0)).unwrap_err();
        assert!(err.to_string().contains("mode 777"), "{err}");
    }
}
