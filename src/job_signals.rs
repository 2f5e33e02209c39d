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

/// Installs the handlers that pass vramscope's terminating signals on to `pid`.
pub fn forward_to(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    JOB.store(pid, Ordering::SeqCst);
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
    let pid = JOB.load(Ordering::SeqCst);
    if pid > 0 && !REAPED.load(Ordering::SeqCst) {
        // SAFETY: kill is async-signal-safe; the pid is our unreaped child.
        unsafe { libc::kill(pid, signal) };
    }
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
}
