//! The fast memory sampling against the fake NVML: spikes of 250 ms that fall between two
//! 1 s refreshes are caught with the default settings, in `--json --loop`, in a recording
//! and in the TUI's peak label, and are not with `--peak-interval off`.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, h100, stderr, threads_named};
use serde_json::{Value, json};
use std::time::Duration;

const BASE: u64 = 10 * GIB;
const SPIKE: u64 = 30 * GIB;
/// Spikes from `k + 0.375` s to `k + 0.625` s of the fake's clock, which starts at NVML's
/// init: halfway between refreshes that fall near whole seconds.
const SPIKES: u64 = 8;

/// One GPU at 10 GiB used, with a 250 ms spike to 30 GiB in the middle of each second from
/// the first to the eighth.
fn spiky() -> Scenario {
    let mut gpu = h100(0);
    let mut timeline = gpu["timeline"].as_array().cloned().unwrap();
    for k in 1..=SPIKES {
        timeline.push(json!({ "t": k as f64 + 0.375, "memory_used": SPIKE }));
        timeline.push(json!({ "t": k as f64 + 0.625, "memory_used": BASE }));
    }
    gpu["timeline"] = json!(timeline);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn device_figure(snapshot: &Value, name: &str) -> Value {
    snapshot["devices"][0][name].clone()
}

#[test]
fn json_loop_catches_a_spike_between_refreshes_unless_the_fast_sampling_is_off() {
    let scenario = spiky();
    let on = scenario.json_loop(&[], 5);
    assert_eq!(on.len(), 5);
    let peaks: Vec<Value> = on
        .iter()
        .map(|s| device_figure(s, "memory_used_peak"))
        .collect();
    assert!(
        peaks.contains(&json!(SPIKE)),
        "a 250 ms spike is some interval's peak: {peaks:?}"
    );
    for snapshot in &on {
        let peak = device_figure(snapshot, "memory_used_peak")
            .as_u64()
            .unwrap();
        let used = device_figure(snapshot, "memory_used").as_u64().unwrap();
        let at = device_figure(snapshot, "memory_used_peak_at_ms")
            .as_u64()
            .unwrap();
        let sampled = device_figure(snapshot, "sampled_at_ms").as_u64().unwrap();
        assert!(peak >= used, "the peak includes the sample's own reading");
        assert!(at <= sampled, "the peak was read before the sample");
    }

    let off = scenario.json_loop(&["--peak-interval", "off"], 5);
    for snapshot in &off {
        assert_eq!(device_figure(snapshot, "memory_used_peak"), Value::Null);
        assert!(
            device_figure(snapshot, "unavailable")["memory_used_peak"]
                .as_str()
                .is_some_and(|why| why.contains("--peak-interval off")),
            "absent with its reason: {snapshot}"
        );
        assert_eq!(
            device_figure(snapshot, "memory_used"),
            json!(BASE),
            "the refreshes alone miss every spike"
        );
    }
}

/// The `memory_peak` values of a 5 s recording's device records, and their `memory` used.
fn recorded(scenario: &Scenario, name: &str, extra: &[&str]) -> (Vec<u64>, Vec<u64>) {
    let file = scenario.dir().join(name);
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .args(["--interval", "1s"])
        .args(extra)
        .args(["record", "--duration", "5s", "-o"])
        .arg(&file)
        .output()
        .expect("run vramscope record");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    let devices: Vec<Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|r| r.get("device").cloned())
        .collect();
    assert!(devices.len() >= 4, "{text}");
    let peaks = devices
        .iter()
        .filter_map(|d| d.get("memory_peak"))
        .map(|p| p[0].as_u64().unwrap())
        .collect();
    let used = devices
        .iter()
        .map(|d| d["memory"][2].as_u64().unwrap())
        .collect();
    (peaks, used)
}

#[test]
fn a_recording_keeps_the_peaks_between_refreshes() {
    let scenario = spiky();
    let (peaks, _) = recorded(&scenario, "on.jsonl", &[]);
    assert!(peaks.contains(&SPIKE), "{peaks:?}");

    let (peaks, used) = recorded(&scenario, "off.jsonl", &["--peak-interval", "off"]);
    assert!(peaks.is_empty(), "no memory_peak without the fast sampling");
    assert!(used.iter().all(|&u| u == BASE), "{used:?}");

    // The recording's reader takes the peak back: the report names it as the GPU's peak.
    let report = scenario
        .command()
        .arg("report")
        .arg(scenario.dir().join("on.jsonl"))
        .output()
        .expect("run vramscope report");
    assert!(report.status.success(), "{}", stderr(&report));
    assert!(
        common::stdout(&report).contains("30.0 GiB"),
        "{}",
        common::stdout(&report)
    );
}

#[test]
fn the_tui_peak_label_shows_a_spike_between_refreshes_unless_the_fast_sampling_is_off() {
    if !tmux::available() {
        return;
    }
    let scenario = spiky();
    let t = Tmux::start(scenario.dir(), 120, 40, &scenario.monitor_line(""));
    let (ok, screen) = t.wait_for(Duration::from_secs(8), |s| s.contains("▲ 30.0 GiB"));
    assert!(ok, "the chart's peak label names the spike:\n{screen}");
    drop(t);

    // A folder of its own, so a tmux server of its own (the socket is named after the folder):
    // the first one may still be shutting down.
    let off_dir = scenario.dir().join("off");
    std::fs::create_dir(&off_dir).unwrap();
    let off = Tmux::start(
        &off_dir,
        120,
        40,
        &scenario.monitor_line("--peak-interval off"),
    );
    let (ok, screen) = off.wait_for(Duration::from_secs(8), |s| s.contains("all-time"));
    assert!(ok, "a GPU panel with its peak label:\n{screen}");
    // Past four spikes of the fake's clock.
    std::thread::sleep(Duration::from_secs(5));
    let screen = off.screen();
    assert!(
        !screen.contains("30.0 GiB") && screen.contains("flat at 10.0 GiB"),
        "the refreshes alone miss every spike:\n{screen}"
    );
}

#[test]
fn a_peek_blocked_in_the_driver_holds_only_its_gpu_and_piles_nothing_up() {
    if !tmux::available() {
        return;
    }
    // GPU 0's memory call blocks 5 s from about 1.3 s, where only peeks fall (the refreshes
    // come near whole seconds). The spare worker starts once the refresh the stuck peek holds
    // up is half a second late (about 2.5 s); GPU 1 then spikes for 250 ms between two
    // refreshes, while GPU 0 is still stuck, and only the spare's peeks can catch it.
    let mut gpu1 = h100(1);
    gpu1["timeline"] = json!([
        { "t": 0, "memory_used": BASE, "gpu_util": 5, "mem_util": 1 },
        { "t": 3.375, "memory_used": SPIKE },
        { "t": 3.625, "memory_used": BASE }
    ]);
    let scenario = Scenario::new(&json!({
        "devices": [h100(0), gpu1],
        "blocks": [{ "function": "nvmlDeviceGetMemoryInfo_v2", "device": 0,
                     "from": 1.25, "until": 1.55, "seconds": 5.0 }]
    }));
    let t = Tmux::start(scenario.dir(), 120, 40, &scenario.monitor_line(""));
    assert!(
        t.wait_for(Duration::from_secs(5), |s| s.contains("NVIDIA"))
            .0
    );
    let pid = t.pid();
    let samplers = || threads_named(pid, "sampler");
    let most_samplers = std::cell::Cell::new(0);
    let (ok, screen) = t.wait_for(Duration::from_secs(8), |s| {
        most_samplers.set(most_samplers.get().max(samplers()));
        s.contains("STALE") && s.contains("▲ 30.0 GiB")
    });
    assert!(
        ok,
        "GPU 0 stale while GPU 1's fast sampling still catches its spike:\n{screen}"
    );
    assert_eq!(most_samplers.get(), 2, "one spare beside the stuck peek");
    let (ok, screen) = t.wait_for(Duration::from_secs(8), |s| !s.contains("STALE"));
    assert!(ok, "GPU 0 back once the call returned:\n{screen}");
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while samplers() != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(samplers(), 1, "one sampling thread once nothing is stuck");
}

#[test]
fn a_peek_blocked_at_a_long_refresh_period_still_gets_a_spare_within_seconds() {
    if !tmux::available() {
        return;
    }
    // At a 30 s refresh the next full tick is half a minute away: the peeks' watch must not
    // wait for it. GPU 0's memory call blocks 6 s from about 3 s, where only peeks fall.
    let scenario = Scenario::new(&json!({
        "devices": [h100(0), h100(1)],
        "blocks": [{ "function": "nvmlDeviceGetMemoryInfo_v2", "device": 0,
                     "from": 3.05, "until": 3.35, "seconds": 6.0 }]
    }));
    let t = Tmux::start(
        scenario.dir(),
        120,
        40,
        &scenario.monitor_line("--interval 30s"),
    );
    assert!(
        t.wait_for(Duration::from_secs(5), |s| s.contains("NVIDIA"))
            .0
    );
    let pid = t.pid();
    let samplers = || threads_named(pid, "sampler");
    // Blocked from about 3.1 s: caught within 2.5 s of it (the watch's 2 s and the 0.5 s a
    // call may take), long before the 30 s tick; the wait leaves a loaded machine room.
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while samplers() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        samplers(),
        2,
        "a spare beside the stuck peek:\n{}",
        t.screen()
    );
}
