//! Host sampler: RAM and swap, and a targeted refresh of only the processes NVML listed.
//! A full process scan costs tens of ms on busy hosts; a targeted one ~15 µs per pid.

use super::container;
use crate::model::{Absent, HostMemory, HostProcess, HostSample, now_ms};
use std::collections::{HashMap, HashSet};
use sysinfo::{
    MemoryRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind, Users,
};

/// Owns sysinfo's state between ticks (CPU % needs the previous reading).
pub struct HostSampler {
    system: Option<System>,
    user_names: HashMap<u32, String>,
    host_namespace: bool,
    /// Pids refreshed at least once: CPU % is a difference, so a first reading has none.
    cpu_seen: HashSet<u32>,
    /// A process's namespace view and container cannot change while it lives, and reading
    /// them costs two /proc files per pid: kept for as long as NVML lists the pid.
    views: HashMap<u32, container::PidView>,
}

impl HostSampler {
    pub fn new() -> Self {
        Self {
            system: System::new().ok(),
            user_names: HashMap::new(),
            host_namespace: container::in_host_pid_namespace(),
            cpu_seen: HashSet::new(),
            views: HashMap::new(),
        }
    }

    /// Reads host memory and the given host pids' facts.
    pub fn sample(&mut self, pids: &[u32]) -> HostSample {
        let at_ms = now_ms();
        let Some(system) = self.system.as_mut() else {
            return HostSample {
                at_ms,
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
        self.views.retain(|pid, _| pids.contains(pid));
        let host_namespace = self.host_namespace;
        let views: Vec<(u32, container::PidView)> = pids
            .iter()
            .map(|&pid| {
                if let Some(view) = self.views.get(&pid) {
                    return (pid, view.clone());
                }
                let view = container::view(pid, host_namespace);
                // "Not visible" is not cached: it may be a race with a starting process.
                if view.local_pid.is_some() {
                    self.views.insert(pid, view.clone());
                }
                (pid, view)
            })
            .collect();
        let local: Vec<Pid> = views
            .iter()
            .filter_map(|(_, v)| v.local_pid.map(Pid::from_u32))
            .collect();
        system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&local),
            true,
            // Threads are not needed, and listing /proc/PID/task costs more than the rest.
            ProcessRefreshKind::nothing()
                .without_tasks()
                .with_memory()
                .with_cpu()
                .with_cmd(UpdateKind::OnlyIfNotSet)
                .with_user(UpdateKind::OnlyIfNotSet),
        );
        let known = Known {
            host_namespace: self.host_namespace,
            cpu_seen: &self.cpu_seen,
        };
        let processes = views
            .into_iter()
            .map(|(pid, view)| describe(system, &mut self.user_names, &known, pid, view))
            .collect();
        self.cpu_seen = local.iter().map(|p| p.as_u32()).collect();
        HostSample {
            at_ms,
            memory,
            processes,
        }
    }
}

/// What `describe` needs to know besides the process itself.
struct Known<'a> {
    host_namespace: bool,
    cpu_seen: &'a HashSet<u32>,
}

/// Host facts for one NVML pid, from the refresh just made.
fn describe(
    system: &System,
    user_names: &mut HashMap<u32, String>,
    known: &Known,
    pid: u32,
    view: container::PidView,
) -> HostProcess {
    let Some(local) = view.local_pid else {
        // In the host's pid namespace a pid missing from /proc has simply exited.
        let why = if known.host_namespace {
            "no such process (exited)"
        } else {
            "pid not visible here (run with --pid=host)"
        };
        return HostProcess::unreadable(pid, None, Absent::Error(why.into()), None);
    };
    let Some(process) = system.process(Pid::from_u32(local)) else {
        return HostProcess::unreadable(pid, Some(local), Absent::NotAvailable, view.container);
    };
    let uid = process.user_id().map(|u| **u);
    let user = match uid {
        Some(uid) => Ok(user_name(user_names, uid)),
        None => Err(Absent::NoPermission),
    };
    HostProcess {
        pid,
        local_pid: Some(local),
        user,
        command: Ok(command_line(process.cmd(), process.name())),
        rss_bytes: Ok(process.memory()),
        cpu_percent: if known.cpu_seen.contains(&local) {
            Ok(process.cpu_usage())
        } else {
            Err(Absent::Error("first reading".into()))
        },
        container: view.container,
        uid,
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
