//! End to end: an instrumented process publishes through a real channel file, the fake NVML
//! lists its pid, and the real binary's `--json`, `--once` and `vramscope run` show the
//! allocator's figures joined to NVML's row for that pid and GPU.

mod common;

use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind, SampleFields, Writer, WriterConfig,
    WriterKind, parse_uuid,
};

const UUID0: &str = "GPU-00000000-0000-0000-0000-000000000000";

/// One H100 listing `pid` with `used` bytes.
fn scenario_listing(pid: u32, used: u64) -> Value {
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": used }] }]);
    json!({ "devices": [gpu] })
}

fn process_row(doc: &Value, pid: u32) -> Option<&Value> {
    doc["processes"]
        .as_array()?
        .iter()
        .find(|p| p["pid"] == json!(pid))
}

/// A writer in this test process (so its pid is ours), in a directory of its own.
fn writer_in(dir: &Path) -> Writer {
    let mut writer = Writer::create(WriterConfig {
        framework: "rust-test 1.0".into(),
        dir: Some(dir.to_path_buf()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("create a channel");
    let slot = writer
        .add_device(DeviceIdentity {
            // CUDA_VISIBLE_DEVICES may call it anything: the join is by UUID.
            ordinal: 5,
            uuid: parse_uuid(UUID0),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .expect("a device slot");
    assert_eq!(slot, 0);
    writer
}

#[test]
fn json_and_once_show_a_writers_figures_beside_nvmls() {
    let work = tempfile::tempdir().unwrap();
    // The writer makes its directory itself, private, as the spec asks.
    let channels = work.path().join("channels");
    let mut writer = writer_in(&channels);
    let pid = std::process::id();
    // A spike to 30 GiB between two of the monitor's polls, then back to 20.
    for (allocated, peak) in [
        (20 * GIB, 20 * GIB),
        (20 * GIB, 30 * GIB),
        (20 * GIB, 20 * GIB),
    ] {
        writer.sample(&SampleFields {
            slot: 0,
            allocated: Some(allocated),
            reserved: Some(24 * GIB),
            peak: Some(peak),
            step: Some(7),
            ..SampleFields::default()
        });
    }
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(20 * GIB),
            allocated_peak: Some(30 * GIB),
            reserved: Some(24 * GIB),
            reserved_peak: Some(24 * GIB),
            ooms: Some(1),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(7), "forward/encoder");
    writer.event(&EventFields {
        slot: Some(0),
        step: Some(7),
        args: [8 * GIB, GIB, 80 * GIB, 20 * GIB, 24 * GIB, 0],
        text: "forward/encoder",
        ..EventFields::new(EventKind::Oom)
    });

    let scenario = Scenario::new(&scenario_listing(pid, 25 * GIB));
    let doc = scenario.json_reading(&channels);
    let row = process_row(&doc, pid).expect("NVML's row for our pid");
    assert_eq!(row["allocated"], json!(20 * GIB));
    assert_eq!(row["reserved"], json!(24 * GIB));
    // The framework's peak counter says 30 GiB, and so did the spike between polls.
    assert_eq!(row["true_peak"], json!(30 * GIB));
    assert_eq!(row["step"], json!(7));
    assert_eq!(row["phase"], json!("forward/encoder"));
    assert_eq!(row["writer"], json!("live"));
    let a = &doc["allocators"][0];
    assert_eq!(a["pid"], json!(pid));
    assert_eq!(a["kind"], json!("Rust"));
    assert_eq!(a["framework"], json!("rust-test 1.0"));
    assert_eq!(a["devices"][0]["gpu_index"], json!(0));
    assert_eq!(a["devices"][0]["ordinal"], json!(5));
    assert_eq!(a["devices"][0]["ooms"], json!(1));
    assert_eq!(a["devices"][0]["requested"], Value::Null);
    assert_eq!(
        a["devices"][0]["unavailable"]["requested"],
        json!("not supported")
    );
    let oom = a["recent_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == json!("oom"))
        .expect("the OOM event");
    assert_eq!(oom["figures"]["requested"], json!(8 * GIB));
    assert_eq!(oom["step"], json!(7));
    assert_eq!(oom["label"], json!("forward/encoder"));
    assert_eq!(doc["devices"][0]["instrumented_reserved"], json!(24 * GIB));

    let text = scenario.stdout_reading(&channels, &["--once"]);
    assert!(
        text.contains(&format!(
            "{pid:>8} GPU 0  allocated 20.0 GiB  reserved 24.0 GiB  outside 1.00 GiB  peak 30.0 GiB  step 7  forward/encoder"
        )),
        "{text}"
    );
    writer.finish(vramscope::channel::Exit::Clean).unwrap();
}

#[test]
fn a_hostile_file_is_named_in_the_output_and_the_rest_still_works() {
    let channels = tempfile::tempdir().unwrap();
    std::fs::write(
        channels.path().join("1234-5678.vsc"),
        b"not a channel at all",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        channels.path().join("1234-5678.vsc"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let scenario = Scenario::new(&scenario_listing(std::process::id(), GIB));
    let doc = scenario.json_reading(channels.path());
    let rejected = doc["rejected_channels"][0].as_str().unwrap();
    assert!(rejected.starts_with("1234-5678.vsc: "), "{rejected}");
    assert!(doc["allocators"].as_array().unwrap().is_empty());
    assert_eq!(doc["devices"].as_array().unwrap().len(), 1);
    let text = scenario.stdout_reading(channels.path(), &["--once"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("channel refused: 1234-5678.vsc: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(line, format!("channel refused: {rejected}"));
}

#[test]
fn one_file_reached_by_two_names_is_read_once() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = writer_in(&channels);
    writer.publish_device(
        0,
        &DeviceFigures {
            reserved: Some(24 * GIB),
            ..DeviceFigures::default()
        },
    );
    // As two ranks in one container reach the same file through two /proc/PID/root paths.
    std::fs::hard_link(writer.path(), channels.join("1-1.vsc")).unwrap();
    let pid = std::process::id();
    let scenario = Scenario::new(&scenario_listing(pid, 25 * GIB));
    let doc = scenario.json_reading(&channels);
    assert_eq!(doc["allocators"].as_array().unwrap().len(), 1, "{doc}");
    // Counted once, not twice, in the GPU's share.
    assert_eq!(doc["devices"][0]["instrumented_reserved"], json!(24 * GIB));
    std::fs::remove_file(channels.join("1-1.vsc")).unwrap();
    writer.finish(vramscope::channel::Exit::Clean).unwrap();
}

/// Reads JSON lines from `child` until `done` accepts one or `timeout` passes.
fn json_lines_until(
    child: &mut Child,
    timeout: Duration,
    done: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(line) = rx.recv_timeout(left) else {
            return None;
        };
        // Every line on stdout is vramscope's: the job's own output goes to stderr.
        let doc: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        if done(&doc) {
            return Some(doc);
        }
    }
    None
}

#[test]
fn vramscope_run_injects_the_python_writer_and_shows_the_scripts_figures() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let pid_file = work.path().join("pid");
    let script = work.path().join("train.py");
    // No `import vramscope` path setup: `vramscope run` makes the package importable.
    std::fs::write(
        &script,
        r#"
import os, sys, time, vramscope
GIB = 1 << 30
print("epoch 1: the training's own output", flush=True)
open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
uuid = "GPU-00000000-0000-0000-0000-000000000000"
vramscope.report(device=0, allocated=3 * GIB, reserved=4 * GIB, peak=3 * GIB, total=80 * GIB, uuid=uuid)
vramscope.report(device=0, allocated=3 * GIB, reserved=4 * GIB, peak=5 * GIB)
with vramscope.mark("warmup"):
    vramscope.report(device=0, allocated=3 * GIB, reserved=4 * GIB, peak=5 * GIB)
    time.sleep(float(sys.argv[2]))
"#,
    )
    .unwrap();
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let mut child = scenario
        .command()
        .env("VRAMSCOPE_DIR", &channels)
        .args(["run", "--json", "--interval", "0.2", "--", "python3"])
        .arg(&script)
        .arg(&pid_file)
        .arg("8")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid: u32 = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            break text.trim().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the script never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Now that the script's pid is known, the fake NVML lists it (the fake re-reads its
    // scenario when the file changes).
    scenario.rewrite(&scenario_listing(pid, 5 * GIB));
    // The last of the script's three reports, not the first: a refresh may fall between
    // them (on a loaded machine it did: the first report's peak of 3 GiB, before the 5 GiB).
    let found = json_lines_until(&mut child, Duration::from_secs(20), |doc| {
        process_row(doc, pid)
            .is_some_and(|r| r["allocated"] == json!(3 * GIB) && r["phase"] == json!("warmup"))
    });
    let _ = child.kill();
    let _ = child.wait();
    let doc = found.expect("a JSON line showing the script's allocator figures");
    let row = process_row(&doc, pid).unwrap();
    assert_eq!(row["reserved"], json!(4 * GIB));
    assert_eq!(row["true_peak"], json!(5 * GIB));
    assert_eq!(row["phase"], json!("warmup"));
    let a = doc["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(pid))
        .unwrap();
    assert_eq!(a["kind"], json!("Python"));
    assert!(a["command"].as_str().unwrap().contains("train.py"), "{a}");
}

#[test]
fn a_writer_killed_mid_run_stays_on_screen_as_killed_with_its_last_figures() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    // Publishes 1 GiB more each time, flat out, until killed.
    let mut child = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import vramscope, sys\n\
             n = 0\n\
             while True:\n\
             \x20   n += 1\n\
             \x20   vramscope.report(device=0, allocated=n << 30, reserved=(n + 1) << 30, uuid='GPU-00000000-0000-0000-0000-000000000000')\n\
             \x20   if n == 3: print('ready', flush=True)\n",
        )
        .env("PYTHONPATH", &package)
        .env("VRAMSCOPE_DIR", &channels)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    std::thread::sleep(Duration::from_millis(100));
    child.kill().unwrap(); // SIGKILL, in the middle of its publishing loop
    child.wait().unwrap();

    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let doc = scenario.json_reading(&channels);
    let a = &doc["allocators"][0];
    assert_eq!(a["writer"], json!("ended (killed)"), "{a}");
    let d = &a["devices"][0];
    let allocated = d["allocated"].as_u64().expect("the last allocated figure");
    assert!(
        allocated >= 3 << 30 && allocated.is_multiple_of(1 << 30),
        "{d}"
    );
    // Allocated and reserved come from one consistent publication, never half of two.
    assert_eq!(
        d["reserved"].as_u64().unwrap(),
        allocated + (1 << 30),
        "{d}"
    );
    // The file is kept for the post-mortem: a crash is what the person came to look at.
    assert_eq!(std::fs::read_dir(&channels).unwrap().count(), 1);
}

#[test]
fn a_writer_that_cannot_name_its_gpu_joins_the_only_one_its_process_uses() {
    // JAX publishes neither UUID nor PCI bus id; NVML lists the process on GPU 1 alone.
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = Writer::create(WriterConfig {
        dir: Some(channels.clone()),
        ..WriterConfig::from_process(WriterKind::Jax)
    })
    .unwrap();
    let slot = writer.add_device(DeviceIdentity::default()).unwrap();
    writer.publish_device(
        slot,
        &DeviceFigures {
            allocated: Some(3 * GIB),
            reserved: Some(4 * GIB),
            ..DeviceFigures::default()
        },
    );
    let pid = std::process::id();
    let mut gpu1 = h100(1);
    gpu1["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": 5 * GIB }] }]);
    let scenario = Scenario::new(&json!({ "devices": [h100(0), gpu1] }));
    let doc = scenario.json_reading(&channels);
    assert_eq!(doc["allocators"][0]["devices"][0]["gpu_index"], json!(1));
    let row = process_row(&doc, pid).unwrap();
    assert_eq!(row["gpu_index"], json!(1));
    assert_eq!(row["allocated"], json!(3 * GIB));
    writer.finish(vramscope::channel::Exit::Clean).unwrap();
}

#[test]
fn a_writer_naming_a_gpu_this_host_lacks_joins_none_even_when_its_bus_id_matches() {
    // Another host's file on a shared /dev/shm: its UUID is not ours, its bus id is GPU 0's.
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = Writer::create(WriterConfig {
        dir: Some(channels.clone()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .unwrap();
    let elsewhere = "GPU-ffffffff-0000-0000-0000-000000000009";
    let slot = writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(elsewhere),
            pci_bus_id: Some("0000:18:00.0".into()),
            total: Some(80 * GIB),
        })
        .unwrap();
    writer.publish_device(
        slot,
        &DeviceFigures {
            allocated: Some(40 * GIB),
            reserved: Some(48 * GIB),
            ..DeviceFigures::default()
        },
    );
    let pid = std::process::id();
    let scenario = Scenario::new(&scenario_listing(pid, 50 * GIB));
    let doc = scenario.json_reading(&channels);
    assert_eq!(doc["allocators"][0]["devices"][0]["gpu_index"], Value::Null);
    // It counts toward no GPU's share, and NVML's row for the pid gets none of its figures.
    assert_eq!(doc["devices"][0]["instrumented_reserved"], Value::Null);
    let row = process_row(&doc, pid).expect("NVML's row");
    assert_eq!(row["allocated"], Value::Null);
    // Not "not instrumented": it is, for a GPU that is not here, as --once says.
    let why = format!("its GPU {elsewhere} is not on this host");
    assert_eq!(row["unavailable"]["allocated"], json!(why), "{row:#}");

    let once = scenario.stdout_reading(&channels, &["--once"]);
    assert!(!once.contains("instrumented (allocator figures)"), "{once}");
    let unjoined: Vec<&str> = once
        .lines()
        .filter(|l| l.contains("not in the table"))
        .collect();
    assert_eq!(unjoined.len(), 1, "{once}");
    assert!(
        unjoined[0].contains(&format!("its GPU {elsewhere} is not on this host")),
        "{once}"
    );
    writer.finish(vramscope::channel::Exit::Clean).unwrap();
}

#[test]
fn json_names_the_figures_of_memory_by_kind_and_says_which_the_writer_could_not_tell() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = writer_in(&channels);
    let pid = std::process::id();
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(20 * GIB),
            reserved: Some(24 * GIB),
            ..DeviceFigures::default()
        },
    );
    // What the Python writer writes at a step's end: buffers belong to modules it does not
    // hold, so they are absent, not zero.
    writer.event(&EventFields {
        slot: Some(0),
        step: Some(3),
        args: [
            4 * GIB,
            vramscope::channel::ABSENT,
            4 * GIB,
            8 * GIB,
            vramscope::channel::ABSENT,
            vramscope::channel::ABSENT,
        ],
        ..EventFields::new(EventKind::MemoryKinds)
    });
    let scenario = Scenario::new(&scenario_listing(pid, 25 * GIB));
    let doc = scenario.json_reading(&channels);
    let kinds = doc["allocators"][0]["recent_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == json!("memory_kinds"))
        .unwrap_or_else(|| panic!("the memory_kinds event: {doc:#}"));
    assert_eq!(kinds["step"], json!(3));
    let figures = &kinds["figures"];
    assert_eq!(figures["parameters"], json!(4 * GIB));
    assert_eq!(figures["gradients"], json!(4 * GIB));
    assert_eq!(figures["optimizer_state"], json!(8 * GIB));
    assert_eq!(figures["buffers"], Value::Null);
    assert_eq!(figures["unavailable"]["buffers"], json!("not supported"));
    writer.finish(vramscope::channel::Exit::Clean).unwrap();
}
