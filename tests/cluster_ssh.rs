//! `vramscope cluster --ssh`: real OpenSSH servers on loopback stand for the hosts
//! (tests/cluster_support/sshd.rs), each running the built vramscope on its own fake NVML
//! and channels through the user's ssh client. The three nodes of the cluster tests give the
//! same job and node views as their exporters do; a host that is down, lacks vramscope, has
//! an older one, stalls or sends hostile text is one line with its reason while the others
//! keep refreshing; an sshd killed mid-run marks its node and its return clears the mark.
//! Skipped, with the reason printed, only where sshd cannot run (never in CI).

mod cluster_support;
mod common;
mod serve_support;

use cluster_support::sshd::{HostSpec, Hosts, write_script};
use cluster_support::*;
use common::tmux::{self, Tmux};
use common::{ISOLATED_SHM, NO_CONFIG, NO_NODE, Scenario, fake_nvml, h100};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The environment of commands run on a host whose vramscope reads `scenario` and the
/// channels in `channels`, finding programs in `bin` first.
fn remote_env(bin: &Path, scenario: &Scenario, channels: Option<&Path>) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            format!("{}:/usr/bin:/bin", bin.display()),
        ),
        (
            "FAKE_NVML_SCENARIO".into(),
            scenario.path.display().to_string(),
        ),
        (
            "VRAMSCOPE_NVML_LIB".into(),
            fake_nvml().display().to_string(),
        ),
        (
            ISOLATED_SHM.0.into(),
            scenario.dir().join(ISOLATED_SHM.1).display().to_string(),
        ),
        (NO_CONFIG.0.into(), NO_CONFIG.1.into()),
        (
            NO_NODE.0.into(),
            scenario.dir().join(NO_NODE.1).display().to_string(),
        ),
    ];
    if let Some(channels) = channels {
        env.push(("VRAMSCOPE_DIR".into(), channels.display().to_string()));
    }
    env
}

/// A folder holding `vramscope`, the built binary (and `vramscope-real`, for scripts).
fn bin_with_vramscope(dir: &Path, name: &str) -> std::path::PathBuf {
    let bin = dir.join(format!("bin-{name}"));
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vramscope"), bin.join("vramscope-real"))
        .unwrap();
    bin
}

fn start_or_skip(specs: Vec<HostSpec>) -> Option<Hosts> {
    match Hosts::start(specs) {
        Ok(hosts) => Some(hosts),
        Err(why) => {
            // .ci/run installs openssh-server: in CI the test must run.
            assert!(
                std::env::var_os("CI").is_none(),
                "sshd cannot run in CI: {why}"
            );
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// `vramscope cluster --ssh HOSTS ARGS --json` with the hosts' client PATH.
fn ssh_json(hosts: &Hosts, list: &str, args: &[&str]) -> (Value, Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env(NO_CONFIG.0, NO_CONFIG.1)
        .env("PATH", hosts.client_path())
        .args(["cluster", "--ssh", list])
        .args(args)
        .arg("--json")
        .output()
        .expect("run vramscope cluster");
    let text = String::from_utf8_lossy(&out.stdout);
    let doc = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "cluster --json is not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        doc,
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn three_hosts_over_ssh_show_the_exporters_views_and_an_sshd_killed_mid_run_comes_back() {
    if !common::python3_available() {
        return;
    }
    let fleet = Fleet::start();
    fleet.wait_until_served();
    let work = tempfile::tempdir().unwrap();
    let specs = NODES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let bin = bin_with_vramscope(work.path(), name);
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vramscope"), bin.join("vramscope"))
                .unwrap();
            HostSpec {
                name: name.to_string(),
                env: remote_env(&bin, &fleet.nodes[i].scenario, Some(&fleet.channels[i])),
            }
        })
        .collect();
    let Some(mut hosts) = start_or_skip(specs) else {
        return;
    };
    let list = NODES.join(",");
    // Every rank where it runs, with the figures its node's own exporter serves.
    // Deadlines a loaded machine meets: `--once` waits for each host's first document at
    // most two timeouts and three refreshes; a
    // session is stalled only after three refreshes and a timeout.
    let (doc, status, stderr) =
        ssh_json(&hosts, &list, &["--interval", "250ms", "--timeout", "10s"]);
    assert_eq!(status, Some(0), "{doc:#}\n{stderr}");
    assert_eq!(doc["problems"], json!([]), "{doc:#}");
    assert_eq!(doc["source"], "3 hosts over ssh");
    // No HTTP request: the sessions bring the documents.
    assert_eq!(doc["requests_per_refresh"], 0);
    check_every_rank(&doc, &fleet);

    if !tmux::available() {
        return;
    }
    let screen = Tmux::start(
        work.path(),
        160,
        40,
        &format!(
            "env PATH={} {}={} {} cluster --ssh {list} --interval 300ms --timeout 5s --view nodes",
            hosts.client_path().to_string_lossy(),
            NO_CONFIG.0,
            NO_CONFIG.1,
            env!("CARGO_BIN_EXE_vramscope"),
        ),
    );
    let row = |shown: &str, name: &str| {
        shown
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row: {shown}"))
            .to_string()
    };
    let (ok, shown) = screen.wait_for(Duration::from_secs(60), |s| {
        NODES.iter().all(|n| s.lines().any(|l| l.starts_with(n))) && !s.contains("! node")
    });
    assert!(ok, "{shown}");
    hosts.hosts[1].kill();
    let (ok, shown) = screen.wait_for(Duration::from_secs(30), |s| {
        s.contains("! node-b: ")
            && s.lines()
                .any(|l| l.starts_with("node-b") && l.contains("STALE"))
    });
    assert!(ok, "{shown}");
    let problem = shown.lines().find(|l| l.starts_with("! node-b")).unwrap();
    // Its session ended (ssh's own words) or it is said to reconnect: one line, its reason.
    assert!(problem.contains("trying again in"), "{problem}");
    // The others keep refreshing.
    for name in ["node-a", "node-c"] {
        assert!(!row(&shown, name).contains("STALE"), "{shown}");
    }
    hosts.hosts[1].restart();
    let (ok, shown) = screen.wait_for(Duration::from_secs(60), |s| {
        !s.contains("! node-b")
            && s.lines()
                .any(|l| l.starts_with("node-b") && !l.contains("STALE"))
    });
    assert!(ok, "node-b never came back: {shown}");
    quit_and_check_cleaned_up(&screen);
}

/// Quits the screen and waits for it to end: its ssh control folder is gone with it.
fn quit_and_check_cleaned_up(screen: &Tmux) {
    let pid = screen.pid();
    screen.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while screen.pane("#{pane_dead}").trim() != "1" {
        assert!(
            Instant::now() < deadline,
            "the screen did not end: {}",
            screen.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let prefix = format!("vramscope-ssh-{pid}-");
    let left: Vec<String> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn hosts_that_fail_lack_vramscope_are_older_stall_or_send_hostile_text_are_one_line_each() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let work = tempfile::tempdir().unwrap();
    let spec = |name: &str, script: Option<&str>| {
        let bin = bin_with_vramscope(work.path(), name);
        match script {
            Some(text) => write_script(&bin.join("vramscope"), text),
            None => {
                std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vramscope"), bin.join("vramscope"))
                    .unwrap()
            }
        }
        HostSpec {
            name: name.to_string(),
            env: remote_env(&bin, &scenario, None),
        }
    };
    let hostile_doc = json!({
        "schema": "vramscope.snapshot", "version": 1, "vramscope_version": "9",
        "taken_at_ms": 0,
        "devices": [{ "index": 0, "uuid": "GPU-\u{1b}]52;c;aGk=\u{7}", "name": "evil\u{202e}GPU",
                      "memory_used": 1024, "memory_total": 4096 }],
        "processes": [{ "gpu_index": 0, "pid": 7, "command": "rm\u{1b}[2J -rf", "user": "eve" }],
    });
    let specs = vec![
        spec("good", None),
        // Found nowhere on the remote PATH.
        HostSpec {
            name: "missing".into(),
            env: remote_env(Path::new("/nonexistent"), &scenario, None),
        },
        spec(
            "older",
            Some(
                "#!/bin/sh\nwhile echo '{\"schema\":\"vramscope.snapshot\",\"version\":0,\"vramscope_version\":\"0.0.1\"}'; do sleep 0.2; done\n",
            ),
        ),
        spec(
            "refuses",
            Some("#!/bin/sh\necho \"error: unexpected argument '--loop' found\" >&2\nexit 2\n"),
        ),
        spec(
            "stalls",
            // Silent after one document (for longer than a stall, not for ever: nothing
            // tells a sleeping script its session is gone).
            Some("#!/bin/sh\nvramscope-real \"$@\" | head -n 1\nexec sleep 30\n"),
        ),
        spec(
            "hostile",
            Some(&format!(
                "#!/bin/sh\nwhile cat <<'EOF'\n{hostile_doc}\nEOF\ndo sleep 0.2; done\n"
            )),
        ),
        spec(
            "hostile-err",
            Some(
                "#!/bin/sh\nprintf '\\033]52;c;aGk=\\007\\033[2Jbad\\342\\200\\256news\\n' >&2\nexit 1\n",
            ),
        ),
    ];
    let Some(hosts) = start_or_skip(specs) else {
        return;
    };
    hosts.add_down_host("down");
    let list = "good,missing,older,refuses,stalls,hostile,hostile-err,down";
    let (doc, status, stderr) =
        ssh_json(&hosts, list, &["--interval", "250ms", "--timeout", "10s"]);
    // The good host answered: the others are said, not fatal.
    assert_eq!(status, Some(0), "{doc:#}\n{stderr}");
    let problem = |host: &str| -> String {
        doc["problems"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|p| p.starts_with(&format!("{host}: ")))
            .unwrap_or_else(|| panic!("no problem line for {host}: {doc:#}"))
            .to_string()
    };
    let version = env!("CARGO_PKG_VERSION");
    for (host, says) in [
        (
            "missing",
            "missing: no vramscope on the host's PATH: ".to_string(),
        ),
        (
            "older",
            format!(
                "older: its vramscope 0.0.1 sends vramscope.snapshot version 0; this vramscope \
                 {version} reads vramscope.snapshot version 1 (missing since"
            ),
        ),
        (
            "refuses",
            "refuses: its vramscope refused `--json --loop` (an older one?): ".to_string(),
        ),
        (
            "hostile-err",
            "hostile-err: the remote vramscope exited with status 1: ".to_string(),
        ),
        (
            "down",
            "down: ssh failed: ssh: connect to host 127.0.0.1 port ".to_string(),
        ),
    ] {
        let p = problem(host);
        assert!(p.starts_with(&says), "{host}: {p}");
    }
    // The last of the remote's stderr, cleaned (the remote user's shell may have written a
    // line of its own before it: root's rc files here do).
    assert!(
        problem("refuses").contains("error: unexpected argument '--loop' found (trying again in "),
        "{doc:#}"
    );
    assert!(
        problem("hostile-err")
            .contains("\u{FFFD}]52;c;aGk=\u{FFFD}\u{FFFD}[2Jbad\u{FFFD}news (trying again in "),
        "{doc:#}"
    );
    assert!(problem("down").contains("Connection refused"), "{doc:#}");
    assert!(problem("missing").contains("not found"), "{doc:#}");
    // The good host and the hostile one are shown; the hostile one's text cleaned.
    let node = |name: &str| {
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .unwrap_or_else(|| panic!("no node {name}: {doc:#}"))
            .clone()
    };
    let good = node("good");
    assert_eq!(
        good["gpus"][0]["memory_total_bytes"],
        80 * common::GIB,
        "{good}"
    );
    let evil = node("hostile");
    assert_eq!(evil["gpus"][0]["model"], "evil\u{FFFD}GPU", "{evil}");
    assert_eq!(
        evil["gpus"][0]["uuid"], "GPU-\u{FFFD}]52;c;aGk=\u{FFFD}",
        "{evil}"
    );
    assert_eq!(
        evil["gpus"][0]["detail"]["processes"][0]["command"], "rm\u{FFFD}[2J -rf",
        "{evil}"
    );
    let text = doc.to_string();
    for raw in ["\\u001b", "\\u0007", "\u{202e}"] {
        assert!(!text.contains(raw), "{raw} reached the output: {text}");
    }
    // A session that sends nothing more is ended as stalled, while the others refresh: the
    // screen, which keeps running.
    if !tmux::available() {
        return;
    }
    let screen = Tmux::start(
        work.path(),
        250,
        50,
        &format!(
            "env PATH={} {}={} {} cluster --ssh good,stalls --interval 300ms --timeout 4s --view nodes",
            hosts.client_path().to_string_lossy(),
            NO_CONFIG.0,
            NO_CONFIG.1,
            env!("CARGO_BIN_EXE_vramscope"),
        ),
    );
    let (ok, shown) = screen.wait_for(Duration::from_secs(60), |s| {
        s.contains("! stalls: stalled: no document for")
    });
    assert!(ok, "{shown}");
    let good = shown
        .lines()
        .find(|l| l.starts_with("good"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(!good.contains("STALE"), "{shown}");
    quit_and_check_cleaned_up(&screen);
}
