//! Old drivers and partial failures: a library without `nvmlDeviceGetMemoryInfo_v2` or the
//! `_v3` process lists (drivers before R510) or without the `_v2` lists too (before R450) still
//! shows memory and processes, read by the older calls; a call that answers NOT_SUPPORTED
//! falls back the same way, once, not every tick; and what cannot be read at all is `n/a`
//! with its reason, never zero processes or "no sample yet".
//!
//! The old library is the fake with those functions really missing from its symbol table
//! (`fake_nvml::copy_without_symbols`), which nvml-wrapper meets as on a real old driver.

mod common;

use common::{GIB, MIB, Scenario, fake_nvml, h100, stderr, stdout};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// What R470 lacks of what vramscope calls.
const R470_MISSING: [&str; 3] = [
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
];

/// What a driver before R450 lacks besides: the `_v2` lists.
const R440_MISSING: [&str; 5] = [
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
];

/// Two GPUs; GPU 0 runs a compute job (this test's pid) and a desktop process in both lists.
fn two_gpus(faults: Value) -> Scenario {
    let me = std::process::id();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0,
        "compute": [{ "pid": me, "used_memory": 2 * GIB }, { "pid": 4_000_001, "used_memory": GIB }],
        "graphics": [{ "pid": 4_000_001, "used_memory": GIB }, { "pid": 4_000_002, "used_memory": 64 * MIB }] }]);
    Scenario::new(&json!({ "devices": [gpu, h100(1)], "faults": faults }))
}

/// The binary against `lib` (a copy of the fake) instead of the fake itself, isolated from
/// the machine's channels as `Scenario::command` is.
fn command(scenario: &Scenario, lib: &PathBuf) -> Command {
    let mut cmd = scenario.command();
    cmd.env_remove("VRAMSCOPE_NVML_LIB")
        .arg("--nvml-lib")
        .arg(lib);
    cmd
}

/// `--json` against `lib`, and the fake's call counts over that run.
fn json_and_counts(scenario: &Scenario, lib: &PathBuf) -> (Value, BTreeMap<String, f64>) {
    let counts = scenario.dir().join("counts.json");
    let out = command(scenario, lib)
        .env("FAKE_NVML_COUNTS", &counts)
        .arg("--json")
        .output()
        .expect("run");
    let doc = json_of(&out);
    let counts = common::parse_counts(&std::fs::read_to_string(&counts).expect("counts"));
    (doc, counts)
}

/// A copy of the fake in the scenario's folder lacking `missing`.
fn old_library(scenario: &Scenario, missing: &[&str]) -> PathBuf {
    let lib = scenario.dir().join("libnvidia-ml.so.1");
    fake_nvml::copy_without_symbols(&fake_nvml(), &lib, missing).expect("old library");
    lib
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("json")
}

/// GPU 0's figures, as `--json` gives them on any driver the fake can play.
fn assert_gpu0_complete(doc: &Value, context: &str) {
    let d0 = &doc["devices"][0];
    // The original call counts the driver's reserved 512 MiB as used.
    assert_eq!(d0["memory_used"], 10 * GIB + 512 * MIB, "{context}: {d0}");
    assert_eq!(d0["memory_total"], 80 * GIB, "{context}");
    assert_eq!(
        d0["memory_free"],
        80 * GIB - 10 * GIB - 512 * MIB,
        "{context}"
    );
    // Unknown, not zero: that call does not tell reserved memory apart.
    assert_eq!(d0["memory_reserved"], Value::Null, "{context}");
    assert_eq!(
        d0["unavailable"]["memory_reserved"], "counted in memory_used by this driver's memory call",
        "{context}"
    );
    assert_eq!(d0["process_count"], 3, "{context}: {d0}");
    assert_eq!(d0["compute_process_count"], 2, "{context}");
    assert_eq!(d0["graphics_process_count"], 2, "{context}");
    for field in ["memory_used", "memory_total", "process_count"] {
        assert!(d0["unavailable"].get(field).is_none(), "{context}: {d0}");
    }
    let me = std::process::id();
    let mine = doc["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == me)
        .unwrap_or_else(|| panic!("{context}: pid {me} missing from {doc}"));
    assert_eq!(mine["used_memory"], 2 * GIB, "{context}");
    assert_eq!(doc["devices"][1]["memory_used"], 10 * GIB + 512 * MIB);
}

#[test]
fn an_r470_library_shows_memory_and_processes_from_the_older_calls() {
    let scenario = two_gpus(json!([]));
    let lib = old_library(&scenario, &R470_MISSING);
    let (doc, counts) = json_and_counts(&scenario, &lib);
    assert_gpu0_complete(&doc, "R470");
    for older in [
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
    ] {
        assert!(
            counts.get(older).is_some_and(|n| *n >= 2.0),
            "{older}: {counts:?}"
        );
    }
    for unversioned in [
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses",
    ] {
        assert!(
            !counts.contains_key(unversioned),
            "{unversioned}: {counts:?}"
        );
    }

    // The table for people says the same.
    let out = command(&scenario, &lib)
        .arg("--once")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(table.contains("10.5 GiB / 80.0 GiB"), "{table}");
    assert!(table.contains(&std::process::id().to_string()), "{table}");
    assert!(!table.contains("n/a:"), "{table}");
}

#[test]
fn a_library_without_the_v2_lists_reads_the_16_byte_entries() {
    let scenario = two_gpus(json!([]));
    let lib = old_library(&scenario, &R440_MISSING);
    let (doc, counts) = json_and_counts(&scenario, &lib);
    assert_gpu0_complete(&doc, "R440");
    // A 24-byte stride over 16-byte entries would have read the second pid out of memory.
    let pids: Vec<&Value> = doc["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| &p["pid"])
        .collect();
    assert!(pids.contains(&&json!(4_000_001)), "{pids:?}");
    assert!(pids.contains(&&json!(4_000_002)), "{pids:?}");
    assert!(
        counts.contains_key("nvmlDeviceGetComputeRunningProcesses"),
        "{counts:?}"
    );
}

#[test]
fn a_refused_call_falls_back_once_not_every_tick() {
    // A newer driver may refuse `_v2` memory and the `_v3` lists where the older calls work.
    let scenario = two_gpus(json!([
        { "function": "nvmlDeviceGetMemoryInfo_v2", "error": "NotSupported" },
        { "function": "nvmlDeviceGetComputeRunningProcesses_v3", "error": "FunctionNotFound" },
        { "function": "nvmlDeviceGetGraphicsRunningProcesses_v3", "error": "NotSupported" },
    ]));
    let counts = scenario.dir().join("counts.json");
    let mut child = scenario
        .command()
        .env("FAKE_NVML_COUNTS", &counts)
        .args(["--json", "--loop", "0.1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut docs = Vec::new();
    for _ in 0..20 {
        let line = lines.next().expect("a snapshot").expect("read");
        docs.push(serde_json::from_str::<Value>(&line).expect("json"));
    }
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert_gpu0_complete(&docs[0], "first snapshot");
    assert_gpu0_complete(&docs[19], "twentieth snapshot");
    // The counts file is rewritten at most once a second: it covers the first second or so.
    let counts = common::parse_counts(&std::fs::read_to_string(&counts).expect("counts"));
    let v1 = counts
        .get("nvmlDeviceGetMemoryInfo")
        .copied()
        .unwrap_or(0.0);
    let lists = counts
        .get("nvmlDeviceGetComputeRunningProcesses_v2")
        .copied()
        .unwrap_or(0.0);
    assert!(
        v1 >= 8.0 && lists >= 8.0,
        "several ticks counted: {counts:?}"
    );
    // Asked once per GPU when it was opened (memory) or first sampled (lists), then not again.
    for refused in [
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
    ] {
        assert_eq!(counts.get(refused), Some(&2.0), "{refused}: {counts:?}");
    }
}

#[test]
fn a_compute_list_not_supported_alone_says_so_and_keeps_the_graphics_processes() {
    let faults: Vec<Value> = [
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetComputeRunningProcesses",
    ]
    .iter()
    .map(|f| json!({ "function": f, "error": "NotSupported", "device": 0 }))
    .collect();
    let scenario = two_gpus(json!(faults));
    let doc = json_of(&scenario.run(&["--json"]));
    let d0 = &doc["devices"][0];
    assert_eq!(d0["compute_process_count"], Value::Null, "{d0}");
    assert_eq!(d0["unavailable"]["compute_process_count"], "not supported");
    assert_eq!(d0["graphics_process_count"], 2, "{d0}");
    assert_eq!(
        d0["process_count"], 2,
        "the graphics list's processes: {d0}"
    );
    let mut pids: Vec<u64> = doc["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["pid"].as_u64())
        .collect();
    pids.sort_unstable();
    assert_eq!(pids, [4_000_001, 4_000_002]);
    assert_eq!(doc["devices"][1]["compute_process_count"], 0);

    let out = scenario.run(&["--once"]);
    let table = stdout(&out);
    assert!(
        table.contains("GPU 0 compute process list: not supported"),
        "{table}"
    );
}

#[test]
fn lists_that_cannot_be_read_are_not_shown_as_no_processes() {
    let faults: Vec<Value> = [
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
    ]
    .iter()
    .map(|f| json!({ "function": f, "error": "NoPermission" }))
    .collect();
    let scenario = two_gpus(json!(faults));
    let doc = json_of(&scenario.run(&["--json"]));
    for gpu in 0..2 {
        let d = &doc["devices"][gpu];
        for field in [
            "process_count",
            "compute_process_count",
            "graphics_process_count",
        ] {
            assert_eq!(d[field], Value::Null, "{field}: {d}");
            assert_eq!(d["unavailable"][field], "no permission", "{field}: {d}");
        }
    }
    let table = stdout(&scenario.run(&["--once"]));
    assert!(!table.contains("no GPU processes"), "{table}");
    assert!(table.contains("(process list n/a)"), "{table}");
    assert!(table.contains("GPU 0 processes: no permission"), "{table}");
}

#[test]
fn a_failing_memory_call_gives_its_reason_for_the_total_too() {
    let faults: Vec<Value> = ["nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"]
        .iter()
        .map(|f| json!({ "function": f, "error": "NoPermission", "device": 0 }))
        .collect();
    let scenario = two_gpus(json!(faults));
    let doc = json_of(&scenario.run(&["--json"]));
    let d0 = &doc["devices"][0];
    for field in ["memory_total", "memory_used", "memory_free"] {
        assert_eq!(d0[field], Value::Null, "{field}: {d0}");
        assert_eq!(d0["unavailable"][field], "no permission", "{field}: {d0}");
    }
    assert_eq!(doc["devices"][1]["memory_total"], 80 * GIB);

    // A missing `_v2` and a refused original: the original's answer is the reason.
    let scenario = two_gpus(json!([
        { "function": "nvmlDeviceGetMemoryInfo", "error": "Unknown", "device": 0 }
    ]));
    let lib = old_library(&scenario, &["nvmlDeviceGetMemoryInfo_v2"]);
    let doc = json_of(
        &command(&scenario, &lib)
            .arg("--json")
            .output()
            .expect("run"),
    );
    let why = doc["devices"][0]["unavailable"]["memory_total"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("unknown"), "{doc}");
}

#[test]
fn a_library_with_no_graphics_list_call_shows_the_compute_processes() {
    let scenario = two_gpus(json!([]));
    let lib = old_library(
        &scenario,
        &[
            "nvmlDeviceGetGraphicsRunningProcesses_v3",
            "nvmlDeviceGetGraphicsRunningProcesses_v2",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ],
    );
    let doc = json_of(
        &command(&scenario, &lib)
            .arg("--json")
            .output()
            .expect("run"),
    );
    let d0 = &doc["devices"][0];
    assert_eq!(d0["process_count"], 2, "{d0}");
    assert_eq!(d0["compute_process_count"], 2, "{d0}");
    assert_eq!(d0["graphics_process_count"], Value::Null, "{d0}");
    let why = d0["unavailable"]["graphics_process_count"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("nvmlDeviceGetGraphicsRunningProcesses"),
        "{d0}"
    );
}
