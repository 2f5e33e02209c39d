//! Signals from outside while the monitor holds a real terminal (tmux): every one that stops
//! or ends it gives the terminal back (main screen, cursor shown, cooked mode), SIGCONT takes
//! it back in raw mode, and `TERM=dumb` gets one plain line instead of full-screen escapes.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, fake_nvml, h100};
use serde_json::json;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn scenario() -> Scenario {
    let mut gpu = h100(0);
    gpu["processes"] =
        json!([{ "t": 0, "compute": [{ "pid": std::process::id(), "used_memory": 6 * GIB }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn monitor(scenario: &Scenario) -> String {
    format!(
        "env FAKE_NVML_SCENARIO={} VRAMSCOPE_DIR={} {} --nvml-lib {} --interval 100ms",
        scenario.path.display(),
        scenario.dir().join("no-channels").display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    )
}

/// The monitor started from an interactive bash (with job control) in a pane `cols` wide,
/// once it shows its GPU.
fn monitor_from_bash(scenario: &Scenario, cols: u16) -> Tmux {
    let t = Tmux::start(
        scenario.dir(),
        cols,
        40,
        "env PS1='PROMPT$ ' bash --norc --noprofile -i",
    );
    assert!(t.wait_for(5 * SECOND, |s| s.contains("PROMPT$")).0);
    t.keys(&[&monitor(scenario), "Enter"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("NVIDIA H100"));
    assert!(ok, "{screen}");
    t
}

fn send(pid: i32, signal: libc::c_int) {
    // SAFETY: a signal to the monitor this test started.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

fn assert_given_back(t: &Tmux, what: &str) {
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("alternate_on") == "0");
    assert!(ok, "{what}: the alternate screen is left");
    assert_eq!(t.pane("cursor_flag"), "1", "{what}: the cursor is shown");
}

#[test]
fn quit_and_int_from_outside_leave_a_clean_shell() {
    if !tmux::available() {
        return;
    }
    for (signal, code) in [(libc::SIGQUIT, 131), (libc::SIGINT, 130)] {
        let scenario = scenario();
        let shell = format!(
            "sh -c '{} ; echo EXIT=$?; stty -a; exec sleep 30'",
            monitor(&scenario)
        );
        let t = Tmux::start(scenario.dir(), 120, 40, &shell);
        assert!(t.wait_for(5 * SECOND, |s| s.contains("NVIDIA")).0);
        send(t.child(), signal);
        let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("EXIT=") && s.contains("icanon"));
        assert!(ok, "signal {signal}:\n{screen}");
        assert!(screen.contains(&format!("EXIT={code}")), "{screen}");
        assert_given_back(&t, &format!("signal {signal}"));
        assert!(
            screen.contains(" icanon") && screen.contains(" echo "),
            "cooked mode after signal {signal}:\n{screen}"
        );
    }
}

#[test]
fn tstp_from_outside_gives_the_terminal_back_and_fg_takes_it_again() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let t = monitor_from_bash(&scenario, 120);
    let pid = t.child();
    send(pid, libc::SIGTSTP);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("Stopped"));
    assert!(ok, "the shell saw the monitor stop:\n{screen}");
    assert_given_back(&t, "SIGTSTP");
    // Cooked mode at the prompt: a command typed there echoes and runs.
    t.keys(&["stty -a | grep -o -- '-\\?icanon' | sed s/^/MODE/", "Enter"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("MODEicanon"));
    assert!(ok, "cooked mode while stopped:\n{screen}");
    t.keys(&["fg; echo EXIT=$?", "Enter"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("alternate_on") == "1");
    assert!(ok, "the monitor took the screen back");
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("NVIDIA H100"));
    assert!(ok, "redrawn whole:\n{screen}");
    assert_eq!(t.pane("cursor_flag"), "0", "cursor hidden again");
    // Raw mode again: `q` alone, without Enter, quits.
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("EXIT=0"));
    assert!(ok, "q quit without Enter:\n{screen}");
    assert_given_back(&t, "q after fg");
}

#[test]
fn ctrl_z_then_fg_comes_back_in_raw_mode() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let t = monitor_from_bash(&scenario, 400);
    t.keys(&["C-z"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("Stopped"));
    assert!(ok, "{screen}");
    assert_given_back(&t, "Ctrl-Z");
    // In the background it must not take the terminal: it stops again (SIGTTOU) untouched.
    let pid = t.child();
    t.keys(&["bg", "Enter"]);
    // bash says `[1]+ ... &` once it has sent SIGCONT (on one line: the pane is wide).
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("100ms &"));
    assert!(ok, "{screen}");
    let stopped = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat[stat.rfind(')').unwrap() + 2..].starts_with('T')
    };
    let (ok, screen) = t.wait_for(3 * SECOND, |_| stopped());
    assert!(ok, "stopped again in the background:\n{screen}");
    assert_given_back(&t, "bg");
    t.keys(&["fg; echo EXIT=$?", "Enter"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("alternate_on") == "1");
    assert!(ok, "the monitor took the screen back");
    assert!(t.wait_for(3 * SECOND, |s| s.contains("NVIDIA H100")).0);
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("EXIT=0"));
    assert!(ok, "q quit without Enter:\n{screen}");
}

#[test]
fn term_dumb_gets_one_plain_line() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let shell = format!(
        "sh -c 'env TERM=dumb {} ; echo EXIT=$?; exec sleep 30'",
        monitor(&scenario)
    );
    let t = Tmux::start(scenario.dir(), 120, 40, &shell);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT="));
    assert!(ok, "{screen}");
    assert!(screen.contains("EXIT=2"), "{screen}");
    let said: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(said.len(), 2, "one line, then the status:\n{screen}");
    assert!(said[0].starts_with("vramscope: TERM=dumb"), "{screen}");
    assert_eq!(t.pane("alternate_on"), "0");
}
