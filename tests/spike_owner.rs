//! A spike between two refreshes belongs to the process that made it: against the fake NVML,
//! a 250 ms rise of one process from 6 to 26 GiB (the GPU from 10 to 30 GiB) falls between
//! 1 s refreshes. The fast memory sampling reads the compute list when it sees the rise, so
//! the process's PEAK, `--json`, the recording, the report and the GPU panel's peak label all
//! name pid 202 and its 26 GiB; with `--peak-interval off`, nothing saw the spike.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, MIB, Scenario, h100, stderr, stdout};
use serde_json::{Value, json};
use std::time::Duration;

const QUIET: u32 = 101;
const SPIKER: u32 = 202;
const SPIKER_PEAK: u64 = 26 * GIB;

/// GPU 0 at 10 GiB: pid 101 holds 4 GiB and pid 202 6 GiB, except from `k + 0.375` s to
/// `k + 0.625` s of each of the first eight seconds, where pid 202 holds 26 GiB (the GPU 30)
/// or, with `small`, 100 MiB more than usual: too little a rise to read the list for.
fn spiky(small: bool) -> Scenario {
    let mut gpu = h100(0);
    let list = |spiker: u64| {
        json!([
            { "pid": QUIET, "used_memory": 4 * GIB },
            { "pid": SPIKER, "used_memory": spiker },
        ])
    };
    let (spike_gpu, spike_proc) = if small {
        (10 * GIB + 100 * MIB, 6 * GIB + 100 * MIB)
    } else {
        (30 * GIB, SPIKER_PEAK)
    };
    let mut timeline = gpu["timeline"].as_array().cloned().unwrap();
    let mut processes = vec![json!({ "t": 0, "compute": list(6 * GIB) })];
    for k in 1..=8 {
        let (up, down) = (k as f64 + 0.375, k as f64 + 0.625);
        timeline.push(json!({ "t": up, "memory_used": spike_gpu }));
        timeline.push(json!({ "t": down, "memory_used": 10 * GIB }));
        processes.push(json!({ "t": up, "compute": list(spike_proc) }));
        processes.push(json!({ "t": down, "compute": list(6 * GIB) }));
    }
    gpu["timeline"] = json!(timeline);
    gpu["processes"] = json!(processes);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn process(snapshot: &Value, pid: u32) -> &Value {
    snapshot["processes"]
        .as_array()
        .and_then(|list| list.iter().find(|p| p["pid"] == json!(pid)))
        .unwrap_or_else(|| panic!("pid {pid} listed: {snapshot}"))
}

#[test]
fn json_names_the_spike_s_owner_and_its_peak() {
    let scenario = spiky(false);
    let on = scenario.json_loop(&[], 5);
    let spiked = on
        .iter()
        .find(|s| s["devices"][0]["memory_used_peak"] == json!(30 * GIB))
        .unwrap_or_else(|| panic!("a snapshot caught the spike: {on:?}"));
    assert_eq!(spiked["devices"][0]["memory_used_peak_pid"], json!(SPIKER));
    let last = on.last().unwrap();
    assert_eq!(
        process(last, SPIKER)["used_memory_peak"],
        json!(SPIKER_PEAK),
        "its PEAK holds the spike no refresh saw"
    );
    assert_eq!(process(last, SPIKER)["used_memory"], json!(6 * GIB));
    assert_eq!(process(last, QUIET)["used_memory_peak"], json!(4 * GIB));

    let off = scenario.json_loop(&["--peak-interval", "off"], 4);
    let last = off.last().unwrap();
    assert_eq!(process(last, SPIKER)["used_memory_peak"], json!(6 * GIB));
    assert_eq!(last["devices"][0]["memory_used_peak_pid"], Value::Null);
    assert!(
        last["devices"][0]["unavailable"]["memory_used_peak_pid"]
            .as_str()
            .is_some_and(|why| why.contains("--peak-interval off")),
        "absent with its reason: {last}"
    );
}

#[test]
fn a_small_rise_reads_no_list_and_says_so() {
    let scenario = spiky(true);
    let snapshots = scenario.json_loop(&[], 5);
    let risen = snapshots
        .iter()
        .find(|s| s["devices"][0]["memory_used_peak"] == json!(10 * GIB + 100 * MIB))
        .unwrap_or_else(|| panic!("a snapshot caught the rise: {snapshots:?}"));
    assert_eq!(risen["devices"][0]["memory_used_peak_pid"], Value::Null);
    let why = risen["devices"][0]["unavailable"]["memory_used_peak_pid"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("not attributed") && why.contains("under the 256 MiB"),
        "{why}"
    );
    // The process's own figure never showed the rise, and nothing claims it did.
    assert_eq!(
        process(snapshots.last().unwrap(), SPIKER)["used_memory_peak"],
        json!(6 * GIB)
    );
}

#[test]
fn the_recording_keeps_the_owner_and_the_report_names_it() {
    let scenario = spiky(false);
    let file = scenario.dir().join("spike.jsonl");
    let out = scenario
        .command()
        .args(["--interval", "1s", "record", "--duration", "5s", "-o"])
        .arg(&file)
        .output()
        .expect("run vramscope record");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    let records: Vec<Value> = text
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r.get("device").is_some())
        .collect();
    // Beside the device record, where readers from before holders skip it; the peak itself
    // stays the `[used, at_ms]` pair they read.
    let holders: Vec<Value> = records
        .iter()
        .filter_map(|r| r.get("peak_holders").cloned())
        .collect();
    assert!(
        records
            .iter()
            .filter_map(|r| r["device"].get("memory_peak"))
            .all(|p| p.as_array().is_some_and(|pair| pair.len() == 2)),
        "{records:?}"
    );
    assert!(
        holders.contains(&json!([[QUIET, 4 * GIB], [SPIKER, SPIKER_PEAK]])),
        "the compute list read at the spike is recorded: {holders:?}"
    );

    let report = scenario
        .command()
        .args(["report", "--json"])
        .arg(&file)
        .output()
        .expect("run vramscope report");
    assert!(report.status.success(), "{}", stderr(&report));
    let report: Value = serde_json::from_slice(&report.stdout).expect("report JSON");
    let owner = &report["gpus"][0]["peak_owner"];
    assert_eq!(owner["pid"], json!(SPIKER), "{report}");
    assert_eq!(owner["rise"], json!(SPIKER_PEAK - 6 * GIB));
    assert_eq!(owner["between_refreshes"], json!(true));
    let spiker = report["processes"]
        .as_array()
        .and_then(|l| l.iter().find(|p| p["pid"] == json!(SPIKER)))
        .expect("the spiker's row");
    assert_eq!(spiker["peak_nvml_used"]["bytes"], json!(SPIKER_PEAK));
    // The spikes no refresh saw are the report's largest (issue 29 §1.6).
    let spikes = report["spikes"].as_array().cloned().unwrap_or_default();
    assert!(
        spikes
            .iter()
            .any(|s| s["what"] == "GPU 0" && s["rise"] == json!(20 * GIB)),
        "a 20 GiB spike of GPU 0 among {spikes:?}"
    );

    let text = scenario
        .command()
        .arg("report")
        .arg(&file)
        .output()
        .expect("run vramscope report");
    let text = stdout(&text);
    assert!(
        text.contains("made by pid 202 (+20.0 GiB)"),
        "the GPU line names the owner:\n{text}"
    );
}

#[test]
fn the_table_and_the_gpu_panel_name_the_spike_s_owner() {
    if !tmux::available() {
        return;
    }
    let scenario = spiky(false);
    let t = Tmux::start(scenario.dir(), 120, 40, &scenario.monitor_line(""));
    let (ok, screen) = t.wait_for(Duration::from_secs(8), |s| {
        s.contains("▲ 30.0 GiB") && s.contains("by pid 202")
    });
    assert!(ok, "the peak label names its owner:\n{screen}");
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with("202"))
        .unwrap_or_else(|| panic!("pid 202's row:\n{screen}"));
    assert!(
        row.contains("26.0"),
        "its PEAK holds the spike while its VRAM shows 6 GiB:\n{screen}"
    );
}
