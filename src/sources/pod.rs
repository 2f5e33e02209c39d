//! The Kubernetes pod of a GPU process, from what the node itself keeps: never the API
//! server (no network, no credentials, and it answers the same on a node cut off from it).
//!
//! - The pod's uid, its QoS class and the container's id come from the process's cgroup
//!   (`/proc/PID/cgroup`), where the kubelet puts every container: cgroup v1 (a line per
//!   controller) and v2 (one `0::` line); the systemd driver
//!   (`kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/
//!   cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`) and the cgroupfs
//!   driver (`kubepods/burstable/pod<uid>/<id>`); guaranteed pods sit right under
//!   `kubepods`, and a kubelet given a cgroup root prefixes the slices (`kubelet-kubepods-…`). Segments are matched wherever they are, so a path seen from another cgroup
//!   namespace (`/../../kubepods-…`) reads too.
//! - The names come from the kubelet's log directories, which it makes for every pod and
//!   container before the container starts, whatever the runtime:
//!   `/var/log/pods/<namespace>_<pod>_<uid>/<container>/` names the pod and namespace for the
//!   uid (neither may hold `_`: both are DNS names), and the symlink
//!   `/var/log/containers/<pod>_<namespace>_<container>-<id>.log` points into the container's
//!   directory there, which ties the cgroup's container id to the container's name. A pod with
//!   one container directory needs no link. Chosen over the runtimes' own state (containerd's
//!   task bundles, CRI-O's `userdata/config.json`, docker's `config.v2.json`) because it is
//!   one layout for all of them, plain directory names rather than three JSON formats, and
//!   readable through the one `/var/log` mount that log-shipping DaemonSets already have.
//!   The kubelet removes a pod's directories when the pod is deleted: a process that
//!   outlives its pod keeps its uid, and its names are `n/a` with that reason.
//!
//! Everything is read under a root (`VRAMSCOPE_K8S_ROOT`, default `/`): `ROOT/proc/PID/cgroup`
//! and `ROOT/var/log/...`, for a debug pod that mounts the node's filesystem at `/host`, and
//! for tests that build a node of their own. The names are someone else's text and are
//! cleaned (`crate::text`). Each pid is resolved once per start time; the cache is bounded.

use crate::model::{Absent, PodInfo, Reading};
use crate::text::clean_bytes;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The variable naming the root under which the node's `/proc` and `/var/log` are read.
pub const ROOT_VAR: &str = "VRAMSCOPE_K8S_ROOT";

/// Processes remembered at most; past it the cache starts afresh (a node runs far fewer GPU
/// processes, so this only bounds a monitor left running for months).
const CACHE_LIMIT: usize = 4096;

/// What a cgroup path says about a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupPod {
    pub uid: String,
    pub qos: Option<&'static str>,
    pub container_id: Option<String>,
    /// Which runtime's naming the container's cgroup follows, where it says.
    pub runtime: Option<&'static str>,
}

/// The pod in `/proc/PID/cgroup` text, if the process runs in one. A line naming the
/// container as well as the pod wins over one naming the pod alone.
pub fn parse_cgroup(text: &str) -> Option<CgroupPod> {
    let mut found: Option<CgroupPod> = None;
    for line in text.lines() {
        // `hierarchy-id:controllers:path`; the path itself may hold `:`.
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        let Some(pod) = parse_path(path) else {
            continue;
        };
        if pod.container_id.is_some() {
            return Some(pod);
        }
        found.get_or_insert(pod);
    }
    found
}

/// One cgroup path: the pod segment, the QoS level it sits under, the container after it.
fn parse_path(path: &str) -> Option<CgroupPod> {
    let segments: Vec<&str> = path.split('/').collect();
    for (i, segment) in segments.iter().enumerate() {
        let parent = i.checked_sub(1).and_then(|p| segments.get(p)).copied();
        let Some((uid, qos)) = pod_segment(segment, parent) else {
            continue;
        };
        let (container_id, runtime) = segments
            .get(i + 1)
            .and_then(|s| container_segment(s))
            .map_or((None, None), |(id, runtime)| (Some(id), runtime));
        return Some(CgroupPod {
            uid,
            qos,
            container_id,
            runtime,
        });
    }
    None
}

/// `kubepods-burstable-pod<uid_>.slice` (systemd) or `pod<uid>` (cgroupfs, whose QoS is
/// the parent segment): the uid with its dashes, and the QoS class.
fn pod_segment(segment: &str, parent: Option<&str>) -> Option<(String, Option<&'static str>)> {
    if let Some(slice) = segment.strip_suffix(".slice") {
        let (level, uid) = slice.rsplit_once("-pod")?;
        // A kubelet given a cgroup root names its slices after it too: kind's nodes have
        // `kubelet-kubepods-burstable-pod<uid>.slice`.
        let is = |name: &str| {
            level == name || level.strip_suffix(name).is_some_and(|p| p.ends_with('-'))
        };
        let qos = if is("kubepods") {
            "guaranteed"
        } else if is("kubepods-burstable") {
            "burstable"
        } else if is("kubepods-besteffort") {
            "besteffort"
        } else {
            return None;
        };
        let uid = uid.replace('_', "-");
        return is_uid(&uid).then_some((uid, Some(qos)));
    }
    let uid = segment.strip_prefix("pod")?;
    let qos = match parent {
        Some("kubepods") => Some("guaranteed"),
        Some("burstable") => Some("burstable"),
        Some("besteffort") => Some("besteffort"),
        _ => None,
    };
    // Under `kubepods` somewhere, or the segment is not a pod's: a path from another cgroup
    // namespace that hides the levels above keeps a uid-shaped `pod…` segment only.
    is_uid(uid).then(|| (uid.to_string(), qos))
}

/// A pod uid: an API server's UUID (36 characters) or a static pod's hash (32 hex digits).
fn is_uid(text: &str) -> bool {
    (32..=36).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        && text.bytes().any(|b| b.is_ascii_hexdigit())
}

/// The container's full id, and the runtime whose naming the segment follows.
fn container_segment(segment: &str) -> Option<(String, Option<&'static str>)> {
    let name = segment.strip_suffix(".scope").unwrap_or(segment);
    let (id, runtime) = if let Some(id) = name.strip_prefix("cri-containerd-") {
        (id, Some("containerd"))
    } else if let Some(id) = name.strip_prefix("crio-") {
        (id, Some("cri-o"))
    } else if let Some(id) = name.strip_prefix("docker-") {
        (id, Some("docker"))
    } else {
        (name, None)
    };
    // `crio-conmon-<id>` is CRI-O's monitor beside the container, not the container.
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (id.to_ascii_lowercase(), runtime))
}

/// Resolves pids to pods under one root, remembering each (pid, start time).
pub struct PodResolver {
    root: PathBuf,
    cache: HashMap<(u32, u64), Option<PodInfo>>,
}

impl PodResolver {
    /// Reads under `root` (the node's `/`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            cache: HashMap::new(),
        }
    }

    /// Reads under `VRAMSCOPE_K8S_ROOT`, else `/`.
    pub fn from_environment() -> Self {
        let root = std::env::var_os(ROOT_VAR)
            .filter(|r| !r.is_empty())
            .map_or_else(|| PathBuf::from("/"), PathBuf::from);
        Self::new(root)
    }

    /// The pod of host pid `pid`, or `None` when its cgroup names none (or cannot be read:
    /// the process is gone, or not visible under the root).
    pub fn resolve(&mut self, pid: u32) -> Option<PodInfo> {
        let proc_dir = self.root.join("proc").join(pid.to_string());
        let starttime = std::fs::read_to_string(proc_dir.join("stat"))
            .ok()
            .and_then(|stat| stat_starttime(&stat));
        if let Some(key) = starttime.map(|t| (pid, t))
            && let Some(known) = self.cache.get(&key)
        {
            return known.clone();
        }
        let cgroup = std::fs::read_to_string(proc_dir.join("cgroup")).ok()?;
        let pod = parse_cgroup(&cgroup).map(|found| self.names(found));
        if let Some(starttime) = starttime {
            if self.cache.len() >= CACHE_LIMIT {
                self.cache.clear();
            }
            self.cache.insert((pid, starttime), pod.clone());
        }
        pod
    }

    /// How many processes are remembered (for tests of the bound).
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// The names of the pod `found` names, each read or absent with its reason.
    fn names(&self, found: CgroupPod) -> PodInfo {
        let logs = self.root.join("var/log");
        let dir = pod_dir(&logs.join("pods"), &found.uid);
        let (namespace, name, container) = match dir {
            Ok((dir, namespace, name)) => {
                let container = container_name(&logs, &dir, &found);
                (Ok(namespace), Ok(name), container)
            }
            Err(why) => (Err(why.clone()), Err(why.clone()), Err(why)),
        };
        PodInfo {
            uid: found.uid,
            qos: found.qos.map(str::to_string),
            container_id: found.container_id,
            namespace,
            name,
            container,
        }
    }
}

/// Field 22 of `/proc/PID/stat`, after the command in parentheses (which may hold anything).
fn stat_starttime(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The kubelet's directory for pod `uid` in `pods` (`<namespace>_<pod>_<uid>`), with its
/// namespace and pod names.
fn pod_dir(pods: &Path, uid: &str) -> Result<(PathBuf, String, String), Absent> {
    let entries = std::fs::read_dir(pods).map_err(|e| {
        Absent::Error(format!(
            "cannot read /var/log/pods ({})",
            crate::text::clean(&e.to_string())
        ))
    })?;
    let suffix = format!("_{uid}");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(prefix) = file_name.as_bytes().strip_suffix(suffix.as_bytes()) else {
            continue;
        };
        let Some(at) = prefix.iter().position(|&b| b == b'_') else {
            continue;
        };
        let (namespace, pod) = (&prefix[..at], &prefix[at + 1..]);
        if namespace.is_empty() || pod.is_empty() {
            continue;
        }
        return Ok((entry.path(), clean_bytes(namespace), clean_bytes(pod)));
    }
    Err(Absent::Error(
        "pod deleted: no /var/log/pods entry for its uid".into(),
    ))
}

/// The container's name: the directory in the pod's log directory that the kubelet's
/// `/var/log/containers/…-<id>.log` link points into, or the pod's only container directory.
fn container_name(logs: &Path, pod_dir: &Path, found: &CgroupPod) -> Reading<String> {
    if let Some(id) = &found.container_id
        && let Some(name) = linked_container(&logs.join("containers"), id, &found.uid)
    {
        return Ok(name);
    }
    let mut dirs = std::fs::read_dir(pod_dir)
        .map_err(|e| {
            Absent::Error(format!(
                "cannot read the pod's log directory ({})",
                crate::text::clean(&e.to_string())
            ))
        })?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
    match (dirs.next(), dirs.next(), &found.container_id) {
        (Some(only), None, _) => Ok(clean_bytes(only.file_name().as_bytes())),
        (_, _, None) => Err(Absent::Error(
            "the cgroup names the pod, not the container".into(),
        )),
        (None, _, Some(_)) => Err(Absent::Error("no container directory in the pod".into())),
        (Some(_), Some(_), Some(id)) => Err(Absent::Error(format!(
            "no /var/log/containers link for container {}",
            &id[..12.min(id.len())]
        ))),
    }
}

/// The container named by the link for container `id` in `containers`, when its target lies
/// in the log directory of pod `uid` (`…/<namespace>_<pod>_<uid>/<container>/<n>.log`).
fn linked_container(containers: &Path, id: &str, uid: &str) -> Option<String> {
    let suffix = format!("-{id}.log");
    let entries = std::fs::read_dir(containers).ok()?;
    for entry in entries.flatten() {
        if !entry.file_name().as_bytes().ends_with(suffix.as_bytes()) {
            continue;
        }
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        // Another link for the same id (a truncated name, a stale link) may still match.
        let container_dir = target.parent();
        let container = container_dir.and_then(Path::file_name);
        let pod_name = container_dir
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .map(OsStr::as_bytes);
        match (container, pod_name) {
            (Some(container), Some(pod)) if pod.ends_with(format!("_{uid}").as_bytes()) => {
                return Some(clean_bytes(container.as_bytes()));
            }
            _ => continue,
        }
    }
    None
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
