//! Shared by the benchmarks that measure a running vramscope (refresh, serve, recording
//! --e2e, peers): its CPU time and peak RSS from /proc, a folder for the fake NVML's counts, the
//! processes a scenario lists as GPU processes, and the fake H100 of the refresh, serve and
//! recording scenarios.
//!
//! Included as `mod support;` (benches/support/mod.rs is not a bench target of its own). The
//! readers of /proc return `None` once the process is gone: each benchmark decides whether
//! that is an error or a zero.

#![allow(
    dead_code,
    reason = "shared by several bench crates, each of which uses a different part"
)]

use serde_json::{Value, json};
use std::process::{Child, Command};

/// CPU time in ns summed over the process's threads (the first field of each
/// /proc/PID/task/TID/schedstat): the clock of utime + stime without its 10 ms ticks, which
/// over 30 s at a 1 s refresh are a third of a millisecond per refresh.
pub fn cpu_ns(pid: u32) -> Option<f64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        tasks
            .filter_map(|t| t.ok())
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
            .sum(),
    )
}

/// utime + stime in clock ticks (fields 14 and 15 of /proc/PID/stat).
pub fn cpu_ticks(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command (which may hold spaces and parentheses) comes field 3 (state):
    // utime is the 12th word from there, stime the 13th.
    let mut fields = stat
        .get(stat.rfind(')')? + 2..)?
        .split_whitespace()
        .skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second, the unit of [`cpu_ticks`].
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// Peak RSS (VmHWM of /proc/PID/status) in kB.
pub fn peak_rss_kb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A folder for the counts files, named `prefix` and a random suffix, on tmpfs where there
/// is one: the fake rewrites its file from inside the measured process, and a disk
/// write-back there was counted as that process's CPU.
pub fn counts_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::Builder::new().prefix(prefix).tempdir())
        .expect("counts folder")
}

/// `sleep SECONDS`: a real process for a scenario's GPU process list, so that host-side
/// lookups do real work.
pub fn sleep(seconds: u64) -> Command {
    let mut command = Command::new("sleep");
    command.arg(seconds.to_string());
    command
}

/// Child processes, killed and reaped when dropped.
pub struct Children(Vec<Child>);

impl Children {
    /// `n` processes, the `i`th started from `command(i)`, in order.
    pub fn spawn(n: usize, mut command: impl FnMut(usize) -> Command) -> Children {
        Children(
            (0..n)
                .map(|i| {
                    let mut c = command(i);
                    c.spawn()
                        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", c.get_program()))
                })
                .collect(),
        )
    }

    /// `n` [`sleep`] processes.
    pub fn sleeps(n: usize, seconds: u64) -> Children {
        Children::spawn(n, |_| sleep(seconds))
    }

    /// Their pids, in the order they were started.
    pub fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// GPU `g` of the refresh, serve and recording scenarios: an H100 on PCI bus 0x18 + `g`
/// whose compute processes are `pids`, holding 1, 2, 3... GiB, with the given timeline
/// (see [`timeline_point`]) and per-process utilisation samples.
pub fn h100(g: usize, uuid: String, pids: &[u32], timeline: Vec<Value>, util: Vec<Value>) -> Value {
    let procs: Vec<Value> = pids
        .iter()
        .enumerate()
        .map(|(i, pid)| json!({ "pid": pid, "used_memory": (i as u64 + 1) << 30 }))
        .collect();
    let mut gpu = crate::common::h100(u32::try_from(g).expect("a GPU index"));
    gpu["uuid"] = uuid.into();
    gpu["timeline"] = timeline.into();
    gpu["processes"] = json!([{ "t": 0, "compute": procs, "graphics": [] }]);
    gpu["process_utilization"] = util.into();
    gpu
}

/// A point of an [`h100`] timeline at `t` s: 40 GiB + `extra_gib` used, `gpu_util` %,
/// `power` mW, the other figures fixed.
pub fn timeline_point(t: impl Into<Value>, extra_gib: u64, gpu_util: u64, power: u64) -> Value {
    json!({ "t": t.into(), "memory_used": (40u64 << 30) + extra_gib * (1 << 30),
        "gpu_util": gpu_util, "mem_util": 30, "temperature": 60, "power": power,
        "sm_clock": 1700, "mem_clock": 2619, "fan": 40, "encoder": 0, "decoder": 0,
        "throttle_reasons": 0, "ecc_corrected": 0, "ecc_uncorrected": 0, "pstate": 0 })
}

/// The CPU one wake-up costs on this machine, in µs: a thread that does nothing but sleep
/// `period` at a time, `wakes` times (the schedstat clock of its own thread, as the monitors
/// are measured). A peek wakes the sampler after such a sleep, so this is the least a peek
/// can cost here, however little it does; on a virtual machine it is tens of µs, most of it
/// the cold caches after the sleep (the longer the sleep, the more it costs).
pub fn idle_wake_cost_us(period: std::time::Duration, wakes: u32) -> Option<f64> {
    let own_cpu_ns = || -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        stat.split_whitespace().next()?.parse().ok()
    };
    std::thread::spawn(move || {
        let before = own_cpu_ns()?;
        let mut due = std::time::Instant::now();
        for _ in 0..wakes {
            due += period;
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        }
        Some((own_cpu_ns()? - before) / 1000.0 / f64::from(wakes.max(1)))
    })
    .join()
    .ok()
    .flatten()
}
