//! The live monitor in a real terminal (tmux) on a channel this test writes with the Rust
//! writer (GPU 0 lists this process): the detail pane shows what held the memory at the peak
//! once the monitor's worker thread has reduced the announced snapshot, and `m` raises the
//! channel's snapshot requests, or says why not for a writer without `--sites`.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, fake_nvml, h100, python3_available, stderr, stdout};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use vramscope::channel::layout::{control, event, flags};
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind, Writer, WriterConfig, WriterKind,
    parse_uuid,
};

const SECOND: Duration = Duration::from_secs(1);

fn scenario() -> Scenario {
    let mut gpu = h100(0);
    gpu["processes"] =
        json!([{ "t": 0, "compute": [{ "pid": std::process::id(), "used_memory": 9 * GIB }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn writer(dir: &Path, sites: bool) -> Writer {
    let mut writer = Writer::create(WriterConfig {
        dir: Some(dir.to_path_buf()),
        flags: if sites { flags::SITES } else { 0 },
        ..WriterConfig::from_process(WriterKind::PyTorch)
    })
    .unwrap();
    let slot = writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid("GPU-00000000-0000-0000-0000-000000000000"),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .unwrap();
    writer.publish_device(
        slot,
        &DeviceFigures {
            allocated: Some(2 * GIB),
            allocated_peak: Some(6 * GIB),
            reserved: Some(8 * GIB),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(40), "forward");
    writer
}

fn requests(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let at = control::SNAPSHOT_REQUESTS;
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// The monitor on `channels` in a pane, once it shows the instrumented row.
fn monitor(scenario: &Scenario, channels: &Path) -> Tmux {
    let line = format!(
        "env FAKE_NVML_SCENARIO={} VRAMSCOPE_DIR={} VRAMSCOPE_SHM=no-shm VRAMSCOPE_CONFIG=none {} --nvml-lib {} --interval 200ms",
        scenario.path.display(),
        channels.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    );
    let t = Tmux::start(scenario.dir(), 200, 50, &line);
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains("ALLOC"));
    assert!(ok, "{screen}");
    t
}

#[test]
fn m_asks_the_selected_writer_for_a_snapshot_and_the_pane_shows_what_held_the_peak() {
    if !tmux::available() || !python3_available() {
        return;
    }
    let scenario = scenario();
    let channels = scenario.dir().join("channels");
    let mut w = writer(&channels, true);
    let name = format!(
        "{}.snap-1-peak.pickle",
        w.path().file_name().unwrap().to_string_lossy()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sites_support/make_snapshot.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(channels.join(&name))
        .arg("peak")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let size: u64 = stdout(&out).trim().parse().unwrap();
    w.event(&EventFields {
        slot: Some(0),
        step: Some(40),
        args: [size, 6 * GIB, event::SNAPSHOT_PEAK, 2 * GIB, 1000, 0],
        text: &name,
        ..EventFields::new(EventKind::SnapshotWritten)
    });
    let t = monitor(&scenario, &channels);
    t.keys(&["Enter"]);
    let (ok, screen) = t.wait_for(10 * SECOND, |s| {
        s.contains("HELD held at the peak (exact): 67% proj/model.py:123 attention 4.00 GiB")
    });
    assert!(ok, "{screen}");
    t.keys(&["m"]);
    let pid = std::process::id();
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains(&format!("asked pid {pid} for a memory snapshot (#1)"))
    });
    assert!(ok, "{screen}");
    assert_eq!(requests(w.path()), 1);
}

#[test]
fn m_on_a_writer_without_sites_says_how_to_start_it_and_writes_nothing() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let channels = scenario.dir().join("channels");
    let w = writer(&channels, false);
    let t = monitor(&scenario, &channels);
    t.keys(&["m"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains("records no allocation history: start it with vramscope run --sites")
    });
    assert!(ok, "{screen}");
    assert_eq!(requests(w.path()), 0);
}
