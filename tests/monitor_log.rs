//! `--monitor-log`: the monitor's own log, against the fake NVML library in a real terminal.
//! The reasons for n/a (a fan the board lacks, a temperature read that fails for a while),
//! a refused channel file and a stuck driver call are written with times as they appear and
//! clear; nothing of it reaches the screen; a log that cannot be written stops the start.

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, h100};
use serde_json::{Value, json};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::time::Duration;

#[test]
fn a_log_that_cannot_be_written_stops_the_start_with_one_line() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let not_a_dir = scenario.dir().join("file");
    std::fs::write(&not_a_dir, "").unwrap();
    let log = not_a_dir.join("v.log");
    let out = scenario
        .command()
        .arg("--monitor-log")
        .arg(&log)
        .arg("--once")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(common::stdout(&out), "");
    let stderr = common::stderr(&out);
    let expected = format!("vramscope: cannot write the log {}: ", log.display());
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn auto_writes_in_the_xdg_state_directory() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let state = scenario.dir().join("state");
    let out = scenario
        .command()
        .env("XDG_STATE_HOME", &state)
        .args(["--monitor-log", "auto", "--once"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!common::stdout(&out).contains("started"));
    let path = state.join("vramscope/vramscope.log");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(is_log_line(text.lines().next().unwrap_or("")), "{text}");
    assert!(text.contains(" UTC vramscope 0.1.0 started"), "{text}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// `2026-11-25 17:10:00.123 UTC text`.
fn is_log_line(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 28
        && line[..4].bytes().all(|c| c.is_ascii_digit())
        && b[4] == b'-'
        && b[10] == b' '
        && b[19] == b'.'
        && &line[23..28] == " UTC "
}

#[test]
fn reasons_refused_channels_and_stuck_calls_are_logged_with_times_and_not_shown() {
    if !tmux::available() {
        return;
    }
    let mut gpu = h100(0);
    gpu["num_fans"] = Value::Null;
    let scenario = Scenario::new(&json!({
        "devices": [gpu],
        "faults": [{"function": "nvmlDeviceGetTemperature", "error": "Unknown", "device": 0,
                    "from": 0, "until": 2.0}],
        "blocks": [{"function": "nvmlDeviceGetMemoryInfo_v2", "device": 0, "from": 2.5,
                    "until": 2.6, "seconds": 2.0}],
    }));
    let channels = scenario.dir().join("channels");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&channels)
        .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(channels.join("garbage.vsc"))
        .unwrap();
    std::fs::write(channels.join("garbage.vsc"), vec![0x55u8; 4096]).unwrap();
    let log = scenario.dir().join("logs/v.log");
    let line = format!(
        "env VRAMSCOPE_DIR={} {}",
        channels.display(),
        scenario.monitor_line(&format!("--interval 200ms --monitor-log {}", log.display()))
    );
    let t = Tmux::start(scenario.dir(), 120, 30, &line);
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let wanted = [
        "n/a: fan: not supported on GPU 0",
        "n/a: channel refused: ",
        "n/a: temp: unknown NVML error on GPU 0",
        "cleared: temp: unknown NVML error on GPU 0",
        "a driver call is stuck",
    ];
    while !wanted.iter().all(|w| read().contains(w)) {
        assert!(
            std::time::Instant::now() < deadline,
            "missing from the log:\n{}\nscreen:\n{}",
            read(),
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = read();
    for line in text.lines() {
        assert!(is_log_line(line), "{line:?} in\n{text}");
    }
    // Each state once: a reason that stays is not written again every frame.
    assert_eq!(text.matches("n/a: fan: not supported").count(), 1, "{text}");
    let screen = t.screen();
    assert!(
        !screen.contains(" UTC "),
        "the log reached the screen:\n{screen}"
    );
    t.keys(&["q"]);
}

/// A log set in the configuration file is opened by the modes that sample, not by `report`.
#[test]
fn the_configuration_file_sets_the_log_for_sampling_modes_only() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let log = scenario.dir().join("v.log");
    let config = scenario.dir().join("config.toml");
    std::fs::write(
        &config,
        format!("monitor-log = {:?}\n", log.display().to_string()),
    )
    .unwrap();
    let report = scenario
        .command()
        .arg("--config")
        .arg(&config)
        .arg("report")
        .arg(scenario.dir().join("missing.vsr"))
        .output()
        .unwrap();
    assert!(!report.status.success());
    assert!(!log.exists(), "report opened the log");
    let once = scenario
        .command()
        .arg("--config")
        .arg(&config)
        .arg("--once")
        .output()
        .unwrap();
    assert!(once.status.success(), "{once:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(" UTC vramscope 0.1.0 started"), "{text}");
}
