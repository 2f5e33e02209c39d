//! Kubernetes pods, end to end: the real binary against the fake NVML, whose GPU processes
//! (real `sleep` processes, so the host pass reads them) are placed in pods by a node of the
//! test's own (`VRAMSCOPE_K8S_ROOT`: its `proc/PID/cgroup` and the kubelet's `var/log/pods`
//! and `var/log/containers`). One process per form: containerd under cgroup v2 and the
//! systemd driver, CRI-O under cgroup v1 and the cgroupfs driver, docker under cgroup v1 and
//! the systemd driver in a pod that was deleted while it runs, a pod whose names are hostile,
//! and a process in no pod. `--json`, `--csv`, `--once`, `/metrics`, a recording and its
//! report, and the TUI (POD column, filter, detail pane) all name them alike.

mod common;
mod serve_support;

use common::tmux::{self, Tmux};
use common::*;
use serde_json::{Value, json};
use serve_support::{Served, samples};
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const UID_TRAINER: &str = "8e7f6a5b-4c3d-2e1f-0a9b-8c7d6e5f4a3b";
const UID_SERVER: &str = "11111111-2222-4333-8444-555555555555";
const UID_GONE: &str = "99999999-aaaa-4bbb-8ccc-dddddddddddd";
const UID_EVIL: &str = "0e0e0e0e-1f1f-4a2a-8b3b-4c4c4c4c4c4c";

/// Hostile names: an OSC title write, a right-to-left override, a C1 CSI.
const EVIL_NS: &str = "team\u{1b}]0;x\u{7}";
const EVIL_NS_SHOWN: &str = "team\u{FFFD}]0;x\u{FFFD}";
const EVIL_POD: &str = "evil\u{202e}gpj.exe";
const EVIL_POD_SHOWN: &str = "evil\u{FFFD}gpj.exe";
const EVIL_CONTAINER: &str = "c\u{9b}31m";
const EVIL_CONTAINER_SHOWN: &str = "c\u{FFFD}31m";

fn id(c: char) -> String {
    c.to_string().repeat(64)
}

/// A `sleep` standing in for a GPU process; killed when dropped.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Self {
        let child = Command::new("sleep")
            .arg("300")
            .stdout(Stdio::null())
            .spawn()
            .expect("sleep");
        Sleeper(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The node: `proc/PID/{stat,cgroup}` and the kubelet's log directories.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Self {
        let node = Node {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        fs::create_dir_all(node.root().join("var/log/pods")).unwrap();
        fs::create_dir_all(node.root().join("var/log/containers")).unwrap();
        node
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn process(&self, pid: u32, cgroup: &str) {
        let dir = self.root().join(format!("proc/{pid}"));
        fs::create_dir_all(&dir).unwrap();
        let stat = format!("{pid} (sleep) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0\n");
        fs::write(dir.join("stat"), stat).unwrap();
        fs::write(dir.join("cgroup"), cgroup).unwrap();
    }

    /// A pod's directory with its containers', and the link of each container given an id.
    fn pod(&self, namespace: &str, name: &str, uid: &str, containers: &[(&str, Option<&str>)]) {
        let pod_dir = format!("{namespace}_{name}_{uid}");
        for (container, id) in containers {
            fs::create_dir_all(
                self.root()
                    .join("var/log/pods")
                    .join(&pod_dir)
                    .join(container),
            )
            .unwrap();
            if let Some(id) = id {
                let link = self.root().join(format!(
                    "var/log/containers/{name}_{namespace}_{container}-{id}.log"
                ));
                let target = format!("/var/log/pods/{pod_dir}/{container}/0.log");
                std::os::unix::fs::symlink(target, link).unwrap();
            }
        }
    }
}

/// The pids of the cluster's processes.
struct Pids {
    trainer: u32,
    server: u32,
    gone: u32,
    evil: u32,
    host: u32,
}

/// One GPU listing the cluster's processes, the trainer only when `trainer`.
fn gpu_listing(pids: &Pids, trainer: bool) -> Value {
    let mut gpu = h100(0);
    let listed = [
        (pids.trainer, 20),
        (pids.server, 4),
        (pids.gone, 3),
        (pids.evil, 2),
        (pids.host, 1),
    ];
    let compute: Vec<Value> = listed
        .iter()
        .filter(|(pid, _)| trainer || *pid != pids.trainer)
        .map(|(pid, gib)| json!({ "pid": pid, "used_memory": gib * GIB }))
        .collect();
    gpu["processes"] = json!([{ "t": 0, "compute": compute }]);
    json!({ "devices": [gpu] })
}

struct Cluster {
    scenario: Scenario,
    node: Node,
    pids: Pids,
    _sleepers: Vec<Sleeper>,
}

impl Cluster {
    fn new() -> Self {
        let sleepers: Vec<Sleeper> = (0..4).map(|_| Sleeper::start()).collect();
        let pids = Pids {
            trainer: sleepers[0].pid(),
            server: sleepers[1].pid(),
            gone: sleepers[2].pid(),
            evil: sleepers[3].pid(),
            host: std::process::id(),
        };
        let node = Node::new();
        let underscored = |uid: &str| uid.replace('-', "_");
        // containerd, cgroup v2, systemd driver, burstable; a sidecar beside it.
        node.process(
            pids.trainer,
            &format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{}.scope\n",
                underscored(UID_TRAINER),
                id('a')
            ),
        );
        node.pod(
            "ml-team",
            "trainer-0",
            UID_TRAINER,
            &[("trainer", Some(&id('a'))), ("sidecar", Some(&id('f')))],
        );
        // CRI-O, cgroup v1, cgroupfs driver, best effort; its only container has no link.
        let crio = format!("/kubepods/besteffort/pod{UID_SERVER}/crio-{}", id('b'));
        node.process(
            pids.server,
            &format!("12:memory:{crio}\n11:pids:{crio}\n1:name=systemd:{crio}\n"),
        );
        node.pod("inference", "server-1", UID_SERVER, &[("triton", None)]);
        // docker, cgroup v1, systemd driver, guaranteed; the pod was deleted: no directory.
        node.process(
            pids.gone,
            &format!(
                "5:memory:/kubepods.slice/kubepods-pod{}.slice/docker-{}.scope\n",
                underscored(UID_GONE),
                id('c')
            ),
        );
        // Hostile names.
        node.process(
            pids.evil,
            &format!(
                "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{}.scope\n",
                underscored(UID_EVIL),
                id('d')
            ),
        );
        node.pod(
            EVIL_NS,
            EVIL_POD,
            UID_EVIL,
            &[(EVIL_CONTAINER, Some(&id('d'))), ("other", None)],
        );
        // The test process runs in no pod: the node has no `proc/` entry for it.
        let scenario = Scenario::new(&gpu_listing(&pids, true));
        Cluster {
            scenario,
            node,
            pids,
            _sleepers: sleepers,
        }
    }

    /// NVML stops listing the trainer (it still runs: it left the GPU).
    fn trainer_leaves(&self) {
        self.scenario.rewrite(&gpu_listing(&self.pids, false));
    }

    fn command(&self) -> Command {
        let mut cmd = self.scenario.command();
        cmd.env(NO_NODE.0, self.node.root());
        cmd
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("run vramscope");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    }
}

/// No control character but the line ends, and no bidirectional formatting character.
fn assert_clean(what: &str, text: &str) {
    for (at, c) in text.char_indices() {
        let bidi = matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(
            !(bidi || (c.is_control() && c != '\n')),
            "{what}: U+{:04X} at byte {at} in:\n{}",
            c as u32,
            text.escape_debug()
        );
    }
}

fn process(doc: &Value, pid: u32) -> &Value {
    doc["processes"]
        .as_array()
        .and_then(|list| list.iter().find(|p| p["pid"] == pid))
        .unwrap_or_else(|| panic!("pid {pid} in {doc:#}"))
}

#[test]
fn json_csv_and_once_name_every_pod() {
    let cluster = Cluster::new();
    let pids = &cluster.pids;
    let doc: Value = serde_json::from_str(&cluster.run(&["--json"])).expect("JSON");

    let trainer = process(&doc, pids.trainer);
    assert_eq!(trainer["pod"], "trainer-0");
    assert_eq!(trainer["namespace"], "ml-team");
    assert_eq!(trainer["container_name"], "trainer", "by the link's target");
    assert_eq!(trainer["pod_uid"], UID_TRAINER);
    assert_eq!(trainer["pod_qos"], "burstable");
    assert_eq!(trainer["container"], "aaaaaaaaaaaa", "the id, as before");

    let server = process(&doc, pids.server);
    assert_eq!(server["pod"], "server-1");
    assert_eq!(server["namespace"], "inference");
    assert_eq!(
        server["container_name"], "triton",
        "the pod's only container"
    );
    assert_eq!(server["pod_qos"], "besteffort");

    let gone = process(&doc, pids.gone);
    assert_eq!(gone["pod_uid"], UID_GONE, "the uid outlives the pod");
    assert_eq!(gone["pod_qos"], "guaranteed");
    for field in ["pod", "namespace", "container_name"] {
        assert_eq!(gone[field], Value::Null, "{field}");
        let why = gone["unavailable"][field].as_str().unwrap_or_default();
        assert!(why.starts_with("pod deleted"), "{field}: {why}");
    }

    let evil = process(&doc, pids.evil);
    assert_eq!(evil["namespace"], EVIL_NS_SHOWN);
    assert_eq!(evil["pod"], EVIL_POD_SHOWN);
    assert_eq!(evil["container_name"], EVIL_CONTAINER_SHOWN);

    let host = process(&doc, pids.host);
    assert_eq!(host["pod"], Value::Null);
    assert_eq!(host["pod_uid"], Value::Null);
    assert_eq!(host["unavailable"]["pod"], "not in a Kubernetes pod");

    let csv = cluster.run(&["--csv"]);
    assert_clean("--csv", &csv);
    let header: Vec<&str> = csv.lines().next().unwrap_or_default().split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} in {header:?}"))
    };
    let row_of = |pid: u32| -> Vec<String> {
        csv.lines()
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .find(|cells| {
                cells.first().map(String::as_str) == Some("process")
                    && cells[column("pid")] == pid.to_string()
            })
            .unwrap_or_else(|| panic!("pid {pid} in {csv}"))
    };
    let trainer_row = row_of(pids.trainer);
    assert_eq!(trainer_row[column("pod")], "trainer-0");
    assert_eq!(trainer_row[column("namespace")], "ml-team");
    assert_eq!(trainer_row[column("container_name")], "trainer");
    assert_eq!(trainer_row[column("pod_uid")], UID_TRAINER);
    let gone_row = row_of(pids.gone);
    assert_eq!(gone_row[column("pod")], "", "absent, not made up");
    assert_eq!(gone_row[column("pod_uid")], UID_GONE);
    assert_eq!(row_of(pids.evil)[column("pod")], EVIL_POD_SHOWN);

    let once = cluster.run(&["--once"]);
    assert_clean("--once", &once);
    for shown in [
        "[ml-team/trainer-0:trainer] sleep 300".to_string(),
        "[inference/server-1:triton] sleep 300".to_string(),
        format!("[pod {UID_GONE}] sleep 300"),
        format!("[{EVIL_NS_SHOWN}/{EVIL_POD_SHOWN}:{EVIL_CONTAINER_SHOWN}] sleep 300"),
    ] {
        assert!(once.contains(&shown), "{shown} in:\n{once}");
    }
}

#[test]
fn the_exporter_labels_processes_as_dcgm_exporter_does() {
    let cluster = Cluster::new();
    let pids = &cluster.pids;
    let served = Served::spawn({
        let mut cmd = cluster.command();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms"]);
        cmd
    });
    let series = |text: &str, pid: u32| {
        samples(text).into_iter().find(|l| {
            l.name == "vramscope_process_memory_used_bytes"
                && l.label("pid") == Some(&pid.to_string())
        })
    };
    let text = served.scrape_until(Duration::from_secs(15), |t| {
        [pids.trainer, pids.gone, pids.evil, pids.host]
            .iter()
            .all(|&pid| series(t, pid).is_some_and(|l| l.label("user").is_some()))
    });
    assert_clean("/metrics", &text);
    let trainer = series(&text, pids.trainer).unwrap();
    assert_eq!(trainer.label("pod"), Some("trainer-0"));
    assert_eq!(trainer.label("namespace"), Some("ml-team"));
    assert_eq!(trainer.label("container"), Some("trainer"));
    let evil = series(&text, pids.evil).unwrap();
    assert_eq!(evil.label("namespace"), Some(EVIL_NS_SHOWN));
    assert_eq!(evil.label("pod"), Some(EVIL_POD_SHOWN));
    assert_eq!(evil.label("container"), Some(EVIL_CONTAINER_SHOWN));
    // Unknown names are no label at all, never an empty or made-up one.
    for pid in [pids.gone, pids.host] {
        let line = series(&text, pid).unwrap();
        for label in ["pod", "namespace", "container"] {
            assert_eq!(line.label(label), None, "pid {pid} {label}");
        }
    }
}

#[test]
fn recordings_keep_pods_and_the_report_names_them() {
    let cluster = Cluster::new();
    let pids = &cluster.pids;
    let file = cluster.scenario.dir().join("run.jsonl");
    let out = cluster
        .command()
        .args(["--interval", "200ms", "record", "--duration", "1.5s", "-o"])
        .arg(&file)
        .output()
        .expect("record");
    assert!(out.status.success(), "{}", stderr(&out));
    let recorded = fs::read_to_string(&file).expect("the recording");
    assert!(
        recorded.contains(&format!("\"uid\":\"{UID_TRAINER}\"")),
        "the pod is recorded"
    );

    let report = cluster.run(&["report", file.to_str().unwrap()]);
    assert_clean("report", &report);
    let line = |pid: u32| {
        report
            .lines()
            .find(|l| l.contains(&format!("pid {pid} on GPU 0")))
            .unwrap_or_else(|| panic!("pid {pid} in:\n{report}"))
            .to_string()
    };
    assert!(
        line(pids.trainer).contains("in pod ml-team/trainer-0, container trainer: NVML used"),
        "{report}"
    );
    assert!(
        line(pids.gone).contains(&format!("in pod {UID_GONE} (names n/a: pod deleted")),
        "{report}"
    );
    assert!(!line(pids.host).contains("in pod"), "{report}");

    let json: Value =
        serde_json::from_str(&cluster.run(&["report", "--json", file.to_str().unwrap()]))
            .expect("report --json");
    let summary = json["processes"]
        .as_array()
        .and_then(|l| l.iter().find(|p| p["pid"] == pids.server))
        .expect("the server in the report");
    assert_eq!(summary["namespace"], "inference");
    assert_eq!(summary["pod"], "server-1");
    assert_eq!(summary["container_name"], "triton");
    assert_eq!(summary["pod_uid"], UID_SERVER);
}

/// Esc while typing clears the filter; the next key waits until every row is back, so that
/// it does not follow Esc closely enough to read as Alt and a key.
fn clear_filter(t: &Tmux) {
    t.keys(&["/", "Escape"]);
    let (ok, screen) = t.wait_for(Duration::from_secs(10), |s| s.contains("rows 1-5 of 5"));
    assert!(ok, "the filter cleared:\n{screen}");
}

#[test]
fn the_table_shows_pods_the_filter_finds_them_and_the_detail_pane_names_them() {
    if !tmux::available() {
        return;
    }
    let cluster = Cluster::new();
    let pids = &cluster.pids;
    let line = format!(
        "env FAKE_NVML_SCENARIO={} {}={} {} --nvml-lib {} --interval 200ms",
        cluster.scenario.path.display(),
        NO_NODE.0,
        cluster.node.root().display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    );
    let t = Tmux::start(cluster.scenario.dir(), 160, 40, &line);
    let row = |s: &str, pid: u32| {
        s.lines()
            .find(|l| l.trim_start().starts_with(&pid.to_string()))
            .map(str::to_string)
    };
    let wait = Duration::from_secs(10);
    let (ok, screen) = t.wait_for(wait, |s| {
        s.lines()
            .any(|l| l.trim_start().starts_with("PID") && l.contains("POD"))
            && row(s, pids.trainer).is_some_and(|r| r.contains("ml-team/trainer-0:trainer"))
    });
    assert!(ok, "the POD column:\n{screen}");
    assert_clean("the screen", &screen);
    assert!(
        row(&screen, pids.server).is_some_and(|r| r.contains("inference/server-1:triton")),
        "{screen}"
    );
    assert!(
        row(&screen, pids.gone).is_some_and(|r| r.contains("pod 99999999-aaaa")),
        "{screen}"
    );

    t.keys(&["/", "inference", "Enter"]);
    let (ok, screen) = t.wait_for(wait, |s| {
        row(s, pids.server).is_some() && row(s, pids.trainer).is_none()
    });
    assert!(ok, "the filter matches the namespace:\n{screen}");

    clear_filter(&t);
    t.keys(&["/", "triton", "Enter"]);
    let (ok, screen) = t.wait_for(wait, |s| {
        row(s, pids.server).is_some() && row(s, pids.trainer).is_none()
    });
    assert!(ok, "the filter matches the container's name:\n{screen}");

    clear_filter(&t);
    t.keys(&["/", "trainer", "Enter"]);
    let (ok, screen) = t.wait_for(wait, |s| {
        row(s, pids.trainer).is_some() && row(s, pids.server).is_none()
    });
    assert!(ok, "the filter matches the pod:\n{screen}");
    t.keys(&["Enter"]);
    let (ok, screen) = t.wait_for(wait, |s| {
        s.contains(&format!("pod uid {UID_TRAINER}")) && s.contains("qos burstable")
    });
    assert!(ok, "the detail pane:\n{screen}");
    assert!(
        screen.contains("pod ml-team/trainer-0  container trainer"),
        "{screen}"
    );

    // A row NVML no longer lists keeps its pod.
    t.keys(&["Escape"]);
    cluster.trainer_leaves();
    let (ok, screen) = t.wait_for(wait, |s| {
        row(s, pids.trainer)
            .is_some_and(|r| r.contains("left GPU") && r.contains("ml-team/trainer-0:trainer"))
    });
    assert!(ok, "the row that left its GPU:\n{screen}");
}
