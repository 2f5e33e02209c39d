//! The header, help and keys in a real terminal (tmux) against the fake NVML library: local
//! time and the host name, a help that scrolls, one meaning for `+`, the table's position.

mod common;
mod recording_fixture;

use common::tmux::{self, Tmux};
use common::{Scenario, h100};
use serde_json::json;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn monitor(scenario: &Scenario, env: &str, extra: &str) -> String {
    // `env` (variables) goes before the program: `env A=1 env B=2 prog` is the same.
    format!(
        "env {env} {}",
        scenario.monitor_line(&format!("--interval 1s {extra}"))
    )
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("host name")
        .trim()
        .to_string()
}

#[test]
fn the_header_shows_local_time_by_tz_and_the_host_name() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    // A POSIX zone five hours east of UTC, named so that no machine's default matches it.
    let t = Tmux::start(scenario.dir(), 120, 30, &monitor(&scenario, "TZ=VST-5", ""));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("64°C"));
    assert!(ok, "the monitor ran:\n{screen}");
    let header = screen.lines().next().unwrap_or_default();
    assert!(header.contains(" VST"), "the zone from TZ: {header}");
    assert!(!header.contains("UTC"), "not UTC: {header}");
    assert!(header.contains(&host_name()), "the host name: {header}");
}

#[test]
fn plus_refreshes_more_often_as_it_plays_a_replay_faster() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let t = Tmux::start(scenario.dir(), 120, 30, &monitor(&scenario, "", ""));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("64°C"));
    assert!(ok, "the monitor ran:\n{screen}");
    t.keys(&["+"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("refresh every 500 ms"));
    assert!(ok, "+ shortens the live period:\n{screen}");
    t.keys(&["-", "-"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("refresh every 2000 ms"));
    assert!(ok, "- lengthens it:\n{screen}");
    t.keys(&["?"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("refresh more / less often"));
    assert!(ok, "the help says so:\n{screen}");
}

#[test]
fn q_and_esc_in_the_demo_go_back_to_the_live_screen() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let t = Tmux::start(scenario.dir(), 140, 40, &common::without_nvml_line());
    for leave in ["q", "Escape"] {
        let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("Press d to see"));
        assert!(ok, "the live screen with the offer:\n{screen}");
        t.keys(&["d"]);
        let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("DEMO: simulated data"));
        assert!(ok, "the demo:\n{screen}");
        t.keys(&[leave]);
        let (ok, screen) = t.wait_for(5 * SECOND, |s| {
            s.contains("demo ended: live data again") && !s.contains("DEMO: simulated data")
        });
        assert!(ok, "{leave} went back to the live screen:\n{screen}");
        assert_eq!(t.pane("pane_dead"), "0", "{leave} did not quit vramscope");
    }
    t.keys(&["q"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("pane_dead") == "1");
    assert!(ok, "q on the live screen quits");
}

#[test]
fn the_help_scrolls_to_its_legend_at_60x20_and_read_only_lists_no_signals() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let t = Tmux::start(
        scenario.dir(),
        60,
        20,
        &monitor(&scenario, "", "--read-only"),
    );
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("64°C"));
    assert!(ok, "the monitor ran:\n{screen}");
    t.keys(&["?"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("Up/Down scroll"));
    assert!(ok, "the help says it scrolls:\n{screen}");
    assert!(
        !screen.contains("SIGTERM"),
        "no k under --read-only:\n{screen}"
    );
    t.keys(&["End"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("gpu:3"));
    assert!(ok, "End reaches the legend's last line:\n{screen}");
    assert!(screen.contains("all-time"), "{screen}");
    assert!(screen.contains("PEAK"), "{screen}");
    // Scrolling keys keep the help open; any other key closes it.
    t.keys(&["Home"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("move the selection"));
    assert!(ok, "Home goes back to the top:\n{screen}");
    t.keys(&["x"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| !s.contains("Up/Down scroll"));
    assert!(ok, "x closed it:\n{screen}");
    assert_eq!(t.pane("pane_dead"), "0");
}

#[test]
fn the_table_says_where_it_is_counts_per_gpu_and_filters_by_gpu() {
    if !tmux::available() {
        return;
    }
    let list = |pids: std::ops::Range<u32>| -> serde_json::Value {
        let compute: Vec<_> = pids
            .map(|pid| json!({ "pid": pid, "used_memory": 1u64 << 30 }))
            .collect();
        json!([{ "t": 0, "compute": compute }])
    };
    let (mut gpu0, mut gpu1) = (h100(0), h100(1));
    // Pids far above any this machine runs: rows NVML lists, whatever the host knows.
    gpu0["processes"] = list(3_000_000..3_000_020);
    gpu1["processes"] = list(3_100_000..3_100_010);
    let scenario = Scenario::new(&json!({ "devices": [gpu0, gpu1] }));
    let t = Tmux::start(scenario.dir(), 140, 40, &monitor(&scenario, "", ""));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("per GPU 0:20 1:10"));
    assert!(ok, "the count per GPU:\n{screen}");
    let header = |s: &str| {
        s.lines()
            .find(|l| l.contains("COMMAND"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(header(&screen).contains("rows 1-"), "{screen}");
    assert!(header(&screen).contains(" of 30"), "{screen}");
    t.keys(&["End"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| header(s).contains("-30 of 30"));
    assert!(ok, "End shows the last rows:\n{screen}");
    assert!(!header(&screen).contains("rows 1-"), "{screen}");
    t.keys(&["/", "g", "p", "u", ":", "1", "Enter"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| header(s).contains("rows 1-10 of 10"));
    assert!(ok, "gpu:1 keeps GPU 1's ten rows:\n{screen}");
    assert!(header(&screen).contains("per GPU 1:10"), "{screen}");
    assert!(!screen.contains("3000000"), "no GPU 0 row:\n{screen}");
}

#[test]
fn a_replay_shows_the_recordings_host_and_its_time_in_the_local_zone() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let path = scenario.dir().join("run.jsonl.zst");
    recording_fixture::write_recording(&path);
    let command = format!(
        "env TZ=VST-5 {} replay {}",
        env!("CARGO_BIN_EXE_vramscope"),
        path.display()
    );
    let t = Tmux::start(scenario.dir(), 140, 40, &command);
    // The recording starts at 2023-11-14 22:13:20 UTC, five hours behind VST.
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("03:13:20 VST"));
    let header = screen.lines().next().unwrap_or_default();
    assert!(ok, "the recording's time in TZ's zone:\n{screen}");
    assert!(header.contains("node-7"), "the recording's host: {header}");
    if host_name() != "node-7" {
        assert!(
            !header.contains(&host_name()),
            "not this machine's: {header}"
        );
    }
}

/// The first process row under the table's header: its pid, without the `*` mark.
fn first_row_pid(screen: &str) -> String {
    let mut lines = screen.lines().skip_while(|l| !l.contains("COMMAND"));
    let row = lines.nth(1).unwrap_or_default();
    let pid = row.split_whitespace().next().unwrap_or_default();
    pid.trim_end_matches('*').to_string()
}

#[test]
fn a_key_that_closes_the_help_does_nothing_else() {
    if !tmux::available() {
        return;
    }
    let compute: Vec<_> = (0..10u64)
        .map(|i| json!({ "pid": 3_000_000 + i, "used_memory": (i + 1) << 30 }))
        .collect();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": compute }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    // 200x50: the whole help fits, and its title says any key closes it.
    let t = Tmux::start(scenario.dir(), 200, 50, &monitor(&scenario, "", ""));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("rows 1-10 of 10"));
    assert!(ok, "the table:\n{screen}");
    let first = first_row_pid(&screen);
    assert!(first.starts_with("300000"), "{first:?}:\n{screen}");
    for closing in ["Down", "PageDown", "End"] {
        t.keys(&["?"]);
        let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("(any key closes)"));
        assert!(ok, "the help fits:\n{screen}");
        t.keys(&[closing]);
        let (ok, screen) = t.wait_for(3 * SECOND, |s| !s.contains("vramscope keys"));
        assert!(ok, "{closing} closed the help:\n{screen}");
        // The selection stayed where it was: Enter opens the first row's process.
        t.keys(&["Enter"]);
        let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains(" PID 300000"));
        assert!(ok, "the detail pane:\n{screen}");
        assert!(
            screen.contains(&format!(" PID {first} ")),
            "{closing} moved nothing underneath: the pane is of {first}:\n{screen}"
        );
        t.keys(&["Escape"]);
        let (ok, screen) = t.wait_for(3 * SECOND, |s| !s.contains(" PID 300000"));
        assert!(ok, "{screen}");
    }
}

#[test]
fn a_says_at_once_that_a_process_is_not_python_and_asks_nothing() {
    if !tmux::available() {
        return;
    }
    // The GPU process is this test's own: a Rust program, which maps no libpython.
    let me = std::process::id();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": me, "used_memory": 6u64 << 30 }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let t = Tmux::start(scenario.dir(), 140, 30, &monitor(&scenario, "", ""));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.lines()
            .any(|l| l.trim_start().starts_with(&me.to_string()) && !l.contains("n/a n/a"))
    });
    assert!(ok, "its row, read by the host pass:\n{screen}");
    t.keys(&["a"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains(&format!("process {me} is not a Python process"))
    });
    assert!(ok, "said on the status line:\n{screen}");
    assert!(
        !screen.contains("to confirm"),
        "no confirmation asked first:\n{screen}"
    );
}
