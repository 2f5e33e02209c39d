//! The sampling owns the pid list: in each tick the host and channel jobs read the processes
//! the GPUs listed in that same tick. So the host facts (user, command) of a process come in
//! the same batch as the first GPU sample that lists it: at start, and for a process that
//! appears later, with no tick of lag and no owner sending the list back down.
//!
//! Run through `vramscope record`, whose file keeps each tick's batch as records sharing one
//! `t`, against the fake NVML listing two real processes of this test.

mod common;

use common::{GIB, Scenario, h100};
use serde_json::{Value, json};
use std::process::{Child, Command};

/// A process the fake NVML can list, with a command line the host sampler will read.
fn sleeper(seconds: &str) -> Child {
    Command::new("sleep").arg(seconds).spawn().expect("sleep")
}

/// Every record of a plain recording, the header left out.
fn records(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("recording")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect()
}

fn lists(device: &Value, pid: u32) -> bool {
    device["processes"]
        .as_array()
        .is_some_and(|list| list.iter().any(|p| p["pid"] == pid))
}

/// The host record of the tick (same `t`) whose GPU sample first listed `pid`, and that
/// sample's `t`.
fn first_listing(records: &[Value], pid: u32) -> (u64, Option<&Value>) {
    let t = records
        .iter()
        .find(|r| r.get("device").is_some_and(|d| lists(d, pid)))
        .and_then(|r| r["t"].as_u64())
        .unwrap_or_else(|| panic!("no GPU sample lists {pid}"));
    let host = records
        .iter()
        .filter(|r| r["t"].as_u64() == Some(t))
        .filter_map(|r| r.get("host"))
        .find_map(|h| h["processes"].as_array()?.iter().find(|p| p["pid"] == pid));
    (t, host)
}

#[test]
fn the_host_facts_come_in_the_tick_of_the_first_gpu_sample_that_lists_the_process() {
    let mut early = sleeper("30");
    let mut late = sleeper("31");
    let mut gpu = h100(0);
    // `late` appears 2.3 s in: between two ticks at a 1 s refresh, when the host (read every
    // 2 s at most while the list is unchanged) is not due for its own sake.
    gpu["processes"] = json!([
        { "t": 0, "compute": [{ "pid": early.id(), "used_memory": 2 * GIB }] },
        { "t": 2.3, "compute": [
            { "pid": early.id(), "used_memory": 2 * GIB },
            { "pid": late.id(), "used_memory": GIB }
        ] }
    ]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let file = scenario.dir().join("run.jsonl");
    let out = scenario
        .command()
        .args(["--interval", "1s", "record", "--duration", "4.5s", "-o"])
        .arg(&file)
        .output()
        .expect("vramscope record");
    let _ = early.kill();
    let _ = late.kill();
    let _ = early.wait();
    let _ = late.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = records(&file);
    for (who, child, command) in [("early", &early, "sleep 30"), ("late", &late, "sleep 31")] {
        let (t, host) = first_listing(&records, child.id());
        let host = host.unwrap_or_else(|| {
            panic!("{who}: no host facts in the tick of its first GPU sample (t {t})")
        });
        assert_eq!(host["command"], command, "{who}: {host}");
        assert!(host["user"].is_string(), "{who}: {host}");
    }
}
