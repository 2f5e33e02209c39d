//! A child run to its end (or killed at a deadline) with its peak memory: what a test of a
//! bound asserts on, since a bound's point is what a hostile input may cost.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a measured run ended.
#[derive(Debug)]
pub struct Measured {
    /// The exit status; `None` when killed (at the deadline or by a signal).
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The child's peak resident memory (`ru_maxrss`), in MiB.
    pub peak_rss_mib: u64,
    pub took: Duration,
    /// Killed because it ran past the deadline.
    pub timed_out: bool,
}

/// Runs `cmd` (stdin closed, stdout and stderr captured), killing it after `deadline`.
pub fn run_measured(mut cmd: Command, deadline: Duration) -> Measured {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let mut timed_out = false;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of the plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our unreaped child; both out-pointers are writable.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid {
            break (status, usage);
        }
        assert_eq!(reaped, 0, "wait4: {}", std::io::Error::last_os_error());
        if !timed_out && started.elapsed() > deadline {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = started.elapsed();
    Measured {
        status: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_rss_mib: (usage.ru_maxrss as u64) / 1024,
        took,
        timed_out,
    }
}
