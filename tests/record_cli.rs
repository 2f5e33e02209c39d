//! `vramscope record` as the real binary against the fake NVML library and a real channel
//! written by this test process: what it records reproduces the scenario's figures when fed
//! to a monitor; Ctrl-C finishes the file; `kill -9` loses at most the last second.

mod common;
mod record_support;

use common::wait::wait_for_content;
use common::{GIB, ISOLATED_SHM, Scenario, h100, stderr};
use record_support::read_all;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind as RawKind, SampleFields, Writer,
    WriterConfig, WriterKind, parse_uuid,
};
use vramscope::model::SourceEvent;
use vramscope::model::{Absent, EventKind, now_ms};
use vramscope::recording::Recording;
use vramscope::state::{Monitor, StaleAfter};

const UUID0: &str = "GPU-00000000-0000-0000-0000-000000000000";

/// Two GPUs: this process on GPU 0 with 6 GiB, GPU 1 without a fan.
fn scenario() -> Scenario {
    let me = std::process::id();
    let mut gpu0 = h100(0);
    gpu0["processes"] = json!([{ "t": 0, "compute": [{ "pid": me, "used_memory": 6 * GIB }] }]);
    gpu0["process_utilization"] = json!([{ "t": 0, "pid": me, "sm": 57, "mem": 12 }]);
    let mut gpu1 = h100(1);
    gpu1["name"] = json!("NVIDIA A10");
    gpu1["num_fans"] = serde_json::Value::Null;
    gpu1["timeline"] = json!([{ "t": 0, "memory_used": 3 * GIB, "gpu_util": 5, "temperature": 41,
        "power": 60_000, "sm_clock": 210, "mem_clock": 405, "pstate": 8 }]);
    Scenario::new(&json!({ "devices": [gpu0, gpu1] }))
}

/// `vramscope record -o FILE` at a 100 ms refresh, reading channels from `channels`.
fn start(scenario: &Scenario, channels: &Path, file: &Path, extra: &[&str]) -> Child {
    scenario
        .command()
        .env("VRAMSCOPE_DIR", channels)
        .args(["--interval", "100ms", "record", "-o"])
        .arg(file)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vramscope record")
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: sending a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

fn wait(child: Child) -> Output {
    child.wait_with_output().expect("wait")
}

/// A channel writer in this process (so its pid is the one NVML lists on GPU 0).
fn channel_writer(dir: &Path) -> Writer {
    let mut writer = Writer::create(WriterConfig {
        framework: "rust-test 1.0".into(),
        dir: Some(dir.to_path_buf()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("a channel");
    writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(UUID0),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .expect("a slot");
    writer
}

#[test]
fn a_recording_reproduces_the_scenario_and_the_channel() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = channel_writer(&channels);
    let scenario = scenario();
    let file = work.path().join("run.jsonl.zst");
    let child = start(&scenario, &channels, &file, &[]);
    wait_for_content(&file, Duration::from_secs(10));
    // Two seconds of a training loop: a sample every 20 ms, a step end every 500 ms.
    let mut published = Vec::new();
    let began = Instant::now();
    let mut i = 0u64;
    while began.elapsed() < Duration::from_secs(2) {
        let allocated = 20 * GIB + (i % 25) * (256 << 20);
        writer.sample(&SampleFields {
            slot: 0,
            allocated: Some(allocated),
            reserved: Some(24 * GIB),
            peak: Some(allocated + (i % 3) * 4096),
            step: Some(100 + i / 25),
            ..SampleFields::default()
        });
        published.push(allocated);
        if i % 25 == 24 {
            writer.event(&EventFields {
                slot: Some(0),
                step: Some(100 + i / 25),
                args: [allocated, 24 * GIB, 500_000_000, 0, 0, 0],
                text: "train",
                ..EventFields::new(RawKind::StepEnd)
            });
        }
        writer.publish_device(
            0,
            &DeviceFigures {
                allocated: Some(allocated),
                reserved: Some(24 * GIB),
                ..DeviceFigures::default()
            },
        );
        writer.status(Some(100 + i / 25), "forward");
        i += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the monitor poll the last samples, then stop it as a person would.
    std::thread::sleep(Duration::from_millis(400));
    signal(&child, libc::SIGINT);
    let out = wait(child);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("recording to {}; Ctrl-C stops", file.display())),
        "{err}"
    );
    assert!(
        err.contains("recorded ") && err.contains(" events, "),
        "{err}"
    );

    let recording = Recording::open(&file).unwrap();
    assert_eq!(recording.header().interval_ms, 100);
    assert_eq!(
        recording.header().vramscope_version,
        env!("CARGO_PKG_VERSION")
    );
    let events = read_all(&file);
    let me = std::process::id();

    // Every sample the writer published is in the recording, in order.
    let mut points = Vec::new();
    let mut step_ends = 0;
    for (_, event) in &events {
        if let SourceEvent::Channels(batch) = event {
            for poll in &batch.polls {
                assert_eq!(poll.identity.framework, "rust-test 1.0");
                points.extend(poll.points.iter().map(|p| p.allocated.unwrap()));
                step_ends += poll
                    .events
                    .iter()
                    .filter(|e| matches!(e.kind, EventKind::StepEnd { .. }))
                    .count();
            }
        }
    }
    assert_eq!(points, published);
    assert_eq!(step_ends, published.len() / 25);

    // The host sampler was told to watch this process (it is on a GPU), as in the monitor.
    let watched = events.iter().any(|(_, e)| match e {
        SourceEvent::Host(h) => h.processes.iter().any(|p| p.pid == me && p.command.is_ok()),
        _ => false,
    });
    assert!(watched, "a host sample lists this process with its command");

    // Fed to a monitor, the recording shows what the scenario says.
    let last = events.last().unwrap().0;
    let mut monitor = Monitor::new(recording_start(&file));
    for (_, event) in events {
        monitor.ingest(event);
    }
    let snap = monitor.snapshot(last, StaleAfter::NEVER);
    assert_eq!(snap.devices.len(), 2);
    let d0 = snap.devices[0].sample.as_ref().unwrap();
    let d1 = snap.devices[1].sample.as_ref().unwrap();
    assert_eq!(
        snap.devices[0].info.name.as_deref(),
        Ok("NVIDIA H100 80GB HBM3")
    );
    assert_eq!(d0.memory.as_ref().unwrap().used, 10 * GIB);
    assert_eq!(d0.gpu_util, Ok(87));
    assert_eq!(d0.fan_percent, Ok(35));
    assert_eq!(snap.devices[1].info.name.as_deref(), Ok("NVIDIA A10"));
    assert_eq!(d1.memory.as_ref().unwrap().used, 3 * GIB);
    assert_eq!(d1.fan_percent, Err(Absent::NotSupported), "absent, not 0");
    let row = snap.processes.iter().find(|r| r.nvml.pid == me).unwrap();
    assert_eq!(row.nvml.used_memory, Ok(6 * GIB));
    assert_eq!(row.nvml.sm_util, Ok(57));
    let allocator = row.allocator.as_ref().expect("joined to the channel");
    assert_eq!(allocator.device.allocated, Ok(*published.last().unwrap()));
    assert_eq!(allocator.label, "forward");
}

fn recording_start(path: &Path) -> u64 {
    Recording::open(path).unwrap().header().started_ms
}

fn killed_mid_run(name: &str) {
    let work = tempfile::tempdir().unwrap();
    let scenario = scenario();
    let file = work.path().join(name);
    let child = start(&scenario, &work.path().join("none"), &file, &[]);
    wait_for_content(&file, Duration::from_secs(10));
    let began = now_ms();
    std::thread::sleep(Duration::from_millis(3000));
    let killed_at = now_ms();
    signal(&child, libc::SIGKILL);
    wait(child);
    let events = read_all(&file);
    let devices: Vec<u64> = events
        .iter()
        .filter(|(_, e)| matches!(e, SourceEvent::Device(_)))
        .map(|(t, _)| *t)
        .collect();
    let last = *devices.last().expect("device samples");
    assert!(
        last + 1000 + 250 >= killed_at,
        "{name}: the last sample is {} ms older than the kill",
        killed_at - last
    );
    // Two GPUs every 100 ms for the three seconds, less the lost second.
    let expected = (killed_at - began - 1000) / 100 * 2;
    assert!(
        devices.len() as u64 >= expected * 7 / 10,
        "{name}: {} device samples, about {expected} expected",
        devices.len()
    );
}

#[test]
fn sigkill_loses_at_most_the_last_second_plain() {
    killed_mid_run("killed.jsonl");
}

#[test]
fn sigkill_loses_at_most_the_last_second_compressed() {
    killed_mid_run("killed.jsonl.zst");
}

#[test]
fn duration_stops_it_and_files_are_not_overwritten_unasked() {
    let work = tempfile::tempdir().unwrap();
    let scenario = scenario();
    let file = work.path().join("short.jsonl");
    let child = start(
        &scenario,
        &work.path().join("none"),
        &file,
        &["--duration", "1s"],
    );
    let began = Instant::now();
    let out = wait(child);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(began.elapsed() < Duration::from_secs(8));
    let first = read_all(&file);
    assert!(
        first
            .iter()
            .any(|(_, e)| matches!(e, SourceEvent::Started { .. }))
    );
    let bytes = std::fs::read(&file).unwrap();

    let again = wait(start(
        &scenario,
        &work.path().join("none"),
        &file,
        &["--duration", "1s"],
    ));
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("the file exists"),
        "{}",
        stderr(&again)
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "left as it was");

    let forced = wait(start(
        &scenario,
        &work.path().join("none"),
        &file,
        &["--duration", "0.5s", "--force"],
    ));
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_ne!(std::fs::read(&file).unwrap(), bytes);

    let clash = scenario
        .command()
        .args(["--json", "record", "-o"])
        .arg(work.path().join("other.jsonl"))
        .output()
        .unwrap();
    assert_eq!(clash.status.code(), Some(2), "{}", stderr(&clash));
}

#[test]
fn sigterm_and_sighup_finish_the_file_too() {
    for (sig, name) in [
        (libc::SIGTERM, "term.jsonl.zst"),
        (libc::SIGHUP, "hup.jsonl.zst"),
    ] {
        let work = tempfile::tempdir().unwrap();
        let scenario = scenario();
        let file: PathBuf = work.path().join(name);
        let child = start(&scenario, &work.path().join("none"), &file, &[]);
        wait_for_content(&file, Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(600));
        signal(&child, sig);
        let out = wait(child);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        // A finished zstd frame: cutting its last bytes would be noticed by `zstd -t`; here,
        // the file reads whole and ends where the frame does.
        assert!(!read_all(&file).is_empty());
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            zstd::decode_all(&bytes[..]).is_ok(),
            "{name}: a complete frame"
        );
    }
}

#[test]
fn without_nvml_the_host_is_still_recorded() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("nonvml.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env_remove("VRAMSCOPE_NVML_LIB")
        .env(ISOLATED_SHM.0, work.path().join(ISOLATED_SHM.1))
        .env_remove("XDG_RUNTIME_DIR")
        .args([
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
            "--interval",
            "100ms",
        ])
        .args(["record", "--duration", "0.5s", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("recording host figures only"),
        "{}",
        stderr(&out)
    );
    let events = read_all(&file);
    assert!(
        events
            .iter()
            .any(|(_, e)| matches!(e, SourceEvent::NvmlUnavailable(_)))
    );
    assert!(
        events
            .iter()
            .any(|(_, e)| matches!(e, SourceEvent::Host(_)))
    );
}
