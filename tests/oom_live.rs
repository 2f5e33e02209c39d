//! A job that dies of an OOM, seen live: its writer cannot name its GPU (JAX, or
//! `vramscope.report(device=0, ...)` without a UUID), and `vramscope run --json` must still
//! join its last figures and its OOM to its row and GPU in the document written after it
//! ended.

mod common;

use common::tmux::{self, Tmux};
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind, Exit, SampleFields, Writer,
    WriterConfig, WriterKind, parse_uuid,
};

/// Writes its pid to `argv[1]`, waits for `argv[2]` to exist (NVML lists it by then), reports
/// 9 GiB allocated and 10 reserved on device 0 without naming the GPU over 40 steps and on
/// until `argv[3]` exists (the test has seen it alive), then dies of an uncaught CUDA OOM.
const SCRIPT: &str = r#"
import os, sys, time, vramscope
GIB = 1 << 30
open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
for _ in range(40):
    vramscope.report(device=0, allocated=9 * GIB, reserved=10 * GIB, peak=12 * GIB, free=GIB)
    vramscope.step()
while not os.path.exists(sys.argv[3]):
    vramscope.report(device=0, allocated=9 * GIB, reserved=10 * GIB, peak=12 * GIB, free=GIB)
    time.sleep(0.05)
raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB")
"#;

/// GPU 1 lists `pid` with 11 GiB; GPU 0 lists nobody.
fn listing_on_gpu1(pid: u32) -> Value {
    let mut gpu1 = h100(1);
    gpu1["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": 11 * GIB }] }]);
    json!({ "devices": [h100(0), gpu1] })
}

#[test]
fn run_json_keeps_an_anonymous_writers_figures_and_oom_on_its_row_after_it_died() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let (pid_file, go, die) = (
        work.path().join("pid"),
        work.path().join("go"),
        work.path().join("die"),
    );
    let script = work.path().join("train.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let scenario = Scenario::new(&json!({ "devices": [h100(0), h100(1)] }));
    let mut child = scenario
        .command()
        .env("VRAMSCOPE_DIR", &channels)
        .args(["run", "--json", "--interval", "0.2", "--", "python3"])
        .args([&script, &pid_file, &go, &die])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let pid: u32 = wait::wait_for("the script to start", Duration::from_secs(20), || {
        std::fs::read_to_string(&pid_file).ok()
    })
    .trim()
    .parse()
    .unwrap();
    // NVML lists it on GPU 1 from now on (and, a moment behind, still after it died).
    scenario.rewrite(&listing_on_gpu1(pid));
    std::fs::write(&go, "").unwrap();
    let row_of = |doc: &Value| -> Option<Value> {
        doc["processes"]
            .as_array()?
            .iter()
            .find(|p| p["pid"] == json!(pid))
            .cloned()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("a document showing the live writer");
        let doc: Value = serde_json::from_str(&line).unwrap();
        if row_of(&doc).is_some_and(|r| r["allocated"] == json!(9 * GIB)) {
            break;
        }
    }
    // Seen alive: now it dies of its OOM.
    std::fs::write(&die, "").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "the job's own status");
    let last_line = rx.iter().last().expect("a document after the job ended");
    let last: Value = serde_json::from_str(&last_line).unwrap();

    // Its row, though the process is gone: the last figures, not "not instrumented".
    let row = last["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == json!(pid))
        .unwrap_or_else(|| panic!("no row for {pid}: {last}"));
    assert_eq!(row["gpu_index"], json!(1), "{row}");
    assert_eq!(row["allocated"], json!(9 * GIB), "{row}");
    assert_eq!(row["reserved"], json!(10 * GIB), "{row}");
    assert_eq!(row["writer"], json!("ended (error)"), "{row}");

    // The writer: its pid and GPU kept, and one fatal OOM with what it asked for.
    let a = last["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(pid))
        .unwrap_or_else(|| panic!("no writer with pid {pid}: {last}"));
    assert_eq!(a["devices"][0]["gpu_index"], json!(1), "{a}");
    let ooms = a["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1, "{a}");
    assert_eq!(ooms[0]["outcome"], json!("fatal"), "{a}");
    assert_eq!(ooms[0]["requested"], json!(6 * GIB), "{a}");
    // Its figures are the last sample's, the uncaught error having none.
    assert_eq!(ooms[0]["allocated"], json!(9 * GIB), "{a}");
    assert_eq!(ooms[0]["reserved"], json!(10 * GIB), "{a}");
}

#[test]
fn json_says_at_which_step_and_in_which_phase_the_true_peak_was() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = Writer::create(WriterConfig {
        dir: Some(channels.clone()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .unwrap();
    let uuid = "GPU-00000000-0000-0000-0000-000000000000";
    let slot = writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(uuid),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .unwrap();
    // Stamped 10 ms and more apart, as a real spike inside a phase is: the monitor orders a
    // poll's samples and events by millisecond.
    let t0 = vramscope::channel::monotonic_ns() - 1_000_000_000;
    let at = |ms: u64| Some(t0 + ms * 1_000_000);
    let sample = |writer: &mut Writer, ms: u64, peak: u64, step: u64| {
        writer.sample(&SampleFields {
            t_ns: at(ms),
            slot: 0,
            allocated: Some(9 * GIB),
            reserved: Some(10 * GIB),
            peak: Some(peak),
            step: Some(step),
            ..SampleFields::default()
        });
    };
    sample(&mut writer, 0, 9 * GIB, 39);
    let phase = |ms: u64, kind| EventFields {
        t_ns: at(ms),
        step: Some(40),
        text: "backward",
        ..EventFields::new(kind)
    };
    writer.event(&phase(10, EventKind::PhaseBegin));
    // The 30 ms spike to 12 GiB that no poll sees, inside backward at step 40.
    sample(&mut writer, 20, 12 * GIB, 40);
    writer.event(&phase(50, EventKind::PhaseEnd));
    sample(&mut writer, 60, 9 * GIB, 40);
    writer.publish_device(
        slot,
        &DeviceFigures {
            allocated: Some(9 * GIB),
            reserved: Some(10 * GIB),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(41), "optimizer");
    let mut gpu = h100(0);
    let pid = std::process::id();
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": 11 * GIB }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let doc = scenario.json_reading(&channels);
    let a = doc["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(pid))
        .unwrap_or_else(|| panic!("no writer with our pid: {doc}"));
    let d = &a["devices"][0];
    assert_eq!(d["true_peak"], json!(12 * GIB), "{d}");
    let at = &d["true_peak_at"];
    // The status says step 41, "optimizer": the peak's place is the sample's, not the poll's.
    assert_eq!(
        (&at["value"], &at["step"], &at["phase"], &at["located"]),
        (
            &json!(12 * GIB),
            &json!(40),
            &json!("backward"),
            &json!(true)
        ),
        "{d}"
    );
    assert!(at["at_ms"].as_u64().is_some_and(|t| t > 0), "{d}");
    writer.finish(Exit::Clean).unwrap();
}

#[test]
fn the_screen_keeps_a_dead_anonymous_writers_row_figures_and_oom() {
    if !python3_available() || !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0), h100(1)] }));
    let dir = scenario.dir();
    let channels = dir.join("channels");
    let (pid_file, go, die) = (dir.join("job-pid"), dir.join("go"), dir.join("die"));
    let script = dir.join("train.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let mut job = std::process::Command::new("python3")
        .arg(&script)
        .args([&pid_file, &go, &die])
        .env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("python"),
        )
        .env("VRAMSCOPE_DIR", &channels)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid: u32 = wait::wait_for("the script to start", Duration::from_secs(20), || {
        std::fs::read_to_string(&pid_file).ok()
    })
    .trim()
    .parse()
    .unwrap();
    scenario.rewrite(&listing_on_gpu1(pid));
    std::fs::write(&go, "").unwrap();
    let line = format!(
        "env VRAMSCOPE_DIR={} {}",
        channels.display(),
        scenario.monitor_line("--interval 200ms")
    );
    let t = Tmux::start(dir, 160, 45, &line);
    let row_of = |screen: &str| {
        screen
            .lines()
            .find(|l| l.contains(&pid.to_string()) && l.contains("python3"))
            .map(str::to_string)
    };
    let (seen, screen) = t.wait_for(Duration::from_secs(20), |s| {
        row_of(s).is_some_and(|r| r.contains("9.00 GiB") && r.contains(" 40 "))
    });
    assert!(
        seen,
        "the live row never showed the writer's figures:\n{screen}"
    );

    // It dies of its OOM; NVML then stops listing it.
    std::fs::write(&die, "").unwrap();
    assert!(!job.wait().unwrap().success());
    scenario.rewrite(&json!({ "devices": [h100(0), h100(1)] }));
    let (gone, screen) = t.wait_for(Duration::from_secs(20), |s| {
        row_of(s).is_some_and(|r| r.contains("exited"))
    });
    assert!(gone, "the row never read exited:\n{screen}");
    let row = row_of(&screen).unwrap();
    for figure in ["9.00 GiB", "10.0 GiB", "12.0 GiB", " 40 "] {
        assert!(
            row.contains(figure),
            "{figure} kept on the exited row: {row}"
        );
    }
    // Its detail pane: the allocator section, and the OOM that killed it with its figures.
    t.keys(&["Enter"]);
    let (shown, screen) = t.wait_for(Duration::from_secs(10), |s| s.contains("OOM fatal"));
    assert!(shown, "no OOM in the detail pane:\n{screen}");
    assert!(screen.contains("ended (error)"), "{screen}");
    assert!(
        screen.contains(
            "OOM fatal  step 40  wanted 6.00 GiB, 1.00 GiB free, alloc 9.00 GiB, resv 10.0 GiB"
        ),
        "{screen}"
    );
    t.keys(&["q"]);
}
