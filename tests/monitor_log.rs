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

/// Issue 28 §1.7: a log whose first line cannot be written (`/dev/full`) is one line and a
/// failed start, not a silent success.
#[test]
fn a_log_on_a_full_disk_stops_the_start_with_one_line() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    // As root /dev/full is refused as no regular file; as a user the write fails.
    let out = scenario
        .command()
        .args(["--monitor-log", "/dev/full", "--once"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = common::stderr(&out);
    assert!(
        stderr.starts_with("vramscope: cannot write the log /dev/full: "),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(common::stdout(&out), "");
}

/// A root-owned file a user would like root to append to, and its size now.
fn victim(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    let target = dir.join("victim");
    std::fs::write(&target, "root's own\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    (target, 11)
}

/// Root's `--monitor-log` at `log`, with `HOME` (and no XDG_STATE_HOME) for `auto`.
fn log_as_root(scenario: &Scenario, log: &str, home: &std::path::Path) -> std::process::Output {
    scenario
        .command()
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .args(["--monitor-log", log, "--once"])
        .output()
        .unwrap()
}

fn refused_in_one_line(out: &std::process::Output, why: &str) {
    let stderr = common::stderr(out);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("vramscope: cannot write the log "),
        "{stderr}"
    );
    assert!(stderr.contains(why), "wanted {why:?}: {stderr}");
}

/// Issue 28 §1.3: the log was created and appended to by path, following symlinks, with no
/// owner check. As root against a real other user: their symlink in a sticky shared folder,
/// a hard link to root's file there, and `auto` under their HOME (as under sudo) while they
/// swap the log's name for a symlink in a loop; each is refused in one line and root's file
/// never grows.
#[test]
fn as_root_a_log_name_a_user_planted_or_flips_is_refused_and_nothing_is_appended() {
    let Some(user) = common::users::TestUser::create() else {
        eprintln!("SKIPPED: needs root and useradd to plant as a real other user");
        return;
    };
    if !common::cc_available() {
        eprintln!("SKIPPED: needs cc for the flipper");
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let top_dir = tempfile::tempdir().unwrap();
    let top = top_dir.path();
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (target, size) = victim(top);
    let size_now = || std::fs::metadata(&target).unwrap().len();
    let root_home = top.join("root-home");
    let shared = top.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();

    // Their symlink in the sticky folder.
    let planted = shared.join("v.log");
    let made = user
        .command("ln")
        .arg("-s")
        .arg(&target)
        .arg(&planted)
        .status()
        .unwrap();
    assert!(made.success());
    let out = log_as_root(&scenario, planted.to_str().unwrap(), &root_home);
    refused_in_one_line(&out, "v.log is a symlink, not followed");
    assert_eq!(size_now(), size, "nothing appended through their symlink");

    // A hard link to root's file under the log's name (made by root here: this machine's
    // protected_hardlinks keeps a user from linking a file they cannot write).
    let linked = shared.join("linked.log");
    std::fs::hard_link(&target, &linked).unwrap();
    let out = log_as_root(&scenario, linked.to_str().unwrap(), &root_home);
    refused_in_one_line(&out, "has 2 hard links");
    assert_eq!(size_now(), size, "nothing appended through a hard link");
    std::fs::remove_file(&linked).unwrap();

    // `auto` in their HOME, its name flipped between their file and a symlink to root's.
    let home = top.join("home");
    let state = home.join(".local/state/vramscope");
    std::fs::create_dir_all(&state).unwrap();
    let held = state.join("held.log");
    std::fs::write(&held, "").unwrap();
    for at in [&held, &state, &state.parent().unwrap().to_path_buf()] {
        user.give(at);
    }
    user.give(&home.join(".local"));
    user.give(&home);
    let flipper = common::race::flipper(top);
    let name = state.join("vramscope.log");
    let mut flip = common::race::Flip::start(&user, &flipper, &name, &held, &target, 2);
    let mut runs = 0;
    while flip.running() {
        let out = log_as_root(&scenario, "auto", &home);
        runs += 1;
        refused_in_one_line(&out, &format!("belongs to uid {}", user.uid));
        assert_eq!(size_now(), size, "run {runs} appended to root's file");
    }
    let rounds = flip.finish();
    eprintln!("auto: {runs} runs as root while the user flipped {rounds} times");
    assert!(rounds > 0 && runs >= 3, "the race ran");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "root's own\n");
}
