//! Host sampler: RAM and swap, and a targeted read of only the processes NVML listed.
//! A process's identity (user, command line, container, Kubernetes pod) is read once, when
//! NVML first lists it; each tick then costs one `pread` of its `/proc/PID/stat` (see
//! `process_meter`).

use super::container;
use super::pod::PodResolver;
use super::process_meter::ProcessMeter;
use crate::model::{Absent, HostLoad, HostMemory, HostProcess, HostSample, PodInfo, now_ms};
use std::collections::HashMap;
use sysinfo::{
    MemoryRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind, Users,
};

/// Owns what must live between ticks: the open stat files (CPU % is a difference) and each
/// watched process's identity.
pub struct HostSampler {
    system: Option<System>,
    user_names: HashMap<u32, String>,
    host_namespace: bool,
    /// Keyed by NVML (host) pid; dropped as soon as NVML stops listing the pid.
    watched: HashMap<u32, Watched>,
    buf: Vec<u8>,
    /// The CPUs' (busy, total) jiffies at the previous pass, for the busy share.
    cpu_before: Option<(u64, u64)>,
    pods: PodResolver,
}

/// A process NVML lists and we can see.
struct Watched {
    view: container::PidView,
    local_pid: u32,
    user: Result<String, Absent>,
    uid: Option<u32>,
    starttime: Option<u64>,
    command: Result<String, Absent>,
    pod: Option<PodInfo>,
    meter: ProcessMeter,
}

/// Busy and total jiffies of every CPU, from the first line of `/proc/stat`
/// (`cpu user nice system idle iowait irq softirq steal ...`); idle and iowait are not busy.
fn cpu_jiffies(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let values: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = values.iter().sum();
    let idle = values.get(3)? + values.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

impl HostSampler {
    pub fn new() -> Self {
        Self {
            system: System::new().ok(),
            user_names: HashMap::new(),
            host_namespace: container::in_host_pid_namespace(),
            watched: HashMap::new(),
            buf: Vec::with_capacity(1024),
            cpu_before: None,
            pods: PodResolver::from_environment(),
        }
    }

    /// Reads host memory and the given host pids' facts.
    pub fn sample(&mut self, pids: &[u32]) -> HostSample {
        let at_ms = now_ms();
        let Some(system) = self.system.as_mut() else {
            return HostSample {
                at_ms,
                load: None,
                memory: Err(Absent::NotSupported),
                processes: Vec::new(),
            };
        };
        system.refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram().with_swap());
        let memory = Ok(HostMemory {
            total: system.total_memory(),
            used: system.used_memory(),
            available: system.available_memory(),
            swap_total: system.total_swap(),
            swap_used: system.used_swap(),
        });
        self.watched.retain(|pid, _| pids.contains(pid));
        self.start_watching(pids);
        let processes = pids.iter().map(|&pid| self.describe(pid)).collect();
        HostSample {
            at_ms,
            load: self.load(),
            memory,
            processes,
        }
    }

    /// The load average, and the CPUs' busy share since the previous pass: two small reads.
    fn load(&mut self) -> Option<HostLoad> {
        let text = std::fs::read_to_string("/proc/loadavg").ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
        let load_average = [fields.next()??, fields.next()??, fields.next()??];
        let now = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|stat| cpu_jiffies(&stat));
        let cpu_percent = match (self.cpu_before, now) {
            (Some((busy0, total0)), Some((busy1, total1))) if total1 > total0 => {
                Some((busy1.saturating_sub(busy0) as f64 * 100.0 / (total1 - total0) as f64) as f32)
            }
            _ => None,
        };
        self.cpu_before = now;
        Some(HostLoad {
            cpu_percent,
            load_average,
        })
    }

    /// Reads identity for pids seen for the first time. "Not visible" is not remembered: it
    /// may be a race with a process that is still starting.
    fn start_watching(&mut self, pids: &[u32]) {
        let new: Vec<(u32, container::PidView)> = pids
            .iter()
            .filter(|pid| !self.watched.contains_key(pid))
            .map(|&pid| (pid, container::view(pid, self.host_namespace)))
            .filter(|(_, view)| view.local_pid.is_some())
            .collect();
        if new.is_empty() {
            return;
        }
        let local: Vec<Pid> = new
            .iter()
            .filter_map(|(_, v)| v.local_pid.map(Pid::from_u32))
            .collect();
        // A System of its own, dropped afterwards, so sysinfo keeps no process list that
        // would grow with every pid ever seen over days of monitoring.
        let Ok(mut identities) = System::new() else {
            return;
        };
        identities.refresh_processes_specifics(
            ProcessesToUpdate::Some(&local),
            true,
            ProcessRefreshKind::nothing()
                .without_tasks()
                .with_cmd(UpdateKind::Always)
                .with_user(UpdateKind::Always),
        );
        for (pid, view) in new {
            let Some(local_pid) = view.local_pid else {
                continue;
            };
            let Some(process) = identities.process(Pid::from_u32(local_pid)) else {
                continue;
            };
            let Ok(meter) = ProcessMeter::open(local_pid) else {
                continue;
            };
            let uid = process.user_id().map(|u| **u);
            let user = match uid {
                Some(uid) => Ok(user_name(&mut self.user_names, uid)),
                None => Err(Absent::NoPermission),
            };
            let command = Ok(command_line(process.cmd(), process.name()));
            // Read after the meter opened `statm`: a process replaced after this read fails
            // the meter's reads (ESRCH) and is read afresh, so this stays its start time.
            let starttime = crate::channel::starttime(Some(local_pid)).ok();
            // By the NVML (host) pid: the pod's files are the node's.
            let pod = self.pods.resolve(pid);
            let mut view = view;
            // The pod's cgroup, read through the node's root, names the container the pod
            // names: the short id shown beside the pod agrees with it.
            if let Some(id) = pod.as_ref().and_then(|p| p.container_id.as_deref()) {
                view.container = id.get(..12).map(str::to_string);
            }
            self.watched.insert(
                pid,
                Watched {
                    view,
                    local_pid,
                    user,
                    uid,
                    starttime,
                    command,
                    pod,
                    meter,
                },
            );
        }
    }

    /// Host facts for one NVML pid, read now.
    fn describe(&mut self, pid: u32) -> HostProcess {
        let Some(watched) = self.watched.get_mut(&pid) else {
            return self.not_visible(pid);
        };
        let (rss_bytes, cpu_percent) = match watched.meter.read(&mut self.buf) {
            Ok((reading, share)) => (
                Ok(reading.rss_bytes),
                share.ok_or_else(|| Absent::Error("first reading".into())),
            ),
            Err(_) => {
                // Exited between NVML's listing and now; forget it so a new process that
                // gets the same pid is read afresh.
                let view = self.watched.remove(&pid).map(|w| w.view);
                let why = Absent::Error("no such process (exited)".into());
                return HostProcess::unreadable(pid, None, why, view.and_then(|v| v.container));
            }
        };
        HostProcess {
            pid,
            local_pid: Some(watched.local_pid),
            user: watched.user.clone(),
            command: watched.command.clone(),
            rss_bytes,
            cpu_percent,
            container: watched.view.container.clone(),
            pod: watched.pod.clone(),
            uid: watched.uid,
            starttime: watched.starttime,
        }
    }

    fn not_visible(&self, pid: u32) -> HostProcess {
        // In the host's pid namespace a pid missing from /proc has simply exited.
        let why = if self.host_namespace {
            "no such process (exited)"
        } else {
            "pid not visible here (run with --pid=host)"
        };
        HostProcess::unreadable(pid, None, Absent::Error(why.into()), None)
    }
}

/// The user's name; the user list is read only when a uid is met for the first time, and a
/// uid without a name (common in containers) is remembered as its number.
fn user_name(names: &mut HashMap<u32, String>, uid: u32) -> String {
    if let Some(name) = names.get(&uid) {
        return name.clone();
    }
    let name = Users::new_with_refreshed_list()
        .ok()
        .and_then(|users| {
            users
                .iter()
                .find(|u| **u.id() == uid)
                .map(|u| u.name().to_string())
        })
        .unwrap_or_else(|| uid.to_string());
    names.insert(uid, name.clone());
    name
}

impl Default for HostSampler {
    fn default() -> Self {
        Self::new()
    }
}

/// The command line joined by spaces; kernel threads and zombies have none, so the name stands in.
fn command_line(cmd: &[std::ffi::OsString], name: &std::ffi::OsStr) -> String {
    if cmd.is_empty() {
        return name.to_string_lossy().into_owned();
    }
    cmd.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_busy_share_leaves_idle_and_iowait_out() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(cpu_jiffies(stat), Some((150, 1000)));
        assert_eq!(cpu_jiffies("intr 1 2 3\n"), None);
    }

    #[test]
    fn the_second_pass_has_a_cpu_share_and_every_pass_a_load_average() {
        let mut sampler = HostSampler::new();
        let first = sampler.sample(&[]).load.expect("/proc/loadavg");
        assert_eq!(first.cpu_percent, None, "a share needs two readings");
        // Some clock ticks of every CPU between the two readings.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let second = sampler.sample(&[]).load.expect("/proc/loadavg");
        let pct = second.cpu_percent.expect("two readings");
        assert!((0.0..=100.0).contains(&pct), "{pct}");
        assert!(second.load_average.iter().all(|l| *l >= 0.0));
    }

    #[test]
    fn samples_our_own_process() {
        let mut sampler = HostSampler::new();
        let me = std::process::id();
        let sample = sampler.sample(&[me]);
        let memory = sample.memory.expect("host memory readable on Linux");
        assert!(memory.total > 0 && memory.used <= memory.total);
        let row = &sample.processes[0];
        assert_eq!(row.pid, me);
        assert!(*row.rss_bytes.as_ref().expect("own rss") > 0);
        assert!(row.command.as_ref().expect("own cmd").contains("vramscope"));
    }

    #[test]
    fn missing_pids_are_absent_not_zero() {
        let mut sampler = HostSampler::new();
        // Pid max on Linux is at most 2^22, so this one cannot exist.
        let sample = sampler.sample(&[4_194_999]);
        assert_eq!(sample.processes[0].local_pid, None);
        assert!(sample.processes[0].rss_bytes.is_err());
    }
}
