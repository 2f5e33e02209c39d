//! What the host tells us: RAM and swap, and for each GPU process its RSS, CPU, user and command.

use super::absent::{Absent, Reading};
use serde::Serialize;
use std::sync::Arc;

/// Host RAM and swap in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HostMemory {
    pub total: u64,
    pub used: u64,
    pub available: u64,
    pub swap_total: u64,
    pub swap_used: u64,
}

/// Host-side facts about a process NVML listed (by host pid).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostProcess {
    /// The host pid, as NVML reports it.
    pub pid: u32,
    /// The pid as seen from vramscope's own pid namespace; `None` when the process is not
    /// visible here (vramscope runs in a container without `--pid=host`).
    pub local_pid: Option<u32>,
    pub user: Reading<String>,
    pub command: Reading<String>,
    pub rss_bytes: Reading<u64>,
    pub cpu_percent: Reading<f32>,
    /// Short container id from the process's cgroup, when it runs in one.
    pub container: Option<String>,
    /// Uid owning the process, for the kill permission check.
    pub uid: Option<u32>,
    /// Its start time (clock ticks since boot, `/proc/<pid>/stat`): with the local pid, it
    /// tells the process apart from a later one given the same pid.
    pub starttime: Option<u64>,
}

impl HostProcess {
    /// A process whose host figures cannot be read, each absent for the same reason.
    pub fn unreadable(
        pid: u32,
        local_pid: Option<u32>,
        why: Absent,
        container: Option<String>,
    ) -> Self {
        Self {
            pid,
            local_pid,
            user: Err(why.clone()),
            command: Err(why.clone()),
            rss_bytes: Err(why.clone()),
            cpu_percent: Err(why),
            container,
            uid: None,
            starttime: None,
        }
    }
}

/// The process `pid` in `sorted`, a list sorted by pid.
pub fn by_pid(sorted: &[Arc<HostProcess>], pid: u32) -> Option<&Arc<HostProcess>> {
    let at = sorted.binary_search_by_key(&pid, |p| p.pid).ok()?;
    sorted.get(at)
}

/// One tick of the host sampler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostSample {
    pub at_ms: u64,
    pub memory: Reading<HostMemory>,
    pub processes: Vec<HostProcess>,
}

/// This machine's name (the UTS node name), for recordings' headers and the exporter's
/// `Hostname` label; `None` when it cannot be read or is empty.
pub fn host_name() -> Option<String> {
    let raw = std::fs::read("/proc/sys/kernel/hostname").ok()?;
    let name = crate::text::clean_bytes(raw.trim_ascii_end());
    (!name.is_empty()).then_some(name)
}
