//! Pid namespaces and containers. NVML is not namespace-aware: it reports host pids.
//! On the host we show which container a process runs in; inside a container we check that a
//! host pid really names a process we can see before using it.

use std::fs;

/// How a host pid from NVML looks from where vramscope runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidView {
    /// The pid in vramscope's own namespace; `None` when the process is not visible here.
    pub local_pid: Option<u32>,
    /// Short container id from the process's cgroup.
    pub container: Option<String>,
}

/// The kernel gives the initial pid namespace this fixed inode number (PROC_PID_INIT_INO).
const INIT_PID_NAMESPACE_INODE: u64 = 0xEFFF_FFFC;

/// Whether vramscope sees the host's pids, so NVML's pids are ours. False inside a container
/// with its own pid namespace (no `--pid=host`). A container sharing the host's pid namespace
/// counts as the host here, which is exactly right for pid mapping.
pub fn in_host_pid_namespace() -> bool {
    crate::channel::pid_ns_inode(None) == Some(INIT_PID_NAMESPACE_INODE)
}

/// Maps an NVML (host) pid to what we can show. `host_namespace` comes from
/// `in_host_pid_namespace`.
pub fn view(nvml_pid: u32, host_namespace: bool) -> PidView {
    let status = fs::read_to_string(format!("/proc/{nvml_pid}/status")).ok();
    let Some(status) = status else {
        // In a pid namespace of its own the host pid is usually not in our /proc at all.
        return PidView {
            local_pid: None,
            container: None,
        };
    };
    if !host_namespace && !holds_nvidia_device(nvml_pid) {
        // The number exists here but names another process: pid namespaces overlap.
        return PidView {
            local_pid: None,
            container: None,
        };
    }
    let local = ns_pids(&status).first().copied().unwrap_or(nvml_pid);
    let container = fs::read_to_string(format!("/proc/{nvml_pid}/cgroup"))
        .ok()
        .and_then(|text| container_id(&text));
    PidView {
        local_pid: Some(local),
        container,
    }
}

/// The pids of a process from the outermost visible namespace inwards (`NSpid:` line), as
/// the channel discovery reads them.
pub fn ns_pids(status: &str) -> Vec<u32> {
    crate::channel::discover::parse_nspid(status)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| u32::try_from(pid).ok())
        .collect()
}

/// A GPU process keeps `/dev/nvidia*` open; checking it tells a real match from a pid clash.
fn holds_nvidia_device(pid: u32) -> bool {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        // Unreadable fds (another user's process): trust the number rather than hide it.
        return true;
    };
    entries.flatten().any(|entry| {
        fs::read_link(entry.path())
            .map(|target| target.to_string_lossy().starts_with("/dev/nvidia"))
            .unwrap_or(false)
    })
}

/// The first 12 hex digits of a container id found in /proc/PID/cgroup text, for docker,
/// podman (libpod), containerd (cri-containerd) and cri-o, with cgroup v1 or v2 paths.
pub fn container_id(cgroup: &str) -> Option<String> {
    for line in cgroup.lines() {
        let path = line.rsplit(':').next().unwrap_or("");
        for segment in path.split('/').rev() {
            let trimmed = segment.trim_end_matches(".scope");
            let candidate = trimmed.rsplit(['-', ':']).next().unwrap_or(trimmed);
            if candidate.len() == 64 && candidate.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Some(candidate[..12].to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f5c2a1b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a";

    #[test]
    fn finds_container_ids_in_every_runtime_style() {
        for text in [
            format!("0::/system.slice/docker-{ID}.scope"),
            format!("12:memory:/docker/{ID}"),
            format!("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-{ID}.scope"),
            format!("0::/machine.slice/libpod-{ID}.scope/container"),
            format!("0::/kubepods/burstable/pod1/crio-{ID}.scope"),
        ] {
            assert_eq!(container_id(&text).as_deref(), Some(&ID[..12]), "{text}");
        }
    }

    #[test]
    fn host_processes_have_no_container() {
        assert_eq!(
            container_id("0::/user.slice/user-1000.slice/session-3.scope"),
            None
        );
        assert_eq!(container_id(""), None);
    }

    #[test]
    fn nspid_lists_outer_to_inner() {
        let status = "Name:\tpython\nNSpid:\t48213\t17\nUid:\t0\n";
        assert_eq!(ns_pids(status), vec![48213, 17]);
        assert!(ns_pids("Name: x\n").is_empty());
    }

    #[test]
    fn our_own_process_is_visible() {
        let me = std::process::id();
        let v = view(me, in_host_pid_namespace());
        assert_eq!(v.local_pid, Some(me));
    }
}
