use super::*;
use std::fs;
use std::os::unix::ffi::OsStringExt;

const ID: &str = "3f5c2a1b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a";
const UID: &str = "8e7f6a5b-4c3d-2e1f-0a9b-8c7d6e5f4a3b";
/// The uid as the systemd driver writes it in a slice name.
const UID_: &str = "8e7f6a5b_4c3d_2e1f_0a9b_8c7d6e5f4a3b";

fn pod(
    uid: &str,
    qos: Option<&'static str>,
    id: Option<&str>,
    runtime: Option<&'static str>,
) -> CgroupPod {
    CgroupPod {
        uid: uid.into(),
        qos,
        container_id: id.map(str::to_string),
        runtime,
    }
}

#[test]
fn cgroup_v2_systemd_driver_for_each_runtime_and_qos() {
    let cases = [
        (
            format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope"
            ),
            pod(UID, Some("burstable"), Some(ID), Some("containerd")),
        ),
        (
            format!(
                "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-{ID}.scope"
            ),
            pod(UID, Some("besteffort"), Some(ID), Some("cri-o")),
        ),
        (
            format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/docker-{ID}.scope"),
            pod(UID, Some("guaranteed"), Some(ID), Some("docker")),
        ),
        // CRI-O on cgroup v2 may put the container's processes one level down.
        (
            format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope/container"),
            pod(UID, Some("guaranteed"), Some(ID), Some("cri-o")),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse_cgroup(&text), Some(want), "{text}");
    }
}

#[test]
fn cgroup_v1_cgroupfs_driver_reads_the_qos_from_the_parent() {
    let v1 = format!(
        "12:pids:/kubepods/besteffort/pod{UID}/{ID}\n\
         11:memory:/kubepods/besteffort/pod{UID}/{ID}\n\
         1:name=systemd:/kubepods/besteffort/pod{UID}/{ID}\n"
    );
    assert_eq!(
        parse_cgroup(&v1),
        Some(pod(UID, Some("besteffort"), Some(ID), None))
    );
    let guaranteed = format!("4:cpu,cpuacct:/kubepods/pod{UID}/{ID}\n");
    assert_eq!(
        parse_cgroup(&guaranteed),
        Some(pod(UID, Some("guaranteed"), Some(ID), None))
    );
    let crio = format!("0::/kubepods/burstable/pod{UID}/crio-{ID}\n");
    assert_eq!(
        parse_cgroup(&crio),
        Some(pod(UID, Some("burstable"), Some(ID), Some("cri-o")))
    );
}

#[test]
fn cgroup_v1_systemd_driver_prefers_a_line_naming_the_container() {
    // The cpuset line names only the pod; the memory line the container as well.
    let v1 = format!(
        "13:cpuset:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice\n\
         9:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope\n"
    );
    assert_eq!(
        parse_cgroup(&v1),
        Some(pod(UID, Some("burstable"), Some(ID), Some("containerd")))
    );
}

#[test]
fn paths_from_another_cgroup_namespace_and_static_pods() {
    let relative =
        format!("0::/../../kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope");
    assert_eq!(
        parse_cgroup(&relative),
        Some(pod(UID, Some("besteffort"), Some(ID), Some("containerd")))
    );
    // A kubelet with `--cgroup-root=/kubelet` (kind's nodes) prefixes its slices.
    let kind = format!(
        "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope"
    );
    assert_eq!(
        parse_cgroup(&kind),
        Some(pod(UID, Some("besteffort"), Some(ID), Some("containerd")))
    );
    let kind_guaranteed = format!(
        "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope"
    );
    assert_eq!(
        parse_cgroup(&kind_guaranteed).and_then(|p| p.qos),
        Some("guaranteed")
    );
    // Not a kubelet's: `mykubepods` is no level.
    assert_eq!(
        parse_cgroup(&format!("0::/mykubepods-pod{UID_}.slice")),
        None
    );
    // A static pod's uid is the hash of its manifest: 32 hex digits, no dashes.
    let hash = "6f1f6d3c8f9e4b2a9d7c5e3b1a0f2e4d";
    let static_pod = format!("0::/kubepods/burstable/pod{hash}/{ID}");
    assert_eq!(parse_cgroup(&static_pod).map(|p| p.uid), Some(hash.into()));
}

#[test]
fn processes_outside_pods_have_none() {
    for text in [
        "0::/user.slice/user-1000.slice/session-3.scope".to_string(),
        format!("0::/system.slice/docker-{ID}.scope"),
        format!("0::/machine.slice/libpod-{ID}.scope/container"),
        "0::/kubepods.slice/kubepods-burstable.slice".to_string(),
        "0::/kubepods/burstable/podman".to_string(),
        "garbage without colons".to_string(),
        String::new(),
    ] {
        assert_eq!(parse_cgroup(&text), None, "{text}");
    }
    // The pod without a container (its own cgroup, or CRI-O's conmon beside it).
    let conmon = format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{ID}.scope");
    assert_eq!(
        parse_cgroup(&conmon),
        Some(pod(UID, Some("guaranteed"), None, None))
    );
}

/// A node of the test's own: `proc/PID/{stat,cgroup}` and the kubelet's `var/log`.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Self {
        let node = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(node.root().join("var/log/pods")).unwrap();
        fs::create_dir_all(node.root().join("var/log/containers")).unwrap();
        node
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn process(&self, pid: u32, starttime: u64, cgroup: &str) {
        let dir = self.root().join(format!("proc/{pid}"));
        fs::create_dir_all(&dir).unwrap();
        // A command with `)` and spaces, as anyone may name a process.
        let stat = format!(
            "{pid} (evil) x (y) S 1 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 {starttime} 1 1\n"
        );
        fs::write(dir.join("stat"), stat).unwrap();
        fs::write(dir.join("cgroup"), cgroup).unwrap();
    }

    /// The kubelet's directories for a pod and its containers, and the links of those with ids.
    fn pod(&self, namespace: &str, name: &str, uid: &str, containers: &[(&str, Option<&str>)]) {
        let dir_name = format!("{namespace}_{name}_{uid}");
        let dir = self.root().join("var/log/pods").join(&dir_name);
        for (container, id) in containers {
            fs::create_dir_all(dir.join(container)).unwrap();
            if let Some(id) = id {
                let link = self.root().join(format!(
                    "var/log/containers/{name}_{namespace}_{container}-{id}.log"
                ));
                // Absolute, as the kubelet writes it: the node's path, not the test's.
                let target = format!("/var/log/pods/{dir_name}/{container}/0.log");
                std::os::unix::fs::symlink(target, link).unwrap();
            }
        }
        fs::create_dir_all(&dir).unwrap();
    }
}

fn containerd_cgroup(uid: &str, id: &str) -> String {
    let uid_ = uid.replace('-', "_");
    format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/cri-containerd-{id}.scope\n"
    )
}

#[test]
fn names_come_from_the_kubelets_directories_and_links() {
    let node = Node::new();
    let other = "a".repeat(64);
    node.pod(
        "ml-team",
        "trainer-7d9f-0",
        UID,
        &[
            ("init-data", Some(&other)),
            ("trainer", Some(ID)),
            ("sidecar", None),
        ],
    );
    node.process(4242, 777, &containerd_cgroup(UID, ID));
    let mut resolver = PodResolver::new(node.root());
    let found = resolver.resolve(4242).expect("in a pod");
    assert_eq!(found.uid, UID);
    assert_eq!(found.qos.as_deref(), Some("burstable"));
    assert_eq!(found.container_id.as_deref(), Some(ID));
    assert_eq!(found.namespace.as_deref(), Ok("ml-team"));
    assert_eq!(found.name.as_deref(), Ok("trainer-7d9f-0"));
    assert_eq!(found.container.as_deref(), Ok("trainer"));
    assert_eq!(found.label(), "ml-team/trainer-7d9f-0");
}

#[test]
fn a_pod_with_one_container_needs_no_link_and_several_do() {
    let node = Node::new();
    let uid2 = "11111111-2222-3333-4444-555555555555";
    node.pod("default", "solo", UID, &[("main", None)]);
    node.pod("default", "duo", uid2, &[("a", None), ("b", None)]);
    node.process(10, 1, &format!("0::/kubepods/burstable/pod{UID}/{ID}\n"));
    node.process(11, 1, &format!("0::/kubepods/burstable/pod{uid2}/{ID}\n"));
    let mut resolver = PodResolver::new(node.root());
    assert_eq!(
        resolver.resolve(10).unwrap().container.as_deref(),
        Ok("main")
    );
    let duo = resolver.resolve(11).unwrap();
    assert_eq!(duo.name.as_deref(), Ok("duo"));
    let why = duo.container.unwrap_err().reason();
    assert!(
        why.contains("no /var/log/containers link for container 3f5c2a1b9d8e"),
        "{why}"
    );
}

#[test]
fn a_link_into_another_pod_or_nowhere_is_passed_over() {
    let node = Node::new();
    let uid2 = "11111111-2222-3333-4444-555555555555";
    node.pod("default", "duo", UID, &[("a", None), ("b", None)]);
    let links = node.root().join("var/log/containers");
    // A stale link for the same id from a pod of the past, and one that points nowhere.
    std::os::unix::fs::symlink(
        format!("/var/log/pods/default_old_{uid2}/a/0.log"),
        links.join(format!("old_default_a-{ID}.log")),
    )
    .unwrap();
    std::os::unix::fs::symlink("x.log", links.join(format!("odd-{ID}.log"))).unwrap();
    std::os::unix::fs::symlink(
        format!("/var/log/pods/default_duo_{UID}/b/0.log"),
        links.join(format!("duo_default_b-{ID}.log")),
    )
    .unwrap();
    node.process(3, 1, &containerd_cgroup(UID, ID));
    let found = PodResolver::new(node.root()).resolve(3).unwrap();
    assert_eq!(found.container.as_deref(), Ok("b"));
}

#[test]
fn a_deleted_pod_keeps_its_uid_and_says_why_its_names_are_gone() {
    let node = Node::new();
    node.process(4242, 777, &containerd_cgroup(UID, ID));
    let found = PodResolver::new(node.root())
        .resolve(4242)
        .expect("in a pod");
    assert_eq!(found.uid, UID);
    for reading in [&found.namespace, &found.name, &found.container] {
        let why = reading.as_ref().unwrap_err().reason();
        assert!(why.starts_with("pod deleted"), "{why}");
    }
    assert_eq!(found.label(), format!("pod {UID}"));
}

#[test]
fn a_node_without_kubelet_logs_says_so() {
    let node = Node::new();
    fs::remove_dir(node.root().join("var/log/pods")).unwrap();
    node.process(5, 1, &containerd_cgroup(UID, ID));
    let found = PodResolver::new(node.root()).resolve(5).unwrap();
    let why = found.name.unwrap_err().reason();
    assert!(why.starts_with("cannot read /var/log/pods"), "{why}");
}

#[test]
fn hostile_names_are_cleaned() {
    let node = Node::new();
    let ns = "ns\u{1b}]52;c;aGk=\u{7}";
    let name = "pod\u{202e}gnp.exe";
    let container = "c\u{1b}[2J\u{9b}31m";
    node.pod(ns, name, UID, &[(container, Some(ID)), ("other", None)]);
    node.process(7, 1, &containerd_cgroup(UID, ID));
    let found = PodResolver::new(node.root()).resolve(7).unwrap();
    let shown = [
        found.namespace.clone().unwrap(),
        found.name.clone().unwrap(),
        found.container.clone().unwrap(),
    ];
    for text in &shown {
        assert!(crate::text::is_clean(text), "{text:?}");
    }
    assert_eq!(shown[0], "ns\u{FFFD}]52;c;aGk=\u{FFFD}");
    assert_eq!(shown[1], "pod\u{FFFD}gnp.exe");
    assert_eq!(shown[2], "c\u{FFFD}[2J\u{FFFD}31m");
    // Bytes that are not UTF-8 in a directory name, too.
    let node = Node::new();
    let raw = [b"ns\xff_pod_".as_slice(), UID.as_bytes()].concat();
    let dir = node
        .root()
        .join("var/log/pods")
        .join(std::ffi::OsString::from_vec(raw));
    fs::create_dir_all(dir).unwrap();
    node.process(8, 1, &containerd_cgroup(UID, ID));
    let found = PodResolver::new(node.root()).resolve(8).unwrap();
    assert_eq!(found.namespace.as_deref(), Ok("ns\u{FFFD}"));
    assert_eq!(found.name.as_deref(), Ok("pod"));
}

#[test]
fn each_pid_is_read_once_per_start_time() {
    let node = Node::new();
    node.pod("a", "one", UID, &[("c", Some(ID))]);
    node.process(20, 100, &containerd_cgroup(UID, ID));
    let mut resolver = PodResolver::new(node.root());
    let first = resolver.resolve(20).unwrap();
    // The kubelet removes the pod's directories: the process read before keeps its names.
    fs::remove_dir_all(node.root().join("var/log/pods")).unwrap();
    assert_eq!(resolver.resolve(20), Some(first));
    assert_eq!(resolver.cached(), 1);
    // The pid reused by a new process (another start time) is read afresh.
    node.process(20, 101, "0::/user.slice\n");
    assert_eq!(resolver.resolve(20), None);
    assert_eq!(resolver.cached(), 2);
}

#[test]
fn the_cache_is_bounded() {
    let node = Node::new();
    let mut resolver = PodResolver::new(node.root());
    for pid in 1..=CACHE_LIMIT as u32 {
        node.process(pid, 5, "0::/user.slice\n");
        resolver.resolve(pid);
    }
    assert_eq!(resolver.cached(), CACHE_LIMIT);
    node.process(99_999, 5, "0::/user.slice\n");
    resolver.resolve(99_999);
    assert_eq!(resolver.cached(), 1, "started afresh rather than grown");
}

#[test]
fn gone_or_hidden_processes_have_no_pod() {
    let node = Node::new();
    assert_eq!(PodResolver::new(node.root()).resolve(31337), None);
}

#[test]
fn the_starttime_is_field_22_after_the_command() {
    let stat = "42 (a) b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123456 9 9\n";
    assert_eq!(stat_starttime(stat), Some(123_456));
    assert_eq!(stat_starttime("42 (x"), None);
}
