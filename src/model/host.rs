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
    /// The Kubernetes pod it runs in (`sources::pod`); `None` when its cgroup names no pod
    /// (not on a Kubernetes node, or not in a pod's cgroup).
    pub pod: Option<PodInfo>,
    /// Why `pod` is unknown rather than "no pod": the process's cgroup could not be read
    /// (`cgroup unreadable: Permission denied`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_unreadable: Option<Absent>,
    /// Uid owning the process, for the kill permission check.
    pub uid: Option<u32>,
    /// Its start time (clock ticks since boot, `/proc/PID/stat` field 22) when first seen:
    /// a signal goes to the pid only while it still has this start time, so a pid reused
    /// by another process since the row was sampled is never signalled; and which channel
    /// the row joins (`joined_channel`), live, in replay and in the report. Not an output.
    #[serde(skip)]
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
            pod: None,
            pod_unreadable: None,
            uid: None,
            starttime: None,
        }
    }
}

/// The Kubernetes pod a process runs in: its uid (and container id) from the process's cgroup,
/// its names from what the kubelet keeps on the node (`sources::pod`). A name that cannot be
/// found is absent with the reason, such as a pod deleted while its process lives on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodInfo {
    /// The pod's uid as the API server gave it (dashes restored from the systemd driver's
    /// underscores).
    pub uid: String,
    /// `guaranteed`, `burstable` or `besteffort`, from the cgroup path; `None` where the
    /// path does not say (seen from a cgroup namespace that hides the QoS level).
    pub qos: Option<String>,
    /// The container's full id from the cgroup; `None` when the cgroup names only the pod.
    pub container_id: Option<String>,
    pub namespace: Reading<String>,
    pub name: Reading<String>,
    /// The container's name in the pod spec.
    pub container: Reading<String>,
}

impl PodInfo {
    /// `namespace/pod`, or `pod <uid>` when the names are unknown: what the table shows.
    pub fn label(&self) -> String {
        match (&self.namespace, &self.name) {
            (Ok(ns), Ok(name)) => format!("{ns}/{name}"),
            _ => format!("pod {}", self.uid),
        }
    }

    /// `namespace/pod:container`, or `label` where the container's name is unknown.
    pub fn full_label(&self) -> String {
        match (&self.name, &self.container) {
            (Ok(_), Ok(container)) => format!("{}:{container}", self.label()),
            _ => self.label(),
        }
    }
}

/// When a process started, in ms since the Unix epoch, from its `/proc/PID/stat` start time
/// (clock ticks since boot) and this machine's boot time; `None` where either cannot be read.
/// Only meaningful for a process of this machine, read live.
pub fn started_ms(starttime_ticks: u64) -> Option<u64> {
    static BOOT: std::sync::OnceLock<Option<(u64, u64)>> = std::sync::OnceLock::new();
    let (boot_s, ticks_per_s) = (*BOOT.get_or_init(boot_and_ticks))?;
    Some(boot_s * 1000 + starttime_ticks.saturating_mul(1000) / ticks_per_s)
}

/// The boot time (`btime` of `/proc/stat`, seconds since the epoch) and clock ticks a second.
fn boot_and_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let boot = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks)
        .ok()
        .filter(|&t| t > 0)
        .map(|t| (boot, t))
}

/// The process `pid` in `sorted`, a list sorted by pid.
pub fn by_pid(sorted: &[Arc<HostProcess>], pid: u32) -> Option<&Arc<HostProcess>> {
    let at = sorted.binary_search_by_key(&pid, |p| p.pid).ok()?;
    sorted.get(at)
}

/// How busy the host's CPUs are, for the host line.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HostLoad {
    /// Every CPU's busy share since the previous host pass, 0-100; `None` on the first pass
    /// (a share needs two readings) or where `/proc/stat` cannot be read.
    pub cpu_percent: Option<f32>,
    /// The load average over 1, 5 and 15 minutes (`/proc/loadavg`).
    pub load_average: [f64; 3],
}

/// One tick of the host sampler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostSample {
    pub at_ms: u64,
    /// `None` where `/proc/loadavg` cannot be read (and in recordings, which leave it out).
    pub load: Option<HostLoad>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_started_after_boot_and_before_now() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let ticks: u64 = after_name.split(' ').nth(19).unwrap().parse().unwrap();
        let started = started_ms(ticks).expect("readable here");
        let now = crate::model::now_ms();
        assert!(started <= now + 1_000, "{started} after {now}");
        assert!(now - started < 3_600_000, "this test began within the hour");
    }
}
