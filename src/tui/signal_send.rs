//! Signalling a process the table shows, and only that process: a pid is a number the kernel
//! hands out again once its process has gone, so the pid must still have the start time
//! sampled with the row. A pidfd, opened before that check, pins the process the check saw:
//! the signal cannot reach a newcomer that took the pid in between.

use crate::attach::pidfd::Pidfd;
use std::io;

/// Sends `signal` to `pid` if its start time (`/proc/PID/stat` field 22) is still
/// `starttime`; otherwise, or when it cannot be sent, why not, in words.
pub fn to_same_process(pid: u32, starttime: u64, signal: libc::c_int) -> Result<(), String> {
    let raw = libc::pid_t::try_from(pid).map_err(|_| format!("pid {pid} is out of range"))?;
    let pidfd = match Pidfd::open(raw) {
        Ok(fd) => Some(fd),
        // Kernels before 5.3: the check then leaves the short window pidfds close.
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
            return Err(format!("pid {pid} has exited"));
        }
        Err(e) => return Err(format!("pid {pid}: {e}")),
    };
    match crate::channel::starttime(Some(pid)) {
        Ok(now) if now == starttime => {}
        Ok(_) => {
            return Err(format!(
                "pid {pid} now belongs to another process (it started after the row was sampled)"
            ));
        }
        Err(_) => return Err(format!("pid {pid} has exited")),
    }
    let sent = match &pidfd {
        Some(fd) => fd.send(signal),
        None => {
            // SAFETY: kill takes plain integers; a wrong pid only yields an error code.
            if unsafe { libc::kill(raw, signal) } == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        }
    };
    sent.map_err(|e| format!("could not signal {pid}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_changed_start_time_is_refused_and_the_process_lives_on() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let real = crate::channel::starttime(Some(pid)).unwrap();
        let refused = to_same_process(pid, real + 1, libc::SIGTERM).unwrap_err();
        assert!(
            refused.contains("now belongs to another process"),
            "{refused}"
        );
        assert!(child.try_wait().unwrap().is_none(), "not signalled");
        to_same_process(pid, real, libc::SIGTERM).unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        let gone = to_same_process(pid, real, libc::SIGTERM).unwrap_err();
        assert!(gone.contains("has exited"), "{gone}");
    }
}
