//! `vramscope attach PID` and `vramscope detach PID`: start (or stop) the embedded Python
//! writer inside a running CPython process, with no restart.
//!
//! `preflight` says what stands in the way, with the fix; `agent` places the writer package
//! and an entry script in the target's /tmp. Then one of two ways has the target's main
//! thread run it at its next safe point (where signal handlers run):
//! - CPython 3.14 and later: `remote_exec`, PEP 768's `sys.remote_exec` called by an
//!   interpreter of the target's version (its own executable when it runs here). The target
//!   is never stopped, so nothing is asked first.
//! - CPython 3.8 to 3.13, a 3.14 target in another mount namespace (a container), Yama's
//!   `ptrace_scope = 1` without CAP_SYS_PTRACE (only vramscope itself, an ancestor, may trace
//!   then), or `--ptrace`: `ptrace` queues a CPython pending call from a main thread stopped
//!   for a few milliseconds; that is asked first unless `--yes`.
//!
//! The agent answers in a status file; until it does, the attach is "pending" (a main thread
//! inside a long C call, NCCL or a sleep, runs it only when the call returns).

pub mod agent;
pub mod elf;
pub mod pidfd;
pub mod preflight;
pub mod process;
pub mod ptrace;
pub mod remote_exec;
pub mod target;

use agent::Request;
use process::Process;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use target::Target;

/// Options of `attach` and `detach`.
#[derive(Debug, Clone)]
pub struct Options {
    pub yes: bool,
    pub timeout: Duration,
    /// Through ptrace even where `sys.remote_exec` would do.
    pub ptrace: bool,
    /// The interpreter that calls `sys.remote_exec` (else the target's own, else PATH's).
    pub python: Option<std::path::PathBuf>,
    /// The identity another vramscope showed when it asked (the TUI's dialog): a process
    /// that is no longer that one is refused.
    pub shown: Option<process::Identity>,
}

/// How the agent is queued in the target.
enum Method {
    /// `sys.remote_exec`, by an interpreter of version `want` (`3.14`, `3.14t`).
    RemoteExec {
        want: String,
    },
    Ptrace,
}

pub fn run(pid: i32, request: Request, options: Options) -> ExitCode {
    match attach(pid, request, options) {
        Ok(line) => match crate::stdout::print(&format!("{line}\n")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(status) => status,
        },
        Err((line, code)) => {
            eprintln!("vramscope: {line}");
            ExitCode::from(code)
        }
    }
}

/// Exit statuses: 2 refused before touching the process, 1 failed while attaching, 3 still
/// pending at the time-out.
///
/// The process is pinned first (`Process::bind`), and what /proc says of it is read after:
/// the preflight's facts are then of the process whose identity the later checks compare.
fn attach(pid: i32, request: Request, options: Options) -> Result<String, (String, u8)> {
    if pid <= 0 {
        return Err((format!("{pid} is not a process id"), 2));
    }
    let process = Process::bind(pid);
    let target = Target::read(pid).map_err(|e| (e, 2))?;
    let rights = preflight::Rights::current();
    let ancestor = is_ancestor(pid);
    if let Some(line) = preflight::obstacle(&target, &rights, ancestor) {
        return Err((line, 2));
    }
    let process = process.map_err(|e| (e, 2))?;
    // What was read of it is of the process pinned.
    process.check().map_err(|e| (e, 2))?;
    if let Some(shown) = &options.shown {
        process.is(shown).map_err(|e| (e, 2))?;
    }
    match method(&target, &rights, &options) {
        Method::RemoteExec { want } => {
            let placed = place(&process, &target, request)?;
            let script = format!("{}/boot.py", placed.there);
            let candidates = remote_exec::candidates(&target, options.python.as_deref(), &want);
            // The caller compares the identity itself right before it calls: no pidfd
            // reaches into `sys.remote_exec`, so the window left is that one's.
            let queued = process
                .check()
                .map_err(remote_exec::Failure::Changed)
                .and_then(|()| {
                    remote_exec::queue(pid, &script, &want, &process.identity(), &candidates)
                });
            if let Err(failure) = queued {
                agent::remove(&placed);
                return Err(remote_exec_failed(&process, &want, failure, &rights));
            }
            agent::queued(&placed);
            wait(&process, placed, options.timeout)
        }
        Method::Ptrace => {
            let at = addresses(&process, &target).map_err(|e| (e, 2))?;
            if !options.yes {
                confirm(&target, request)?;
                // The prompt took as long as the person did: the process may have exec'd
                // another program, or exited and left its pid to another.
                process.check().map_err(|e| (e, 2))?;
            }
            let placed = place(&process, &target, request)?;
            let helper = rights.yama != Some(1) || rights.cap_sys_ptrace;
            let code = agent::bootstrap(&placed.there);
            // Again once its main thread is stopped: a stopped thread cannot exec.
            let same = || process.check();
            if let Err(e) = ptrace::queue(pid, at, &code, helper, &same) {
                agent::remove(&placed);
                let line = if e.starts_with("ptrace: Operation not permitted") {
                    preflight::refused(pid, &rights)
                } else if e.ends_with(": nothing done") {
                    e
                } else {
                    format!("attaching to process {pid} failed: {e}")
                };
                return Err((line, 1));
            }
            agent::queued(&placed);
            wait(&process, placed, options.timeout)
        }
    }
}

/// Why `pid` is no process to attach to because it runs no Python, read before a dialog asks
/// the person to confirm; None when it is one, or when its memory map cannot be read from
/// here (the attach itself then says what stands in the way).
pub fn not_python(pid: i32) -> Option<String> {
    let target = Target::read(pid).ok()?;
    if target.mapped.is_empty() {
        return None;
    }
    preflight::not_python(&target)
}

/// Whether attaching to `pid` (with no option) would stop its main thread: ptrace rather
/// than PEP 768. Unknown (unreadable) counts as stopping: the dialog then says the worst.
pub fn stops(pid: i32) -> bool {
    let Ok(target) = Target::read(pid) else {
        return true;
    };
    let options = Options {
        yes: false,
        timeout: Duration::ZERO,
        ptrace: false,
        python: None,
        shown: None,
    };
    matches!(
        method(&target, &preflight::Rights::current(), &options),
        Method::Ptrace
    )
}

/// `sys.remote_exec` for 3.14 and later, unless only ptrace can reach the target (see the
/// module's doc) or the user asked for it.
fn method(target: &Target, rights: &preflight::Rights, options: &Options) -> Method {
    let new_enough = target.python_version().is_some_and(|v| v >= (3, 14));
    let yama_ancestor_only = rights.yama == Some(1) && !rights.cap_sys_ptrace;
    if options.ptrace
        || !new_enough
        || yama_ancestor_only
        || !remote_exec::same_mount_namespace(target.pid)
    {
        return Method::Ptrace;
    }
    match remote_exec::wanted_version(target) {
        Some(want) => Method::RemoteExec { want },
        None => Method::Ptrace,
    }
}

/// The agent in the pinned process's own /tmp, as its user.
fn place(
    process: &Process,
    target: &Target,
    request: Request,
) -> Result<agent::Placed, (String, u8)> {
    let pid = target.pid;
    let failed = |e: std::io::Error| {
        (
            format!("cannot place the agent in process {pid}'s /tmp: {e}"),
            1,
        )
    };
    let tmp = process.tmp().map_err(failed)?;
    agent::place(tmp, pid, process.identity().uid, process.gid(), request).map_err(failed)
}

/// The line and status for a `sys.remote_exec` that queued nothing.
fn remote_exec_failed(
    process: &Process,
    want: &str,
    failure: remote_exec::Failure,
    rights: &preflight::Rights,
) -> (String, u8) {
    use remote_exec::Failure;
    let pid = process.pid;
    match failure {
        Failure::Changed(line) => (line, 2),
        // The caller saw a change; this says which, once more from the pinned process.
        Failure::ChangedBeforeCall => (
            process.check().err().unwrap_or_else(|| {
                format!("process {pid} changed before sys.remote_exec was called: nothing done")
            }),
            2,
        ),
        Failure::NoInterpreter(tried) => (
            format!(
                "process {pid} runs Python {want}, and no Python {want} runs here to call sys.remote_exec ({tried}): name one with `--python PATH`, or use `--ptrace` (pauses its main thread for a few milliseconds)"
            ),
            2,
        ),
        Failure::Refused(why) => (
            format!(
                "{} ({})",
                preflight::refused(pid, rights).replacen("ptrace of", "access to", 1),
                why
            ),
            1,
        ),
        Failure::Disabled => (
            format!(
                "process {pid} has remote debugging turned off (PEP 768): started with it disabled (PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug), restart it without; built --without-remote-debug, `vramscope attach --ptrace {pid}` pauses its main thread instead"
            ),
            2,
        ),
        Failure::Other(why) => (
            format!("attaching to process {pid} through sys.remote_exec failed: {why}"),
            1,
        ),
    }
}

fn wait(
    process: &Process,
    placed: agent::Placed,
    timeout: Duration,
) -> Result<String, (String, u8)> {
    let pid = process.pid;
    let started = Instant::now();
    let mut said_pending = false;
    loop {
        if let Some(answer) = agent::status(&placed) {
            agent::remove(&placed);
            if answer.starts_with("failed") || answer.starts_with("disabled") {
                return Err((format!("process {pid}: {answer}"), 1));
            }
            return Ok(format!("process {pid}: {answer}"));
        }
        if !process.alive() {
            agent::remove(&placed);
            return Err((format!("process {pid} exited before the agent ran"), 1));
        }
        let waited = started.elapsed();
        if waited >= timeout {
            agent::stop_waiting(placed);
            return Err((
                format!(
                    "process {pid}: attach pending after {}s: its main thread has not returned to Python (a long C call: NCCL, a sleep, I/O); the agent runs when it does",
                    timeout.as_secs()
                ),
                3,
            ));
        }
        if !said_pending && waited >= Duration::from_millis(500) {
            eprintln!(
                "vramscope: attach pending: waiting for process {pid}'s main thread to return to Python"
            );
            said_pending = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Finds the functions the injection calls, in the files the target maps.
fn addresses(process: &Process, target: &Target) -> Result<ptrace::Addresses, String> {
    let mut mmap = None;
    let mut pending = None;
    let mut run = None;
    for (base, path) in &target.mapped {
        let name = path.rsplit('/').next().unwrap_or(path);
        let is_libc = name.starts_with("libc.so") || name.starts_with("libc-");
        let is_python = name.contains("python");
        if !is_libc && !is_python {
            continue;
        }
        // The mapped file itself, not its path (its user may swap that), read bounded.
        let Ok(bytes) = process.mapped_file(*base) else {
            continue;
        };
        let Ok((found, min)) =
            elf::lookup(&bytes, &["mmap", "Py_AddPendingCall", "PyRun_SimpleString"])
        else {
            continue;
        };
        let at = |s: &str| found.get(s).map(|v| base + v - min);
        mmap = mmap.or(if is_libc { at("mmap") } else { None });
        pending = pending.or(at("Py_AddPendingCall"));
        run = run.or(at("PyRun_SimpleString"));
    }
    match (mmap, pending, run) {
        (Some(mmap), Some(add_pending_call), Some(run_simple_string)) => Ok(ptrace::Addresses {
            mmap,
            add_pending_call,
            run_simple_string,
        }),
        (None, _, _) => Err(format!(
            "process {}: no glibc mmap found among the files it maps (musl or a static build): not supported",
            target.pid
        )),
        _ => Err(format!(
            "process {}: its Python exports no Py_AddPendingCall/PyRun_SimpleString: not a CPython vramscope can attach to",
            target.pid
        )),
    }
}

/// Asks on the terminal; without one, `--yes` is needed.
fn confirm(target: &Target, request: Request) -> Result<(), (String, u8)> {
    let verb = match request {
        Request::Attach => "attach to",
        Request::Detach => "detach from",
    };
    let user = user_name(target.uid);
    if !std::io::stdin().is_terminal() {
        return Err((
            format!(
                "not asking without a terminal: add --yes to {verb} process {} ({user}: {})",
                target.pid, target.command
            ),
            2,
        ));
    }
    eprint!(
        "{verb} process {} (user {user}): {}?\nIts main thread stops for a few milliseconds. [y/N] ",
        target.pid, target.command
    );
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    if matches!(line.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(("not confirmed: nothing done".to_string(), 2))
    }
}

fn user_name(uid: u32) -> String {
    // path-ok: /etc/passwd is root's own file, only a name is taken from it (cleaned where shown).
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let _ = f.next();
            (f.next()? == uid.to_string()).then(|| name.to_string())
        })
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// Whether this process is an ancestor of `pid` (Yama 1 lets ancestors trace).
fn is_ancestor(pid: i32) -> bool {
    let me = std::process::id() as i32;
    let mut p = pid;
    for _ in 0..64 {
        // path-ok: /proc/PID/stat is the kernel's, named by a number.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            return false;
        };
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1)?.parse::<i32>().ok())
            .unwrap_or(0);
        if ppid == me {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        p = ppid;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Whether a process of `python` would be stopped by an attach (the TUI dialog says so).
    fn stops_with(python: &str) -> Option<(bool, Option<(u32, u32)>)> {
        let mut child = Command::new(python)
            .args(["-c", "import sys; sys.stdin.read()"])
            .stdin(Stdio::piped())
            .spawn()
            .ok()?;
        // Until the interpreter maps itself, the pid is only the fork.
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Target::read(pid).map_or(true, |t| t.python_file().is_none())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let answer = (stops(pid), Target::read(pid).ok()?.python_version());
        let _ = child.kill();
        let _ = child.wait();
        Some(answer)
    }

    /// The check asked once the main thread is stopped: a process that is no longer the one
    /// confirmed gets nothing queued (the next queue, with the right identity, runs first),
    /// and is left running, untraced.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_process_changed_when_stopped_gets_nothing_injected() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let Ok(child) = Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import sys, time\nopen(sys.argv[1], 'w').close()\nwhile True: time.sleep(0.01)",
                ready.to_str().unwrap(),
            ])
            .spawn()
        else {
            eprintln!("SKIPPED: no /usr/bin/python3");
            return;
        };
        // Killed when the test ends, passed or failed.
        struct Killed(std::process::Child);
        impl Drop for Killed {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut child = Killed(child);
        let pid = child.0.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready.exists() {
            assert!(Instant::now() < deadline, "python never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        let target = Target::read(pid).unwrap();
        let at = addresses(&Process::bind(pid).unwrap(), &target).unwrap();
        let mut shown = Process::bind(pid).unwrap().identity();
        shown.exe.1 += 1;
        let stale = Process::bind(pid).unwrap().shown_as(shown);
        let marker = |name: &str| {
            let path = dir.path().join(name);
            let code = format!("open({:?}, 'w').close()", path.to_str().unwrap());
            (path, code)
        };
        // Root traces from a helper; a user, from this process (an ancestor: Yama 1 allows).
        let helper = crate::channel::sys::euid() == 0;
        let (stale_file, stale_code) = marker("stale");
        let err = ptrace::queue(pid, at, &stale_code, helper, &|| stale.check()).unwrap_err();
        assert_eq!(
            err,
            format!(
                "process {pid} runs another program than the one checked (it called exec): nothing done"
            )
        );
        let (fresh_file, fresh_code) = marker("fresh");
        let same = Process::bind(pid).unwrap();
        ptrace::queue(pid, at, &fresh_code, helper, &|| same.check()).unwrap();
        while !fresh_file.exists() {
            assert!(Instant::now() < deadline, "the right queue never ran");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!stale_file.exists(), "queued into a process that changed");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(status.contains("TracerPid:\t0\n"), "{status}");
        assert!(child.0.try_wait().unwrap().is_none(), "still running");
    }

    #[test]
    fn only_a_314_target_is_attached_without_stopping_it() {
        match stops_with("/usr/bin/python3") {
            Some((stops, version)) => assert_eq!(stops, version < Some((3, 14)), "{version:?}"),
            None => eprintln!("SKIPPED: no /usr/bin/python3"),
        }
        match std::env::var("VRAMSCOPE_PYTHON314") {
            Ok(py) if !py.is_empty() => {
                assert_eq!(stops_with(&py), Some((false, Some((3, 14)))), "{py}");
            }
            _ => eprintln!("SKIPPED: needs VRAMSCOPE_PYTHON314 (a CPython 3.14)"),
        }
    }

    /// A mapped library's path swapped for a FIFO (as a container's user can swap any path in
    /// their root) must not hang root's attach: the symbols are read from the mapped file
    /// itself, through the kernel's link to it.
    #[test]
    fn a_mapped_librarys_path_swapped_for_a_fifo_does_not_block_the_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
        let Some(libc) = libc else {
            eprintln!("SKIPPED: no glibc at its Debian path");
            return;
        };
        let copy = dir.path().join("libc.so.6");
        std::fs::copy(libc, &copy).unwrap();
        let ready = dir.path().join("ready");
        // The copy mapped at offset 0 (as the loader maps a library), then a FIFO mounted over
        // its name in the process's own mount namespace, where /proc/PID/maps still names it.
        let fifo = dir.path().join("fifo");
        let script = "import mmap, os, subprocess, sys, time\n\
                      f = open(sys.argv[1], 'rb')\n\
                      m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n\
                      os.mkfifo(sys.argv[3])\n\
                      subprocess.run(['mount', '--bind', sys.argv[3], sys.argv[1]], check=True)\n\
                      open(sys.argv[2], 'w').close()\n\
                      time.sleep(60)\n";
        let spawned = Command::new("unshare")
            .args(["-m", "--propagation", "private", "python3", "-c", script])
            .args([&copy, &ready, &fifo])
            .spawn();
        let Ok(mut child) = spawned.map_err(|e| e.to_string()).and_then(|c| {
            (crate::channel::sys::euid() == 0)
                .then_some(c)
                .ok_or_else(|| "not root".to_string())
        }) else {
            eprintln!("SKIPPED: needs root, unshare and python3");
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let pid = child.id() as i32;
        let target = Target::read(pid).unwrap();
        assert!(
            target
                .mapped
                .iter()
                .any(|(_, p)| p == copy.to_str().unwrap()),
            "the copy is mapped under the FIFO's name"
        );
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let process = Process::bind(pid).unwrap();
            let _ = tx.send(addresses(&process, &target).is_ok());
        });
        let answered = rx.recv_timeout(Duration::from_secs(20));
        let _ = child.kill();
        let _ = child.wait();
        // Opening the FIFO by its path would never return (nobody writes it).
        assert!(answered.is_ok(), "the lookup blocked on the FIFO");
    }
}
