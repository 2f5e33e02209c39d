//! Doing file work as another user: on a thread of its own whose filesystem identity
//! (`setfsuid`/`setfsgid`, and its supplementary groups) is that user's. On Linux these are
//! per thread when called as raw system calls (glibc's `setgroups` would change every
//! thread's), and changing the filesystem uid from 0 clears the thread's filesystem
//! capabilities (`CAP_DAC_OVERRIDE`, `CAP_CHOWN`, `CAP_FOWNER`...), so the kernel checks that
//! thread's opens, creates and removals exactly as it checks the user's own. Root uses it to
//! work inside a directory the user controls: a symlink or a renamed folder can then only
//! lead it to what the user could reach anyway.

use std::io;

/// Runs `work` with the filesystem identity of `uid`/`gid` (no supplementary groups) and
/// returns what it returned. When the caller already is `uid` (not root), it simply runs.
pub fn as_user<T: Send>(uid: u32, gid: u32, work: impl FnOnce() -> T + Send) -> io::Result<T> {
    // SAFETY: geteuid and getegid cannot fail.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if euid == uid && (egid == gid || euid != 0) {
        return Ok(work());
    }
    if euid != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("only root may work as uid {uid}"),
        ));
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("vramscope-as-user".into())
            .spawn_scoped(scope, move || {
                become_user(uid, gid)?;
                Ok(work())
            })?
            .join()
            .map_err(|_| io::Error::other("the work done as the user panicked"))?
    })
}

/// This thread only: supplementary groups, then fsgid, then fsuid (the last drops the
/// capabilities that would let the others change).
fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    let groups = [gid as libc::gid_t];
    // SAFETY: the raw system call changes this thread's credentials only; `groups` is valid
    // for one element.
    if unsafe { libc::syscall(libc::SYS_setgroups, 1 as libc::size_t, groups.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // setfsgid/setfsuid return the previous value and cannot report failure; asking again
    // with an invalid id (-1) returns the current one, which is how a failure is found.
    // SAFETY: both are per-thread system calls with no memory arguments.
    unsafe {
        libc::setfsgid(gid);
        libc::setfsuid(uid);
    }
    // SAFETY: as above; -1 changes nothing.
    let (now_gid, now_uid) = unsafe { (libc::setfsgid(u32::MAX), libc::setfsuid(u32::MAX)) };
    if now_uid as u32 != uid || now_gid as u32 != gid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("cannot take uid {uid} and gid {gid} to work as that user"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Needs root to become another user; CI runs as root.
    #[test]
    fn files_made_as_the_user_are_the_users_and_roots_files_stay_out_of_reach() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let top = tempfile::tempdir().unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let secret = top.path().join("secret");
        std::fs::write(&secret, "root's").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let made = top.path().join("made");
        let (made_ok, read_secret) = as_user(65534, 65534, || {
            (
                std::fs::write(&made, "x").is_ok(),
                std::fs::read(&secret).map_err(|e| e.kind()),
            )
        })
        .unwrap();
        assert!(made_ok);
        assert_eq!(read_secret, Err(io::ErrorKind::PermissionDenied));
        let meta = std::fs::metadata(&made).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
        // The calling thread is still root.
        assert!(std::fs::read(&secret).is_ok());
    }
}
