//! A pidfd: a descriptor that names one process, not its number. A pid is handed out again
//! once its process is reaped; a pidfd keeps naming the process it was opened for, and says
//! when that one is gone (ESRCH), so nothing sent through it reaches a newcomer.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One process, pinned.
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    /// `pidfd_open(pid)`: ESRCH when there is no such process, ENOSYS before Linux 5.3.
    pub fn open(pid: libc::pid_t) -> io::Result<Pidfd> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::c_int::try_from(fd).map_err(io::Error::other)?;
        // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
        Ok(Pidfd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// `pidfd_send_signal`: to this process only (ESRCH once it has exited).
    pub fn send(&self, signal: libc::c_int) -> io::Result<()> {
        let no_info: *const libc::siginfo_t = std::ptr::null();
        // SAFETY: a descriptor we own, a signal number, a null siginfo (the kernel fills in
        // what kill would) and no flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                signal,
                no_info,
                0,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Whether the process still runs (signal 0 checks without sending): false once it has
    /// exited, even when its pid already names another process. EPERM (a process we may not
    /// signal) still says it is there.
    pub fn alive(&self) -> bool {
        match self.send(0) {
            Ok(()) => true,
            Err(e) => e.raw_os_error() != Some(libc::ESRCH),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pidfd_says_when_its_process_is_gone() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = Pidfd::open(child.id() as i32).unwrap();
        assert!(fd.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!fd.alive());
        assert_eq!(
            fd.send(libc::SIGTERM).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
    }
}
