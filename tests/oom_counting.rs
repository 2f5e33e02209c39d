//! How many OOMs a writer had, as `--json` says it: one per failure whoever counted it (the
//! program's own count, its OOM events, or both), and every one, beyond those the monitor
//! keeps in detail.

mod common;

use common::*;
use serde_json::{Value, json};
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, Exit, Writer, WriterConfig, WriterKind, parse_uuid,
};

const UUID: &str = "GPU-00000000-0000-0000-0000-000000000000";

/// A Rust writer on GPU 0 with 9 GiB allocated, the test's own process listed there.
fn writer_on_gpu0(channels: &std::path::Path) -> (Writer, usize) {
    let mut writer = Writer::create(WriterConfig {
        dir: Some(channels.to_path_buf()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .unwrap();
    let slot = writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(UUID),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .unwrap();
    (writer, slot)
}

fn figures(ooms: Option<u64>) -> DeviceFigures {
    DeviceFigures {
        allocated: Some(9 * GIB),
        reserved: Some(10 * GIB),
        ooms,
        ..DeviceFigures::default()
    }
}

/// The document's entry for our own writer, read with our pid listed on GPU 0.
fn our_writer(channels: &std::path::Path) -> Value {
    let mut gpu = h100(0);
    let pid = std::process::id();
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": 11 * GIB }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let doc = scenario.json_reading(channels);
    doc["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(pid))
        .cloned()
        .unwrap_or_else(|| panic!("no writer with our pid: {doc}"))
}

#[test]
fn an_oom_the_program_counted_and_also_reported_is_one_oom() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let (mut writer, slot) = writer_on_gpu0(&channels);
    writer.publish_device(slot, &figures(Some(0)));
    writer.status(Some(60), "train");
    // The program catches an OOM, counts it in its own figure, and tells vramscope of it.
    writer.publish_device(slot, &figures(Some(1)));
    writer.oom(slot, Some(5 * GIB), Some(2 * GIB));
    writer.publish_device(slot, &figures(Some(1)));
    let a = our_writer(&channels);
    assert_eq!(a["devices"][0]["ooms"], json!(1), "{a}");
    assert_eq!(a["ooms"].as_array().unwrap().len(), 1, "{a}");
    writer.finish(Exit::Clean).unwrap();
}

#[test]
fn ooms_reported_by_a_program_that_counts_none_are_all_counted() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let (mut writer, slot) = writer_on_gpu0(&channels);
    writer.publish_device(slot, &figures(None));
    // More OOMs than the monitor keeps in detail (64), one step apart.
    let reported = 70;
    for step in 0..reported {
        writer.status(Some(step), "train");
        writer.oom(slot, Some(GIB), None);
    }
    let a = our_writer(&channels);
    assert_eq!(a["devices"][0]["ooms"], json!(reported), "{a}");
    let kept = a["ooms"].as_array().unwrap().len() as u64;
    assert!(kept < reported, "kept {kept} in detail");
    assert_eq!(a["ooms_dropped"], json!(reported - kept), "{a}");
    writer.finish(Exit::Clean).unwrap();
}
