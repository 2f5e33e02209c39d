//! `k` and `K` through the real binary in a real terminal (tmux): a replay or the demo never
//! signals the local process that has a recorded pid now, and the live monitor signals a pid
//! only while it still belongs to the process its row was sampled from.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, fake_nvml, h100};
use serde_json::json;
use std::process::{Child, Command};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// One GPU whose only process is `pid`.
fn scenario_listing(pid: u32) -> Scenario {
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": 6 * GIB }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep")
}

fn still_running(child: &mut Child) -> bool {
    child.try_wait().expect("try_wait").is_none()
}

fn end(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `k`, then `y` as if confirming, in the monitor on the screen; returns the screen after.
fn press_k_then_y(t: &Tmux, expect: &str) -> String {
    t.keys(&["k"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains(expect));
    assert!(ok, "`k` answered {expect:?}:\n{screen}");
    t.keys(&["y"]);
    std::thread::sleep(SECOND / 2);
    screen
}

#[test]
fn a_replay_never_signals_the_live_process_that_has_a_recorded_pid() {
    if !tmux::available() {
        return;
    }
    let mut victim = sleeper();
    let scenario = scenario_listing(victim.id());
    let path = scenario.dir().join("run.jsonl.zst");
    let recorded = scenario
        .command()
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .args(["record", "--interval", "0.2", "--duration", "1.5s", "-o"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("record");
    assert!(recorded.success());
    let command = format!(
        "{} replay {}",
        env!("CARGO_BIN_EXE_vramscope"),
        path.display()
    );
    let t = Tmux::start(scenario.dir(), 160, 40, &command);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("sleep 60"));
    assert!(ok, "the recorded process:\n{screen}");
    press_k_then_y(&t, "signals go only to live ones");
    t.keys(&["K"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("signals go only to live ones"));
    assert!(ok, "{screen}");
    t.keys(&["y"]);
    std::thread::sleep(SECOND / 2);
    assert!(
        still_running(&mut victim),
        "the replay signalled pid {}",
        victim.id()
    );
    assert!(!t.screen().contains("send SIG"), "no confirmation offered");
    t.keys(&["?"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("k and K send no signals"));
    assert!(ok, "the help says why:\n{screen}");
    assert!(!screen.contains("send SIGTERM to the selected"), "{screen}");
    end(victim);
}

#[test]
fn the_demo_offers_no_signal() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let command = format!("{} demo", env!("CARGO_BIN_EXE_vramscope"));
    let t = Tmux::start(scenario.dir(), 160, 40, &command);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("DEMO: simulated data"));
    assert!(ok, "{screen}");
    let screen = press_k_then_y(&t, "signals go only to live ones");
    assert!(!screen.contains("send SIG"), "{screen}");
}

/// Gives the next new process the pid `pid` (root only: `ns_last_pid`); `None` where that
/// cannot be done, or other processes kept taking it first.
fn sleeper_with_pid(pid: u32) -> Option<Child> {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
        let child = sleeper();
        if child.id() == pid {
            return Some(child);
        }
        end(child);
    }
    None
}

#[test]
fn the_live_monitor_refuses_a_pid_taken_by_another_process_since_its_row_was_sampled() {
    if !tmux::available() {
        return;
    }
    let first = sleeper();
    let pid = first.id();
    let scenario = scenario_listing(pid);
    let command = format!(
        "env FAKE_NVML_SCENARIO={} VRAMSCOPE_DIR={} {} --nvml-lib {} --interval 100ms",
        scenario.path.display(),
        scenario.dir().join("no-channels").display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    );
    let t = Tmux::start(scenario.dir(), 200, 40, &command);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("sleep 60"));
    assert!(ok, "{screen}");
    t.keys(&["k"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| {
        s.contains(&format!("send SIGTERM to pid {pid}"))
    });
    assert!(ok, "the confirmation:\n{screen}");
    // While the question is on screen, the process ends and another takes its pid.
    end(first);
    let Some(mut second) = sleeper_with_pid(pid) else {
        eprintln!("SKIPPED: cannot hand pid {pid} to a new process (needs root)");
        return;
    };
    t.keys(&["y"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| {
        s.contains(&format!(
            "not signalled: pid {pid} now belongs to another process"
        ))
    });
    assert!(ok, "refused:\n{screen}");
    std::thread::sleep(SECOND / 2);
    assert!(still_running(&mut second), "the newcomer was signalled");
    // Once sampled, the newcomer is the process shown and the same keys reach it. Until then
    // the row shows the first process's facts, or none, and `k` or `y` is refused again.
    let sent = format!("sent SIGTERM to {pid}");
    let asked = format!("send SIGTERM to pid {pid}");
    let mut screen = String::new();
    for _ in 0..20 {
        t.keys(&["k"]);
        let (_, now) = t.wait_for(3 * SECOND, |s| {
            s.contains(&asked) || s.contains("not visible") || s.contains("has exited")
        });
        if now.contains(&asked) {
            t.keys(&["y"]);
            (_, screen) = t.wait_for(3 * SECOND, |s| {
                s.contains(&sent) || s.contains("not signalled")
            });
            if screen.contains(&sent) {
                break;
            }
        }
        std::thread::sleep(SECOND / 2);
    }
    assert!(screen.contains(&sent), "{screen}");
    use std::os::unix::process::ExitStatusExt;
    let status = second.wait().expect("wait");
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}
