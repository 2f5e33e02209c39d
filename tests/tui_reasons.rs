//! The status line in a real terminal (tmux) against the fake NVML library: "not supported"
//! is a fact of datacentre GPUs, not a problem, so it stays off the status line; faults that
//! do not fit are cut with a mark and a pointer to `w`, which lists every reason in full.

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, h100};
use serde_json::{Value, json};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn monitor(scenario: &Scenario) -> String {
    scenario.monitor_line("--interval 200ms")
}

/// Eight GPUs without fans, as datacentre boards are.
fn fanless(count: u32) -> Vec<Value> {
    (0..count)
        .map(|i| {
            let mut gpu = h100(i);
            gpu["num_fans"] = Value::Null;
            gpu
        })
        .collect()
}

fn status_line(screen: &str) -> &str {
    screen.lines().last().unwrap_or("")
}

#[test]
fn fans_not_supported_on_eight_gpus_stay_off_the_status_line_and_w_lists_them() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": fanless(8) }));
    let t = Tmux::start(scenario.dir(), 120, 30, &monitor(&scenario));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        status_line(s).contains("all supported figures readable")
    });
    assert!(ok, "no nag on the status line:\n{screen}");
    assert!(!screen.contains("not supported"), "{screen}");
    assert!(status_line(&screen).contains("w why n/a"), "{screen}");
    t.keys(&["w"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("Why figures are n/a"));
    assert!(ok, "the reasons overlay:\n{screen}");
    assert!(
        screen.contains("fan: not supported on GPU 0,1,2,3,4,5,6,7"),
        "every GPU named in full:\n{screen}"
    );
    assert!(screen.contains("not reported by this hardware or driver"));
    t.keys(&["Escape"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| !s.contains("Why figures are n/a"));
    assert!(ok, "Esc closes it:\n{screen}");
}

#[test]
fn faults_that_do_not_fit_are_cut_with_a_mark_and_w_shows_each_in_full() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({
        "devices": fanless(8),
        "faults": [
            { "function": "nvmlDeviceGetTemperature", "error": "NoPermission" },
            { "function": "nvmlDeviceGetPowerUsage", "error": "Timeout" },
            { "function": "nvmlDeviceGetClockInfo", "error": "Unknown" },
        ]
    }));
    let t = Tmux::start(scenario.dir(), 100, 30, &monitor(&scenario));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| status_line(s).contains("(w: all "));
    assert!(ok, "the cut status line points to w:\n{screen}");
    let status = status_line(&screen);
    assert!(
        status.starts_with("temp: no permission on GPU 0,1,2,3,4,5,6,7; "),
        "{status}"
    );
    assert!(status.contains('…'), "the cut is marked: {status}");
    assert!(!status.contains("not supported"), "{status}");
    assert!(status.chars().count() <= 100);
    t.keys(&["w"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("Why figures are n/a"));
    assert!(ok, "{screen}");
    for reason in [
        "temp: no permission on GPU 0,1,2,3,4,5,6,7",
        "power: timed out on GPU 0,1,2,3,4,5,6,7",
        "SM clock: unknown",
        "fan: not supported on GPU 0,1,2,3,4,5,6,7",
    ] {
        assert!(screen.contains(reason), "{reason}:\n{screen}");
    }
    let problems = screen.find("problems").unwrap();
    let facts = screen.find("not reported by").unwrap();
    assert!(problems < facts, "faults first:\n{screen}");
    // `q` still quits from the overlay.
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| !s.contains("Why figures are n/a"));
    assert!(ok, "{screen}");
}
