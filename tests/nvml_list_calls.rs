//! The process lists and per-process utilisation cost one NVML call each per GPU and refresh
//! (a buffer kept between refreshes instead of a count probe before every read), a list that
//! outgrows that buffer still comes back whole, and a driver that keeps answering
//! INSUFFICIENT_SIZE gives absent figures, not a stuck or crashed sampler.

mod common;

use common::{GIB, MIB, Scenario, h100, stderr};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Stdio};

const LISTS: [&str; 3] = [
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
];

/// `n` processes on GPU `gpu`, pids from `gpu * 1000 + 1`, each with a utilisation sample.
fn processes(gpu: u32, n: u32, from_t: f64) -> (Value, Value) {
    let pids: Vec<u32> = (1..=n).map(|i| 4_000_000 + gpu * 1000 + i).collect();
    let list: Vec<Value> = pids
        .iter()
        .map(|pid| json!({ "pid": pid, "used_memory": u64::from(pid % 1000) * MIB }))
        .collect();
    let samples: Vec<Value> = pids
        .iter()
        .map(|pid| json!({ "t": from_t, "pid": pid, "sm": pid % 100, "mem": 1 }))
        .collect();
    (json!(list), json!(samples))
}

/// `vramscope --json --loop 0.1` and its output lines.
fn looping(scenario: &Scenario) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = scenario
        .command()
        .args(["--json", "--loop", "0.1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run vramscope");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    (child, lines)
}

fn next_doc(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = lines.next().expect("another snapshot").expect("read");
    serde_json::from_str(&line).expect("json")
}

#[test]
fn one_refresh_calls_each_list_once_per_gpu() {
    const GPUS: u32 = 4;
    let devices: Vec<Value> = (0..GPUS)
        .map(|i| {
            let (compute, samples) = processes(i, 3, 0.0);
            let mut gpu = h100(i);
            gpu["processes"] = json!([{ "t": 0, "compute": compute,
                "graphics": [{ "pid": 4_000_000 + i * 1000 + 1, "used_memory": GIB }] }]);
            gpu["process_utilization"] = samples;
            gpu
        })
        .collect();
    let scenario = Scenario::new(&json!({ "devices": devices }));
    let counts = scenario.dir().join("counts.json");
    let out = scenario
        .command()
        .env("FAKE_NVML_COUNTS", &counts)
        .arg("--json")
        .output()
        .expect("run vramscope");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    for i in 0..GPUS as usize {
        assert_eq!(doc["devices"][i]["process_count"], 3, "GPU {i}: {doc}");
    }
    let processes = doc["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 3 * GPUS as usize);
    for p in processes {
        let pid = p["pid"].as_u64().expect("pid");
        assert_eq!(p["sm_util"], pid % 100, "{p}");
        assert_eq!(p["used_memory"], (pid % 1000) * MIB, "{p}");
    }
    // The fake writes its counts when the process exits.
    let counts: Value =
        serde_json::from_slice(&std::fs::read(&counts).expect("counts")).expect("counts json");
    for list in LISTS {
        assert_eq!(counts[list], GPUS, "{list}: {counts}");
    }
}

#[test]
fn a_list_growing_past_the_kept_buffer_comes_back_whole() {
    // 2 processes, then 100 half a second in: more than the buffer kept from the first ticks
    // holds, for the process list and for the utilisation samples alike.
    let (few, few_samples) = processes(0, 2, 0.0);
    let (many, many_samples) = processes(0, 100, 0.5);
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": few }, { "t": 0.5, "compute": many }]);
    let mut samples = few_samples.as_array().expect("samples").clone();
    samples.extend(many_samples.as_array().expect("samples").iter().cloned());
    gpu["process_utilization"] = json!(samples);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let (mut child, mut lines) = looping(&scenario);
    let first = next_doc(&mut lines);
    assert_eq!(first["devices"][0]["process_count"], 2, "{first}");
    let mut last = first;
    for _ in 0..50 {
        last = next_doc(&mut lines);
        if last["devices"][0]["process_count"] == 100 {
            break;
        }
    }
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert_eq!(last["devices"][0]["process_count"], 100, "{last}");
    let expected: Vec<u64> = (1..=100).map(|i| 4_000_000 + i).collect();
    let rows = last["processes"].as_array().expect("processes");
    let pids: Vec<u64> = rows.iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids, expected);
    for p in rows {
        let pid = p["pid"].as_u64().expect("pid");
        assert_eq!(p["used_memory"], (pid % 1000) * MIB, "{p}");
        assert_eq!(p["sm_util"], pid % 100, "{p}");
    }
}

#[test]
fn a_persistent_insufficient_size_is_absent_and_sampling_goes_on() {
    let (list0, samples0) = processes(0, 2, 0.0);
    let (list1, samples1) = processes(1, 2, 0.0);
    let mut gpu0 = h100(0);
    gpu0["processes"] = json!([{ "t": 0, "compute": list0 }]);
    gpu0["process_utilization"] = samples0;
    let mut gpu1 = h100(1);
    gpu1["processes"] = json!([{ "t": 0, "compute": list1 }]);
    gpu1["process_utilization"] = samples1;
    let scenario = Scenario::new(&json!({
        "devices": [gpu0, gpu1],
        "faults": [
            { "function": "nvmlDeviceGetComputeRunningProcesses_v3", "error": "InsufficientSize",
              "device": 0 },
            { "function": "nvmlDeviceGetProcessUtilization", "error": "InsufficientSize",
              "device": 1 },
        ]
    }));
    let (mut child, mut lines) = looping(&scenario);
    for _ in 0..5 {
        let doc = next_doc(&mut lines);
        let (d0, d1) = (&doc["devices"][0], &doc["devices"][1]);
        // GPU 0: its process list is unknown, not empty.
        assert_eq!(d0["process_count"], Value::Null, "{doc}");
        assert_eq!(d0["unavailable"]["process_count"], "insufficient size");
        assert_eq!(d0["memory_used"], 10 * GIB);
        // GPU 1: processes listed, their utilisation absent with the reason.
        assert_eq!(d1["process_count"], 2, "{doc}");
        let rows: Vec<&Value> = doc["processes"]
            .as_array()
            .expect("processes")
            .iter()
            .filter(|p| p["gpu_index"] == 1)
            .collect();
        assert_eq!(rows.len(), 2, "{doc}");
        for p in rows {
            assert_eq!(p["sm_util"], Value::Null, "{p}");
            assert_eq!(p["unavailable"]["sm_util"], "insufficient size", "{p}");
            assert!(p["used_memory"].is_u64(), "{p}");
        }
    }
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    child.kill().expect("kill");
    child.wait().expect("wait");
}
