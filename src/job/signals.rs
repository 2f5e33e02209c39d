//! While `vramscope run` waits for its job without a monitor on screen (`--no-monitor`,
//! `--json`, `--once`), the signals that would end vramscope go to the job instead, and
//! vramscope waits for the job to end so that it can exit with the job's status.
//!
//! Ctrl-C at the terminal already reaches the job: it shares our process group. Sent a second
//! time it would interrupt the job's own handler, so a signal the kernel generated (the
//! terminal's) is not forwarded; one sent by a process (`kill`, a scheduler) is.
//!
//! The pid is signalled only until the job is reaped: `before_reaping` waits for any handler
//! still sending, and from then on none sends, so a pid reused later is never signalled.
//!
//! The handlers are installed before the job starts (`hold`): a signal sent between the
//! job's start and the moment its pid is known would otherwise end vramscope and leave the
//! job running unwatched. Such a signal waits, and `forward_to` passes it on.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

/// The signals that end vramscope by default and that a job may want to handle.
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The job's pid; 0 before `forward_to`.
static JOB: AtomicI32 = AtomicI32::new(0);
/// Set once the job has exited and is about to be reaped.
static REAPED: AtomicBool = AtomicBool::new(false);
/// Handlers between their check of `REAPED` and the end of their `kill`.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// `si_code` of a signal the kernel raised itself, such as the terminal's Ctrl-C.
const SI_KERNEL: libc::c_int = 0x80;

/// A forwarded signal that came before the job's pid was known; 0 when none.
static EARLY: AtomicI32 = AtomicI32::new(0);

/// Installs the handlers, before the job starts: from now on vramscope's terminating signals
/// are the job's, held until `forward_to` names it.
pub fn hold() -> io::Result<()> {
    for signal in FORWARDED {
        // SAFETY: a zeroed sigaction is a valid empty one; every field we rely on is set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: sa_mask is ours to initialise; sigaction reads the struct we own and the
        // handler it names only touches atomics and calls kill, which are async-signal-safe.
        let rc = unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Names the job the held signals go to, and passes on one that came before.
pub fn forward_to(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    JOB.store(pid, Ordering::SeqCst);
    let early = EARLY.swap(0, Ordering::SeqCst);
    if early != 0 {
        // SAFETY: kill takes plain integers; the pid is our unreaped child.
        unsafe { libc::kill(pid, early) };
    }
    Ok(())
}

/// Called once the job has exited and before it is reaped: no signal is sent to its pid
/// after this returns.
pub fn before_reaping() {
    REAPED.store(true, Ordering::SeqCst);
    while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        std::hint::spin_loop();
    }
}

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { info.as_ref() }.map_or(SI_KERNEL, |i| i.si_code);
    if code == SI_KERNEL {
        return;
    }
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let mut pid = JOB.load(Ordering::SeqCst);
    if pid == 0 {
        // No job named yet: held for `forward_to`. It may name the job between our look and
        // the hold; whichever of us takes the signal back sends it, so it goes exactly once.
        EARLY.store(signal, Ordering::SeqCst);
        pid = JOB.load(Ordering::SeqCst);
        let taken = pid > 0
            && EARLY
                .compare_exchange(signal, 0, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
        if !taken {
            pid = 0;
        }
    }
    if pid > 0 && !REAPED.load(Ordering::SeqCst) {
        // SAFETY: kill is async-signal-safe; the pid is our unreaped child.
        unsafe { libc::kill(pid, signal) };
    }
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    #[test]
    fn a_signal_before_the_job_is_named_is_held_and_then_reaches_it() {
        hold().unwrap();
        // Sent by a process (`raise` is not the kernel's terminal signal), before the job
        // exists: without the hold it would end this process.
        // SAFETY: raise takes a signal number; the handler it runs only holds the signal.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        assert_eq!(EARLY.load(Ordering::SeqCst), libc::SIGTERM);
        let mut job = Command::new("sleep").arg("30").spawn().unwrap();
        forward_to(job.id()).unwrap();
        assert_eq!(EARLY.load(Ordering::SeqCst), 0, "passed on once");
        before_reaping();
        let status = job.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }
}
