//! `--on EVENT=CMD` driven through the real binary on the fake NVML: a hook script records
//! the JSON on its standard input and its VRAMSCOPE_* variables, so the tests assert on what
//! a hook is really told; a hook that sleeps for ever is killed after the timeout and said
//! once while the documents keep coming, and one that fails is said once.

mod common;

use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Records one event: `<dir>/<kind>.json` is its standard input, `<dir>/<kind>.env` its
/// VRAMSCOPE_* variables, and `<dir>/runs` gets one line per run.
const RECORDER: &str = r#"#!/bin/sh
dir="$1"
cat > "$dir/$VRAMSCOPE_EVENT.json"
env | grep '^VRAMSCOPE_' | sort > "$dir/$VRAMSCOPE_EVENT.env"
echo "$VRAMSCOPE_EVENT" >> "$dir/runs"
"#;

/// Writes its pid to `argv[2]` and reports 9 GiB allocated (a 12 GiB peak) on device 0;
/// once `argv[1]` exists (the test has seen vramscope read it), 40 steps of 50 ms, then 6 s
/// on step 40 (a hang: the floor is 3 s), then dies of an uncaught CUDA OOM.
const SCRIPT: &str = r#"
import os, sys, time, vramscope
GIB = 1 << 30
def report():
    vramscope.report(device=0, allocated=9 * GIB, reserved=10 * GIB, peak=12 * GIB, free=GIB)
report()
open(sys.argv[2] + ".tmp", "w").write(str(os.getpid()))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
while not os.path.exists(sys.argv[1]):
    report()
    time.sleep(0.05)
for _ in range(40):
    report()
    vramscope.step()
    time.sleep(0.05)
for _ in range(60):
    report()
    time.sleep(0.1)
raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB")
"#;

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn env_of(file: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn run_tells_the_hooks_of_the_jobs_peak_hang_oom_and_end_once_each() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    // A folder with a space: the command is split into words as a shell quotes them.
    let out = work.path().join("hook out");
    std::fs::create_dir(&out).unwrap();
    let recorder = work.path().join("record.sh");
    executable(&recorder, RECORDER);
    let script = work.path().join("train.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let (go, pid_file) = (work.path().join("go"), work.path().join("pid"));
    let hook = |kind: &str| format!("{kind}={} '{}'", recorder.display(), out.display());
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let mut child = scenario
        .command()
        .env("VRAMSCOPE_DIR", work.path().join("channels"))
        .args(["run", "--json", "--interval", "0.2"])
        .args(["--on", &hook("oom"), "--on", &hook("exit")])
        // 12 GiB of an 80 GiB GPU is 15%.
        .args(["--on", &hook("peak:0.1"), "--on", &hook("hang")])
        .args(["--", "python3"])
        .args([&script, &go, &pid_file])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (docs_tx, docs) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = docs_tx.send(line);
        }
    });
    wait::wait_until("the job to start", Duration::from_secs(30), || {
        std::fs::read_to_string(&pid_file).is_ok()
    });
    let job_pid: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    // NVML lists the job on GPU 0: its channel is read for the pids NVML lists.
    let mut gpu0 = h100(0);
    gpu0["processes"] =
        json!([{ "t": 0, "compute": [{ "pid": job_pid, "used_memory": 11 * GIB }] }]);
    scenario.rewrite(&json!({ "devices": [gpu0] }));
    // Its steps begin once vramscope reads its channel, so that it sees them go by.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = docs.recv_timeout(left).expect("a document with the writer");
        let doc: Value = serde_json::from_str(&line).unwrap();
        let seen = doc["allocators"]
            .as_array()
            .is_some_and(|a| a.iter().any(|w| w["pid"] == json!(job_pid)));
        if seen {
            break;
        }
    }
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "the job's own status; {stderr}");
    let runs = out.join("runs");
    wait::wait_until(
        &format!("the four hooks; {stderr}"),
        Duration::from_secs(20),
        || std::fs::read_to_string(&runs).is_ok_and(|t| t.lines().count() >= 4),
    );
    let mut kinds: Vec<String> = std::fs::read_to_string(&runs)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["exit", "hang", "oom", "peak"],
        "each once; {stderr}"
    );

    let read = |kind: &str| -> Value {
        let text = std::fs::read_to_string(out.join(format!("{kind}.json"))).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let peak = read("peak");
    assert_eq!(peak["pid"], json!(job_pid), "{peak}");
    assert_eq!(peak["gpu"], json!(0), "{peak}");
    assert_eq!(peak["details"]["peak"], json!(12 * GIB), "{peak}");
    assert_eq!(peak["details"]["gpu_total"], json!(80 * GIB), "{peak}");
    let hang = read("hang");
    assert_eq!(hang["details"]["step"], json!(40), "{hang}");
    let waited = hang["details"]["waited_ms"].as_u64().unwrap();
    assert!(waited >= 3_000, "never before the floor: {hang}");

    let oom: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("oom.json")).unwrap()).unwrap();
    assert_eq!(oom["kind"], json!("oom"), "{oom}");
    assert_eq!(oom["details"]["requested"], json!(6 * GIB), "{oom}");
    assert_eq!(oom["details"]["step"], json!(40), "{oom}");
    assert_eq!(
        oom["pid"],
        json!(job_pid),
        "the job's pid, not vramscope's ({pid}): {oom}"
    );
    assert_eq!(oom["gpu"], json!(0), "{oom}");
    let env = env_of(&out.join("oom.env"));
    assert!(
        env.contains(&("VRAMSCOPE_EVENT".into(), "oom".into())),
        "{env:?}"
    );
    assert!(
        env.contains(&("VRAMSCOPE_PID".into(), job_pid.to_string())),
        "{env:?}"
    );
    assert!(
        env.contains(&("VRAMSCOPE_GPU".into(), "0".into())),
        "{env:?}"
    );

    let exit: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("exit.json")).unwrap()).unwrap();
    assert_eq!(exit["kind"], json!("exit"), "{exit}");
    assert_eq!(exit["pid"], json!(job_pid), "{exit}");
    assert_eq!(exit["details"]["status"], json!(1), "{exit}");
    assert_eq!(exit["details"]["job"], json!(true), "{exit}");
    let env = env_of(&out.join("exit.env"));
    assert!(
        env.contains(&("VRAMSCOPE_EVENT".into(), "exit".into())),
        "{env:?}"
    );
}

#[test]
fn a_hook_that_hangs_is_killed_and_said_once_and_the_documents_keep_coming() {
    let work = tempfile::tempdir().unwrap();
    let hung_pid = work.path().join("hung.pid");
    // From the configuration file: `on` is a setting. The hung hook asks for a shell itself.
    let config = work.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "on = [\"free:1s=sh -c 'echo $$ > {}; exec sleep 1000'\", \"free:1s=false\"]\n",
            hung_pid.display()
        ),
    )
    .unwrap();
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let mut child = scenario
        .command()
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--json", "--loop", "0.2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (docs_tx, docs) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = docs_tx.send((Instant::now(), line));
        }
    });
    let (said_tx, said) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = said_tx.send((Instant::now(), line));
        }
    });
    wait::wait_until("the hung hook to start", Duration::from_secs(30), || {
        std::fs::read_to_string(&hung_pid).is_ok_and(|t| t.trim().parse::<u32>().is_ok())
    });
    let hook_started = Instant::now();
    let sleeper: u32 = std::fs::read_to_string(&hung_pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lines
        .iter()
        .any(|(_, l): &(Instant, String)| l.contains("killed"))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        lines.push(said.recv_timeout(left).expect("the timeout said"));
    }
    let killed_at = lines.iter().find(|(_, l)| l.contains("killed")).unwrap().0;
    assert!(
        killed_at.duration_since(hook_started) >= Duration::from_secs(9),
        "killed after its timeout, not before"
    );
    // Killed with what it started: the `sleep` the shell became is gone.
    wait::wait_until(
        "the hung hook's process to go",
        Duration::from_secs(10),
        || {
            !Path::new(&format!("/proc/{sleeper}")).exists()
                || std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        },
    );
    // A few more documents, then stop; the documents went on while the hook hung.
    std::thread::sleep(Duration::from_secs(2));
    child.kill().unwrap();
    child.wait().unwrap();
    let docs: Vec<(Instant, String)> = docs.try_iter().collect();
    let during = docs
        .iter()
        .filter(|(at, _)| *at > hook_started && *at < killed_at)
        .count();
    assert!(during >= 5, "{during} documents while the hook hung");
    for (_, doc) in &docs {
        serde_json::from_str::<Value>(doc).expect("each document whole");
    }
    lines.extend(said.try_iter());
    let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    let killed = text.iter().filter(|l| l.contains("killed")).count();
    let failed = text
        .iter()
        .filter(|l| l.contains("--on free:1s=false") && l.contains("exit status: 1"))
        .count();
    assert_eq!(killed, 1, "said once: {text:?}");
    assert_eq!(failed, 1, "said once: {text:?}");
    assert!(
        text.iter()
            .any(|l| l.starts_with("vramscope: --on free:1s=sh -c")
                && l.ends_with("still running after 10 s: killed")),
        "{text:?}"
    );
}

#[test]
fn the_monitor_runs_its_hooks_and_says_a_failing_one_on_the_status_line() {
    if !common::tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0), h100(1)] }));
    let out = scenario.dir().join("out");
    std::fs::create_dir(&out).unwrap();
    let recorder = scenario.dir().join("record.sh");
    executable(&recorder, RECORDER);
    let line = format!(
        "{} --interval 0.2 --on 'free:1s={} {}' --on free:1s=false",
        scenario.monitor_line(""),
        recorder.display(),
        out.display()
    );
    let t = common::tmux::Tmux::start(scenario.dir(), 120, 30, &line);
    let (said, screen) = t.wait_for(Duration::from_secs(30), |s| {
        s.contains("--on free:1s=false: exit status: 1")
    });
    assert!(said, "the failing hook said on the screen:\n{screen}");
    wait::wait_until("the recording hook", Duration::from_secs(20), || {
        std::fs::read_to_string(out.join("runs")).is_ok_and(|t| !t.is_empty())
    });
    // Both GPUs are free: the event is either's.
    let free: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("free.json")).unwrap()).unwrap();
    assert_eq!(free["kind"], json!("free"), "{free}");
    assert!(free["gpu"] == json!(0) || free["gpu"] == json!(1), "{free}");
    assert!(free["details"]["idle_s"].as_u64().unwrap() >= 1, "{free}");
    let env = env_of(&out.join("free.env"));
    assert!(
        env.contains(&("VRAMSCOPE_EVENT".into(), "free".into())),
        "{env:?}"
    );
    t.keys(&["q"]);
}

#[test]
fn serve_runs_its_hooks_too() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let out = scenario.dir().join("out");
    std::fs::create_dir(&out).unwrap();
    let recorder = scenario.dir().join("record.sh");
    executable(&recorder, RECORDER);
    let hook = format!("free:1s={} {}", recorder.display(), out.display());
    let mut child = scenario
        .command()
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "200ms"])
        .args(["--on", &hook])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let recorded = out.join("free.json");
    let ran = wait::poll(Duration::from_secs(30), wait::POLL, || {
        std::fs::read_to_string(out.join("runs"))
            .is_ok_and(|t| !t.is_empty())
            .then_some(())
    });
    if ran.is_err() {
        child.kill().unwrap();
        panic!("serve never ran its free hook");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let free: Value = serde_json::from_str(&std::fs::read_to_string(recorded).unwrap()).unwrap();
    assert_eq!(free["kind"], json!("free"), "{free}");
    assert_eq!(free["gpu"], json!(0), "{free}");
}

#[test]
fn a_bell_hook_rings_the_terminal_bell() {
    // The monitor rings no bell of its own: tmux's flag is the hook's.
    if !common::tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let line = format!(
        "{} --interval 0.2 --on free:1s=bell",
        scenario.monitor_line("")
    );
    let t = common::tmux::Tmux::start(scenario.dir(), 120, 30, &line);
    let (ran, screen) = t.wait_for(Duration::from_secs(20), |s| s.contains("GPU"));
    assert!(ran, "the monitor ran:\n{screen}");
    let rang = wait::poll(Duration::from_secs(30), Duration::from_millis(100), || {
        (t.pane("window_bell_flag") == "1").then_some(())
    });
    assert!(rang.is_ok(), "no bell:\n{}", t.screen());
    // The detached test session has no client to show tmux's message: that is not said.
    std::thread::sleep(Duration::from_secs(1));
    let screen = t.screen();
    assert!(!screen.contains("--on free:1s=bell"), "{screen}");
    t.keys(&["q"]);
}
