//! Queueing the agent in the target: two function calls made on its main thread through
//! ptrace, a pause of a few milliseconds of that one thread (1.5-4 ms measured under strace on a
//! loaded 2-core machine); the other threads never stop.
//!
//! 1. `PTRACE_SEIZE` (no SIGSTOP is ever sent, so nothing can leave the process in a job-control
//!    stop) and `PTRACE_INTERRUPT` stop the main thread where it is. Its registers and its
//!    whole extended state (x87/SSE/AVX...) are saved.
//! 2. `mmap` gives one anonymous page; the bootstrap's text is written into it.
//! 3. `Py_AddPendingCall(PyRun_SimpleString, page)` queues the bootstrap: CPython runs it on
//!    the main thread, holding the GIL, at its next check of the eval breaker: where signal
//!    handlers run, the safe point PEP 768 also uses. Nothing of Python runs here, at an
//!    arbitrary instruction; neither call takes a lock the interrupted code could hold
//!    (mmap is a system call; the pending-calls lock is held only inside the pending-call
//!    functions, and a call that has not returned in time is abandoned, below).
//! 4. Registers and extended state are restored exactly (an interrupted system call then
//!    restarts as after any signal) and the thread is detached.
//!
//! Each call sets the registers for the System V ABI, with a return address of 0: the return
//! faults with `rip == 0`, which is the sign the call is done. A call that does not return
//! within its time is interrupted and abandoned by restoring the saved registers.
//!
//! Why not gdb: gdb 13.1 (Debian bookworm's) cannot make an inferior call on a CPU whose
//! extended state is larger than it knows (AMX: Sapphire Rapids, which GPU hosts are): its
//! `PTRACE_SETREGSET` fails with "Couldn't write extended state status: Bad address". This
//! saves the state at the size the kernel reports, so it restores what it saved.
//!
//! The tracer is a helper process of its own (see `queue`): killing vramscope at any moment
//! leaves the target as it was or with the agent queued, never mid-call.

use std::time::{Duration, Instant};

/// Where the pieces are in the target.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    pub mmap: u64,
    pub add_pending_call: u64,
    pub run_simple_string: u64,
}

/// How long one injected call may take before it is abandoned.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the main thread may take to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

const NT_X86_XSTATE: libc::c_int = 0x202;

/// Queues `code` (NUL-terminated here) to run at the target's next safe point.
///
/// The tracing is done by a helper process forked for it, in a session of its own with
/// SIGINT, SIGTERM, SIGHUP and SIGQUIT blocked: vramscope killed (even with SIGKILL) or its
/// terminal closed while the target's thread is stopped inside an injected call cannot
/// strand that thread; the helper finishes its few milliseconds' work, restores it and exits.
///
/// `helper: false` traces from this process: Yama's `ptrace_scope = 1` lets only an ancestor
/// trace, which the helper is not.
///
/// `same` is asked once the main thread is stopped, before anything is written: whether the
/// process is still the one the person confirmed (a stopped thread cannot exec, so what it
/// says then holds for the injection). Its error is passed on as it is, with the thread
/// resumed and untouched.
#[cfg(target_arch = "x86_64")]
pub fn queue(
    pid: i32,
    at: Addresses,
    code: &str,
    helper: bool,
    same: &dyn Fn() -> Result<(), String>,
) -> Result<(), String> {
    let guard = SignalGuard::block();
    let result = if helper {
        in_helper(|| queue_blocked(pid, at, code, same))
    } else {
        queue_blocked(pid, at, code, same)
    };
    drop(guard);
    result
}

/// Runs `work` in a forked child and returns what it said. vramscope's attach runs no other
/// thread, so the child may allocate.
#[cfg(target_arch = "x86_64")]
fn in_helper(work: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the descriptors were just created and are owned here alone.
    let (mut reader, writer) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    // SAFETY: fork in a single-threaded process; the child only runs `work` and exits.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if child == 0 {
        drop(reader);
        // SAFETY: plain calls in the child: its own session, and no SIGPIPE if vramscope
        // is gone when it answers.
        unsafe {
            libc::setsid();
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        let said = match work() {
            Ok(()) => String::new(),
            Err(e) => e,
        };
        let mut writer = writer;
        let _ = std::io::Write::write_all(&mut writer, said.as_bytes());
        // SAFETY: leaves at once, running no destructor or exit handler of the parent's.
        unsafe { libc::_exit(0) };
    }
    drop(writer);
    let mut said = String::new();
    let read = reader.read_to_string(&mut said);
    let mut status = 0;
    // SAFETY: reaps our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    match read {
        Ok(_) if said.is_empty() && libc::WIFEXITED(status) => Ok(()),
        Ok(_) if !said.is_empty() => Err(said),
        _ => Err("the attach helper ended without an answer".to_string()),
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub fn queue(
    _pid: i32,
    _at: Addresses,
    _code: &str,
    _helper: bool,
    _same: &dyn Fn() -> Result<(), String>,
) -> Result<(), String> {
    Err("attach runs on x86_64 only in this version".to_string())
}

#[cfg(target_arch = "x86_64")]
fn queue_blocked(
    pid: i32,
    at: Addresses,
    code: &str,
    same: &dyn Fn() -> Result<(), String>,
) -> Result<(), String> {
    // SAFETY: ptrace on a pid; no memory of ours is handed over.
    let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize) };
    if rc != 0 {
        return Err(format!(
            "ptrace: {} (see the fix vramscope attach suggests before trying)",
            std::io::Error::last_os_error()
        ));
    }
    let mut tracee = Tracee {
        pid,
        signals: Vec::new(),
    };
    // SAFETY: as above.
    let rc = unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0usize, 0usize) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        tracee.detach();
        return Err(format!("ptrace interrupt: {e}"));
    }
    if let Err(e) = tracee.wait_stop(STOP_TIMEOUT) {
        tracee.detach();
        return Err(e);
    }
    if let Err(e) = same() {
        tracee.detach();
        return Err(e);
    }
    let saved = match tracee.save() {
        Ok(s) => s,
        Err(e) => {
            tracee.detach();
            return Err(e);
        }
    };
    let outcome = inject(&mut tracee, &saved, at, code);
    let restored = tracee.restore(&saved);
    tracee.detach();
    restored?;
    outcome
}

#[cfg(target_arch = "x86_64")]
fn inject(t: &mut Tracee, saved: &Saved, at: Addresses, code: &str) -> Result<(), String> {
    let mut bytes = code.as_bytes().to_vec();
    bytes.push(0);
    let len = (bytes.len() as u64).div_ceil(4096) * 4096;
    let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    let page = t.call(saved, at.mmap, [0, len, prot, flags, u64::MAX, 0])?;
    if page == 0 || page > u64::MAX - 4096 {
        return Err("the target could not map a page for the agent's bootstrap".to_string());
    }
    t.write(page, &bytes)?;
    let rc = t.call(
        saved,
        at.add_pending_call,
        [at.run_simple_string, page, 0, 0, 0, 0],
    )?;
    if rc as u32 as i32 != 0 {
        return Err("the target's pending-call queue is full (try again)".to_string());
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
struct Saved {
    regs: libc::user_regs_struct,
    /// The extended state at the size the kernel gave, or the legacy FP state.
    xstate: Option<Vec<u8>>,
    fp: Option<libc::user_fpregs_struct>,
}

#[cfg(target_arch = "x86_64")]
struct Tracee {
    pid: i32,
    /// Signals that arrived while the thread was ours: sent again after the detach.
    signals: Vec<i32>,
}

#[cfg(target_arch = "x86_64")]
enum Stop {
    /// A stop with this signal (0 for the group or interrupt stop of PTRACE_INTERRUPT).
    Signal(i32),
    Event,
}

#[cfg(target_arch = "x86_64")]
impl Tracee {
    fn wait(&self, timeout: Duration) -> Result<Option<Stop>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes one int we own.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL | libc::WNOHANG) };
            if rc < 0 {
                return Err(format!("wait: {}", std::io::Error::last_os_error()));
            }
            if rc == self.pid {
                if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                    return Err("the process exited during the attach".to_string());
                }
                if libc::WIFSTOPPED(status) {
                    if status >> 16 == libc::PTRACE_EVENT_STOP {
                        return Ok(Some(Stop::Event));
                    }
                    return Ok(Some(Stop::Signal(libc::WSTOPSIG(status))));
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            // The target's thread is stopped while this waits: yield for the first
            // milliseconds (a stop or a call takes microseconds), then sleep.
            if Instant::now() + timeout < deadline + Duration::from_millis(5) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Waits for the interrupt's stop; a signal that arrives first is kept for later.
    fn wait_stop(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.wait(left)? {
                Some(Stop::Event) => return Ok(()),
                Some(Stop::Signal(sig)) => {
                    self.signals.push(sig);
                    // The interrupt is still pending: resuming brings its stop at once.
                    self.cont()?;
                }
                None => return Err("the main thread did not stop in time".to_string()),
            }
        }
    }

    /// One ptrace request on the tracee; its error named `what`. The one place the
    /// registers, the extended state and the tracee's run state are read or written.
    ///
    /// # Safety
    /// `data` must be what `request` expects: null, or a pointer to a live value of the type
    /// (or iovec) it reads or writes.
    unsafe fn request(
        &self,
        request: libc::c_uint,
        addr: usize,
        data: *mut libc::c_void,
        what: &str,
    ) -> Result<(), String> {
        // SAFETY: the caller vouches for `data`; ptrace touches nothing else of ours.
        let rc = unsafe { libc::ptrace(request, self.pid, addr, data) };
        if rc != 0 {
            return Err(format!(
                "ptrace {what}: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    fn cont(&self) -> Result<(), String> {
        // SAFETY: PTRACE_CONT takes no pointer (data 0: no signal).
        unsafe { self.request(libc::PTRACE_CONT, 0, std::ptr::null_mut(), "cont") }
    }

    /// The general registers.
    fn regs(&self) -> Result<libc::user_regs_struct, String> {
        // SAFETY: user_regs_struct is plain data; the kernel fills it.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let data = (&mut regs as *mut libc::user_regs_struct).cast();
        // SAFETY: PTRACE_GETREGS writes one user_regs_struct at `data`.
        unsafe { self.request(libc::PTRACE_GETREGS, 0, data, "getregs")? };
        Ok(regs)
    }

    fn set_regs(&self, regs: &libc::user_regs_struct) -> Result<(), String> {
        let mut copy = *regs;
        let data = (&mut copy as *mut libc::user_regs_struct).cast();
        // SAFETY: PTRACE_SETREGS reads one user_regs_struct at `data`.
        unsafe { self.request(libc::PTRACE_SETREGS, 0, data, "setregs") }
    }

    /// The extended state (`NT_X86_XSTATE`) into or out of `buf`; on a read, `buf` is cut to
    /// the size the kernel gave.
    fn xstate(&self, buf: &mut Vec<u8>, write: bool) -> Result<(), String> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let (request, what) = if write {
            (libc::PTRACE_SETREGSET, "setregset")
        } else {
            (libc::PTRACE_GETREGSET, "getregset")
        };
        let data = (&mut iov as *mut libc::iovec).cast();
        // SAFETY: the kernel reads or writes at most iov_len bytes of buf, and shrinks iov_len.
        unsafe { self.request(request, NT_X86_XSTATE as usize, data, what)? };
        buf.truncate(iov.iov_len);
        Ok(())
    }

    /// The legacy FP state (kernels without `NT_X86_XSTATE`).
    fn fp(&self, fp: &mut libc::user_fpregs_struct, write: bool) -> Result<(), String> {
        let (request, what) = if write {
            (libc::PTRACE_SETFPREGS, "setfpregs")
        } else {
            (libc::PTRACE_GETFPREGS, "getfpregs")
        };
        let data = (fp as *mut libc::user_fpregs_struct).cast();
        // SAFETY: the request reads or writes one user_fpregs_struct at `data`.
        unsafe { self.request(request, 0, data, what) }
    }

    /// Everything `restore` puts back: the registers and the whole extended state, at the
    /// size the kernel reports (or the legacy FP state).
    fn save(&self) -> Result<Saved, String> {
        let regs = self.regs()?;
        let mut buf = vec![0u8; 64 * 1024];
        if self.xstate(&mut buf, false).is_ok() {
            return Ok(Saved {
                regs,
                xstate: Some(buf),
                fp: None,
            });
        }
        // SAFETY: user_fpregs_struct is plain data; the kernel fills it.
        let mut fp: libc::user_fpregs_struct = unsafe { std::mem::zeroed() };
        self.fp(&mut fp, false)?;
        Ok(Saved {
            regs,
            xstate: None,
            fp: Some(fp),
        })
    }

    fn restore(&self, saved: &Saved) -> Result<(), String> {
        if let Some(x) = &saved.xstate {
            self.xstate(&mut x.clone(), true)?;
        }
        if let Some(fp) = &saved.fp {
            self.fp(&mut { *fp }, true)?;
        }
        self.set_regs(&saved.regs)
    }

    fn poke(&self, addr: u64, word: u64) -> Result<(), String> {
        // SAFETY: PTRACE_POKEDATA writes into the tracee, not into us.
        let rc = unsafe { libc::ptrace(libc::PTRACE_POKEDATA, self.pid, addr, word) };
        if rc != 0 {
            return Err(format!("ptrace poke: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Writes `bytes` at `addr` (in a page of ours: whole words past the end are ours too).
    fn write(&self, addr: u64, bytes: &[u8]) -> Result<(), String> {
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.poke(addr + 8 * i as u64, u64::from_le_bytes(word))?;
        }
        Ok(())
    }

    /// Calls `func(args...)` on the stopped thread; its return value (rax).
    fn call(&mut self, saved: &Saved, func: u64, args: [u64; 6]) -> Result<u64, String> {
        let mut regs = saved.regs;
        // Below the red zone, 16-aligned, then the return address 0.
        let sp = (saved.regs.rsp.wrapping_sub(1024) & !0xf) - 8;
        self.poke(sp, 0)?;
        regs.rsp = sp;
        regs.rip = func;
        regs.rdi = args[0];
        regs.rsi = args[1];
        regs.rdx = args[2];
        regs.rcx = args[3];
        regs.r8 = args[4];
        regs.r9 = args[5];
        regs.rax = 0;
        // Not in a system call any more: the kernel must not restart one at our address.
        regs.orig_rax = u64::MAX;
        self.set_regs(&regs)?;
        self.cont()?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.wait(left)? {
                Some(Stop::Signal(libc::SIGSEGV)) => {
                    let now = self.regs()?;
                    if now.rip == 0 {
                        return Ok(now.rax);
                    }
                    return Err(format!(
                        "the injected call faulted at {:#x}; the thread was restored",
                        now.rip
                    ));
                }
                Some(Stop::Signal(sig)) => {
                    self.signals.push(sig);
                    self.cont()?;
                }
                Some(Stop::Event) => self.cont()?,
                None => {
                    // SAFETY: ptrace on our tracee.
                    unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, self.pid, 0usize, 0usize) };
                    self.wait_stop(STOP_TIMEOUT)?;
                    return Err(
                        "the injected call did not return in time; the thread was restored (try again)"
                            .to_string(),
                    );
                }
            }
        }
    }

    fn detach(&self) {
        // SAFETY: ptrace on our tracee; signal 0 discards the stop's own signal (ours).
        unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid, 0usize, 0usize) };
        for &sig in &self.signals {
            // SAFETY: a signal the process was sent while stopped, sent again.
            unsafe { libc::kill(self.pid, sig) };
        }
    }
}

/// Blocks the signals that would end vramscope while the target's thread is stopped.
struct SignalGuard {
    old: libc::sigset_t,
}

impl SignalGuard {
    fn block() -> SignalGuard {
        // SAFETY: sigset_t is plain data, initialised by sigemptyset before use.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: the set and old set are ours.
        unsafe {
            libc::sigemptyset(&mut set);
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::sigaddset(&mut set, sig);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        }
        SignalGuard { old }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `block`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}
