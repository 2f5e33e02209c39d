//! A thread that cannot start is one clear line and an exit, never a monitor left deaf (no
//! input thread) or stuck on "starting NVML..." (no NVML thread). `VRAMSCOPE_FAIL_SPAWN`
//! makes the named thread fail as the system does when it is out of threads (EAGAIN).

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, h100};
use serde_json::json;
use std::time::Duration;

const EAGAIN: &str = "Resource temporarily unavailable (os error 11)";

#[test]
fn record_exits_with_one_line_when_a_sampling_thread_cannot_start() {
    for thread in ["nvml-open", "sampling-watchdog"] {
        let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
        let out = scenario
            .command()
            .env("VRAMSCOPE_FAIL_SPAWN", thread)
            .args(["record", "--duration", "5s", "-o"])
            .arg(scenario.dir().join("r.vsr"))
            .output()
            .expect("run vramscope");
        assert_eq!(out.status.code(), Some(1), "{thread}: {out:?}");
        assert_eq!(
            common::stderr(&out),
            format!("vramscope: cannot start the {thread} thread: {EAGAIN}\n"),
            "{thread}"
        );
    }
}

#[test]
fn serve_exits_with_one_line_when_the_nvml_thread_cannot_start() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let out = scenario
        .command()
        .env("VRAMSCOPE_FAIL_SPAWN", "nvml-open")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .expect("run vramscope");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        common::stderr(&out),
        format!("vramscope: cannot start the nvml-open thread: {EAGAIN}\n")
    );
}

/// In a real terminal: the line is on the shell's screen, the monitor has exited with 1 and
/// the terminal is as it was (no alternate screen, cursor shown).
#[test]
fn the_monitor_exits_cleanly_when_its_input_or_job_thread_cannot_start() {
    if !tmux::available() {
        return;
    }
    for (thread, extra) in [
        ("input", String::new()),
        ("nvml-open", String::new()),
        ("job-wait", "run -- sleep 2".to_string()),
    ] {
        let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
        // The monitor runs from a shell that stays, so the terminal can be read after it:
        // its status is printed, its stderr goes to a file, exactly what it would show.
        let err = scenario.dir().join("stderr");
        let line = format!(
            "sh -c 'env VRAMSCOPE_FAIL_SPAWN={thread} {} 2>{}; echo exit=$?; exec sleep 60'",
            scenario.monitor_line(&extra),
            err.display()
        );
        let t = Tmux::start(scenario.dir(), 120, 30, &line);
        let (ended, screen) = t.wait_for(Duration::from_secs(10), |s| s.contains("exit="));
        assert!(ended, "{thread}: still running:\n{screen}");
        assert!(screen.contains("exit=1"), "{thread}:\n{screen}");
        let stderr = std::fs::read_to_string(&err).expect("stderr file");
        let mut lines = stderr.lines();
        assert_eq!(
            lines.next(),
            Some(format!("vramscope: cannot start the {thread} thread: {EAGAIN}").as_str()),
            "{thread}"
        );
        // `run` leaves a job it started running and says so, as on every other exit.
        if thread == "job-wait" {
            let next = lines.next().unwrap_or("");
            assert!(next.contains("is still running"), "{stderr}");
        }
        assert_eq!(lines.next(), None, "{stderr}");
        assert_eq!(
            t.pane("alternate_on"),
            "0",
            "{thread}: alternate screen left"
        );
        assert_eq!(t.pane("cursor_flag"), "1", "{thread}: cursor hidden");
    }
}
