//! A GPU's "in allocators" share (`instrumented_reserved` in `--json` and `--csv`, the TUI's
//! GPU panel, `vramscope_gpu_instrumented_reserved_bytes`) counts a channel only through the
//! pid the channel sampler verified and NVML lists on that GPU: a writer whose slot names
//! GPU 0 while NVML lists its process on GPU 1 adds nothing to GPU 0's share.

mod common;
mod serve_support;

use common::*;
use serde_json::{Value, json};
use serve_support::*;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use vramscope::channel::{DeviceFigures, Writer};

/// This process's channel: GPU 0 (`UUID0`) in its slot, 24 GiB reserved.
fn publishing_writer(channels: &Path) -> Writer {
    let mut writer = rank_writer(channels);
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(20 * GIB),
            reserved: Some(24 * GIB),
            ..DeviceFigures::default()
        },
    );
    writer
}

struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper() -> Sleeper {
    Sleeper(Command::new("sleep").arg("120").spawn().expect("sleep"))
}

/// `--json` once the channel has been read (its allocator listed under our verified pid).
fn json_with_channel(scenario: &Scenario, channels: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = scenario
            .command()
            .env("VRAMSCOPE_DIR", channels)
            .arg("--json")
            .output()
            .expect("vramscope --json");
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let read = doc["allocators"]
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c["pid"] == json!(std::process::id())));
        if read {
            return doc;
        }
        assert!(
            Instant::now() < deadline,
            "the channel was never read: {doc}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_channel_counts_toward_a_gpus_share_only_where_nvml_lists_its_pid() {
    let work = tempfile::tempdir().expect("tempdir");
    let channels = work.path().join("channels");
    let writer = publishing_writer(&channels);
    let ours = std::process::id();
    let other = sleeper();

    // NVML lists our process on GPU 0, where its slot is: the share is its reserve.
    let listed = Scenario::new(&two_gpus(ours, None));
    let doc = json_with_channel(&listed, &channels);
    assert_eq!(doc["devices"][0]["instrumented_reserved"], json!(24 * GIB));
    assert_eq!(doc["devices"][1]["instrumented_reserved"], Value::Null);

    // NVML lists someone else on GPU 0 and our process on GPU 1 only: no GPU's share.
    let elsewhere = Scenario::new(&two_gpus(other.0.id(), Some(ours)));
    let doc = json_with_channel(&elsewhere, &channels);
    assert_eq!(
        doc["devices"][0]["instrumented_reserved"],
        Value::Null,
        "{doc}"
    );
    assert_eq!(
        doc["devices"][1]["instrumented_reserved"],
        Value::Null,
        "{doc}"
    );
    drop(writer);
}

#[test]
fn the_exporter_counts_a_channel_only_on_the_gpu_nvml_lists_its_pid_on() {
    let work = tempfile::tempdir().expect("tempdir");
    let channels = work.path().join("channels");
    let writer = publishing_writer(&channels);
    let ours = std::process::id().to_string();
    let other = sleeper();
    let scenario = Scenario::new(&two_gpus(other.0.id(), Some(std::process::id())));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    // Read once its reserve is exported for our (verified) pid on the GPU its slot names.
    let text = served.scrape_until(Duration::from_secs(20), |text| {
        value(
            &samples(text),
            "vramscope_process_allocator_reserved_bytes",
            &[("pid", &ours), ("gpu", "0")],
        )
        .is_some()
    });
    let all = samples(&text);
    for gpu in ["0", "1"] {
        assert_eq!(
            value(
                &all,
                "vramscope_gpu_instrumented_reserved_bytes",
                &[("gpu", gpu)]
            ),
            None,
            "GPU {gpu}:\n{text}"
        );
    }
    drop(writer);
}
