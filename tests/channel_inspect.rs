//! `inspect`: one channel as JSON, for `vramscope inspect FILE`.

mod channel_support;

use channel_support::{private_dir, small, writer};
use serde_json::Value;
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind, Exit, SampleFields, inspect,
};

#[test]
fn inspect_renders_everything_in_the_file_as_json() {
    let dir = private_dir();
    let mut w = writer(dir.path(), small(2, 4, 4, 4));
    let slot = w
        .add_device(DeviceIdentity {
            ordinal: 1,
            uuid: Some([0xAB; 16]),
            pci_bus_id: None,
            total: Some(1 << 30),
        })
        .expect("slot");
    w.publish_device(
        slot,
        &DeviceFigures {
            allocated: Some(42),
            ..DeviceFigures::default()
        },
    );
    let phase = w.intern("say \"hi\"\\");
    w.status(Some(7), "tab\there");
    for i in 0..6u64 {
        w.sample(&SampleFields {
            t_ns: Some(i),
            phase,
            allocated: Some(i),
            ..SampleFields::default()
        });
    }
    let mut oom = EventFields::new(EventKind::Oom);
    oom.args[0] = 1 << 20;
    w.event(&oom);
    let path = w.path().to_path_buf();
    w.finish(Exit::Error("boom".into())).expect("finish");

    let text = inspect(&path).expect("inspect");
    let v: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["state"], "exited_error");
    assert_eq!(v["liveness"]["status"], "ended");
    assert_eq!(v["liveness"]["crashed"], false);
    assert_eq!(v["identity"]["pid"], u64::from(std::process::id()));
    assert_eq!(v["identity"]["kind"], "rust");
    assert_eq!(v["identity"]["rank"], Value::Null);
    assert_eq!(v["phases"][0], "say \"hi\"\\");
    // The tab is a space (src/text.rs).
    assert_eq!(v["status"]["label"], "tab here");
    assert_eq!(v["status"]["step"], 7);
    let d = &v["devices"][0];
    assert_eq!(d["uuid"], "GPU-abababab-abab-abab-abab-abababababab");
    assert_eq!(
        (d["allocated"].clone(), d["reserved"].clone()),
        (Value::from(42), Value::Null)
    );
    let t: Vec<u64> = v["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| s["t_ns"].as_u64().expect("t"))
        .collect();
    assert_eq!(t, [2, 3, 4, 5], "the ring's history, from the start");
    assert_eq!(v["lost_samples"], 2);
    let kinds: Vec<&str> = v["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["OOM", "EXIT"]);
    assert_eq!(v["events"][0]["args"][0], 1 << 20);
    assert_eq!(v["events"][0]["args"][1], Value::Null);
    assert_eq!(v["events"][1]["text"], "boom");
}

#[test]
fn inspect_refuses_what_the_reader_refuses() {
    let dir = private_dir();
    let path = channel_support::write_file(dir.path(), "1-1.vsc", &[0u8; 100]);
    let r = inspect(&path).expect_err("refused");
    assert_eq!(
        r.to_string(),
        "1-1.vsc: truncated: 100 bytes, less than the 512-byte header"
    );
}
