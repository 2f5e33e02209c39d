//! A child run to its end (or killed at a deadline) with its peak memory: what a test of a
//! bound asserts on, since a bound's point is what a hostile input may cost.
//!
//! The peak is the child's own `VmHWM` (its address space's high-water mark), read from
//! `/proc/PID/status` every few milliseconds while it runs. `wait4`'s `ru_maxrss` cannot be
//! used: the child is spawned with the test process's address space until it `exec`s, and
//! the kernel keeps that space's high-water mark, so it reports at least the test's own
//! memory. Sampling misses nothing that matters here: memory takes time to fill, so a read
//! that costs gigabytes runs for many samples.

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
    /// The child's peak resident memory, as sampled, in MiB.
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
    let pid = child.id();
    let mut timed_out = false;
    let mut peak_kib = 0;
    let status = loop {
        // Read before the check for its end: the last sample is as late as can be.
        peak_kib = peak_kib.max(high_water_kib(pid).unwrap_or(0));
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if !timed_out && started.elapsed() > deadline {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = started.elapsed();
    Measured {
        status: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_rss_mib: peak_kib / 1024,
        took,
        timed_out,
    }
}

/// `VmHWM` of a running process, in KiB (none once it has exited or before it has a
/// memory map of its own).
fn high_water_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
